"""The split of a gated pod's wait into steps (bench/wait_steps.py) over recorded samples: a
composer log as the composer writes it, a Director tap log, the bench's own pod records."""

from __future__ import annotations

import logging

import pytest

from bench.pod_times import PodTimes
from bench.wait_steps import PodSteps, pod_steps, run_steps, step_stats
from composer.__main__ import LOG_FORMAT
from composer.shell.pod_steps import LOGGER, log_step

NS = "bench-composer-abc123"
MACHINES = {1: "blade-slot-1", 2: "blade-slot-2"}


def line(step: str, pod: str, t: float, **fields: object) -> str:
    """The composer's log line of a step, as ``python -m composer`` formats it."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        log_step(step, pod, t, **fields)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    (rec,) = records
    return logging.Formatter(LOG_FORMAT).format(rec)


def edit(t0: float, mach: int, status: int = 200, path: str = "fabric/edit") -> dict:
    return {"t0": t0, "t1": t0 + 0.01, "method": "POST", "path": path, "mach_id": mach, "status": status}


COMPOSER_LOG = [
    "2026-12-04 17:00:00,000 INFO composer.run.loop MainThread: composer running",
    line("admitted", f"{NS}/a", 100.05),
    line("admitted", f"{NS}/a", 101.0),  # a second CREATE answer (a retry): the first counts
    line("admitted", f"{NS}/b", 100.5),
    line("admitted", f"{NS}/c", 100.9),
    line("admitted", "other-ns/d", 100.2),  # another run's namespace: not this run's pod d
    line("planned", f"{NS}/a", 100.60, uid="ua", node="blade-slot-1", devices=1, gated=True, seen=100.25),
    line("planned", f"{NS}/a", 104.0, uid="ua", node="blade-slot-2", devices=1, gated=True, seen=100.25),
    line("planned", f"{NS}/b", 100.80, uid="ub", node="blade-slot-2", devices=0, gated=True, seen=100.7),
    'INFO composer.pod_steps composer-webhook: pod-step {"step": "planned", "pod": "' + NS + '/c"',  # cut off
]
TAP = [
    edit(100.40, 1),  # on a's node before a was planned: another pod's compose
    edit(100.61, 1, status=409),  # refused by the Director: no compose
    edit(100.62, 1, path="fabric/reprogram"),
    edit(100.70, 1),  # a's compose call
    edit(100.90, 2),  # b's node, but b composes nothing (spare units)
]


def pods() -> list[PodTimes]:
    return [PodTimes(n, submitted=100.0 + i * 0.1) for i, n in enumerate("abcd")]


def steps() -> dict[str, PodSteps]:
    got = pod_steps(pods(), namespace=NS, composer_log=COMPOSER_LOG, tap=TAP, machines=MACHINES)
    return {s.pod: s for s in got}


def test_each_step_comes_from_its_own_observer():
    a = steps()["a"]
    assert a == PodSteps(
        "a", created=100.0, admitted=100.05, seen=100.25, planned=100.6, node="blade-slot-1", sent=100.7
    )
    d = a.durations()
    assert d == pytest.approx(
        {
            "admission": 0.05,
            "informer": 0.2,
            "planning": 0.35,
            "compose_call": 0.1,
            "composer": 0.45,
            "total": 0.7,
        }
    )


def test_a_step_not_observed_is_none_not_estimated():
    got = steps()
    assert set(got) == {"a", "b", "c"}  # d was not gated by this run's composer
    b = got["b"].durations()
    assert b["planning"] == pytest.approx(0.1) and b["compose_call"] is None and b["composer"] is None
    c = got["c"].durations()  # admitted, never planned (its only planned line is cut off)
    assert c["admission"] == pytest.approx(0.7)
    assert c["informer"] is c["planning"] is c["compose_call"] is c["total"] is None


def test_a_pod_planned_without_the_watchs_first_delivery_has_no_informer_or_planning_step():
    log = [
        line("admitted", f"{NS}/a", 100.05),
        line("planned", f"{NS}/a", 100.6, node="blade-slot-1", devices=1),
    ]
    (a,) = pod_steps(pods()[:1], namespace=NS, composer_log=log, tap=TAP, machines=MACHINES)
    d = a.durations()
    assert d["informer"] is None and d["planning"] is None and d["composer"] is None
    assert d["compose_call"] == pytest.approx(0.1)


def test_step_stats_count_only_observed_pods():
    s = step_stats(steps().values())
    assert s["pods"] == 3
    assert s["stats"]["admission"]["n"] == 3
    assert s["stats"]["planning"]["n"] == 2 and s["stats"]["compose_call"]["n"] == 1
    assert s["stats"]["composer"] == {
        "n": 1,
        "mean": 0.45,
        "p50": 0.45,
        "p90": 0.45,
        "p99": 0.45,
        "max": 0.45,
    }
    assert step_stats([])["stats"]["total"] == {"n": 0}
    assert [p["pod"] for p in s["per_pod"]] == ["a", "b", "c"]


def test_a_run_reads_its_composer_log_file(tmp_path):
    log = tmp_path / "composer.log"
    log.write_text("\n".join(COMPOSER_LOG) + "\n")
    got = run_steps(pods(), NS, log, TAP, MACHINES)
    assert got == step_stats(steps().values())
    assert run_steps(pods(), NS, tmp_path / "absent.log", TAP, MACHINES)["pods"] == 0
