"""Part 2 end to end at the smallest size: an isolated control plane, the Director tap, the GPU
agent, and both controllers (the composer in device-plugin mode without and with gating and in
DRA mode, and the periodic-scan baseline) serving 2 pods."""

from __future__ import annotations

import pytest

from bench.reaction import run
from bench.run_modes import mode


@pytest.mark.slow
def test_reaction_quick_run_measures_both_controllers(tmp_path):
    out = run(
        quick=True,
        sizes=(2,),
        pods=2,
        work_dir=tmp_path,
        cfg_overrides={"scan_interval": 1.0, "mean_interarrival": 0.3},
    )
    runs = {mode(r): r for r in out["runs"]}
    assert set(runs) == {
        ("composer", "plain"),
        ("composer", "gating"),
        ("composer", "dra"),
        ("baseline", "plain"),
    }, out["runs"]
    for (_, m), r in runs.items():
        assert "error" not in r, (r.get("error"), r.get("logs"))
        assert r["not_running"] == 0
        assert r["config"]["gating"] is (m == "gating") and r["config"]["dra"] is (m == "dra")
        gated = m == "gating"
        s = r["stats"]
        assert s["to_running"]["n"] == 2 and s["to_issue"]["n"] == 2
        # the chain is ordered and the simulated hardware latency is inside it
        for p in r["per_pod"]:
            assert p["submitted"] <= p["issued"] <= p["attached"] <= p["running"]
            assert p["bound"] <= p["running"]
            assert p["attached"] - p["issued"] >= r["config"]["hotplug_latency"]
            if gated:  # held by the webhook's gate, released only once its GPUs were advertised
                assert p["gated"]
                assert p["advertised"] <= p["gate_removed"] <= p["bound"]
            if m == "dra":  # allocated, waited in PreBind until visible, bound after
                assert p["prebind"] <= p["visible"] <= p["bound"] and p["allocated"] <= p["visible"]
    assert runs[("composer", "gating")]["gated"] == 2 and runs[("composer", "plain")]["gated"] == 0
    assert runs[("composer", "gating")]["gpus_taken_by_another_pod"] == 0
    dra = runs[("composer", "dra")]
    assert dra["gpus_taken_by_another_pod"] == 0 and dra["never_visible"] == 0
    assert dra["stats"]["poll_wait"]["n"] == 2
    assert [(c["nodes"], c["mode"]) for c in out["comparison"]] == [(2, "plain"), (2, "gating"), (2, "dra")]
    assert out["commit"]["sha"]
