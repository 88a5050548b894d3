"""The preview-for-review summary.

Pure tests feed engine events captured from real ``pulumi preview --json`` runs of the fixture
program (``tests/ops/fixtures/preview/*.events.jsonl``, see ``preview_fixtures.py``) through the
parser and the renderer and compare with the expected Markdown for each known change. The CLI
tests run ``python -m ops.preview_report`` against a real deployed fixture stack.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.preview_events import SECRET_SIG, UNKNOWN, PreviewParseError, ResourceState, Step, parse_events
from ops.preview_markdown import fit_comment, format_value, render_markdown
from ops.preview_report import PreviewRun, blocks_merge, main, preview_from_run

from .preview_fixtures import CASES, FIXTURES, STACK, Workspace, prepare

ROOT = Path(__file__).resolve().parents[2]


def events(case: str) -> list[str]:
    return (FIXTURES / f"{case}.events.jsonl").read_text().splitlines()


def summary(case: str) -> str:
    return render_markdown(parse_events(events(case)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_summary_equals_the_expected_markdown(case: str) -> None:
    assert summary(case) == (FIXTURES / f"{case}.md").read_text()


def test_adding_a_gpu_shows_the_new_host_total_and_no_hardware_warning() -> None:
    md = summary("add-gpu")
    assert "✅ **Preview succeeded** · ✅ all 2 policies passed" in md
    assert "**Plan:** 0 to create · 2 to update · 0 to replace · 0 to delete · 13 unchanged" in md
    assert "| `blade-slot-1` | 1 | 2 (+1) | Tesla-T4 |" in md
    assert "blade-slot-2" not in md  # unchanged host: not mentioned anywhere
    assert "[!CAUTION]" not in md
    assert ("| ~ update | `blade-slot-1-gpus-attach` | pulumi-python:dynamic/director:GpuAttachment | "
            "`count`: 1 → 2 |") in md


def test_adding_a_tenant_lists_the_tenant_and_its_network() -> None:
    md = summary("add-tenant")
    assert "| ➕ added | `globex` | – | GPU quota 1, models [\"Tesla-T4\"] |" in md
    assert "| ➕ added | `globex` | `net-b` | 10.20.0.0/24, VXLAN 1002, VLAN 102 |" in md
    assert "#### Tenant `globex` › TenantNetwork `globex-net-b`" in md
    assert "### GPUs per host" not in md


def test_hardware_replacements_and_deletions_are_highlighted_first() -> None:
    md = summary("hardware-replace")
    caution = md.split("> [!CAUTION]\n", 1)[1].split("\n\n", 1)[0]
    assert md.index("[!CAUTION]") < md.index("### GPUs per host")
    assert "**4 hardware-affecting replacements or deletions**" in caution
    assert ("> - **replace** BareMetalHost `blade-slot-1-bmh` (Host `blade-slot-1`): `boot_mac`: "
            "52:54:00:aa:bb:01 → 52:54:00:aa:bb:11 (forces replacement)") in caution
    assert ("> - **replace** DpuPosture `blade-slot-1-dpu-posture` (Host `blade-slot-1` › Dpu "
            "`blade-slot-1-dpu`)") in caution
    assert "> - **delete** GpuAttachment `blade-slot-2-gpus-attach`" in caution
    assert "TenantVxlan" not in caution  # a network update is no hardware change
    assert "| `blade-slot-2` | 1 | 0 (-1) | Tesla-T4 → – |" in md


def test_policy_violations_are_listed_with_their_enforcement_level() -> None:
    preview = parse_events(events("policy-violation"))
    md = render_markdown(preview)
    assert preview.result == "failed" and blocks_merge(preview)
    assert "❌ **Preview failed** · 🚫 1 mandatory policy violation · ⚠️ 1 advisory" in md
    rows = [line for line in md.splitlines() if line.startswith("| 🚫") or line.startswith("| ⚠️")]
    assert rows == [
        "| 🚫 mandatory | `estate-fixture-policies/gpu-count-within-host-cap` | GpuComposition "
        "`blade-slot-1-gpus` | host blade-slot-1 asks for 6 GPUs; its PCIe slots take at most 4 |",
        "| ⚠️ advisory | `estate-fixture-policies/tenant-vxlan-in-tenant-range` | TenantNetwork "
        "`acme-net-mgmt` | tenant acme network net-mgmt uses VXLAN 42; IDs below 1000 are kept for the "
        "platform |",
    ]
    # the model change replaces the attachment: highlighted as hardware-affecting
    assert "> - **replace** GpuAttachment `blade-slot-2-gpus-attach`" in md


def test_no_change_and_clean_previews_do_not_block_merging() -> None:
    for case in ("no-change", "add-gpu", "add-tenant", "hardware-replace"):
        assert not blocks_merge(parse_events(events(case))), case
    assert "**Plan:** no changes (15 unchanged)" in summary("no-change")


# --- parser ---------------------------------------------------------------------------


def test_parser_folds_replacement_halves_and_drops_debug_diagnostics() -> None:
    preview = parse_events(events("policy-violation"))
    replaced = [s for s in preview.steps if s.urn.endswith("::blade-slot-2-gpus-attach")]
    assert [s.op for s in replaced] == ["replace"]
    assert replaced[0].keys == ["model"]
    assert preview.change_counts == {"create": 2, "replace": 1, "same": 11, "update": 3}
    assert preview.policy_packs == {"estate-fixture-policies": "0.0.1"}
    assert [d.message.strip() for d in preview.diagnostics] == ["preview failed"]
    debug = json.dumps({"diagnosticEvent": {"severity": "debug", "message": "noise", "color": "never"}})
    assert parse_events([debug]).diagnostics == []


def test_parser_names_the_bad_line() -> None:
    with pytest.raises(PreviewParseError, match="event line 2"):
        parse_events(['{"cancelEvent": {}}', "not json"])
    with pytest.raises(PreviewParseError, match="event line 1"):
        parse_events(['{"policyEvent": {"message": "no policy name"}}'])


def test_a_run_that_never_started_reports_the_cli_error() -> None:
    run = PreviewRun(events=[], returncode=255, stderr="error: no stack named 'staging' found\n",
                     diff_text=None)
    preview = preview_from_run(run)
    assert blocks_merge(preview)
    md = render_markdown(preview, title="staging")
    assert "⚠️ **Preview did not finish**" in md
    assert "- **error**: error: no stack named 'staging' found" in md


# --- rendering details ----------------------------------------------------------------


def test_values_mask_secrets_and_unknowns_and_escape_table_pipes() -> None:
    secret = {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "[secret]"}
    assert format_value(secret) == "[secret]"
    assert format_value(UNKNOWN) == "(known after apply)"
    assert format_value(None) == "–"
    assert format_value({"b": [1, secret], "a": True}) == '{"a":true,"b":[1,"[secret]"]}'
    assert len(format_value("x" * 500)) == 60

    urn = "urn:pulumi:dev::p::kubernetes:metal3.io/v1alpha1:BareMetalHost::blade-slot-9"
    old = ResourceState(type="kubernetes:metal3.io/v1alpha1:BareMetalHost", urn=urn, custom=True,
                        inputs={"spec": {"online": True, "image": {"url": "a|b"}}, "__provider": "x"})
    new = old.model_copy(
        update={"inputs": {"spec": {"online": False, "image": {"url": "c"}}, "__provider": "y"}})
    step = Step(op="update", urn=urn, type=old.type, old=old, new=new,
                detailedDiff={"spec.online": {"kind": "update"}, "spec.image.url": {"kind": "update"}})
    assert step.changed_keys == ["spec.image.url", "spec.online"]
    preview = parse_events([]).model_copy(update={"steps": [step], "change_counts": {"update": 1}})
    md = render_markdown(preview)
    assert ("| ~ update | `blade-slot-9` | kubernetes:metal3.io/v1alpha1:BareMetalHost | "
            "`spec.image.url`: a\\|b → c; `spec.online`: true → false |") in md
    assert "⚠️ no policy pack ran" in md and "No policy pack ran with this preview." in md


def test_diff_text_is_collapsed_fenced_and_cut_to_size() -> None:
    preview = parse_events(events("add-gpu"))
    text = "```\n" + "\n".join(f"    ~ count: {i} => {i + 1}" for i in range(1000))
    md = render_markdown(preview, diff_text=text, max_diff_chars=2000)
    block = md.split("<details><summary>Full <code>pulumi preview --diff</code> output</summary>\n\n", 1)[1]
    assert block.startswith("````text\n```\n    ~ count: 0 => 1\n")
    assert "~ count: 999 => 1000" not in block
    assert "_Output cut at 2000 characters; the full text is in the CI job's artifacts._" in block
    assert md.endswith("</details>\n")


def test_cli_renders_saved_events_and_exits_by_verdict(tmp_path: Path) -> None:
    out = tmp_path / "summary.md"
    assert main(["--from-events", str(FIXTURES / "add-gpu.events.jsonl"), "--out", str(out)]) == 0
    assert out.read_text() == (FIXTURES / "add-gpu.md").read_text()
    assert main(["--from-events", str(FIXTURES / "policy-violation.events.jsonl"), "--out", str(out)]) == 1
    assert "🚫 mandatory" in out.read_text()
    assert main(["--from-events", str(FIXTURES / "policy-violation.events.jsonl"), "--out", str(out),
                 "--exit-zero"]) == 0


# --- the real CLI ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    yield prepare(tmp_path_factory.mktemp("preview"))


def _report(ws: Workspace, case: str, tmp_path: Path, *extra: str) -> tuple[int, str]:
    from .preview_fixtures import estate_for

    ws.set_estate(estate_for(case))
    out = tmp_path / f"{case}.md"
    proc = subprocess.run(
        [sys.executable, "-m", "ops.preview_report", "--stack", STACK, "--cwd", str(ws.project),
         "--policy-pack", str(ws.pack), "--out", str(out), "--events-out", str(tmp_path / f"{case}.jsonl"),
         *extra],
        cwd=ROOT, env=ws.env, capture_output=True, text=True, timeout=300,
    )
    assert out.exists(), proc.stderr
    return proc.returncode, out.read_text()


@pytest.mark.cli
def test_command_on_a_real_preview_gives_the_expected_summary(workspace: Workspace, tmp_path: Path) -> None:
    code, md = _report(workspace, "add-gpu", tmp_path)
    assert code == 0
    rendered, details = md.split("<details>", 1)
    assert rendered.rstrip("\n") + "\n" == (FIXTURES / "add-gpu.md").read_text()
    assert re.search(r"~ count\s*: 1 => 2", details)  # the --diff run's text
    # the saved events re-render to the same summary
    assert main(["--from-events", str(tmp_path / "add-gpu.jsonl"), "--out", str(tmp_path / "again.md")]) == 0
    assert (tmp_path / "again.md").read_text() == (FIXTURES / "add-gpu.md").read_text()


@pytest.mark.cli
def test_command_fails_on_a_mandatory_violation_but_still_writes_the_summary(
    workspace: Workspace, tmp_path: Path
) -> None:
    code, md = _report(workspace, "policy-violation", tmp_path, "--no-diff-text")
    assert code == 1
    assert md == (FIXTURES / "policy-violation.md").read_text()


def test_fit_comment_drops_diff_blocks_last_first_then_cuts() -> None:
    preview = parse_events(events("add-gpu"))
    one = render_markdown(preview, title="dev", diff_text="x\n" * 3000)
    two = render_markdown(preview, title="staging", diff_text="y\n" * 3000)
    doc = one + "\n" + two
    assert fit_comment(doc, limit=len(doc)) == doc
    dropped_last = fit_comment(doc, limit=len(doc) - 100)
    assert "x\nx\n" in dropped_last and "y\ny\n" not in dropped_last
    assert dropped_last.count("was left out to fit the comment") == 1
    assert "## staging" in dropped_last and dropped_last.endswith("see the CI artifacts._\n")
    both = fit_comment(doc, limit=len(one) - 100)
    assert both.count("was left out to fit the comment") == 2
    cut = fit_comment(doc, limit=1500)
    assert len(cut) <= 1500
    assert cut.endswith("_Summary cut to fit a comment; the full text is in the CI artifacts._\n")


def test_policy_config_follows_the_stack_environment(tmp_path: Path) -> None:
    from ops.preview_report import default_policy_config, preview_args, stack_environment

    (tmp_path / "Pulumi.qa.yaml").write_text("config:\n  composable-gpu:estate:\n    environment: staging\n")
    pack = tmp_path / "policies"
    (pack / "config").mkdir(parents=True)
    assert stack_environment(tmp_path, "qa") == "staging"
    assert stack_environment(tmp_path, "missing") is None
    # a stack whose estate is an inventory folder: the environment is in one of its files
    (tmp_path / "Pulumi.inv.yaml").write_text("config:\n  composable-gpu:inventory: envs/inv\n")
    (tmp_path / "envs" / "inv" / "hosts").mkdir(parents=True)
    (tmp_path / "envs" / "inv" / "hosts" / "a.yaml").write_text("hosts: []\n")
    (tmp_path / "envs" / "inv" / "estate.yaml").write_text("environment: production\n")
    assert stack_environment(tmp_path, "inv") == "production"
    assert default_policy_config(pack, tmp_path, "qa") is None  # no staging.json in this pack
    (pack / "config" / "staging.json").write_text("{}")
    assert default_policy_config(pack, tmp_path, "qa") == pack / "config" / "staging.json"
    config = pack / "config" / "staging.json"
    assert preview_args("qa", [pack], json_events=True, policy_configs=[config]) == [
        "preview", "--stack", "qa", "--non-interactive", "--json", "--policy-pack", str(pack),
        "--policy-pack-config", str(config),
    ]
    # the committed stacks map onto the committed policy configs
    for stack, environment in (("dev", "lab"), ("staging", "staging"), ("production", "production")):
        expected = ROOT / "policies" / "config" / f"{environment}.json"
        assert default_policy_config(ROOT / "policies", ROOT, stack) == expected


def test_failed_preview_without_violations_does_not_claim_the_policies_passed() -> None:
    from ops.preview_events import Preview

    failed = Preview(policy_packs={"composable-gpu-tenant-isolation": "0.1.0"},
                     policies_passed=frozenset({"composable-gpu-tenant-isolation/record-resource-inputs"}),
                     result="failed")
    md = render_markdown(failed, title="t")
    assert "policies not fully evaluated" in md
    assert "all 1 policy passed" not in md
    assert "No violations." not in md
    ok = failed.model_copy(update={"result": "succeeded"})
    assert "all 1 policy passed" in render_markdown(ok, title="t")
