"""The discrete-event GPU-savings simulation (bench/savings.py) on tiny traces."""

from __future__ import annotations

import math

from bench.savings import SimConfig, compare, min_gpus, run, simulate_fixed, simulate_pool, split_by_demand
from bench.trace import TracePod, handover_trace, write_trace


def pod(t: float, d: float, g: int = 1, host: str | None = None, model: str | None = "Tesla-T4") -> TracePod:
    return TracePod(arrival_seconds=t, duration_seconds=d, gpus=g, host=host, model=model)


CFG = SimConfig(hosts=("h1", "h2"), compose_seconds=10, idle_timeout_seconds=100)


def test_a_composed_pod_waits_the_compose_time():
    r = simulate_pool([pod(0, 50)], 1, CFG)
    assert r.waits == [10]
    assert r.composes == 1


def test_spare_gpus_are_reused_at_once_on_the_same_host_before_the_idle_timeout():
    r = simulate_pool([pod(0, 50, host="h1"), pod(60, 50, host="h1")], 1, CFG)
    assert r.waits == [10, 0]
    assert r.composes == 1


def test_a_pod_pinned_elsewhere_waits_for_the_idle_reclaim():
    # the first pod runs 10..60; the only GPU then sits idle on h1 until 60 + 100, is given
    # back and composed onto h2 (+10): the second pod waits 170 - 60
    r = simulate_pool([pod(0, 50, host="h1"), pod(60, 50, host="h2")], 1, CFG)
    assert r.waits[0] == 10
    assert math.isclose(r.waits[1], 110)
    assert r.reclaims >= 1


def test_pods_that_never_fit_count_as_infinite_waits():
    r = simulate_pool([pod(0, 50, g=2)], 1, CFG)
    assert r.waits == [math.inf]
    f = simulate_fixed([pod(0, 50, g=4)], 2, CFG)
    assert f.waits == [math.inf]
    assert f.within(1e9) == 0.0


def test_fixed_hosts_start_at_once_and_pinned_pods_wait_for_their_host():
    r = simulate_fixed([pod(0, 50, host="h1"), pod(10, 5, host="h1"), pod(10, 5)], 1, CFG)
    assert r.waits == [0, 40, 0]
    assert r.gpus == 2


def test_two_hosts_handing_over_need_two_pooled_gpus_against_four_fixed():
    out = compare(
        handover_trace(cycles=2), SimConfig(hosts=("blade-slot-1", "blade-slot-2")), target_seconds=120
    )
    assert out["pool"]["gpus"] == 2
    assert out["fixed"]["gpus"] == 4 and out["fixed"]["per_host"] == 2
    assert out["pool_over_fixed"] == 0.5
    assert 0 < out["fixed"]["utilisation"] < out["pool"]["utilisation"] <= 1


def test_min_gpus_finds_the_smallest_size_meeting_the_target():
    calls = []

    def sim(n):
        calls.append(n)
        return simulate_pool([pod(0, 100, host="h1"), pod(0, 100, host="h2"), pod(0, 100)], n, CFG)

    best = min_gpus(sim, target_seconds=15)
    assert best is not None and best.gpus == 3
    assert best.within(15) == 1.0
    assert sim(2).within(15) < 1.0


def test_split_by_demand_shares_out_exactly_the_total():
    pods = [pod(0, 300, model="A"), pod(0, 100, model="B"), pod(0, 100, model=None)]
    assert split_by_demand(pods, 4) == {"A": 3, "B": 1}
    assert sum(split_by_demand(pods, 7).values()) == 7
    assert split_by_demand([pod(0, 1, model=None)], 3) == {"Tesla-T4": 3}


def test_run_replays_a_user_trace_and_writes_the_handover_trace(tmp_path):
    trace = write_trace(tmp_path / "mine.csv", [pod(i * 30.0, 200, host=f"h{i % 3}") for i in range(12)])
    out = run(quick=True, out_dir=tmp_path, trace_path=trace)
    assert (tmp_path / "article.csv").exists()
    mine = [c for c in out["cases"] if c["trace"] == "mine.csv"]
    assert mine and all(c["hosts"] == 3 for c in mine)
    assert all(c["pool"]["gpus"] <= c["fixed"]["gpus"] for c in mine)
    assert out["traces"]["mine.csv"]["pods"] == 12
    assert out["curve"]["pool"] and out["curve"]["fixed"]
