"""Part 2's pure pieces (bench/reaction.py, bench/baseline.py): inventory, arrivals, statistics,
and the matching of watch and Director-tap timestamps."""

from __future__ import annotations

import pytest

from bench.__main__ import _keep_other_workloads
from bench.pod_times import PodTimes, summarize
from bench.reaction import (
    ReactionConfig,
    _Observed,
    _pod_body,
    arrivals,
    compare,
    controller_argv,
    derive,
    inventory,
    match_director,
)
from composer.run.loop import next_tick
from lab.director_sim.inventory import Inventory


def test_inventory_is_valid_for_the_director_simulator():
    inv = Inventory.model_validate(inventory([f"blade-slot-{i}" for i in range(1, 41)], 50))
    assert len(inv.machines) == 40 and len(inv.gpus) == 50
    assert len(inv.switches) == 4  # 16 GPUs per switch
    assert all(g.pool is None and g.attached_to is None for g in inv.gpus)


def test_arrivals_are_seeded_and_start_at_zero():
    a = arrivals(50, 2.0, 1)
    assert a == arrivals(50, 2.0, 1) and a != arrivals(50, 2.0, 2)
    assert a[0] == 0 and a == sorted(a)
    assert 50 < a[-1] < 200  # 49 gaps of mean 2 s
    assert arrivals(3, 0, 1) == [0, 0, 0]


def test_summarize_uses_nearest_rank_quantiles():
    s = summarize(float(x) for x in range(1, 101))
    assert (s["n"], s["p50"], s["p90"], s["p99"], s["max"]) == (100, 50, 90, 99, 100)
    assert summarize([]) == {"n": 0}


def test_match_director_maps_each_pod_to_its_compose_and_derives_intervals():
    obs = _Observed()
    obs.pods["p0"] = PodTimes("p0", uid="u0", unschedulable=100.0, bound=104.5, running=104.6)
    obs.pods["p1"] = PodTimes("p1", uid="u1", unschedulable=101.0)
    obs.intents = {"u0": (100.4, "n1"), "u1": (103.0, "n1")}
    obs.alloc = {"n1": [(90.0, 0), (103.9, 1), (106.0, 2)]}
    tap = [
        {"t0": 95.0, "t1": 95.1, "path": "fabric/edit", "mach_id": 1},  # before the intent: not it
        {"t0": 100.5, "t1": 100.51, "path": "fabric/edit", "mach_id": 1},
        {"t0": 100.6, "t1": 102.7, "path": "fabric/reprogram", "mach_id": 1},
        {"t0": 103.1, "t1": 103.12, "path": "fabric/edit", "mach_id": 1},
        {"t0": 103.2, "t1": 105.3, "path": "fabric/reprogram", "mach_id": 1},
        {"t0": 100.5, "t1": 100.6, "path": "fabric/edit", "mach_id": 2},  # another machine
    ]
    match_director(obs, tap, {1: "n1", 2: "n2"})
    p0, p1 = obs.pods["p0"], obs.pods["p1"]
    assert (p0.node, p0.issued, p0.attached, p0.advertised) == ("n1", 100.5, 102.7, 103.9)
    assert (p1.issued, p1.attached, p1.advertised) == (103.1, 105.3, 106.0)
    cfg = ReactionConfig(nodes=1, pods=2, hotplug_latency=2.0, advertise_delay=1.0)
    d = derive(p0, cfg)
    assert d["to_issue"] == pytest.approx(0.5)
    assert d["to_running"] == pytest.approx(4.6)
    assert d["overhead"] == pytest.approx(1.6)
    assert d["schedule"] == pytest.approx(0.6)
    assert derive(p1, cfg)["to_running"] is None


def test_every_mode_is_measured_from_the_pods_creation():
    cfg = ReactionConfig(nodes=1, pods=1, hotplug_latency=2.0, advertise_delay=1.0, gating=True)
    gated = PodTimes("p", submitted=10.0, gated=10.01, gate_removed=13.2, issued=10.2, running=13.5)
    d = derive(gated, cfg)  # never unschedulable: measured from creation all the same
    assert d["to_running"] == pytest.approx(3.5) and d["overhead"] == pytest.approx(0.5)
    assert d["to_issue"] == pytest.approx(0.2)
    late = PodTimes("q", submitted=10.0, unschedulable=10.4, running=14.0)
    assert derive(late, cfg)["to_running"] == pytest.approx(4.0)  # not from the Unschedulable verdict


def test_gating_adds_the_webhook_flags_only():
    cfg = ReactionConfig(nodes=1, pods=1, gating=True)
    kw = dict(director_url="http://x", kubeconfig="k", ns="ns", plugin_ns="gpu", probe_port=1, cfg=cfg)
    plain = controller_argv("composer", **kw)
    hooked = controller_argv("composer", webhook=(9443, "c.pem", "k.pem"), **kw)
    assert hooked[: len(plain)] == plain
    assert hooked[len(plain) :] == [
        "--webhook-address",
        "127.0.0.1",
        "--webhook-port",
        "9443",
        "--webhook-cert-file",
        "c.pem",
        "--webhook-key-file",
        "k.pem",
    ]


def test_compare_gives_baseline_over_composer_ratios():
    a = {
        "stats": {
            "to_issue": {"mean": 0.5, "p50": 0.4, "p99": 1.0},
            "to_running": {"mean": 4, "p50": 4, "p99": 5},
        }
    }
    b = {
        "stats": {
            "to_issue": {"mean": 5.0, "p50": 4.0, "p99": 9.5},
            "to_running": {"mean": 8, "p50": 8, "p99": 15},
        }
    }
    out = compare(a, b)
    assert out["to_issue"] == {"mean": 10.0, "p50": 10.0, "p99": 9.5}
    assert out["to_running"]["p99"] == 3.0
    assert compare({}, b)["to_issue"]["mean"] is None


def test_controller_argv_differ_only_in_the_trigger():
    cfg = ReactionConfig(nodes=1, pods=1, scan_interval=7)
    kw = dict(director_url="http://x", kubeconfig="k", ns="ns", plugin_ns="gpu", probe_port=1, cfg=cfg)
    comp, base = controller_argv("composer", **kw), controller_argv("baseline", **kw)
    assert comp[1:3] == ["-m", "composer"]
    assert base[1:5] == ["-m", "bench.baseline", "--scan-interval-seconds", "7"]
    assert comp[3:] == base[6:]


def test_next_tick_is_on_a_fixed_grid():
    assert next_tick(100.0, 10.0) == 110.0
    assert next_tick(101.5, 10.0) == 110.0
    assert next_tick(109.99, 10.0, phase=5.0) == 115.0


def test_pinned_pods_select_their_host_and_unpinned_ones_any():
    pinned = _pod_body("p", "blade-slot-3")
    assert pinned["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "blade-slot-3"}
    assert pinned["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "nodeSelector" not in _pod_body("p")["spec"]


def test_rerunning_one_workload_keeps_the_other_workloads_runs(tmp_path):
    old = tmp_path / "reaction.json"
    old.write_text(
        '{"command": "old", "runs": [{"controller": "composer", "nodes": 10}, '
        '{"controller": "composer", "workload": "pinned", "nodes": 10}], '
        '"comparison": [{"nodes": 10, "baseline_over_composer": {}}]}'
    )
    new = {"runs": [{"controller": "composer", "workload": "pinned", "nodes": 100}], "comparison": []}
    out = _keep_other_workloads(new, old, ("pinned",))
    assert [(r["workload"], r["nodes"]) for r in out["runs"]] == [("unpinned", 10), ("pinned", 100)]
    assert out["comparison"][0]["workload"] == "unpinned"
    assert out["carried_over"] == {"workloads": ["unpinned"], "from": "old --workloads unpinned"}
    assert _keep_other_workloads({"runs": []}, old, None) == {"runs": []}
