"""The composer's control loop: when rounds run. Used by ``python -m composer`` and, with the
change-driven wake-up turned off, by the benchmark's periodic-scan baseline (:mod:`bench.baseline`).

Each turn of :func:`run_loop`:

1. exits with code 1 once the Lease is lost (``elector.lost``): no two replicas may act at once;
2. runs one :meth:`Controller.round <composer.run.controller.Controller.round>` while leading (an
   exception is logged and counted in ``composer_round_failures_total{stage="bug"}``, never
   kills the loop) and beats the readiness probe (ready while a round succeeded within
   ``stall_seconds``; a standby replica is always ready);
3. waits:

   - change-driven (``scan_interval_seconds`` None): until ``wake`` is set (a watched object
     changed, leadership changed, a signal) or the decision's timer ends
     (:meth:`Controller.wait_seconds <composer.run.controller.Controller.wait_seconds>`, at most
     ``resync_seconds``; a standby waits ``resync_seconds``); after a wake it pauses
     :data:`DEBOUNCE_SECONDS` so that a burst of changes makes one round, or longer when
     :meth:`Controller.settle_seconds <composer.run.controller.Controller.settle_seconds>` says so
     (a gated pod just arrived whose batch window has not closed: waiting for it makes one round
     that plans the pod, where a round at once would only hold it);
   - periodic scan (``scan_interval_seconds`` set): until the next point of the grid
     ``k * scan_interval_seconds``, whatever changes, as cluster-autoscaler's ``--scan-interval``.

Setting ``stop`` ends the loop at once (the waits are on ``stop`` or on ``wake``, which the
signal handler sets too); it returns 0.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from composer.shell.health import Probes
    from composer.shell.leader import LeaseElector
    from composer.shell.metrics import Metrics

log = logging.getLogger("composer")

#: Pause after a change before the round starts, to batch a burst of changes (seconds).
DEBOUNCE_SECONDS = 0.02


class Rounds(Protocol):
    """What the loop runs: device-plugin mode's :class:`composer.run.controller.Controller` or DRA
    mode's :class:`composer.run.dra_loop.DraController`."""

    @property
    def metrics(self) -> Metrics:
        """Where a failing round is counted (``round_failures``)."""
        ...

    @property
    def last_round_ok(self) -> float:
        """When the last round succeeded (seconds since the epoch)."""
        ...

    def round(self) -> object:
        """One round (its result is not used here)."""
        ...

    def wait_seconds(self, resync_seconds: float) -> float:
        """How long the loop may sleep before the next round (seconds)."""
        ...

    def settle_seconds(self) -> float:
        """How long to wait after a wake before the round, when longer than the debounce
        (seconds; 0 = the debounce only)."""
        ...


def next_tick(now: float, interval: float, phase: float = 0.0) -> float:
    """The next time after ``now`` on the grid ``phase + k * interval`` (seconds)."""
    k = int((now - phase) // interval) + 1
    return phase + k * interval


def run_loop(
    ctrl: Rounds,
    stop: threading.Event,
    *,
    resync_seconds: float,
    wake: threading.Event | None = None,
    elector: LeaseElector | None = None,
    probes: Probes | None = None,
    stall_seconds: float = 900.0,
    scan_interval_seconds: float | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """Run rounds until ``stop`` is set or the Lease is lost (see the module docstring).

    Args:
        ctrl: the controller whose rounds run.
        stop: set to end the loop (a signal handler sets it, and ``wake`` with it).
        resync_seconds: longest wait between rounds when nothing changes (seconds).
        wake: set by the watches (and leadership changes) to start a round early; None = a
            private event nothing sets.
        elector: the Lease elector (None = always leading, no leader election).
        probes: readiness/liveness beats (None = no probes).
        stall_seconds: a leader is not ready when its last successful round is older (seconds).
        scan_interval_seconds: None = change-driven; else rounds on this fixed grid (seconds),
            ``wake`` and the decision's timers ignored.
        clock: wall clock (seconds since the epoch), as ``Controller.last_round_ok``.

    Returns:
        0 after ``stop``, 1 when the Lease was lost.
    """
    wake = wake or threading.Event()
    while not stop.is_set():
        if elector is not None and elector.lost.is_set():
            log.error("leadership lost: exiting so that no two replicas act at once")
            return 1
        leading = elector.is_leader if elector is not None else True
        if leading:
            try:
                ctrl.round()
            except Exception:  # a bug must not kill the loop; the next round starts afresh
                log.exception("round failed")
                ctrl.metrics.round_failures.labels("bug").inc()
            if probes is not None:
                fresh = clock() - ctrl.last_round_ok <= stall_seconds
                probes.beat(ready=fresh, detail="leader" if fresh else "leader, no successful round lately")
        elif probes is not None:
            probes.beat(ready=True, detail="standby (not the leader)")
        if scan_interval_seconds is not None:
            stop.wait(max(0.0, next_tick(clock(), scan_interval_seconds) - clock()))
        elif wake.wait(ctrl.wait_seconds(resync_seconds) if leading else resync_seconds):
            wake.clear()
            stop.wait(max(DEBOUNCE_SECONDS, ctrl.settle_seconds() if leading else 0.0))
    return 0
