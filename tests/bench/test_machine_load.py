"""The load average sampled during a run (bench/machine.py ``LoadSampler``)."""

from __future__ import annotations

import os
import time

from bench.machine import LoadSampler


def test_load_is_sampled_on_entry_and_exit_and_summarised():
    values = iter([(1.0, 0.5, 0.2), (3.5, 0.6, 0.2)])
    with LoadSampler(interval_seconds=60, read=lambda: next(values)) as load:
        pass
    assert load.summary() == {"samples": 2, "mean": 2.25, "max": 3.5, "cores": os.cpu_count()}


def test_load_is_sampled_on_the_interval_while_the_run_lasts():
    calls: list[int] = []

    def read() -> tuple[float, float, float]:
        calls.append(1)
        return (float(len(calls)), 0.0, 0.0)

    with LoadSampler(interval_seconds=0.01, read=read) as load:
        deadline = time.monotonic() + 5
        while len(calls) < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
    s = load.summary()
    assert s["samples"] == len(calls) >= 5 and s["max"] == float(len(calls))


def test_nothing_sampled_says_so():
    assert LoadSampler().summary() == {"samples": 0, "cores": os.cpu_count()}
