"""Part 5's report (bench/report_fleet.py) and its place in ``python -m bench``: every sentence comes
from ``fleet.json``, a missing or failed run is said so, the goal is judged only at its size."""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench import report
from bench.__main__ import main
from bench.report_fleet import figures, fleet_section


def _stack(name: str, seconds: float, creates: int, status: str = "ok") -> dict[str, Any]:
    ok = status == "ok"
    return {"stack": name, "status": status, "seconds": seconds,
            "changes": {"create": creates} if ok else {}, "detail": "" if ok else "error: x"}


def _run(wall: float, stacks: list[dict[str, Any]], ok: bool = True) -> dict[str, Any]:
    return {"wall_seconds": wall, "peak_tree_rss_mib": 700.0, "ok": ok, "exit_code": 0 if ok else 1,
            "load": {"samples": 3, "mean": 2.5, "max": 3.0, "cores": 2}, "stacks": stacks,
            "peak_rss_by_process_mib": {"pulumi": 150.0}}


FLEET: dict[str, Any] = {
    "part": "fleet",
    "commit": {"sha": "0123456789abcdef", "dirty": False, "paths": ["bench"]},
    "estate": {"name": "f", "hosts": 1000, "tenants": 2, "racks": 2, "files": 6, "stacks": 5,
               "validate_seconds": 0.9, "changed_file": "environments/f/tenants/team-002.yaml",
               "changed_stack": "f-tenant-team-002"},
    "parallel": 2,
    "goal_seconds": 60.0,
    "runs": {
        "setup": _run(40.0, [_stack("f-tenant-team-001", 10.0, 14)]),
        "monolith": {"wall_seconds": 450.0, "peak_tree_rss_mib": 5000.0, "ok": True, "exit_code": 0,
                     "resources": 9000, "load": {"samples": 90, "mean": 2.2, "max": 2.9, "cores": 2}},
        "one_tenant": _run(30.0, [_stack("f-tenant-team-002", 12.0, 14)]),
        "full": _run(100.0, [_stack("f-platform", 10.0, 11), _stack("f-hosts-rack-001", 60.0, 4000),
                             _stack("f-hosts-rack-002", 50.0, 4990), _stack("f-tenant-team-001", 20.0, 14),
                             _stack("f-tenant-team-002", 10.0, 15)]),
    },
    "command": "python -m bench --only fleet",
}


def test_figures_are_computed_from_the_runs():
    f = figures(FLEET)
    assert f["command_overhead"] == pytest.approx(18.0)
    assert f["speedup"] == pytest.approx(15.0)
    assert f["goal_met"] is True
    assert f["full_stacks_seconds"] == pytest.approx(150.0) and f["full_parallelism"] == pytest.approx(1.5)
    assert f["split_creates"] == 9030
    assert f["kinds"]["hosts"] == {"count": 2, "median": 55.0, "max": 60.0, "slowest": "f-hosts-rack-001",
                                   "creates": 8990}
    assert f["kinds"]["tenant"]["count"] == 2 and f["kinds"]["platform"]["creates"] == 11
    assert f["failed"] == []


def test_the_section_states_the_figures_and_the_commit():
    text = fleet_section(FLEET, commit_line="Commit measured: `0123456789ab`.")
    head = "## 5. A change to one tenant of a split estate\n\nCommit measured: `0123456789ab`.\n"
    assert text.startswith(head)
    goal = "The one-tenant change took 30.0 s end to end at 1,000 hosts and 2 tenants: it meets the goal"
    assert goal in text
    assert "the preview of `f-tenant-team-002` took 12.0 s" in text and "the other 18.0 s" in text
    assert "took 450.0 s for 9,000 resources: 15.0 times the one-tenant change's wall" in text
    assert "100.0 s wall; the stacks' own previews add up to 150.0 s, so 1.50 ran at once" in text
    assert "9,030 creates, 30 more than the monolith's 9,000 (about 6.0 per stack)" in text
    assert "- 2 host group stacks: median 55.0 s, slowest 60.0 s (`f-hosts-rack-001`), 8,990 creates." in text
    row = "| one-tenant change | `ops.estate preview --changed-since <base>` | 1 | 30.0 | 700.0 | 2.5 | ok |"
    assert row in text
    assert "monolith 5,000 MiB" in text


def test_the_stacks_the_command_created_and_opened_come_from_the_data():
    old = fleet_section(FLEET, commit_line="")  # results from before the command recorded them
    assert "and selecting or creating each of the fleet's 5 stacks on the backend before any runs." in old
    new = copy.deepcopy(FLEET)
    for run, created in (("setup", 3), ("one_tenant", 0), ("full", 2)):
        new["runs"][run]["stacks_created"] = created
    text = fleet_section(new, commit_line="")
    assert ("git's diff, one listing of the backend's stacks (5 in the fleet), creating none, and opening "
            "the 1 stack it ran.") in text
    assert "| first run (creates 3 stacks) | `ops.estate preview --stack <changed tenant>` | 1 |" in text
    assert "about 6.0 per stack); the run created the 2 stacks the first run had not." in text


def test_the_goal_is_missed_or_not_judged_as_the_data_says():
    slow = copy.deepcopy(FLEET)
    slow["runs"]["one_tenant"]["wall_seconds"] = 75.0
    assert "it misses the goal of under 60 s at 1,000 hosts" in fleet_section(slow, commit_line="")
    small = copy.deepcopy(FLEET)
    small["estate"]["hosts"] = 20
    assert figures(small)["goal_met"] is None
    assert "is stated at 1,000 hosts, so this size does not judge it" in fleet_section(small, commit_line="")
    broken = copy.deepcopy(FLEET)
    broken["runs"]["one_tenant"] = _run(9.0, [_stack("f-tenant-team-002", 8.0, 0, "failed")], ok=False)
    broken["runs"]["monolith"] = {"ok": False, "exit_code": 255, "wall_seconds": 3.0}
    text = fleet_section(broken, commit_line="")
    assert figures(broken)["goal_met"] is None and figures(broken)["speedup"] is None
    assert "did not preview successfully: the 60 s goal is not judged" in text
    assert "The monolithic preview did not succeed (exit 255), so no ratio is given." in text
    assert "- one_tenant: `f-tenant-team-002` error: x" in text


def test_report_md_gains_part_five_and_fleet_md_holds_it_alone(tmp_path):
    (tmp_path / "fleet.json").write_text(json.dumps(FLEET))
    report.write_report(tmp_path)
    assert "## 5. A change to one tenant of a split estate" in (tmp_path / "REPORT.md").read_text()
    alone = (tmp_path / "FLEET.md").read_text()
    assert alone.startswith("# Fleet benchmark\n") and "Commit measured: `0123456789ab`." in alone


def test_the_fleet_part_runs_with_its_sizes_against_its_own_control_plane(tmp_path, monkeypatch):
    import bench.__main__ as entry
    import bench.fleet

    seen: dict[str, Any] = {}

    @contextmanager
    def lab(part: str):
        seen["part"] = part
        yield type("Lab", (), {"kubeconfig": tmp_path / "kc", "cfg": type("Cfg", (), {"pki_dir": tmp_path})})

    def run(**kwargs: Any) -> dict[str, Any]:
        seen.update(kwargs)
        return copy.deepcopy(FLEET)

    monkeypatch.setattr(entry, "toolchain_missing", lambda: None)
    monkeypatch.setattr(entry, "_control_plane", lab)
    monkeypatch.setattr(bench.fleet, "run", run)
    monkeypatch.setenv("COMPOSABLE_GPU_ROOT", str(tmp_path))
    out = tmp_path / "out"
    assert main(["--only", "fleet", "--fleet-size", "20,4,8", "--parallel", "3", "--out", str(out)]) == 0
    assert seen["part"] == "fleet" and seen["ca_pem"] == Path(tmp_path) / "ca.crt"
    assert (seen["hosts"], seen["tenants"], seen["rack_size"], seen["parallel"]) == (20, 4, 8, 3)
    assert json.loads((out / "fleet.json").read_text())["estate"]["hosts"] == 1000
    assert (out / "FLEET.md").exists()
