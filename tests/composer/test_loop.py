"""The one control loop (composer.run.loop.run_loop): leader loss, failing rounds, readiness beats,
the change-driven wake-up with its debounce, and the periodic-scan mode of the baseline."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from composer.run.loop import DEBOUNCE_SECONDS, run_loop
from composer.shell.metrics import Metrics


@dataclass
class FakeController:
    """Counts rounds; after ``limit`` of them stops the loop as the signal handler does (``stop``
    and ``wake``); ``fail`` makes rounds raise."""

    stop: threading.Event
    wake: threading.Event | None = None
    limit: int = 3
    fail: bool = False
    wait: float = 30.0
    settle: float = 0.0
    rounds: list[float] = field(default_factory=list)
    metrics: Metrics = field(default_factory=lambda: Metrics(CollectorRegistry()))
    last_round_ok: float = 0.0

    def round(self) -> None:
        self.rounds.append(time.monotonic())
        if len(self.rounds) >= self.limit:
            self.stop.set()
            if self.wake is not None:
                self.wake.set()
        if self.fail:
            raise RuntimeError("a bug")
        self.last_round_ok = time.time()

    def wait_seconds(self, resync_seconds: float) -> float:
        return min(self.wait, resync_seconds)

    def settle_seconds(self) -> float:
        return self.settle


@dataclass
class FakeElector:
    is_leader: bool = True
    lost: threading.Event = field(default_factory=threading.Event)


@dataclass
class FakeProbes:
    beats: list[tuple[bool, str]] = field(default_factory=list)

    def beat(self, *, ready: bool, detail: str) -> None:
        self.beats.append((ready, detail))


def test_a_lost_lease_exits_with_1_before_any_round() -> None:
    stop = threading.Event()
    ctrl = FakeController(stop)
    elector = FakeElector()
    elector.lost.set()
    assert run_loop(ctrl, stop, resync_seconds=1, elector=elector) == 1  # type: ignore[arg-type]
    assert ctrl.rounds == []


def test_a_failing_round_is_counted_and_the_loop_goes_on_not_ready() -> None:
    stop = threading.Event()
    ctrl = FakeController(stop, limit=2, fail=True, wait=0.0)
    probes = FakeProbes()
    assert run_loop(ctrl, stop, resync_seconds=1, probes=probes) == 0  # type: ignore[arg-type]
    assert len(ctrl.rounds) == 2
    assert ctrl.metrics.round_failures.labels("bug")._value.get() == 2
    assert probes.beats == [(False, "leader, no successful round lately")] * 2


def test_a_standby_does_not_round_and_is_ready() -> None:
    stop = threading.Event()
    ctrl = FakeController(stop)
    probes = FakeProbes()
    threading.Timer(0.2, stop.set).start()
    t0 = time.monotonic()
    run_loop(ctrl, stop, resync_seconds=0.05, elector=FakeElector(is_leader=False), probes=probes)  # type: ignore[arg-type]
    assert ctrl.rounds == []
    assert probes.beats and set(probes.beats) == {(True, "standby (not the leader)")}
    assert time.monotonic() - t0 < 2


def test_a_wake_starts_the_next_round_after_the_debounce_and_stop_ends_at_once() -> None:
    stop, wake = threading.Event(), threading.Event()
    ctrl = FakeController(stop, wake, limit=2, wait=30.0)
    woken: list[float] = []
    threading.Timer(0.1, lambda: (woken.append(time.monotonic()), wake.set())).start()
    t0 = time.monotonic()
    assert run_loop(ctrl, stop, resync_seconds=60, wake=wake) == 0  # type: ignore[arg-type]
    assert len(ctrl.rounds) == 2
    assert DEBOUNCE_SECONDS <= ctrl.rounds[1] - woken[0] < 5  # woken (not the 30 s timer), debounced
    assert time.monotonic() - t0 < 5  # stop (with wake) ends the loop at once
    wake.clear()
    stop2 = threading.Event()
    slow = FakeController(stop2, limit=99, wait=30.0)
    threading.Timer(0.1, lambda: (stop2.set(), wake.set())).start()  # what the SIGTERM handler does
    t0 = time.monotonic()
    run_loop(slow, stop2, resync_seconds=60, wake=wake)  # type: ignore[arg-type]
    assert len(slow.rounds) == 1 and time.monotonic() - t0 < 5


def test_a_wake_waits_the_controllers_settle_time_when_longer_than_the_debounce() -> None:
    stop, wake = threading.Event(), threading.Event()
    ctrl = FakeController(stop, wake, limit=2, wait=30.0, settle=0.3)
    woken: list[float] = []
    threading.Timer(0.1, lambda: (woken.append(time.monotonic()), wake.set())).start()
    assert run_loop(ctrl, stop, resync_seconds=60, wake=wake) == 0  # type: ignore[arg-type]
    assert 0.3 <= ctrl.rounds[1] - woken[0] < 5


def test_the_scan_mode_ignores_wakes_and_rounds_on_the_grid() -> None:
    stop, wake = threading.Event(), threading.Event()
    ctrl = FakeController(stop, limit=2, wait=0.0)
    wake.set()  # a change: ignored
    run_loop(ctrl, stop, resync_seconds=60, wake=wake, scan_interval_seconds=0.5)  # type: ignore[arg-type]
    assert 0.0 < ctrl.rounds[1] - ctrl.rounds[0] <= 0.5 + 0.2
    assert wake.is_set()  # never consumed
