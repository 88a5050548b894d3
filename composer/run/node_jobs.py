"""Node jobs on worker threads, one job per node at a time: the part of a round that acts, shared
by device-plugin mode's :class:`composer.run.controller.Controller` and DRA mode's
:class:`composer.run.dra.DraDriver`.

A round hands each :class:`~composer.decide.round_types.NodeJob` it decided to
:meth:`NodeJobs.submit`, which runs it on a :class:`composer.shell.lazy_pool.LazyPool` and returns
at once, so a slow hot-plug on one node never delays another node's job or the next round:

- a node whose job runs is *busy* (:meth:`NodeJobs.busy`): the next rounds decide without it
  (:func:`without_busy`): without its record (stale until the job ends), the pods it composes
  for, the GPUs attached to it and the GPUs its job composes, decomposes or untags
  (:func:`job_devices`), so no pod or GPU is planned twice;
- a job that ends calls ``on_done`` on its worker thread (the loop's wake-up), so the round that
  reads what it did comes at once, not at the next resync;
- a round starts with :meth:`NodeJobs.collect` on the loop's thread: the results of the jobs that
  ended since (the caller applies them: :func:`remember`, and in DRA mode the held compose
  failures); a job that raised (a Kubernetes write failed) leaves its node busy for the retry
  backoff (``Policy.backoff_seconds``, doubling with each failure in a row), so an unreachable
  API server does not turn into a loop of failing jobs; it is counted in
  ``composer_round_failures_total{stage="job"}``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, wait
from dataclasses import dataclass, replace

from composer.decide.round_types import Memory, NodeJob, Policy, Snapshot
from composer.model.annotations import NodeRecord
from composer.shell.act import JobResult
from composer.shell.fabric_cache import FabricCache
from composer.shell.lazy_pool import LazyPool
from composer.shell.metrics import Metrics

log = logging.getLogger(__name__)

#: ``composer_round_failures_total`` stage of a node job that raised.
JOB_FAILED = "job"


@dataclass(frozen=True)
class Finished:
    """A node job that ended.

    Attributes:
        job: the job as submitted.
        result: what it did; None when it raised (``error``).
        error: what it raised, or None.
    """

    job: NodeJob
    result: JobResult | None
    error: BaseException | None = None


@dataclass
class _Running:
    future: Future[JobResult]
    job: NodeJob


class NodeJobs:
    """Node jobs running on ``workers`` threads (named ``name-N``), one per node at a time.

    Submitting, collecting and asking what is busy are for the loop's thread; ``on_done`` runs on
    the worker thread that ran the job.

    Args:
        workers: most jobs running at once.
        policy: the retry backoff of a node whose job raised (``backoff_seconds``).
        metrics: where a job that raised is counted (``round_failures``, stage :data:`JOB_FAILED`).
        clock: seconds since the epoch.
        on_done: called when a job ends (wakes the loop); None = nobody.
        name: prefix of the worker threads' names.
    """

    def __init__(
        self,
        workers: int,
        *,
        policy: Policy,
        metrics: Metrics,
        clock: Callable[[], float] = time.time,
        on_done: Callable[[], None] | None = None,
        name: str = "composer-node",
    ) -> None:
        self._pool = LazyPool(workers, name)
        self._policy = policy
        self._metrics = metrics
        self._clock = clock
        self.on_done = on_done
        self._running: dict[str, _Running] = {}
        self._failures: dict[str, int] = {}
        self._cooldown: dict[str, float] = {}

    def submit(self, job: NodeJob, run: Callable[[], JobResult]) -> None:
        """Run ``run()`` (which does ``job``) on a worker; ``on_done`` is called when it ends.

        Raises:
            ValueError: ``job.node`` has a job running (the round should not have decided one).
        """
        if job.node in self._running:
            raise ValueError(f"node {job.node} has a job running already")
        fut = self._pool.submit(run)
        wake = self.on_done
        if wake is not None:  # its results feed the next round: start it
            fut.add_done_callback(lambda _f: wake())
        self._running[job.node] = _Running(fut, job)

    def running(self) -> dict[str, NodeJob]:
        """Node -> its job still running (or ended and not collected yet)."""
        return {n: r.job for n, r in self._running.items()}

    def busy(self) -> dict[str, NodeJob]:
        """:meth:`running`, plus an empty job for each node sitting out the backoff after its job
        raised (expired backoffs are dropped here)."""
        busy = self.running()
        now = self._clock()
        for node, until in list(self._cooldown.items()):
            if now < until:
                busy.setdefault(node, NodeJob(node, NodeRecord(), NodeRecord()))
            else:
                del self._cooldown[node]
        return busy

    def collect(self) -> list[Finished]:
        """The jobs that ended since the last call, in the order submitted; a job that raised is
        logged, counted and starts its node's backoff."""
        done = []
        for node, run in list(self._running.items()):
            if not run.future.done():
                continue
            del self._running[node]
            try:
                res = run.future.result()
            except Exception as exc:
                n = self._failures.get(node, 0) + 1
                self._failures[node] = n
                pause = self._policy.backoff_seconds(n)
                self._cooldown[node] = self._clock() + pause
                log.warning(
                    "job on %s failed (%d in a row), node left alone for %.0f s: %s", node, n, pause, exc
                )
                self._metrics.round_failures.labels(JOB_FAILED).inc()
                done.append(Finished(run.job, None, exc))
                continue
            self._failures.pop(node, None)
            self._cooldown.pop(node, None)
            done.append(Finished(run.job, res))
        return done

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until every submitted job has ended (for tests and shutdown); True if they did.
        Their results wait for :meth:`collect`."""
        _, pending = wait([r.future for r in self._running.values()], timeout=timeout)
        return not pending

    def close(self) -> None:
        """Wait for the running jobs and stop the workers (results wait for :meth:`collect`)."""
        self._pool.close()


def remember(memory: Memory, res: JobResult, *, now: float, policy: Policy) -> None:
    """Apply a finished job's result to the round memory: compose attempts and give-ups by UID,
    and a failed reclaim's backoff (``memory.reclaim_retry_at``, ``policy.backoff_seconds``
    doubling) or its end once a reclaim step gave GPUs back."""
    for uid, n in res.failed.items():
        memory.attempts[uid] = n
    for uid, why in res.gave_up.items():
        memory.abandoned[uid] = why
        memory.attempts.pop(uid, None)
    for uid in res.composed:
        memory.attempts.pop(uid, None)
    if res.reclaim_failed:
        n = memory.reclaim_failures.get(res.node, 0) + 1
        memory.reclaim_failures[res.node] = n
        memory.reclaim_retry_at[res.node] = now + policy.backoff_seconds(n)
    elif res.reclaimed:
        memory.reclaim_failures.pop(res.node, None)
        memory.reclaim_retry_at.pop(res.node, None)


def follow_fabric(fabric: FabricCache, job: NodeJob, res: JobResult | None, *, owner_tag: str) -> None:
    """Keep the cached Director read true after a job: a clean compose is applied to it (the
    Director client verified the attach, and wrote ``owner_tag`` first); anything else (a job
    that raised, a failure, a reclaim, orphans, a cancelled edit) makes the next round read the
    Director again."""
    clean = res is not None and not (res.failed or res.gave_up or res.reclaim_failed or res.reclaimed)
    if res is None or not clean or job.reclaim is not None or job.cancel_edit:
        fabric.forget()
        return
    fabric.applied(job.node, [d for ds in res.composed.values() for d in ds], owner_tag)


def job_devices(jobs: Iterable[NodeJob]) -> frozenset[str]:
    """The Director GPU names ``jobs`` compose, decompose (reclaim step, orphans) or untag: not to
    be planned by another job while they run."""
    out: set[str] = set()
    for job in jobs:
        out.update(d for it in job.compose for d in it.placement.devices)
        out.update(job.untag)
        out.update(job.orphans)
        if job.reclaim is not None:
            out.update(job.reclaim.devices)
    return frozenset(out)


def without_busy(snap: Snapshot, busy: Mapping[str, NodeJob]) -> Snapshot:
    """``snap`` without the nodes that have a job running, the pods being composed for there,
    and the GPUs they take (:func:`job_devices`, and every GPU attached to a busy node).

    Their records are stale until the job ends, so they sit this round out. Pods bound to busy
    nodes stay (they do not matter for other nodes), as do the hidden nodes in ``hidden``.
    """
    if not busy:
        return snap
    uids = {it.placement.uid for job in busy.values() for it in job.compose}
    uids |= {uid for job in busy.values() for uid in job.after.intents}
    pods = tuple(
        p
        for p in snap.pods
        if p.uid not in uids
        and not ((p.unschedulable or p.gated) and p.constraints.hosts and p.constraints.hosts <= busy.keys())
    )
    nodes = tuple(n for n in snap.nodes if n.name not in busy)
    hidden = tuple(n for n in snap.nodes if n.name in busy)
    reclaiming = frozenset(n for n, job in busy.items() if job.reclaim or job.after.reclaim)
    fabric = snap.fabric.without(job_devices(busy.values()), frozenset(busy))
    return replace(
        snap, pods=pods, nodes=nodes, fabric=fabric, hidden=hidden, hidden_reclaiming=reclaiming & busy.keys()
    )
