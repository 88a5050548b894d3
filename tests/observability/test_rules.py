"""The chart's alert rules: promtool checks them, unit-tests them (alerts_test.yaml), and each alert
says what to do, has a runbook section, and reads only metrics the composer exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.observability import chart_render, metric_names

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNBOOK = ROOT / "docs" / "composer-alerts.md"
#: The alerts issue 37's operators asked for, by what they watch.
EXPECTED = {
    "ComposerNoLeader",
    "ComposerDirectorUnavailable",
    "ComposerComposeFailing",
    "ComposerGatedPastReservation",
    "ComposerGpuDetachedOutOfBand",
    "ComposerReclaimStuck",
    "ComposerPoolExhausted",
}

pytestmark = pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")
promtool_built = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not built: run `make setup`"
)


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def _only_summaries(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups with each alert's annotations cut to its summary (promtool compares annotations
    whole; the descriptions are checked by `promtool check rules` and below)."""
    out = []
    for g in groups:
        rules = [
            {**r, "annotations": {"summary": r["annotations"]["summary"]}} if "alert" in r else r
            for r in g["rules"]
        ]
        out.append({**g, "rules": rules})
    return out


@promtool_built
def test_promtool_check_rules_accepts_the_rendered_rules(tmp_path: Path) -> None:
    for sets in (
        (),
        (
            "metrics.prometheusRule.runbookBaseUrl=https://example.org/docs/composer-alerts.md",
            "metrics.prometheusRule.additionalAlertLabels.team=gpu-platform",
        ),
    ):
        rules = chart_render.write_rules(tmp_path / "rules.yaml", chart_render.rule_groups(*sets))
        out = promtool("check", "rules", str(rules), cwd=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"SUCCESS: {len(EXPECTED)} rules found" in out.stdout + out.stderr


@promtool_built
def test_promtool_unit_tests_of_every_alert_pass(tmp_path: Path) -> None:
    chart_render.write_rules(tmp_path / "rules.yaml", _only_summaries(chart_render.rule_groups()))
    tests = yaml.safe_load((HERE / "alerts_test.yaml").read_text())
    (tmp_path / "alerts_test.yaml").write_text(
        yaml.safe_dump({**tests, "rule_files": ["rules.yaml"]}, sort_keys=False)
    )
    out = promtool("test", "rules", "alerts_test.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    rendered = set(chart_render.alerts(chart_render.rule_groups()))
    assert rendered == EXPECTED
    firing: dict[str, int] = {}
    quiet: dict[str, int] = {}
    for t in yaml.safe_load((HERE / "alerts_test.yaml").read_text())["tests"]:
        for case in t["alert_rule_test"]:
            name = case["alertname"]
            assert name in rendered, f"test {t['name']!r} names an alert the chart does not have: {name}"
            bucket = firing if case.get("exp_alerts") else quiet
            bucket[name] = bucket.get(name, 0) + 1
    assert set(firing) == rendered, f"no firing case: {rendered - set(firing)}"
    assert set(quiet) == rendered, f"no quiet case: {rendered - set(quiet)}"


def test_every_alert_says_what_to_do_and_has_a_runbook_section() -> None:
    sections = set(re.findall(r"^## (\w+)$", RUNBOOK.read_text(), re.M))
    base = "https://example.org/docs/composer-alerts.md"
    for name, rule in chart_render.alerts(chart_render.rule_groups()).items():
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        assert rule["annotations"]["summary"] and len(rule["annotations"]["description"]) > 150, name
        assert "runbook_url" not in rule["annotations"], name
        assert name in sections, f"docs/composer-alerts.md has no section '## {name}'"
    with_url = chart_render.alerts(
        chart_render.rule_groups(
            f"metrics.prometheusRule.runbookBaseUrl={base}",
            "metrics.prometheusRule.additionalAlertLabels.team=gpu",
        )
    )
    for name, rule in with_url.items():
        assert rule["annotations"]["runbook_url"] == f"{base}#{name.lower()}"
        assert rule["labels"]["team"] == "gpu"


def test_rules_read_only_exported_metrics_of_this_release() -> None:
    exported = metric_names.exported()
    selector = 'namespace="ns-a",pod=~"rel-a-composer-[a-z0-9]+-[a-z0-9]+"'
    rules = chart_render.alerts(chart_render.rule_groups(release="rel-a", namespace="ns-a"))
    for name, rule in rules.items():
        expr = rule["expr"]
        used = metric_names.named_in(expr)
        assert used and used <= exported, f"{name} reads metrics not exported: {used - exported}"
        selected = re.findall(r"\bcomposer_[a-z0-9_]+\{([^}]*)\}", expr)
        assert len(selected) == len(re.findall(r"\bcomposer_[a-z0-9_]+\b", expr)), f"{name}: {expr}"
        assert all(sel.startswith(selector) for sel in selected), f"{name} reads other releases: {expr}"


def test_no_rule_without_the_value() -> None:
    assert not chart_render.of_kind(chart_render.render(), "PrometheusRule")
