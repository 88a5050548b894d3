"""Part 2 end to end at the smallest size: an isolated control plane, the Director tap, the GPU
agent, and both controllers (composer and periodic-scan baseline) serving 2 pods."""

from __future__ import annotations

import pytest

from bench.reaction import run


@pytest.mark.slow
def test_reaction_quick_run_measures_both_controllers(tmp_path):
    out = run(
        quick=True,
        sizes=(2,),
        pods=2,
        work_dir=tmp_path,
        cfg_overrides={"scan_interval": 1.0, "mean_interarrival": 0.3},
    )
    runs = {(r["controller"], r["gating"]): r for r in out["runs"]}
    assert set(runs) == {("composer", False), ("composer", True), ("baseline", False)}, out["runs"]
    for (_, gated), r in runs.items():
        assert "error" not in r, (r.get("error"), r.get("logs"))
        assert r["not_running"] == 0
        assert r["config"]["gating"] is gated
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
    assert runs[("composer", True)]["gated"] == 2 and runs[("composer", False)]["gated"] == 0
    assert runs[("composer", True)]["gpus_taken_by_another_pod"] == 0
    assert [(c["nodes"], c["gating"]) for c in out["comparison"]] == [(2, False), (2, True)]
    assert out["commit"]["sha"]
