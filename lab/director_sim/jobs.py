"""Asynchronous jobs of the Director simulator (hardware stand-in): HTTP 202 answers and their polls.

LIQID's SDK handles an HTTP 202 answer to any call by reading ``data[0].links[0].href`` and
polling it (GET, every second) until it answers 404 (done) or a ``command_execution_state``
other than ``"Pending"`` (``"FAILURE"`` / ``"SUCCESS"``): ``liqidinc/liqidsdk-java``
``liqidsdk/src/com/liqid/sdk/LiqidClientBase.java:30-32,176-237``; the poll answer is an
``AsynchronousStatus`` (``liqidinc/liqidsdk-go`` ``liqidsdk/types_gen.go:43-55``).

Here a job holds a resource (a machine or a group) for ``delay`` seconds; its effect, when it
has one deferred (the reprogram's hot-plug, ``pool/done``), is applied when it ends. Jobs end
lazily: :meth:`Jobs.settle` runs before every request, so no timer thread is needed. The link's
path (``job/{id}``) and the ``execution_date`` format are this simulator's choices: LIQID's
published code does not show them.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["FAILURE", "PENDING", "Job", "Jobs"]

PENDING = "Pending"  # LiqidClientBase.java:30
FAILURE = "FAILURE"  # LiqidClientBase.java:31


@dataclass
class Job:
    """One asynchronous job.

    Attributes:
        job_id: number in the link (``job/{job_id}``).
        key: the resource it holds (``machine:1``, ``group:2``) or ``""``.
        call: ``METHOD path`` that started it.
        done_at: ``time.monotonic()`` when it ends.
        fail: it ends in ``FAILURE`` (an injected fault).
        finish: applied when it ends, with ``failed``.
        state: ``Pending`` until it ends, then ``FAILURE`` or ``done``.
        device_id: ``device_id`` of the poll answer.
    """

    job_id: int
    key: str
    call: str
    done_at: float
    fail: bool = False
    finish: Callable[[bool], None] | None = None
    state: str = PENDING
    device_id: str = "0x00000000"
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))


class Jobs:
    """Thread-safe registry of jobs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settling = threading.Lock()  # one settle at a time: a job reads as ended only once applied
        self._ids = itertools.count(1)
        self._jobs: dict[int, Job] = {}

    def start(
        self,
        *,
        key: str,
        call: str,
        delay: float,
        fail: bool = False,
        finish: Callable[[bool], None] | None = None,
        device_id: str = "0x00000000",
    ) -> Job:
        """Register a job that ends ``delay`` seconds from now."""
        with self._lock:
            job = Job(next(self._ids), key, call, time.monotonic() + delay, fail, finish, device_id=device_id)
            self._jobs[job.job_id] = job
            return job

    def settle(self) -> None:
        """End every job whose time has come, applying its deferred effect first: a concurrent
        request waits here, so it never sees a job ended whose effect is not applied yet."""
        with self._settling:
            now = time.monotonic()
            with self._lock:
                due = [j for j in self._jobs.values() if j.state == PENDING and j.done_at <= now]
            for j in due:
                if j.finish is not None:
                    j.finish(j.fail)
                with self._lock:
                    j.state = FAILURE if j.fail else "done"

    def get(self, job_id: int) -> Job | None:
        """The job, or ``None`` when unknown."""
        with self._lock:
            return self._jobs.get(job_id)

    def running(self, key: str) -> Job | None:
        """The job still holding ``key``, if any."""
        if not key:
            return None
        with self._lock:
            return next((j for j in self._jobs.values() if j.key == key and j.state == PENDING), None)

    def abort(self, key: str) -> None:
        """End the job holding ``key`` as failed, without its deferred effect (a cancel)."""
        with self._lock:
            for j in self._jobs.values():
                if j.key == key and j.state == PENDING:
                    j.state, j.finish = FAILURE, None

    def clear(self) -> None:
        """Forget every job."""
        with self._lock:
            self._jobs.clear()

    def running_count(self) -> int:
        """How many jobs are still running."""
        with self._lock:
            return sum(1 for j in self._jobs.values() if j.state == PENDING)
