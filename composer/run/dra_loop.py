"""DRA mode in the control loop: :class:`DraController` gives :func:`composer.run.loop.run_loop`
the rounds of a :class:`composer.run.dra.DraDriver`, so DRA mode runs under the same loop,
leader election, probes and wake-ups as device-plugin mode.

A round is skipped until the watch cache has listed every kind once (a half-filled cache would
show claims without their pods or nodes). A read or slice write that fails skips the round
(counted in ``composer_round_failures_total`` by stage, as device-plugin mode does:
:mod:`composer.run.skip`); the next round starts from what is there. The loop wakes on every
change of pods, managed nodes, pool namespaces, ResourceClaims and the driver's ResourceSlices
(:class:`composer.shell.cache.DraCache`), when a node job ends (the driver's ``on_job_done``: the
next round writes the claim's conditions from what the job did), and at the latest after
``resync_seconds`` (the idle timeout and the failure hold are timers nothing wakes; a change on
the Director made by others wakes the loop once the background read finds it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from composer.run.dra import DraDriver, DraRound
from composer.run.skip import run_or_skip, unsynced
from composer.shell.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass
class DraController:
    """The loop's controller in DRA mode.

    Attributes:
        driver: the DRA driver whose rounds run (its ``source``, when set, gates rounds on
            ``synced``).
        metrics: where rounds are counted.
        clock: seconds since the epoch.
        last_round_ok: when the last round succeeded (seconds since the epoch; the readiness probe).
        last: the last round's result (None before one succeeded).
    """

    driver: DraDriver
    metrics: Metrics
    clock: Callable[[], float] = time.time
    last_round_ok: float = 0.0
    last: DraRound | None = None

    def round(self) -> DraRound | None:
        """One DRA round; None when skipped (cache not synced, a read failed)."""
        t0 = time.monotonic()
        if unsynced(self.driver.source, log):
            return None
        done = run_or_skip(
            self.driver.round,
            self.metrics,
            log,
            round_name="DRA round",
            kubernetes_failed="Kubernetes read or slice write failed",
        )
        if done is None:
            return None
        self.last = done
        self.metrics.rounds.inc()
        self.metrics.round_seconds.observe(time.monotonic() - t0)
        self.last_round_ok = self.clock()
        if done.decision.decision.jobs or done.statuses:
            log.info(
                "DRA round: %d node job(s), %d claim status write(s)",
                len(done.decision.decision.jobs),
                len(done.statuses),
            )
        return done

    def wait_seconds(self, resync_seconds: float) -> float:
        """How long the loop may sleep: ``resync_seconds``, or less when the last decision has a
        timer running."""
        wake = self.last.decision.decision.wake_after if self.last is not None else None
        if wake is None:
            return resync_seconds
        return max(0.01, min(resync_seconds, wake))

    def settle_seconds(self) -> float:
        """0: DRA mode holds no batch of gated pods, the loop's debounce applies."""
        return 0.0

    def close(self) -> None:
        """Wait for the running node jobs and release the executor's clients."""
        self.driver.close()
