"""The report writer (bench/report.py) and ``python -m bench`` (bench/__main__.py) on tiny data."""

from __future__ import annotations

import importlib.util
import json

import pytest

from bench import report
from bench.__main__ import main
from bench.machine import describe

HAVE_MPL = importlib.util.find_spec("matplotlib") is not None

REACTION = {
    "part": "reaction",
    "runs": [
        {
            "controller": c,
            "nodes": 10,
            "pods": 3,
            "not_running": 0,
            "config": {
                "hotplug_latency": 2.0,
                "advertise_delay": 1.0,
                "agent_interval": 0.5,
                "mean_interarrival": 1.5,
                "max_gpus_per_node": 8,
                "scan_interval": 10.0,
                "settle_timeout": 60.0,
            },
            "metrics": {"composer_round_seconds_sum": 1.0, "composer_round_seconds_count": 4},
            "stats": {
                k: {"n": 3, "mean": v, "p50": v, "p90": v, "p99": v * 1.5, "max": v * 2}
                for k, v in {
                    "to_issue": 0.2 * f,
                    "to_running": 3.5 * f,
                    "overhead": 0.5 * f,
                    "director": 2.0,
                    "advertise": 1.2,
                    "schedule": 0.1,
                    "start": 0.05,
                }.items()
            },
        }
        | (
            {"stuck": [{"pod": "gpu-pod-7", "last_intent": {"node": "n3", "phase": "Advertised"}}]}
            if f > 1
            else {}
        )
        for c, f in (("composer", 1.0), ("baseline", 3.0))
    ]
    + [{"nodes": 1000, "error": "TimeoutError: nodes not Ready"}],
    "comparison": [
        {
            "nodes": 10,
            "baseline_over_composer": {
                "to_issue": {"mean": 3.0, "p50": 3.0, "p99": 3.0},
                "to_running": {"mean": 3.0, "p50": 3.0, "p99": 3.0},
            },
        }
    ],
    "ca_slo": {"max_seconds": 60, "average_seconds": 15, "nodes": "100-1000", "source": "CA FAQ"},
    "target": {"overhead_p99_seconds": 1.0, "at_nodes": 1000},
    "command": "python -m bench --only reaction",
}
PREVIEW = {
    "part": "preview",
    "stacks": [
        {
            "stack": s,
            "hosts": n,
            "config": {"config_bytes": 355 + n, "inline_config_bytes": 600 * n},
            "mocks": {"ok": True, "seconds": 0.5 * n, "tracemalloc_peak_mib": 30.0},
            "preview": {
                "ok": ok,
                "exit_code": 0 if ok else 255,
                "wall_seconds": 3.0 + n,
                "peak_tree_rss_mib": 400.0,
                "peak_rss_by_process_mib": {"pulumi": 120.0},
                "config_env_bytes_by_process": {
                    "python pulumi-language-python-exec": 300,
                    "python policies": 310,
                },
                "resources": 10 * n,
                "engine_seconds": 1.0,
                "program": {
                    "construct_seconds": 0.4,
                    "cpu_seconds": 0.8,
                    "alive_seconds": 2.0 + n,
                    "maxrss_mib": 90.0,
                },
                **({} if ok else {"tail": "error: boom"}),
            },
        }
        for s, n, ok in (("dev", 2, True), ("fleet16", 16, False))
    ],
    "validated": [
        {"stack": "fleet10000", "hosts": 10000, "files": 317, "validation_seconds": 13.7, "ok": True,
         "config_bytes": 362, "inline_config_bytes": 5860987}
    ],
    "command": "python -m bench --only preview",
}


def test_main_runs_parts_and_writes_json_report_and_plots(tmp_path):
    assert main(["--quick", "--only", "savings", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "savings.json").read_text())
    assert saved["elapsed_seconds"] >= 0 and saved["cases"]
    assert json.loads((tmp_path / "machine.json").read_text())["cores"] >= 1
    text = (tmp_path / "REPORT.md").read_text()
    assert "## 3. GPU savings" in text and "## 1. Planner" not in text
    assert "| article | 2 |" in text
    assert (tmp_path / "savings.png").exists() == HAVE_MPL


def test_unknown_part_is_refused(tmp_path, capsys):
    assert main(["--only", "nope", "--out", str(tmp_path)]) == 2
    assert "nope" in capsys.readouterr().err


def test_a_toolchain_part_without_the_toolchain_stops_with_one_line(tmp_path, capsys, monkeypatch):
    import bench.__main__ as entry

    monkeypatch.setattr(entry, "toolchain_missing", lambda: "python -m bench: ... run make setup")
    assert main(["--only", "preview", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "python -m bench: ... run make setup\n"
    assert not (tmp_path / "preview.json").exists()


def test_outside_lab_env_a_toolchain_part_is_refused_naming_what_to_run(tmp_path, capsys, monkeypatch):
    import bench.__main__ as entry

    monkeypatch.setattr(entry, "toolchain_missing", lambda: None)
    monkeypatch.delenv("COMPOSABLE_GPU_ROOT", raising=False)
    assert main(["--only", "reaction", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "python -m bench: not inside lab/env.sh: run source lab/env.sh && python -m bench"
    ]
    # the pure parts need neither
    assert main(["--quick", "--only", "planner", "--out", str(tmp_path)]) == 0


def test_outside_lab_env_the_command_runs_itself_again_inside_it(tmp_path):
    """What ``python -m bench`` does when started outside lab/env.sh: the same arguments, run by
    ``python -m bench`` inside it (here a report rebuild, which needs nothing else)."""
    import os
    import subprocess
    import sys

    from bench.__main__ import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("COMPOSABLE_GPU_ROOT", "PULUMI_HOME")}
    code = f"import bench.__main__ as m; m._reexec_in_env(['--report-only', '--out', {str(tmp_path)!r}])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"[bench] report: {tmp_path / 'REPORT.md'}" in out.stdout


def test_report_renders_reaction_and_preview_including_failures(tmp_path):
    (tmp_path / "reaction.json").write_text(json.dumps(REACTION))
    (tmp_path / "preview.json").write_text(json.dumps(PREVIEW))
    (tmp_path / "machine.json").write_text(json.dumps(describe(binaries=False)))
    assert main(["--report-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "REPORT.md").read_text()
    assert "| composer | unpinned | 10 | 3 (0 not running) | 0.20 | 0.30 | 3.50 | 5.25 |" in text
    assert "error: TimeoutError" in text
    assert "Pods not Running 60 s after the last arrival" in text
    assert "- baseline / unpinned / 10 nodes: 1: gpu-pod-7 (n3, Advertised)" in text
    assert "not measured in this run" in text  # the 1,000-node run failed
    assert "Baseline (10.0 s periodic scan)" in text
    assert "| dev | 2 | 20 | 5.00 | 400.00 |" in text
    assert "exit 255" in text and "error: boom" in text
    assert "| dev | 2 | 357 | 300 | 310 | 1200 | preview |" in text
    assert "| fleet10000 | 10000 | 362 | – | – | 5860987 | validated in 13.7 s |" in text
    assert "CPU:" in text
    if HAVE_MPL:
        assert (tmp_path / "reaction.png").stat().st_size > 1000
        assert (tmp_path / "preview.png").stat().st_size > 1000


def test_a_failed_part_is_reported_not_hidden(tmp_path):
    (tmp_path / "planner.json").write_text(json.dumps({"part": "planner", "error": "ValueError: x"}))
    report.write_report(tmp_path)
    assert "Failed: `ValueError: x`" in (tmp_path / "REPORT.md").read_text()


@pytest.mark.skipif(not HAVE_MPL, reason="matplotlib not installed")
def test_plots_are_skipped_gracefully_without_data(tmp_path):
    assert report.plot_reaction({"runs": [{"nodes": 1, "error": "x"}]}, tmp_path / "r.png") is False
    assert not (tmp_path / "r.png").exists()


def _run(
    controller: str, workload: str, gating: bool, p99: float, taken: float | None, nodes: int = 100
) -> dict:
    stats = {k: {"n": 3, "mean": 1.0, "p50": 1.0, "p90": 1.0, "p99": p99, "max": p99} for k in ("overhead",)}
    stats |= {k: {"n": 3, "mean": 1.0, "p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0} for k in ("to_issue",)}
    return {
        "controller": controller,
        "workload": workload,
        "gating": gating,
        "nodes": nodes,
        "pods": 3,
        "not_running": 0,
        "config": REACTION["runs"][0]["config"] | {"gating": gating},
        "metrics": {} if taken is None else {"composer_gpus_taken_by_another_pod_total": taken},
        "stats": stats,
    }


def test_gating_findings_are_computed_from_the_runs():
    d = {
        "runs": [
            _run("composer", "pinned", True, 0.40, 0.0),
            _run("composer", "unpinned", True, 0.65, 0.0),
            _run("baseline", "pinned", False, 11.0, None),
            _run("baseline", "unpinned", False, 17.0, None),
        ],
        "target": {"overhead_p99_seconds": 1.0, "at_nodes": 1000},
        "commit": {"sha": "0123456789abcdef", "dirty": False},
    }
    (line, not_at) = report._gating_findings(d)
    assert "unpinned p99 overhead 0.65 s (target < 1 s: **met**)" in line
    assert "difference 0.25 s (target ≤ 0.3 s: **met**)" in line
    assert "GPUs taken by another pod: 0 / 0 (unpinned / pinned; target 0: **met**)" in line
    assert "pinned 27.50×, unpinned 26.20× (target ≥ 10× on both: **met**)" in line
    assert not_at == "- Gating at 1,000 nodes: not measured in this run."
    d["runs"][1] = _run("composer", "unpinned", True, 1.2, 2.0)
    (line, _) = report._gating_findings(d)
    assert "(target < 1 s: **NOT met**)" in line and "difference 0.80 s (target ≤ 0.3 s: **NOT met**)" in line
    assert "target 0: **NOT met**" in line
    assert report._commit(d) == "Commit measured: `0123456789ab`."
    assert report._gating_findings({"runs": [], "target": d["target"]}) == [
        "- Gating: not measured in this run."
    ]
