"""Executing one node's job: annotation writes, device-plugin restart, compose, reclaim.

Runs in a worker thread; one job per node at a time, so a node's annotations have a single
writer. Order matters for crash safety:

- compose: the ``Composing`` intent is durable *before* anything changes on the Director, and
  the result is written after; a crash in between is resolved next round from the Director's
  truth. The intent's PATCH runs on a writer thread while the compose reads the Director, and
  the compose waits for it before its first change (``before_change``), so the write and the
  reads overlap instead of adding up;
- reclaim: the ``reclaim`` annotation is written before the taint is set, GPU pods on the node
  are listed again after the taint (a pod bound in the meantime aborts the reclaim), and the
  taint is lifted before the annotation is cleared; a step that gives back its devices only
  (:attr:`~composer.decide.round_types.ReclaimStep.node_taint` False, DRA mode) neither taints
  the node nor lists its pods (the devices' taint is in the driver's ResourceSlices);
- owner tag: the composer's owner tag is written on the GPUs before they are attached (with
  the autoscaler annotations on the node, in the ``Composing`` write), and cleared after
  they are detached; so every GPU the composer attached carries it, and a GPU left tagged by a
  crash in between is still free to plan (see :mod:`composer.decide.decide`);
- orphans (composer-tagged GPUs on a machine with no Node): the Node's absence is confirmed
  with a GET just before the decompose.

Director failures never escape a job: they become intent ``retry_at`` times, Events and
metrics. Kubernetes failures abort the job (logged); the next round starts from what is
really there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from composer.decide.decide import intents_for
from composer.decide.round_types import (
    ComposeItem,
    NodeJob,
    Policy,
    ReclaimKind,
    lease_event,
    node_event,
    pod_event,
)
from composer.model import annotations as ann
from composer.model.annotations import Intent, IntentPhase, NodeRecord, Reclaim, ReclaimPhase
from composer.model.fabric import FabricClient, FabricFactory
from composer.model.models import EventSpec, Taint
from composer.shell.lazy_pool import LazyPool
from composer.shell.metrics import Metrics
from dynamic_providers.director.errors import DirectorError

log = logging.getLogger(__name__)

RECLAIM_TAINT = Taint(ann.RECLAIM_TAINT_KEY, ann.RECLAIM_TAINT_VALUE, ann.RECLAIM_TAINT_EFFECT)


def _about(item: ComposeItem, type_: str, reason: str, message: str) -> EventSpec:
    """An Event about the object a compose serves (a pod; a ResourceClaim in DRA mode)."""
    ev = pod_event(item.placement.key, item.placement.uid, type_, reason, message)
    return ev if item.kind == ev.kind else replace(ev, kind=item.kind)


class KubeWrites(Protocol):
    """The Kubernetes calls a job makes (:class:`composer.shell.kube.KubeApi` provides them)."""

    def patch_node_annotations(
        self, node: str, changes: Mapping[str, str | None]
    ) -> Mapping[str, Any] | None: ...

    def set_taint(self, node: str, taint: Taint, present: bool) -> Mapping[str, Any] | None: ...

    def gpu_pods_on_node(self, node: str) -> list[str]: ...

    def restart_daemonset_pods(self, node: str, namespace: str, selector: str) -> list[str]: ...

    def create_event(self, ev: EventSpec) -> None: ...

    def node_exists(self, node: str) -> bool: ...


@dataclass
class JobResult:
    """What a job did, for the controller's memory.

    Attributes:
        failed: pod UID -> failed compose attempts so far (retry later).
        gave_up: pod UID -> why the composer stops trying.
        composed: pod UID -> devices attached for it.
        reclaim_failed: a reclaim step failed (back off before the next attempt).
        reclaimed: devices given back.
    """

    node: str
    failed: dict[str, int] = field(default_factory=dict)
    gave_up: dict[str, str] = field(default_factory=dict)
    composed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reclaim_failed: bool = False
    reclaimed: tuple[str, ...] = ()


@dataclass
class _PendingWrite:
    """A Node write running on the executor's writer thread.

    :meth:`wait` blocks until the API server answered, hands the answer to ``written`` once,
    and re-raises the write's failure (a Kubernetes error) on every call.
    """

    future: Future[Mapping[str, Any] | None] | None
    written: Callable[[Mapping[str, Any] | None], None]
    _handed: bool = False

    def wait(self) -> None:
        if self.future is None:
            return
        obj = self.future.result()
        if not self._handed:
            self._handed = True
            self.written(obj)


@dataclass
class Executor:
    """Runs :class:`NodeJob` objects against Kubernetes and the Director.

    Attributes:
        kube: Kubernetes writes.
        fabric_factory: builds a Director client; one is cached per worker thread.
        policy: retry limits and backoff.
        metrics: where to count.
        plugin_namespace / plugin_selector: the NVIDIA device-plugin pods.
        mig_manager_selector: the GPU Operator's mig-manager pods (in ``plugin_namespace``), also
            restarted on a MIG host: mig-manager runs mig-parted when it starts or the node's
            ``nvidia.com/mig.config`` changes, never when a GPU is hot-plugged (mig-parted v0.12.1
            ``cmd/nvidia-mig-manager/main.go``, ``ContinuouslySyncMigConfigChanges``: the informer's
            add sets the config, updates only on a label change).
        release_to_system_pool: move reclaimed GPUs from the group pool to the system pool.
        clock: seconds since the epoch.
        created: pod UID -> creation time, for the latency histograms (set each round).
        async_events: create Events from one background thread, in the order emitted (as
            client-go's event broadcaster does), so that no round, release or compose waits
            for an Event's API call; :meth:`close` waits for the queue.
        on_node_written: called (on the worker thread) with the Node the API server answered
            each of the job's Node writes with; the :class:`composer.run.controller.Controller`
            connects it to its cluster source's ``assume`` (the watch cache lays the write over
            its watch), so the next round sees the write at once and its watch echo wakes nobody.
        write_workers: threads that send Composing intents while their composes read the
            Director (one write per running job: give it the controller's ``workers``).
    """

    kube: KubeWrites
    fabric_factory: FabricFactory
    policy: Policy
    metrics: Metrics
    plugin_namespace: str = "gpu-operator"
    plugin_selector: str = "app=nvidia-device-plugin-daemonset"
    mig_manager_selector: str = "app=nvidia-mig-manager"
    release_to_system_pool: bool = True
    clock: Callable[[], float] = time.time
    async_events: bool = False
    on_node_written: Callable[[Mapping[str, Any]], None] | None = None
    write_workers: int = 4
    _local: threading.local = field(default_factory=threading.local, repr=False)
    _events: LazyPool = field(default_factory=lambda: LazyPool(1, "composer-events"), init=False, repr=False)
    _writer: LazyPool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._writer = LazyPool(self.write_workers, "composer-write")

    def fabric(self) -> FabricClient:
        """This thread's Director client."""
        c = getattr(self._local, "client", None)
        if c is None:
            c = self._local.client = self.fabric_factory()
        return c

    def _drop_client(self) -> None:
        c = getattr(self._local, "client", None)
        self._local.client = None
        if c is not None:
            try:
                c.close()
            except Exception:  # closing a broken client must not hide the real error
                log.debug("closing the Director client failed", exc_info=True)

    def emit(self, ev: EventSpec) -> None:
        """Create an Event (also logged); failures are logged, never raised. With
        ``async_events`` the API call is queued (any thread may emit; order is kept)."""
        log.info("event %s %s/%s %s: %s", ev.type, ev.namespace, ev.name, ev.reason, ev.message)
        if not self.async_events:
            self._create_event(ev)
            return
        self._events.submit(self._create_event, ev)

    def _create_event(self, ev: EventSpec) -> None:
        try:
            self.kube.create_event(ev)
        except Exception as exc:
            log.warning("event %s/%s %s not recorded: %s", ev.namespace, ev.name, ev.reason, exc)

    def close(self) -> None:
        """Wait until every queued Event was sent (``async_events``) and every Node write ended."""
        self._events.close()
        self._writer.close()

    def _write(self, res: JobResult, node: str, old: NodeRecord, new: NodeRecord) -> NodeRecord:
        new, changes = self._changes(old, new)
        if changes:
            self._written(res, self.kube.patch_node_annotations(node, changes))
        return new

    def _write_behind(
        self, res: JobResult, node: str, old: NodeRecord, new: NodeRecord
    ) -> tuple[NodeRecord, _PendingWrite]:
        """Like :meth:`_write`, but the PATCH runs on the writer thread; the caller waits for
        it (:meth:`_PendingWrite.wait`) before anything that must follow it."""
        new, changes = self._changes(old, new)
        future = None
        if changes:
            future = self._writer.submit(self.kube.patch_node_annotations, node, changes)
        return new, _PendingWrite(future, lambda obj: self._written(res, obj))

    @staticmethod
    def _changes(old: NodeRecord, new: NodeRecord) -> tuple[NodeRecord, dict[str, str | None]]:
        """The record to write and the annotation changes from ``old`` to it."""
        new = ann.with_hold(new)  # the autoscaler annotations ride on the same PATCH
        changes: dict[str, str | None] = {}
        if old.hold != new.hold:
            changes.update(ann.hold_changes(new.hold))
        if old.devices != new.devices:
            changes[ann.DEVICES] = ann.encode_devices(new.devices)
        if old.intents != new.intents:
            changes[ann.INTENTS] = ann.encode_intents(new.intents)
        if old.reclaim != new.reclaim:
            changes[ann.RECLAIM] = ann.encode_reclaim(new.reclaim)
        if old.idle_since != new.idle_since:
            changes[ann.IDLE_SINCE] = ann.encode_idle_since(new.idle_since)
        return new, changes

    def _taint(self, res: JobResult, node: str, present: bool) -> None:
        self._written(res, self.kube.set_taint(node, RECLAIM_TAINT, present))

    def _written(self, res: JobResult, obj: Mapping[str, Any] | None) -> None:
        if obj is None:
            return
        if self.on_node_written is not None:
            self.on_node_written(obj)

    # -- the job ---------------------------------------------------------------------------
    def run(self, job: NodeJob, created: Mapping[str, float] | None = None) -> JobResult:
        """Do ``job``; returns what happened. Raises only on Kubernetes failures."""
        res = JobResult(job.node)
        after = job.after
        fresh: dict[str, Intent] = {}
        if job.compose:  # the Composing intents ride on the reconciliation write: one PATCH
            fresh = intents_for(job.compose, self.clock())
            after = replace(after, intents={**after.intents, **fresh})
        intent = _PendingWrite(None, lambda obj: None)
        if job.compose and not (job.cancel_edit or job.restart_plugin):
            rec, intent = self._write_behind(res, job.node, job.before, after)
        else:
            rec = self._write(res, job.node, job.before, after)
        if job.cancel_edit:
            self._cancel_edit(job.node)
        if job.restart_plugin:
            deleted = self.kube.restart_daemonset_pods(
                job.node, self.plugin_namespace, self.plugin_selector
            )
            self.metrics.plugin_restarts.inc(len(deleted))
            log.info("restarted device-plugin pod(s) %s on %s", deleted, job.node)
            if self.policy.is_mig_host(job.node):
                migs = self.kube.restart_daemonset_pods(
                    job.node, self.plugin_namespace, self.mig_manager_selector
                )
                log.info("restarted mig-manager pod(s) %s on MIG host %s", migs, job.node)
        if job.compose:
            rec = self._compose(job, rec, res, created or {}, fresh, intent)
        if job.reclaim is not None:
            self._reclaim(job, rec, res)
        if job.orphans:
            self._orphans(job, res)
        if job.untag:
            self._untag(list(job.untag))
            log.info("cleared the owner tag of free GPU(s) %s (left by an interrupted compose or reclaim)",
                     ", ".join(job.untag))
            res.reclaimed = job.untag  # the next round reads the Director again
        return res

    def _untag(self, devices: list[str]) -> None:
        """Clear the composer's owner tag from ``devices``; a failure is logged (a free GPU
        still carrying the tag is planned like any free GPU)."""
        untag = getattr(self.fabric(), "clear_owner_tag", None)
        if untag is None:
            return
        try:
            untag(devices, only_if=self.policy.owner_tag)
        except DirectorError as exc:
            log.warning("could not clear the owner tag of %s: %s", devices, exc)

    def _orphans(self, job: NodeJob, res: JobResult) -> None:
        """Decompose ``job.orphans`` from machine ``job.node`` once no Node of that name exists."""
        machine, devices = job.node, list(job.orphans)
        if self.kube.node_exists(machine):
            log.info("GPUs %s of machine %s kept: a Node %s exists (not managed by this composer?)",
                     devices, machine, machine)
            return
        try:
            self.fabric().decompose(machine, devices)
            if self.release_to_system_pool:
                try:
                    self.fabric().release_to_system_pool(devices)
                except DirectorError as exc:
                    log.warning("could not move %s back to the system pool: %s", devices, exc)
        except Exception as exc:
            if not isinstance(exc, DirectorError):
                self._drop_client()
            self.metrics.decomposition_failures.labels(type(exc).__name__).inc()
            res.reclaim_failed = True
            self.emit(
                lease_event(
                    self.policy,
                    "Warning",
                    "OrphanReclaimFailed",
                    f"giving back {', '.join(devices)} from machine {machine} (no Node) failed, will retry: "
                    f"{exc}",
                )
            )
            return
        self._untag(devices)
        self.metrics.orphans_reclaimed.inc(len(devices))
        self.metrics.decomposed_gpus.inc(len(devices))
        res.reclaimed = tuple(devices)
        self.emit(
            lease_event(
                self.policy,
                "Warning",
                "OrphanedGpusReclaimed",
                f"gave {', '.join(devices)} back to the free pool: attached by this composer to machine "
                f"{machine}, which had no Node for {self.policy.orphan_grace_seconds:.0f} s",
            )
        )

    def _cancel_edit(self, node: str) -> None:
        cancel = getattr(self.fabric(), "cancel_edit", None)
        if cancel is None:
            return
        try:
            cancel(node)
            log.info("cancelled a fabric edit left open on %s by an interrupted compose", node)
        except DirectorError as exc:
            log.info("no fabric edit to cancel on %s (%s)", node, exc)

    def _compose(
        self,
        job: NodeJob,
        rec: NodeRecord,
        res: JobResult,
        created: Mapping[str, float],
        fresh: Mapping[str, Intent],
        intent: _PendingWrite,
    ) -> NodeRecord:
        """Call the Director for ``job.compose``; ``rec`` holds the ``fresh`` intents, whose
        write ``intent`` may still be in flight: the Director changes nothing before it ended,
        and its failure (a Kubernetes error) aborts the job whatever the Director did."""
        devices = [d for it in job.compose for d in it.placement.devices]
        if not devices:
            intent.wait()
            for it in job.compose:
                self.emit(
                    _about(
                        it,
                        "Normal",
                        "UsingSpareGpus",
                        f"{it.placement.spare_units} {it.request.resource} already on "
                        f"{job.node} ({it.placement.model}); waiting for the scheduler",
                    )
                )
            return rec
        try:
            self.fabric().compose(
                job.node, devices, owner_tag=self.policy.owner_tag, before_change=intent.wait
            )
        except Exception as exc:
            intent.wait()  # a failed intent write raises here: the job ends on a Kubernetes error
            if isinstance(exc, DirectorError):
                return self._compose_failed(job, rec, res, exc, fresh)
            self._drop_client()  # a client bug or transport surprise: treat as transient
            return self._compose_failed(job, rec, res, DirectorError(f"unexpected: {exc!r}"), fresh)
        intent.wait()
        done = self.clock()
        self.metrics.compositions.inc()
        self.metrics.composed_gpus.inc(len(devices))
        intents = dict(rec.intents)
        for it in job.compose:
            pl = it.placement
            intents[pl.uid] = fresh[pl.uid].moved(IntentPhase.ATTACHED, done)
            res.composed[pl.uid] = pl.devices
            if pl.uid in created and created[pl.uid] > 0:
                self.metrics.pending_to_composed.observe(max(0.0, done - created[pl.uid]))
            where = f" on PCIe switch {'/'.join(pl.switches)}" if pl.switches else ""
            self.emit(
                _about(
                    it,
                    "Normal",
                    "Composed",
                    f"composed {', '.join(pl.devices) or 'no new GPUs'} ({pl.model}){where} onto "
                    f"{job.node}" + (f", reusing {pl.spare_units} spare unit(s)" if pl.spare_units else ""),
                )
            )
        composed = replace(rec, devices=rec.devices | set(devices), intents=intents)
        return self._write(res, job.node, rec, composed)

    def _compose_failed(
        self,
        job: NodeJob,
        rec: NodeRecord,
        res: JobResult,
        exc: DirectorError,
        fresh: Mapping[str, Intent],
    ) -> NodeRecord:
        now = self.clock()
        kind = type(exc).__name__
        self.metrics.composition_failures.labels(kind).inc()
        log.warning("compose on %s failed: %s", job.node, exc)
        intents = dict(rec.intents)
        for it in job.compose:
            pl = it.placement
            if not pl.devices:
                continue  # only reuses spare units: nothing failed for it
            n = it.attempts + 1
            if n >= self.policy.compose_max_attempts or not it.retry:
                intents.pop(pl.uid, None)
                why = (f"compose failed {n} time(s), giving up: {exc}" if it.retry
                       else f"compose failed: {exc}")
                res.gave_up[pl.uid] = why
                self.emit(_about(it, "Warning", "ComposeGaveUp", why))
                continue
            wait = self.policy.backoff_seconds(n)
            intents[pl.uid] = replace(fresh[pl.uid], retry_at=now + wait)
            res.failed[pl.uid] = n
            self.emit(
                _about(
                    it,
                    "Warning",
                    "ComposeFailed",
                    f"composing {', '.join(pl.devices)} onto {job.node} failed (attempt {n} of "
                    f"{self.policy.compose_max_attempts}), retrying in {wait:.0f} s: {exc}",
                )
            )
        return self._write(res, job.node, rec, replace(rec, intents=intents))

    def _reclaim(self, job: NodeJob, rec: NodeRecord, res: JobResult) -> None:
        step = job.reclaim
        assert step is not None
        node = job.node
        now = self.clock()
        if step.kind in (ReclaimKind.FINISH, ReclaimKind.ABORT):
            if step.node_taint:
                self._taint(res, node, False)
            self._write(res, node, rec, replace(rec, reclaim=None))
            return
        devices = step.devices
        if step.kind is ReclaimKind.START:
            tainted = Reclaim(devices, ReclaimPhase.TAINTED, now)
            rec = self._write(res, node, rec, replace(rec, reclaim=tainted))
            if step.node_taint:
                self._taint(res, node, True)
                busy = self.kube.gpu_pods_on_node(node)
                if busy:
                    log.info("reclaim on %s aborted: GPU pod(s) %s arrived", node, busy)
                    self._taint(res, node, False)
                    self._write(res, node, rec, replace(rec, reclaim=None))
                    return
        try:
            if devices:
                self.fabric().decompose(node, list(devices))
                if self.release_to_system_pool:
                    try:
                        self.fabric().release_to_system_pool(list(devices))
                    except DirectorError as exc:  # still free, only in the group's pool
                        log.warning("could not move %s back to the system pool: %s", devices, exc)
                self._untag(list(devices))
        except Exception as exc:
            reason = type(exc).__name__
            if not isinstance(exc, DirectorError):
                self._drop_client()
            self.metrics.decomposition_failures.labels(reason).inc()
            log.warning("decompose on %s failed: %s", node, exc)
            res.reclaim_failed = True
            if step.node_taint:
                self._taint(res, node, False)
            self._write(res, node, rec, replace(rec, reclaim=None))
            self.emit(
                node_event(
                    node,
                    "Warning",
                    "ReclaimFailed",
                    f"giving back {', '.join(devices)} failed, will retry: {exc}",
                )
            )
            return
        if devices:
            self.metrics.decompositions.inc()
            self.metrics.decomposed_gpus.inc(len(devices))
            self.emit(
                node_event(
                    node,
                    "Normal",
                    "Reclaimed",
                    f"idle for {self.policy.idle_timeout_seconds:.0f} s: gave {', '.join(devices)} "
                    "back to the free pool",
                )
            )
        res.reclaimed = devices
        self._write(
            res,
            node,
            rec,
            replace(
                rec,
                devices=rec.devices - set(devices),
                reclaim=Reclaim(devices, ReclaimPhase.DECOMPOSED, self.clock()),
            ),
        )
