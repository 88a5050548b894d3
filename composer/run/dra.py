"""One DRA-mode round: read claims, slices, nodes and the Director; write slices, claim status and
run the node jobs.

The order is what makes the reclaim safe: the pool's ResourceSlices are written first (GPUs a
reclaim step decomposes this round carry the ``NoSchedule`` device taint, failed GPUs theirs,
idle composed GPUs are offered to their own node), then the claims' device conditions
(``Attached``/``VisibleOnNode`` True, ``AttachFailed`` True with a reason), then the node jobs
(compose for claims, reclaim steps, orphans) through the device-plugin mode's
:class:`composer.shell.act.Executor`, one node after the other on the calling thread. A compose
that fails is held as a :class:`composer.dra.binding.Failure` of its GPUs: the next round writes
the claim's failure condition and publishes the GPU tainted until :func:`composer.dra.binding.healed`
drops it; a compose that succeeds gets its binding conditions in the next round, from the
Director's and the node's truth (so a new leader finishes what an old one started, and never
composes a GPU twice: once attached, it is no longer free).

Reads come from a :class:`DraSource` (``python -m composer``: the watch-fed
:class:`composer.shell.cache.DraCache`) or, without one, from lists each round. The loop,
leader election and wake-ups are device-plugin mode's (:mod:`composer.run.dra_loop`).

The published devices carry the Director's facts of each GPU: its model string (``model``), memory
(capacity ``memory``) and fabric id (``fabric``), besides the GFD product name, PCIe switch and
pool. They come with the round's fabric read (``DirectorClient.gpus`` joins ``status/gpu``, which
has ``fabr_id``, and ``device/info/gpu``, which has ``model`` and ``dram_size``, to place the
GPUs and read their owner tags anyway), so they cost no request and are not cached: a cache
would save nothing the round does not read already. A failed read of either skips the round,
as any failed Director read does (the owner tags in ``device/info/gpu`` decide which GPUs are
free); a GPU the Director gives no info record or no ``dram_size`` is published without
``model`` or ``memory``. What is not here: the kubelet plugin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from composer.decide.dra_round import DraDecision, decide_dra
from composer.decide.round_types import Memory, NodeJob, Policy, Snapshot
from composer.dra import binding, claims, slices
from composer.model import annotations as ann
from composer.model.fabric import FabricView, read_fabric
from composer.model.nodestate import node_view
from composer.model.podspec import pod_view
from composer.run.controller import Observed
from composer.shell.act import Executor, JobResult
from composer.shell.kube import KubeError

log = logging.getLogger(__name__)


class DraKube(Protocol):
    """The Kubernetes reads and writes of a DRA round (:class:`composer.shell.kube.KubeApi`)."""

    def list_pods(self) -> list[dict[str, Any]]: ...

    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]: ...

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
        decision: the round's :class:`composer.decide.dra_round.DraDecision`.
        plan: the claims' :class:`composer.dra.binding.BindingPlan`.
        slices: the pool's :class:`composer.dra.slices.Rewrite` (what was written).
        statuses: ``namespace/name`` of claims whose device status was written.
        results: the node jobs' results.
    """

    decision: DraDecision
    plan: binding.BindingPlan
    slices: slices.Rewrite
    statuses: tuple[str, ...] = ()
    results: tuple[JobResult, ...] = ()


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
        memory: the reclaim's memory between rounds.
        failures: Director GPU name -> its held compose failure.
    """

    kube: DraKube
    executor: Executor
    policy: Policy
    node_selector: str = ""
    source: DraSource | None = None
    failure_hold_seconds: float = 300.0
    clock: Callable[[], float] = time.time
    memory: Memory = field(default_factory=Memory)
    failures: dict[str, binding.Failure] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.source is not None and self.executor.on_node_written is None:
            self.executor.on_node_written = self.source.assume

    def _observe(self, now: float) -> tuple[Snapshot, FabricView]:
        view = read_fabric(self.executor.fabric())
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
        """Read, decide and write one round (see the module docstring for the order).

        Raises:
            KubeError: a read failed, or a slice write failed (nothing after it was written: no
                node job runs before the slices are written).
        """
        now = self.clock()
        snap, view = self._observe(now)
        read = self._claims()
        self.failures = binding.healed(self.failures, view, now=now, hold_seconds=self.failure_hold_seconds)
        visible = {n.name: n.advertised_gpus for n in snap.nodes}
        plan = binding.plan_binding(read, view, visible=visible, failures=self.failures)
        dd = decide_dra(snap, self.memory, self.policy, composes=plan.composes, claimed=plan.claimed)
        rewrite = self._write_slices(snap, view, plan, dd)
        statuses = self._write_statuses(read, plan, now)
        for ev in dd.decision.events:
            self.executor.emit(ev)
        results = tuple(r for r in (self._run(job) for job in dd.decision.jobs) if r is not None)
        return DraRound(dd, plan, rewrite, statuses, results)

    def _write_slices(
        self, snap: Snapshot, view: FabricView, plan: binding.BindingPlan, dd: DraDecision
    ) -> slices.Rewrite:
        hosts = {n.name: n.labels.get(ann.POOL_LABEL, self.policy.default_pool) for n in snap.nodes}
        wanted = slices.build_slices(
            view,
            hosts=hosts,
            generation=0,
            device_pools=self.policy.device_pools,
            excluded=self.policy.excluded,
            tainted={**plan.tainted, **dd.reclaiming},
            facts=slices.gpu_facts(view),
            idle=dd.idle,
            own_tag=self.policy.owner_tag,
        )
        for name, why in sorted(wanted.omitted.items()):
            log.debug("GPU %s not published: %s", name, why)
        stored = [
            s for s in self.kube.list_resource_slices(slices.DRIVER)
            if (s.get("spec") or {}).get("pool", {}).get("name") == slices.POOL
        ]
        rewrite = slices.plan_rewrite(stored, wanted)
        for body in rewrite.apply:
            self.kube.apply_resource_slice(body)
        for name in rewrite.delete:
            self.kube.delete_resource_slice(name)
        return rewrite

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

    def _run(self, job: NodeJob) -> JobResult | None:
        """Run ``job``; a compose that gave up becomes a held failure of its GPUs. A Kubernetes
        failure ends the job (logged; None): the next round starts from what is there."""
        try:
            res = self.executor.run(job)
        except KubeError as exc:
            log.warning("node job on %s failed: %s", job.node, exc)
            return None
        for item in job.compose:
            why = res.gave_up.get(item.placement.uid)
            if why is not None:
                for gpu in item.placement.devices:
                    self.failures[gpu] = binding.Failure("ComposeFailed", why, self.clock())
        return res
