"""One reconcile round's decisions, from a snapshot of the world. No I/O.

:func:`decide` takes what was observed (pods, nodes, the Director's truth) plus the
controller's small in-memory :class:`Memory` (backoff counters, idle timers, what was already
reported) and returns a :class:`Decision`: per-node jobs (annotation updates, device-plugin
restarts, compositions, reclaim steps) and Events. The controller executes the jobs
(:mod:`composer.act`); tests call :func:`decide` with plain data.

Convergence rules (issue 7 §3-§5):

- intents are reconciled against the Director first: devices of a ``Composing`` intent that
  the Director shows attached are adopted (a restart mid-compose never composes twice); an
  intent whose pod is bound, gone or finished is dropped;
- a node is *busy* while a non-terminal GPU pod is bound or nominated to it, or an intent is
  open on it; only composer-managed devices (annotation ``composer.liqid.io/devices``) of a
  node idle for ``idle_timeout_seconds`` are reclaimed, never static ones (configured as
  excluded, or carrying the Pulumi program's owner tag in the Director);
- a reclaim taints the node first, re-checks, decomposes, and lifts the taint once the node
  stops advertising the GPUs (or after ``advertise_timeout_seconds``);
- a request nothing can satisfy gets one Warning Event per reason change, and nothing is
  attached for it, so there is no attach/detach loop; a pod composed for but never scheduled
  is given up after ``schedule_timeout_seconds`` and not planned again.

Reclaim guards and out-of-band changes (:mod:`composer.reclaim_guard`, ``docs/composer-reclaim.md``):

- an idle node's reclaim starts only when no guard holds it (``do-not-reclaim`` on the node or a
  pod on it, a reclaim window, the pool's budget); a held reclaim gets one ``ReclaimHeld`` Event
  per reason change; ``do-not-reclaim`` appearing on a tainted node aborts its reclaim;
- a managed GPU the Director no longer shows attached to its node (not by a reclaim) gives a
  Warning ``GpuDetachedOutOfBand`` Event on the node and on each GPU pod bound to it; nothing is
  composed in its place for a running pod;
- GPUs carrying the composer's owner tag attached to a machine with no Node are orphans: after
  ``orphan_grace_seconds`` they are decomposed (an ``orphan`` job; Events on the composer's
  Lease); a free GPU still carrying the tag is free to plan.

Pods held by the composer's scheduling gate (:mod:`composer.gating`) are demand like
unschedulable pods, with these rules:

- newly gated pods are collected for a short batch (``batch_idle_seconds`` without a new one,
  at most ``batch_max_seconds``) and planned together;
- a placement reserves its GPUs until ``reservation_timeout_seconds`` (the intent's ``until``);
  a reservation not released by then expires (``ReservationExpired``) and the pod is planned
  again; its GPUs stay on the node as spare units;
- once the node advertises the reserved units the pod is released: pinned to the node and
  ungated in one patch (``Released``);
- a pod nothing can serve is ungated unchanged ``unserved_wait_seconds`` after its creation;
  one that can never be served here (more GPUs than any host takes, an invalid request, an
  unknown pinned host, given up) at once (``Ungated`` with the reason).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from composer import annotations as ann
from composer import reclaim_guard as guard
from composer.annotations import Intent, IntentPhase, NodeRecord, ReclaimPhase
from composer.gating import PodAction, batch_wait, release_patch, ungate_patch
from composer.intents import reconcile_record
from composer.models import (
    HOSTNAME_LABEL,
    EventSpec,
    FreeGpu,
    GpuRequest,
    Plan,
    Reason,
)
from composer.nodestate import NodeUsage, NodeView, host_state, max_gpus_of, usage_by_node
from composer.planner import plan as make_plan
from composer.podspec import InvalidRequest, PodView, gpu_request
from composer.pools import with_pools
from composer.round_types import (
    FREE_POOL,
    ComposeItem,
    Decision,
    Memory,
    NodeJob,
    Policy,
    ReclaimKind,
    ReclaimStep,
    Reconciled,
    Snapshot,
    lease_event,
    node_event,
    pod_event,
)


def reclaim_step(
    node: NodeView,
    record: NodeRecord,
    *,
    attached: Mapping[str, str],
    busy: bool,
    now: float,
    policy: Policy,
    memory: Memory,
) -> ReclaimStep | None:
    """The next reclaim step for a node, updating ``memory.idle_since`` (see module docstring)."""
    if record.reclaim is None:
        if node.reclaim_tainted:
            return ReclaimStep(ReclaimKind.FINISH)  # taint left behind without a reclaim record
        reclaimable = tuple(sorted((record.devices & attached.keys()) - policy.excluded))
        if busy or not reclaimable:
            memory.idle_since.pop(node.name, None)
            return None
        since = memory.idle_since.setdefault(node.name, now)
        if now - since >= policy.idle_timeout_seconds and now >= memory.reclaim_retry_at.get(node.name, 0.0):
            return ReclaimStep(ReclaimKind.START, reclaimable)
        return None
    memory.idle_since.pop(node.name, None)
    rc = record.reclaim
    if rc.phase is ReclaimPhase.TAINTED:
        if busy:
            return ReclaimStep(ReclaimKind.ABORT)
        return ReclaimStep(
            ReclaimKind.DECOMPOSE, tuple(d for d in rc.devices if d in attached and d not in policy.excluded)
        )
    # DECOMPOSED: lift the taint once the node no longer advertises them
    if node.advertised_gpus <= len(attached) or now - rc.since >= policy.advertise_timeout_seconds:
        return ReclaimStep(ReclaimKind.FINISH)
    return None


def decide(snapshot: Snapshot, memory: Memory, policy: Policy) -> Decision:
    """Decide one round. Updates ``memory`` (idle timers, abandoned pods, reported refusals).

    Args:
        snapshot: what was observed.
        memory: the controller's memory (mutated).
        policy: settings.

    Returns:
        The :class:`Decision`.
    """
    snapshot = with_pools(snapshot, policy.pool_map)  # configured pools win over labels
    now = snapshot.now
    fabric = snapshot.fabric
    tagged = frozenset(g.name for g in fabric.gpus if g.owner_tag and g.owner_tag != policy.owner_tag)
    if tagged - policy.excluded:  # GPUs the Pulumi program owns (its owner tag): static, never touched
        policy = replace(policy, excluded=policy.excluded | tagged)
    pods_by_uid = {p.uid: p for p in snapshot.pods}
    usage = usage_by_node(snapshot.pods)
    empty_usage = NodeUsage()
    events: list[EventSpec] = []
    composable = [n for n in snapshot.nodes if n.name in fabric.machines]
    memory.forget_missing(set(pods_by_uid), {n.name for n in composable}, now)

    # 1. reconcile each node's record with the Director and the pods
    records: dict[str, NodeRecord] = {}
    flags: dict[str, tuple[bool, bool]] = {}
    latencies: list[float] = []
    actions: list[PodAction] = []
    expired = taken = lost = 0
    for node in composable:
        rc = reconcile_record(
            node,
            attached=fabric.attached(node.name),
            usage=usage.get(node.name, empty_usage),
            pods_by_uid=pods_by_uid,
            now=now,
            policy=policy,
        )
        records[node.name] = rc.record
        flags[node.name] = (rc.restart_plugin, rc.cancel_edit)
        events.extend(rc.events)
        latencies.extend(rc.advertised_after)
        for uid, why in rc.given_up:
            memory.abandoned[uid] = why
        expired += rc.expired
        taken += rc.taken
        lost += len(rc.lost)
        for uid, it in rc.release:
            actions.append(_release(pods_by_uid[uid], node.name, it))

    # 2. requests: unschedulable or gated GPU pods nobody is serving yet
    served = {uid for rec in records.values() for uid in rec.intents}
    limit = _host_limit(composable, policy)
    requests: dict[str, GpuRequest] = {}
    gated: dict[str, PodView] = {}
    for p in snapshot.pods:
        if p.gated and p.uid not in memory.gated_seen and p.uid not in served and _serves(policy, p):
            memory.gated_seen[p.uid] = now
            events.append(
                pod_event(
                    p.key,
                    p.uid,
                    "Normal",
                    "Gated",
                    f"held by the scheduling gate {ann.GATE} until the GPUs composed for it are "
                    "advertised on its node",
                )
            )
        if (
            not (p.unschedulable or p.gated)
            or not p.wants_gpu
            or p.deleting
            or p.terminal
            or (p.nominated_node and not p.gated)  # our own nomination of a gated pod is a reservation
            or p.uid in served
            or not _serves(policy, p)
        ):
            continue
        if p.uid in memory.abandoned:
            if p.gated:
                actions.append(_ungate(p, "Warning", f"the composer gave up: {memory.abandoned[p.uid]}"))
            continue
        try:
            req = gpu_request(
                p,
                pool=snapshot.namespace_pools.get(p.namespace, policy.default_pool),
                units_per_gpu=policy.units_per_gpu,
                resource_models=policy.resource_models,
            )
        except InvalidRequest as exc:
            if p.gated:
                actions.append(_ungate(p, "Warning", f"{Reason.INVALID}: {exc}"))
            elif memory.reported.get(p.uid) != "InvalidRequest":
                memory.reported[p.uid] = "InvalidRequest"
                events.append(pod_event(p.key, p.uid, "Warning", "NotComposed", str(exc)))
            continue
        if p.gated and limit is not None and req.gpus > limit:
            actions.append(
                _ungate(
                    p,
                    "Warning",
                    f"TooManyGpus: asks for {req.gpus} GPU(s) ({req.units} {req.resource}); no host takes "
                    f"more than {limit} (maxGpusPerNode / node label {ann.MAX_GPUS_LABEL})",
                )
            )
            continue
        requests[p.uid] = req
        if p.gated:
            gated[p.uid] = p

    # 2b. newly gated pods wait for their batch to close (pods refused or retried before do not)
    fresh = {
        uid: memory.gated_seen[uid]
        for uid in gated
        if uid not in memory.reported and uid not in memory.attempts and uid in memory.gated_seen
    }
    wake: list[float] = []
    hold = batch_wait(
        fresh, now=now, idle_seconds=policy.batch_idle_seconds, max_seconds=policy.batch_max_seconds
    )
    if hold > 0:
        wake.append(hold)
        for uid in fresh:
            del requests[uid]

    # 3. hosts, pool usage, free pool -> plan (only when something asks for GPUs)
    hosts = []
    pool_usage: dict[str, int] = {}
    for node in composable if requests else ():
        rec = records[node.name]
        attached = fabric.attached(node.name)
        pool = node.labels.get(ann.POOL_LABEL, policy.default_pool)
        hosts.append(
            host_state(
                node,
                record=rec,
                usage=usage.get(node.name, empty_usage),
                attached_models=attached,
                pending=pods_by_uid,
                pool=pool,
                max_gpus=max_gpus_of(node, policy.max_gpus_per_node),
                units_per_gpu=policy.units_per_gpu,
                group=fabric.machine_groups.get(node.name),
            )
        )
        held = set(rec.devices & attached.keys())
        for it in rec.intents.values():
            held.update(it.devices)
        pool_usage[pool] = pool_usage.get(pool, 0) + len(held - policy.excluded)
    free = fabric.free(excluded=policy.excluded, device_pools=policy.device_pools)
    if requests:  # the composer's own tag on a free GPU (left by a crash) does not make it static
        free += [
            FreeGpu(g.name, g.model, g.switch, policy.device_pools.get(g.name), g.group)
            for g in fabric.gpus
            if g.owner_tag == policy.owner_tag
            and g.machine is None
            and g.healthy
            and g.name not in policy.excluded
        ]
    free_by_model: dict[tuple[str, str], int] = {}
    for g in free:
        k = (g.model, g.pool or "")
        free_by_model[k] = free_by_model.get(k, 0) + 1
    plan = Plan()
    if requests:
        plan = make_plan(
            requests.values(), hosts, free, quotas=policy.quotas, usage=pool_usage, excluded=policy.excluded
        )

    for r in plan.refusals:
        if memory.reported.get(r.uid) != r.reason:
            memory.reported[r.uid] = r.reason
            events.append(pod_event(r.key, r.uid, "Warning", "NotComposed", f"{r.reason}: {r.message}"))
        p = gated.get(r.uid)
        if p is None:
            continue
        waited = now - p.created if p.created > 0 else now - memory.gated_seen.get(r.uid, now)
        if r.reason in (Reason.INVALID, Reason.UNKNOWN_HOST):
            actions.append(_ungate(p, "Warning", f"{r.reason}: {r.message}"))
        elif waited >= policy.unserved_wait_seconds:
            actions.append(
                _ungate(
                    p,
                    "Warning",
                    f"nothing in the pool can serve it after {policy.unserved_wait_seconds:.0f} s "
                    f"({r.reason}: {r.message}); handing it to the scheduler unchanged",
                )
            )
        else:
            wake.append(policy.unserved_wait_seconds - waited)
    by_node: dict[str, list[ComposeItem]] = {}
    for pl in plan.placements:
        memory.reported.pop(pl.uid, None)
        until = now + policy.reservation_timeout_seconds if pl.uid in gated else 0.0
        by_node.setdefault(pl.host, []).append(
            ComposeItem(pl, requests[pl.uid], memory.attempts.get(pl.uid, 0), until)
        )
        if until:
            r = requests[pl.uid]
            what = f"composing {', '.join(pl.devices)}" if pl.devices else "spare units"
            events.append(
                pod_event(
                    pl.key,
                    pl.uid,
                    "Normal",
                    "Reserved",
                    f"{r.units} {r.resource} on {pl.host} ({what}, {pl.model}) reserved for this pod for "
                    f"up to {policy.reservation_timeout_seconds:.0f} s",
                )
            )

    # 4. idle detection and reclaim (behind its guards), then the jobs
    jobs = []
    guards = _Guards(snapshot, composable, records, policy)
    for node in composable:
        rec = ann.with_hold(records[node.name])
        u = usage.get(node.name, empty_usage)
        busy = u.gpu_pods > 0 or bool(rec.intents) or node.name in by_node
        step = reclaim_step(
            node, rec, attached=fabric.attached(node.name), busy=busy, now=now, policy=policy, memory=memory
        )
        step = guards.check(node, step, memory, events)
        restart, cancel = flags[node.name]
        job = NodeJob(node.name, node.record, rec, restart, cancel, tuple(by_node.get(node.name, ())), step)
        if not job.idle:
            jobs.append(job)

    # 5. orphans: the composer's GPUs on Director machines that have no Node
    planned = frozenset(d for pl in plan.placements for d in pl.devices)
    jobs.extend(_orphan_jobs(snapshot, records, planned, policy, memory, events))
    pending = sum(
        1
        for p in snapshot.pods
        if (p.unschedulable or p.gated) and p.wants_gpu and not p.deleting and _serves(policy, p)
    )
    n_gated = sum(1 for p in snapshot.pods if p.gated and not p.deleting and _serves(policy, p))
    return Decision(
        tuple(jobs),
        tuple(events),
        plan,
        pending,
        free_by_model,
        tuple(latencies),
        pod_actions=tuple(actions),
        wake_after=min(wake) if wake else None,
        gated=n_gated,
        reservations=sum(len(r.intents) for r in records.values()),
        expired=expired,
        taken=taken,
        lost=lost,
        held=guards.held_counts(memory),
    )


class _Guards:
    """The reclaim guards of one round (pool sizes and reclaims under way are counted lazily:
    only rounds where a reclaim would start need them)."""

    def __init__(
        self,
        snapshot: Snapshot,
        composable: list[NodeView],
        records: Mapping[str, NodeRecord],
        policy: Policy,
    ) -> None:
        self.snapshot, self.composable, self.records, self.policy = snapshot, composable, records, policy
        self._opted: dict[str, str] | None = None
        self._reclaiming: dict[str, int] | None = None
        self._size: dict[str, int] = {}

    def _pool(self, node: NodeView) -> str:
        return node.labels.get(ann.POOL_LABEL, self.policy.default_pool)

    def opted_out(self, node: NodeView) -> str:
        """What holds ``node`` by the ``do-not-reclaim`` annotation ("" = nothing)."""
        if node.do_not_reclaim:
            return f"node {node.name}"
        if self._opted is None:
            self._opted = {}
            for p in self.snapshot.pods:
                if p.node_name and not p.terminal and guard.opted_out(p.annotations, ann.DO_NOT_RECLAIM):
                    self._opted.setdefault(p.node_name, f"pod {p.key}")
        return self._opted.get(node.name, "")

    def _counts(self) -> dict[str, int]:
        if self._reclaiming is None:
            self._reclaiming = {}
            for n in self.composable:
                if self.records[n.name].reclaim is not None or n.reclaim_tainted:
                    self._reclaiming[self._pool(n)] = self._reclaiming.get(self._pool(n), 0) + 1
            for n in self.snapshot.hidden:
                if n.name in self.snapshot.hidden_reclaiming:
                    self._reclaiming[self._pool(n)] = self._reclaiming.get(self._pool(n), 0) + 1
            for n in (*self.composable, *self.snapshot.hidden):
                self._size[self._pool(n)] = self._size.get(self._pool(n), 0) + 1
        return self._reclaiming

    def check(
        self, node: NodeView, step: ReclaimStep | None, memory: Memory, events: list[EventSpec]
    ) -> ReclaimStep | None:
        """``step`` if no guard holds it; None (or ``abort``) and a ``ReclaimHeld`` Event otherwise."""
        if step is None or step.kind not in (ReclaimKind.START, ReclaimKind.DECOMPOSE):
            if step is None and node.name not in memory.idle_since:
                memory.held.pop(node.name, None)  # not idle any more: a later hold is news again
            return step
        opted = self.opted_out(node)
        if step.kind is ReclaimKind.DECOMPOSE:
            if not opted:
                return step
            text = f"{opted} is annotated do-not-reclaim; reclaim aborted"
            self._report(node, guard.Hold.DO_NOT_RECLAIM, text, memory, events)
            return ReclaimStep(ReclaimKind.ABORT)
        pool = self._pool(node)
        counts = self._counts()
        budget = self.policy.budget_of(pool)
        held = guard.held_by(
            do_not_reclaim=opted,
            now=self.snapshot.now,
            windows=self.policy.reclaim_windows,
            reclaiming=counts.get(pool, 0),
            allowed=None if budget is None else budget.allowed(self._size.get(pool, 0)),
        )
        if held is not None:
            why, text = held
            if why == guard.Hold.BUDGET:
                text += f" (reclaim budget of pool {pool!r}: {budget})"
            self._report(node, why, text, memory, events)
            return None
        counts[pool] = counts.get(pool, 0) + 1
        memory.held.pop(node.name, None)
        return step

    @staticmethod
    def _report(node: NodeView, why: guard.Hold, text: str, memory: Memory, events: list[EventSpec]) -> None:
        if memory.held.get(node.name) == why:
            return
        memory.held[node.name] = why
        events.append(
            node_event(
                node.name,
                "Normal",
                "ReclaimHeld",
                f"idle GPUs {', '.join(sorted(node.record.devices)) or ''} not reclaimed ({why}): {text}",
            )
        )

    def held_counts(self, memory: Memory) -> dict[str, int]:
        """Guard -> nodes it holds now (for the ``reclaims_held`` gauge)."""
        out = {str(h): 0 for h in guard.Hold}
        for why in memory.held.values():
            out[why] = out.get(why, 0) + 1
        return out


def _orphan_jobs(
    snapshot: Snapshot,
    records: Mapping[str, NodeRecord],
    planned: frozenset[str],
    policy: Policy,
    memory: Memory,
    events: list[EventSpec],
) -> list[NodeJob]:
    """Jobs decomposing the composer-tagged GPUs of Director machines with no Node once they
    were seen so for ``orphan_grace_seconds`` (a Node that comes back in time keeps them), and
    one clearing the tag of free GPUs no intent names (left by a crash between detach and untag,
    or by a failed compose) after the same time."""
    tagged = [g for g in snapshot.fabric.gpus if g.owner_tag == policy.owner_tag]
    if not tagged and not memory.orphan_since:
        return []  # most rounds: nothing to look at
    nodes = {n.name for n in snapshot.nodes} | {n.name for n in snapshot.hidden}
    found: dict[str, list[str]] = {}
    free = [g.name for g in tagged if g.machine is None and g.name not in planned]  # planned: keeps its tag
    for g in tagged:
        if g.machine is not None and g.machine not in nodes:
            found.setdefault(g.machine, []).append(g.name)
    if free:
        intended = {d for rec in records.values() for it in rec.intents.values() for d in it.devices}
        stale = [d for d in free if d not in intended]
        if stale:
            found[FREE_POOL] = stale
    seen = {d for ds in found.values() for d in ds}
    for d in [d for d in memory.orphan_since if d not in seen]:
        del memory.orphan_since[d]
    jobs = []
    for machine, devices in sorted(found.items()):
        fresh = [d for d in devices if d not in memory.orphan_since]
        for d in devices:
            memory.orphan_since.setdefault(d, snapshot.now)
        if fresh and machine != FREE_POOL:
            events.append(
                lease_event(
                    policy,
                    "Warning",
                    "OrphanedGpus",
                    f"{', '.join(sorted(fresh))} attached by this composer to machine {machine}, which "
                    f"has no Node; giving them back to the free pool in {policy.orphan_grace_seconds:.0f} s "
                    f"unless Node {machine} comes back",
                )
            )
        grace = policy.orphan_grace_seconds
        due = tuple(sorted(d for d in devices if snapshot.now - memory.orphan_since[d] >= grace))
        if due:
            for d in due:  # timed again from now: a failed job is retried after another grace period
                memory.orphan_since[d] = snapshot.now
            if machine == FREE_POOL:
                jobs.append(NodeJob(machine, NodeRecord(), NodeRecord(), untag=due))
            else:
                jobs.append(NodeJob(machine, NodeRecord(), NodeRecord(), orphans=due))
    return jobs


def busy_releases(
    snapshot: Snapshot, busy: Mapping[str, frozenset[str]], policy: Policy
) -> tuple[PodAction, ...]:
    """Releases of gated pods whose reserved units are already advertised on a node that has a
    job running (it composes for another pod).

    Such a node sits out of :func:`decide` until its job ends, which can take a whole hot-plug;
    a pod whose GPUs are advertised there need not wait for that. Nothing is written to the node
    here (the job is its only writer): the first round after the job records the phase.

    Args:
        snapshot: the round's observation, busy nodes included.
        busy: node -> UIDs of the pods its running job composes for.
        policy: settings.
    """
    pods_by_uid = {p.uid: p for p in snapshot.pods}
    usage = usage_by_node(snapshot.pods)
    out: list[PodAction] = []
    for node in snapshot.nodes:
        if node.name not in busy or node.name not in snapshot.fabric.machines:
            continue
        rc = reconcile_record(
            node,
            attached=snapshot.fabric.attached(node.name),
            usage=usage.get(node.name, NodeUsage()),
            pods_by_uid=pods_by_uid,
            now=snapshot.now,
            policy=policy,
            in_flight=busy[node.name],
        )
        out.extend(_release(pods_by_uid[uid], node.name, it) for uid, it in rc.release)
    return tuple(out)


def _serves(policy: Policy, pod: PodView) -> bool:
    return not policy.namespaces or pod.namespace in policy.namespaces


def _host_limit(nodes: list[NodeView], policy: Policy) -> int | None:
    """The most GPUs any composable host takes (None = no limit known, or no host)."""
    limits = [max_gpus_of(n, policy.max_gpus_per_node) for n in nodes]
    if not limits or any(x is None for x in limits):
        return None
    return max(x for x in limits if x is not None)


def _ungate(pod: PodView, type_: str, why: str) -> PodAction:
    return PodAction(
        "ungate",
        pod.uid,
        pod.key,
        "",
        tuple(ungate_patch(pod)),
        pod_event(pod.key, pod.uid, type_, "Ungated", f"scheduling gate removed, pod unchanged: {why}"),
        pod.created,
    )


def _release(pod: PodView, node: str, it: Intent) -> PodAction:
    reservation = {"node": node, "devices": list(it.devices), "resource": it.resource, "units": it.units}
    try:
        patch = release_patch(pod, node=node, reservation=reservation)
    except ValueError as exc:
        return _ungate(pod, "Warning", f"cannot pin it to {node}: {exc}")
    own = pod.node_selector.get(HOSTNAME_LABEL) == node
    return PodAction(
        "release",
        pod.uid,
        pod.key,
        node,
        tuple(patch),
        pod_event(
            pod.key,
            pod.uid,
            "Normal",
            "Released",
            f"{it.units} {it.resource} reserved on {node} ({', '.join(it.devices) or 'spare units'}) are "
            + (
                "advertised; scheduling gate removed (the pod already selects this node)"
                if own
                else f"advertised; pinned (nodeSelector {HOSTNAME_LABEL}={node}), scheduling gate removed"
            ),
        ),
        pod.created,
    )


def intents_for(items: tuple[ComposeItem, ...], now: float) -> dict[str, Intent]:
    """The intents recorded before composing ``items`` (``Composing``, or ``Attached`` when
    the placement only reuses spare units)."""
    out = {}
    for it in items:
        pl, r = it.placement, it.request
        phase = IntentPhase.COMPOSING if pl.devices else IntentPhase.ATTACHED
        out[pl.uid] = Intent(
            pod=pl.key,
            resource=r.resource,
            units=r.units,
            model=pl.model,
            devices=pl.devices,
            phase=phase,
            since=now,
            until=it.reserve_until,
        )
    return out


__all__ = [
    "FREE_POOL",
    "ComposeItem",
    "busy_releases",
    "Decision",
    "EventSpec",
    "Memory",
    "NodeJob",
    "Policy",
    "ReclaimKind",
    "ReclaimStep",
    "Reconciled",
    "Snapshot",
    "decide",
    "intents_for",
    "lease_event",
    "node_event",
    "pod_event",
    "reclaim_step",
    "reconcile_record",
]
