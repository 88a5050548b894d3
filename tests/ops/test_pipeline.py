"""The CI recipe's preview stage: ``ci/pipeline.sh previews`` on the fixture
program, with one stack that has a backend (``dev``, a local file backend) and one that has
none (``staging``, skipped). The ``test`` stage is the project's own lint and test run and is
not repeated here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from .preview_fixtures import FIXTURES, Workspace, estate_for, prepare

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.cli]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    ws = prepare(tmp_path_factory.mktemp("pipeline"))
    shutil.copy(ws.project / "Pulumi.dev.yaml", ws.project / "Pulumi.staging.yaml")
    return ws


def _pipeline(ws: Workspace, out: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {**ws.env, "PROJECT_DIR": str(ws.project), "POLICY_PACK": str(ws.pack), "OUT_DIR": str(out),
           "START_LAB": "0", "BACKEND_URL_DEV": ws.env["PULUMI_BACKEND_URL"],
           "PULUMI_CONFIG_PASSPHRASE_DEV": ws.env["PULUMI_CONFIG_PASSPHRASE"], **extra}
    env.pop("PULUMI_BACKEND_URL")
    env.pop("PULUMI_CONFIG_PASSPHRASE")
    return subprocess.run([str(ROOT / "ci" / "pipeline.sh"), "previews"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_previews_summarise_every_stack_and_pass_a_clean_change(workspace: Workspace, tmp_path: Path) -> None:
    workspace.set_estate(estate_for("add-gpu"))
    step_summary = tmp_path / "step-summary.md"
    proc = _pipeline(workspace, tmp_path / "out", GITHUB_STEP_SUMMARY=str(step_summary))
    assert proc.returncode == 0, proc.stderr[-3000:]

    out = tmp_path / "out"
    preview = (out / "preview.md").read_text()
    assert preview.startswith("# Infrastructure preview\n\n## Pulumi preview: `estate-fixture` / `dev`\n")
    dev = (out / "preview-dev.md").read_text()
    assert dev.split("<details>", 1)[0].rstrip("\n") + "\n" == (FIXTURES / "add-gpu.md").read_text()
    assert dev in preview
    assert "## `staging`: not previewed\n\n⏭️ `BACKEND_URL_STAGING` is not set in this CI job" in preview
    assert step_summary.read_text() == preview
    assert (out / "preview-comment.md").read_text() == preview  # small enough for a comment as it is
    assert (out / "preview-dev.events.jsonl").stat().st_size > 0
    assert "Previewing update (dev)" in (out / "preview-dev.diff.txt").read_text()


def test_previews_fail_on_a_mandatory_violation_or_a_missing_backend(
    workspace: Workspace, tmp_path: Path
) -> None:
    workspace.set_estate(estate_for("policy-violation"))
    proc = _pipeline(workspace, tmp_path / "violation", STACKS="dev")
    assert proc.returncode == 1
    assert "blocked: dev" in proc.stderr
    preview = (tmp_path / "violation" / "preview.md").read_text()
    assert "| 🚫 mandatory | `estate-fixture-policies/gpu-count-within-host-cap` |" in preview
    assert "staging" not in preview  # STACKS limits the run

    proc = _pipeline(workspace, tmp_path / "strict", STACKS="staging", REQUIRE_ALL_STACKS="1")
    assert proc.returncode == 1
    assert "blocked: staging" in proc.stderr
