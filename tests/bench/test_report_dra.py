"""The report's DRA-mode section (bench/report_dra.py) and the reading of a run's mode
(bench/run_modes.py), on tiny data."""

from __future__ import annotations

from typing import Any

from bench import report
from bench.report_dra import dra_section
from bench.run_modes import label, mode, taken


def _stats(**values: float) -> dict[str, Any]:
    return {
        k: {"n": 3, "mean": v, "p50": v, "p90": v, "p99": v + 0.1, "max": v + 0.2} for k, v in values.items()
    }


#: A DRA run's per-pod means (seconds; p99 = mean + 0.1 in :func:`_stats`).
DRA_MEANS = {"overhead": 2.0, "to_issue": 0.1, "visible_lag": 0.2, "poll_wait": 1.6, "after_poll": 0.05}


def _gated() -> dict[str, Any]:
    """A gated composer run at 10 nodes, pinned, as ``reaction.json`` holds it."""
    return {
        "controller": "composer",
        "workload": "pinned",
        "gating": True,
        "nodes": 10,
        "pods": 3,
        "not_running": 0,
        "config": {"gating": True, "dra": False},
        "metrics": {"composer_gpus_taken_by_another_pod_total": 0.0},
        "stats": _stats(overhead=0.25),
    }


def _dra(beyond: float = 0.3, taken_gpus: int = 0) -> dict[str, Any]:
    """A DRA-mode run of the same size and workload (the composer's metric says 0 taken)."""
    return _gated() | {
        "gating": False,
        "dra": True,
        "config": {"gating": False, "dra": True},
        "gpus_taken_by_another_pod": taken_gpus,
        "poll_share": 0.8,
        "missed_polls": 0,
        "never_visible": 0,
        "visible_withdrawn": 2,
        "stats": _stats(**DRA_MEANS, overhead_beyond_poll=beyond),
    }


def _reaction(*runs: dict[str, Any]) -> dict[str, Any]:
    return {
        "runs": list(runs),
        "target": {"overhead_p99_seconds": 1.0, "at_nodes": 1000, "dra_beyond_poll_p99_seconds": 0.5},
        "prebind_poll_seconds": 5.0,
    }


def test_a_runs_mode_is_read_from_its_flags_older_files_included():
    assert mode(_dra()) == ("composer", "dra") and label(_dra()) == "composer DRA"
    assert mode(_gated()) == ("composer", "gating") and label(_gated()) == "composer + gating"
    assert mode({"controller": "composer", "config": {"gating": True}}) == ("composer", "gating")
    assert (
        mode({"controller": "baseline"}) == ("baseline", "plain")
        and label({"controller": "baseline"}) == "baseline"
    )


def test_gpus_taken_are_the_runs_own_count_else_the_composers_metric():
    assert taken(_dra(taken_gpus=2)) == 2.0  # the metric says 0: DRA mode's count is derived
    assert taken(_gated()) == 0.0
    assert taken({"metrics": {}}) is None


def test_the_dra_section_sets_dra_beside_gated_mode_and_judges_the_beyond_poll_target():
    lines = dra_section(_reaction(_gated(), _dra()))
    text = "\n".join(lines)
    assert (
        "| pinned | 10 | 3 (0 not running) | 2.00 | 2.10 | 0.25 | 0.35 | 0.10 | 0.20 | 0.20 | 0.30 | 1.60 | "
        "80 % | 0.15 | 0.30 | 0.40 | 0 / 0 |" in text
    )
    header, rule = lines[lines.index(next(x for x in lines if x.startswith("| workload"))) :][:2]
    assert header.count("|") == rule.count("|")
    [finding] = [x for x in lines if x.startswith("- DRA at 10 nodes (pinned)")]
    assert "overhead p50 2.00 s, p99 2.10 s" in finding
    assert "p50 0.25 s, p99 0.35 s" in finding  # the gated run of the same size and workload
    assert "compose p50 0.10 s, p99 0.20 s after the pod's creation" in finding
    assert "conditions p50 0.20 s, p99 0.30 s after the node showed the GPU" in finding
    assert "accounts for 80 % of DRA mode's overhead (mean wait for the next poll 1.60 s" in finding
    assert "beyond the poll p99 0.40 s (target ≤ 0.5 s: **met**)" in finding
    assert "GPUs taken by another pod: 0 (target 0: **met**)" in finding
    assert "seen ready and then not ready again before their bind: 2;" in finding

    [late] = [
        x for x in dra_section(_reaction(_gated(), _dra(beyond=0.6, taken_gpus=1))) if x.startswith("- DRA")
    ]
    assert "beyond the poll p99 0.70 s (target ≤ 0.5 s: **NOT met**)" in late
    assert "GPUs taken by another pod: 1 (target 0: **NOT met**)" in late


def test_a_failed_or_missing_dra_run_is_said_so():
    failed = {
        "controller": "composer",
        "dra": True,
        "nodes": 100,
        "workload": "pinned",
        "error": "RuntimeError: x",
    }
    assert dra_section(_reaction(failed))[-1] == "- DRA at 100 nodes (pinned): failed: `RuntimeError: x`."
    assert dra_section(_reaction(_gated())) == ["- DRA mode: not measured in this run."]
    no_gated = "\n".join(dra_section(_reaction(_dra())))
    assert "gated overhead" in no_gated and "p50 – s, p99 – s" in no_gated


def test_the_reaction_section_names_dra_runs_and_carries_the_dra_section(tmp_path):
    d = _reaction(_gated(), _dra())
    for r in d["runs"]:
        r["config"] |= {
            "hotplug_latency": 2.0,
            "advertise_delay": 1.0,
            "agent_interval": 0.1,
            "mean_interarrival": 1.5,
            "max_gpus_per_node": 8,
            "scan_interval": 10.0,
            "settle_timeout": 60.0,
        }
        r["stats"] |= _stats(to_issue=0.1, to_running=3.2, director=2.0, advertise=1.1)
    d |= {
        "ca_slo": {"max_seconds": 60, "average_seconds": 15, "nodes": "100-1000", "source": "FAQ"},
        "commit": {"sha": "0123456789abcdef", "dirty": False},
        "command": "python -m bench --only reaction",
        "comparison": [
            {
                "nodes": 10,
                "workload": "pinned",
                "gating": False,
                "mode": "dra",
                "baseline_over_composer": {
                    k: {"mean": 2.0, "p50": 2.0, "p99": 2.0} for k in ("to_issue", "to_running")
                },
            }
        ],
    }
    text = report._reaction(d, plotted=False)
    assert "Commit measured: `0123456789ab`." in text
    assert "| composer DRA | pinned | 10 | 3 (0 not running) |" in text
    assert "| DRA | pinned | 10 | 2.00 |" in text  # the baseline comparison names the mode
    assert "### DRA mode and the scheduler's PreBind poll" in text
