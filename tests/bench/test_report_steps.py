"""The report's step table of a gated pod's wait (bench/report_steps.py): the table, the load
beside it, and sentences that follow the data; a step not observed says so."""

from __future__ import annotations

import copy
import json

from bench import report
from bench.report_steps import wait_steps_section
from bench.wait_steps import PodSteps, step_stats


def gated_run(nodes: int, pods: list[PodSteps], load: dict | None = None) -> dict:
    return {
        "controller": "composer",
        "gating": True,
        "workload": "unpinned",
        "nodes": nodes,
        "pods": len(pods),
        "load": load or {"samples": 10, "mean": 6.5, "max": 7.25, "cores": 2},
        "wait_steps": step_stats(pods),
    }


def pod(i: int, admission: float, informer: float, planning: float, call: float) -> PodSteps:
    t = 100.0 + i
    return PodSteps(
        f"p{i}",
        created=t,
        admitted=t + admission,
        seen=t + admission + informer,
        planned=t + admission + informer + planning,
        node="blade-slot-1",
        sent=t + admission + informer + planning + call,
    )


TARGET = {"p99_seconds": 0.3, "at_nodes": 5000}
TIMING = {"round_after_change_seconds": 0.05, "batch_idle_seconds": 0.05, "batch_max_seconds": 1.0}


def data(*runs: dict) -> dict:
    return {"runs": list(runs), "composer_share_target": TARGET, "composer_timing": TIMING}


def text(d: dict) -> str:
    return "\n".join(wait_steps_section(d))


SLOW_ADMISSION = [pod(i, 0.8, 0.1, 0.05, 0.02) for i in range(4)]
SLOW_COMPOSER = [pod(i, 0.01, 0.02, 0.5, 0.3) for i in range(4)]


def test_the_table_gives_each_steps_quantiles_and_the_load_beside_it():
    out = text(data(gated_run(1000, SLOW_ADMISSION)))
    assert (
        "**1,000 nodes, unpinned workload** (load average (1 min) during the run: mean 6.50, max 7.25" in out
    )
    assert "above its 2 cores: runnable tasks waited for a CPU" in out
    assert "| created → admitted with the gate | 4 of 4 | 0.800 | 0.800 |" in out
    assert "| seen → compose sent (the composer's share) | 4 of 4 | 0.070 | 0.070 |" in out
    assert "| created → compose sent | 4 of 4 | 0.970 | 0.970 |" in out
    assert "gated pods not observed" not in out  # every step seen in every pod
    assert "batch window of the run (planned once none arrived for 50 ms, at the latest after 1 s)" in out
    calm = text(data(gated_run(1000, SLOW_ADMISSION, {"samples": 3, "mean": 1.5, "max": 1.9, "cores": 2})))
    assert "mean 1.50, max 1.90 (3 samples), within its 2 cores" in calm


def test_the_step_named_as_holding_the_wait_follows_the_data():
    out = text(data(gated_run(1000, SLOW_ADMISSION)))
    assert (
        "held mostly by **created → admitted with the gate** (p50 0.800 s of the whole wait's p50 0.970 s)"
        in out
    )
    assert "more of the median wait is outside the composer" in out
    out = text(data(gated_run(1000, SLOW_COMPOSER)))
    assert "held mostly by **seen → planned** (p50 0.500 s" in out
    assert "more of the median wait is in the composer" in out
    mixed = SLOW_COMPOSER[:3] + [pod(9, 0.01, 0.02, 0.1, 2.0)]  # one slow compose call: the p99 moves
    assert "; at p99 by **planned → compose sent** (2.000 s)" in text(data(gated_run(1000, mixed)))


def test_the_composer_share_target_is_judged_at_its_size_only():
    fast = [pod(i, 0.5, 0.1, 0.1, 0.05) for i in range(4)]
    out = text(data(gated_run(5000, fast)))
    assert (
        "the composer's share (seen → compose sent) p99 0.150 s (target < 0.3 s at 5,000 nodes: **met**)"
        in out
    )
    assert "**NOT met**" in text(data(gated_run(5000, SLOW_COMPOSER)))
    out = text(data(gated_run(1000, fast)))
    assert "p99 0.150 s;" in out and "**met**" not in out
    assert "The composer's share at 5,000 nodes (target p99 < 0.3 s): not measured in this run." in out
    assert "No target for the composer's share" in text({"runs": [gated_run(1000, fast)]})


def test_a_step_not_observed_says_so_instead_of_a_number():
    unseen = [PodSteps(p.pod, p.created, p.admitted, None, p.planned, p.node, p.sent) for p in SLOW_ADMISSION]
    out = text(data(gated_run(5000, unseen)))
    assert "| admitted → seen by the composer | 0 of 4 | not observed | not observed |" in out
    assert "| seen → compose sent (the composer's share) | 0 of 4 | not observed | not observed |" in out
    assert (
        "- 5,000 nodes, unpinned workload: admitted → seen by the composer: 4 of 4 gated pods not observed."
        in out
    )
    assert "the composer's share (seen → compose sent): not observed" in out
    assert (
        "not comparable (admitted → seen by the composer, seen → compose sent (the composer's share) "
        "not observed)" in out
    )
    assert "**met**" not in out and "NOT met" not in out
    nothing = text(data(gated_run(5000, [PodSteps("p0", created=1.0, admitted=1.1)])))
    assert "held mostly by **created → admitted with the gate**" in nothing  # the one step observed
    none = text(data(gated_run(5000, [])))
    assert "no step was observed" in none
    assert "load average during the run: not recorded" in text(
        data(gated_run(1000, SLOW_ADMISSION) | {"load": {}})
    )


def test_without_gated_runs_the_section_says_it_was_not_measured():
    assert "Not measured in this run" in text({"runs": [{"nodes": 10, "controller": "baseline"}]})


def test_the_report_carries_the_step_table(tmp_path):
    from tests.bench.test_report_and_main import REACTION

    d = copy.deepcopy(REACTION) | {"composer_share_target": TARGET}
    d["runs"].append(gated_run(5000, SLOW_ADMISSION) | {"stats": d["runs"][0]["stats"]})
    (tmp_path / "reaction.json").write_text(json.dumps(d))
    md = report.write_report(tmp_path).read_text()
    assert "### Where a gated pod's wait goes" in md and "**5,000 nodes, unpinned workload**" in md


def test_the_composers_rounds_come_from_its_round_histogram():
    run = gated_run(5000, SLOW_COMPOSER)
    assert "the composer's rounds: not recorded" in text(data(run))
    run["metrics"] = {"composer_round_seconds_count": 439.0, "composer_round_seconds_sum": 95.97}
    assert "the composer ran 439 rounds, mean 0.219 s each (96.0 s of rounds in all)" in text(data(run))

