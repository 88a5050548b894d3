"""One DRA-mode round: read claims, slices, nodes and the Director; write slices and claim status,
and hand the node jobs to workers.

The order is what makes the reclaim safe: the pool's ResourceSlices are written first (GPUs a
reclaim step decomposes this round carry the ``NoSchedule`` device taint, failed GPUs theirs,
idle composed GPUs are offered to their own node), then the claims' device conditions
(``Attached``/``VisibleOnNode`` True, ``AttachFailed`` True with a reason), then the node jobs
(compose for claims, reclaim steps, orphans) are submitted, run by the device-plugin mode's
:class:`composer.shell.act.Executor` on the same workers as there
(:class:`composer.run.node_jobs.NodeJobs`): one job per node at a time, so a slow compose on one
node never delays another node's claim or the next round.

While a node's job runs, the rounds leave the node out of their decision
(:func:`composer.run.node_jobs.without_busy`), never compose a GPU a running job composes again
(``in_flight`` of :func:`composer.dra.binding.plan_binding`), publish no GPU a compose is planned or
running on, and publish the node's GPUs as the round that started the job did (its idle GPUs
for that node, those its reclaim gives back tainted). A job that ends wakes the loop
(``on_job_done``): the next round collects its result and writes the claims' binding conditions
from the Director's and the node's truth (so a new leader finishes what an old one started, and
never composes a GPU twice: once attached, it is no longer free). A compose that fails is held
as a :class:`composer.dra.binding.Failure` of its GPUs: that round writes the claim's failure
condition and publishes the GPU tainted until :func:`composer.dra.binding.healed` drops it.

Reads come from a :class:`DraSource` (``python -m composer``: the watch-fed
:class:`composer.shell.cache.DraCache`) or, without one, from lists each round. The loop,
leader election and wake-ups are device-plugin mode's (:mod:`composer.run.dra_loop`).

The published devices carry the Director's facts of each GPU: its model string (``model``), memory
(capacity ``memory``) and fabric id (``fabric``), besides the GFD product name, PCIe switch and
pool. They come with the Director read the round decides on (``DirectorClient.gpus`` joins
``status/gpu``, which has ``fabr_id``, and ``device/info/gpu``, which has ``model`` and
``dram_size``, to place the GPUs and read their owner tags anyway), so they cost no request of
their own. That read is device-plugin mode's :class:`composer.shell.fabric_cache.FabricCache`: a
clean compose is applied to it, any other job makes the next round read again, and it is
refreshed in the background once ``fabric_max_age_seconds`` old (``directorResyncSeconds``; 0 =
read every round). A failed read of either list skips the round, as any failed Director read
does (the owner tags in ``device/info/gpu`` decide which GPUs are free); a GPU the Director
gives no info record or no ``dram_size`` is published without ``model`` or ``memory``. What is
not here: the kubelet plugin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from composer.decide.dra_round import DraDecision, decide_dra
from composer.decide.round_types import Memory, NodeJob, Policy, Snapshot
from composer.dra import binding, claims, slices
from composer.model import annotations as ann
from composer.model.fabric import FabricView
from composer.model.nodestate import node_view
from composer.model.podspec import pod_view
from composer.run.controller import Observed
from composer.run.node_jobs import Finished, NodeJobs, follow_fabric, job_devices, remember, without_busy
from composer.shell.act import Executor, JobResult
from composer.shell.fabric_cache import FabricCache
from composer.shell.fabric_process import background_reader
from composer.shell.kube import KubeError

log = logging.getLogger(__name__)


class DraKube(Protocol):
    """The Kubernetes reads and writes of a DRA round (:class:`composer.shell.kube.KubeApi`)."""

    def list_pods(self) -> list[dict[str, Any]]: ...

    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]: ...

    def patch_node_labels(self, node: str, changes: Mapping[str, str | None]) -> dict[str, Any] | None: ...

    def namespace_pools(self) -> dict[str, str]: ...

    def list_resource_claims(self) -> list[dict[str, Any]]: ...

    def patch_resource_claim_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def list_resource_slices(self, driver: str) -> list[dict[str, Any]]: ...

    def apply_resource_slice(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete_resource_slice(self, name: str) -> None: ...


class DraSource(Protocol):
    """Where a DRA round's pods, nodes, namespace pools and claims come from (the watch cache)."""

    @property
    def synced(self) -> bool:
        """Every kind listed once."""
        ...

    def read(self) -> Observed:
        """(pods, managed nodes, namespace -> pool)."""
        ...

    def assume(self, node: Mapping[str, Any]) -> None:
        """A Node object the composer just wrote (the API server's answer)."""
        ...

    def claims(self) -> list[claims.ClaimView]:
        """Every ResourceClaim as last seen."""
        ...

    def assume_claim(self, claim: Mapping[str, Any]) -> None:
        """A ResourceClaim the composer just wrote (the API server's answer)."""
        ...


@dataclass(frozen=True)
class DraRound:
    """What one round did.

    Attributes:
        decision: the round's :class:`composer.decide.dra_round.DraDecision` (its jobs were
            submitted to the workers; a node with a job running was left out of it).
        plan: the claims' :class:`composer.dra.binding.BindingPlan`.
        slices: the pool's :class:`composer.dra.slices.Rewrite` (what was written).
        statuses: ``namespace/name`` of claims whose device status was written.
        results: the results of the node jobs that ended since the round before (collected at
            this round's start; a job that raised has none).
    """

    decision: DraDecision
    plan: binding.BindingPlan
    slices: slices.Rewrite
    statuses: tuple[str, ...] = ()
    results: tuple[JobResult, ...] = ()


@dataclass(frozen=True)
class _Published:
    """How the round that started a node's job published that node's GPUs, kept while the job
    runs (the node is left out of the rounds' decisions meanwhile): ``idle`` GPU -> the node,
    ``reclaiming`` GPU -> taint value."""

    idle: Mapping[str, str]
    reclaiming: Mapping[str, str]


@dataclass
class DraDriver:
    """The composer as the DRA driver :data:`composer.dra.slices.DRIVER`: its claim side.

    Attributes:
        kube: Kubernetes reads and writes.
        executor: runs node jobs (compose, reclaim, orphans) as in device-plugin mode.
        policy: settings (idle timeout, reclaim guards, pools, excluded GPUs).
        node_selector: label selector of the nodes served in DRA mode ("" = all).
        source: pods, nodes, pools and claims; None = listed through ``kube`` every round. Every
            Node write of the node jobs goes to its ``assume`` (the executor's
            ``on_node_written``, connected here unless set already).
        failure_hold_seconds: a failed GPU stays tainted at least this long.
        clock: seconds since the epoch.
        workers: node jobs running at once (:class:`composer.run.node_jobs.NodeJobs`).
        on_job_done: called (on the worker thread) when a node job ends, and when a background
            Director read found a change, to wake the loop.
        fabric_max_age_seconds: age at which the Director read rounds decide on is refreshed in
            the background (:class:`composer.shell.fabric_cache.FabricCache`, as device-plugin
            mode; 0 = read every round, on the loop's thread).
        memory: the reclaim's memory between rounds.
        failures: Director GPU name -> its held compose failure.
        jobs: the node jobs running.
    """

    kube: DraKube
    executor: Executor
    policy: Policy
    node_selector: str = ""
    source: DraSource | None = None
    failure_hold_seconds: float = 300.0
    clock: Callable[[], float] = time.time
    workers: int = 4
    on_job_done: Callable[[], None] | None = None
    fabric_max_age_seconds: float = 0.0
    memory: Memory = field(default_factory=Memory)
    failures: dict[str, binding.Failure] = field(default_factory=dict)
    jobs: NodeJobs = field(init=False, repr=False)
    _published: dict[str, _Published] = field(default_factory=dict, repr=False)
    _labelled: set[str] | None = field(default=None, repr=False)
    fabric: FabricCache = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.source is not None and self.executor.on_node_written is None:
            self.executor.on_node_written = self.source.assume
        self.jobs = NodeJobs(
            self.workers,
            policy=self.policy,
            metrics=self.executor.metrics,
            clock=self.clock,
            on_done=self.on_job_done,
            name="composer-dra-node",
        )
        self.fabric = FabricCache(
            self.executor.fabric_factory,
            max_age_seconds=self.fabric_max_age_seconds,
            on_refresh=self._wake,
            clock=self.clock,
            reader=background_reader(self.executor.fabric_factory),
        )

    def _wake(self) -> None:
        if self.on_job_done is not None:
            self.on_job_done()

    def _observe(self, now: float) -> tuple[Snapshot, FabricView]:
        view = self.fabric.view()
        if self.source is not None:
            pods, nodes, pools = self.source.read()
        else:
            pods = tuple(pod_view(p) for p in self.kube.list_pods())
            nodes = tuple(node_view(n) for n in self.kube.list_nodes(self.node_selector))
            pools = self.kube.namespace_pools()
        snap = Snapshot(now, pods, nodes, pools, view)
        return snap.with_pools(self.policy.pool_map), view

    def _claims(self) -> list[claims.ClaimView]:
        if self.source is not None:
            return self.source.claims()
        return [claims.claim_view(c) for c in self.kube.list_resource_claims()]

    def round(self) -> DraRound:
        """Collect the ended jobs, then read, decide, write and submit one round (see the module
        docstring for the order).

        Raises:
            KubeError: a read failed, or a slice write failed (nothing after it was written: no
                node job is submitted before the slices are written).
        """
        results = tuple(r for r in (self._collected(f) for f in self.jobs.collect()) if r is not None)
        running = self.jobs.running()  # fixed before observing: a job ending meanwhile is still busy
        busy = self.jobs.busy()
        now = self.clock()
        snap, view = self._observe(now)
        read = self._claims()
        self.failures = binding.healed(self.failures, view, now=now, hold_seconds=self.failure_hold_seconds)
        visible = {n.name: n.advertised_gpus for n in snap.nodes}
        plan = binding.plan_binding(
            read, view, visible=visible, failures=self.failures, in_flight=job_devices(running.values())
        )
        dd = decide_dra(
            without_busy(snap, busy), self.memory, self.policy, composes=plan.composes, claimed=plan.claimed
        )
        self._published = {n: p for n, p in self._published.items() if n in busy}
        for job in dd.decision.jobs:
            giving_back = job.reclaim.devices if job.reclaim is not None else ()
            self._published[job.node] = _Published(
                {d: n for d, n in dd.idle.items() if n == job.node},
                {d: why for d, why in dd.reclaiming.items() if d in giving_back},
            )
        composing = _composed_by((*running.values(), *dd.decision.jobs))
        rewrite = self._write_slices(snap, view, plan, dd, composing)
        statuses = self._write_statuses(read, plan, now)
        for ev in dd.decision.events:
            self.executor.emit(ev)
        for job in dd.decision.jobs:
            self.jobs.submit(job, partial(self.executor.run, job))
        return DraRound(dd, plan, rewrite, statuses, results)

    def _write_slices(
        self,
        snap: Snapshot,
        view: FabricView,
        plan: binding.BindingPlan,
        dd: DraDecision,
        composing: frozenset[str],
    ) -> slices.Rewrite:
        hosts = {n.name: n.labels.get(ann.POOL_LABEL, self.policy.default_pool) for n in snap.nodes}
        self._write_labels(snap, view, hosts)
        idle = dict(dd.idle)
        reclaiming = dict(dd.reclaiming)
        for kept in self._published.values():  # the busy nodes' GPUs, as their job's round had them
            idle.update(kept.idle)
            reclaiming.update(kept.reclaiming)
        wanted = slices.build_slices(
            view,
            hosts=hosts,
            generation=0,
            device_pools=self.policy.device_pools,
            excluded=self.policy.excluded | composing,
            tainted={**plan.tainted, **reclaiming},
            facts=slices.gpu_facts(view),
            idle=idle,
            own_tag=self.policy.owner_tag,
        )
        for name, why in sorted(wanted.omitted.items()):
            log.debug("GPU %s not published: %s", name, why)
        stored = [
            s for s in self.kube.list_resource_slices(slices.DRIVER)
            if slices.is_driver_pool((s.get("spec") or {}).get("pool", {}).get("name"))
        ]
        rewrite = slices.plan_rewrite(stored, wanted)
        # Deletes first, then the pools that lose a device: a GPU moving between pools is
        # withdrawn before it is offered again.
        for name in rewrite.delete:
            self.kube.delete_resource_slice(name)
        for body in rewrite.apply:
            self.kube.apply_resource_slice(body)
        return rewrite

    def _write_labels(self, snap: Snapshot, view: FabricView, hosts: Mapping[str, str]) -> None:
        """Bring the driver's node labels (:func:`composer.dra.slices.reach_labels`: which hosts
        reach the fabric, their group and pool) to what the Director and the pools say, before
        the slices that select hosts by them are written.

        Nodes this driver does not serve lose the labels too, or the slices would offer them GPUs
        the composer never composes there: on the first round every Node carrying
        :data:`~composer.dra.slices.REACH_LABEL` (an earlier run's, before the node selector
        changed or the node left DRA mode), later the nodes labelled that have left the served
        set. A removal that fails (not 404) is tried again next round."""
        current = {n.name: dict(n.labels) for n in snap.nodes}
        wanted = slices.reach_labels(view, hosts)
        if self._labelled is None:
            self._labelled = {n["metadata"]["name"] for n in self.kube.list_nodes(slices.REACH_LABEL)}
        kept: set[str] = set()
        for node in sorted(self._labelled - current.keys()):
            try:
                self.kube.patch_node_labels(node, dict.fromkeys(slices.DRIVER_LABELS))
            except KubeError as exc:
                if exc.status != 404:
                    log.warning("driver labels of node %s (not served) not removed: %s", node, exc)
                    kept.add(node)
        for node, change in sorted(slices.label_changes(current, wanted).items()):
            answer = self.kube.patch_node_labels(node, change)
            if self.source is not None and answer is not None:
                self.source.assume(answer)
        self._labelled = set(wanted) | kept

    def _write_statuses(
        self, read: list[claims.ClaimView], plan: binding.BindingPlan, now: float
    ) -> tuple[str, ...]:
        by_name = {(c.namespace, c.name): c for c in read}
        written = []
        for (ns, name), wanted in sorted(plan.conditions.items()):
            claim = by_name[(ns, name)]
            patch = claims.status_patch(claim, wanted, now=now)
            if patch is None:
                continue
            try:
                answer = self.kube.patch_resource_claim_status(ns, name, patch)
            except KubeError as exc:  # changed since read (409) or refused: the next round tries again
                log.warning("device status of claim %s not written: %s", claim.key, exc)
                continue
            if self.source is not None:
                self.source.assume_claim(answer)
            written.append(claim.key)
        return tuple(written)

    def _collected(self, done: Finished) -> JobResult | None:
        """Apply an ended job: a compose that gave up becomes a held failure of its GPUs (the
        round writes the claim's failure condition and taints the GPU), a failed reclaim backs
        off (:func:`composer.run.node_jobs.remember`). A job that raised (a Kubernetes failure,
        logged by :class:`~composer.run.node_jobs.NodeJobs`) has no result: the round starts
        from what is there."""
        res = done.result
        follow_fabric(self.fabric, done.job, res, owner_tag=self.policy.owner_tag)
        if res is None:
            return None
        now = self.clock()
        for item in done.job.compose:
            why = res.gave_up.get(item.placement.uid)
            if why is not None:
                for gpu in item.placement.devices:
                    self.failures[gpu] = binding.Failure("ComposeFailed", why, now)
        remember(self.memory, res, now=now, policy=self.policy)
        return res

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until no node job runs (for tests and shutdown); True if none does. The results
        are collected by the next round."""
        return self.jobs.wait_idle(timeout)

    def close(self) -> None:
        """Wait for the running jobs, then release the Director read and the executor's clients."""
        self.jobs.close()
        self.fabric.close()
        self.executor.close()


def _composed_by(jobs: tuple[NodeJob, ...]) -> frozenset[str]:
    """The Director GPUs ``jobs`` compose: not published while a compose is planned or running
    (a claim holds each already; once attached it is no longer free)."""
    return frozenset(d for job in jobs for it in job.compose for d in it.placement.devices)
