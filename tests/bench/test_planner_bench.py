"""Part 1's code (bench/planner_bench.py) at tiny sizes."""

from __future__ import annotations

import pytest

from bench.planner_bench import Size, growth_exponents, make_world, measure, profile_round, run


def test_make_world_is_deterministic_and_has_the_requested_size():
    a = make_world(Size(20, 160, 50), seed=3)
    b = make_world(Size(20, 160, 50), seed=3)
    assert a == b
    reqs, hosts, gpus = a
    assert (len(reqs), len(hosts), len(gpus)) == (50, 20, 160)
    assert len({g.name for g in gpus}) == 160
    assert any(r.hosts for r in reqs) or len(reqs) < 20
    assert make_world(Size(20, 160, 50), seed=4)[0] != reqs


def test_measure_accounts_for_every_request_and_reports_units():
    row = measure(Size(10, 80, 40), repeats=2)
    assert row["placements"] + row["refusals"] == 40
    assert 0 < row["ms_min"] <= row["ms_median"] <= row["ms_max"]
    assert row["peak_round_mib"] > 0 and row["input_mib"] > 0
    assert row["gpus_planned"] <= 80


def test_growth_exponents_are_log_log_slopes():
    rows = [
        {"pods": 10, "ms_median": 1.0},
        {"pods": 100, "ms_median": 10.0},
        {"pods": 1000, "ms_median": 1000.0},
    ]
    assert growth_exponents(rows) == [1.0, 2.0]


def test_profile_lists_the_planner_first():
    top = profile_round(make_world(Size(10, 80, 30)), top=5)
    assert len(top) == 5
    assert "plan" in top[0]["function"]
    assert top[0]["cumtime_s"] >= top[-1]["cumtime_s"]


@pytest.mark.slow
def test_quick_run_has_every_section():
    out = run(quick=True, repeats=1)
    assert [r["hosts"] for r in out["sizes"]] == [10, 30, 100]
    assert out["target_met"] is None  # no 1,000-host size in quick mode
    assert len(out["growth_exponents"]) == 2
    assert out["profile"]["top"]
