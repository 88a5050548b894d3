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
from dataclasses import dataclass, field, replace

from composer import annotations as ann
from composer.annotations import Intent, IntentPhase, NodeRecord
from composer.fabric import FabricView
from composer.gating import PodAction, batch_wait, release_patch, ungate_patch
from composer.models import GPU_RESOURCE, HOSTNAME_LABEL, EventSpec, GpuRequest, Placement, Plan, Reason
from composer.nodestate import NodeUsage, NodeView, host_state, max_gpus_of, usage_by_node
from composer.planner import plan as make_plan
from composer.podspec import PodView, gpu_request
from composer.pools import PoolMap, with_pools


@dataclass(frozen=True)
class Policy:
    """Decision-relevant settings (see :class:`composer.config.Settings` for meanings)."""

    default_pool: str = "default"
    quotas: Mapping[str, int] = field(default_factory=dict)
    device_pools: Mapping[str, str] = field(default_factory=dict)
    excluded: frozenset[str] = frozenset()
    max_gpus_per_node: int | None = None
    units_per_gpu: Mapping[str, int] = field(default_factory=dict)
    resource_models: Mapping[str, frozenset[str]] = field(default_factory=dict)
    idle_timeout_seconds: float = 600.0
    advertise_timeout_seconds: float = 120.0
    schedule_timeout_seconds: float = 300.0
    compose_max_attempts: int = 5
    retry_base_seconds: float = 5.0
    retry_max_seconds: float = 300.0
    restart_device_plugin: bool = True
    namespaces: frozenset[str] = frozenset()
    batch_idle_seconds: float = 0.1
    batch_max_seconds: float = 1.0
    reservation_timeout_seconds: float = 300.0
    unserved_wait_seconds: float = 60.0
    pool_map: PoolMap = field(default_factory=PoolMap)

    def backoff_seconds(self, attempt: int) -> float:
        """Pause before retry number ``attempt`` (1-based): base * 2^(attempt-1), capped."""
        return min(self.retry_max_seconds, self.retry_base_seconds * (2 ** max(0, attempt - 1)))


@dataclass(frozen=True)
class Snapshot:
    """What one round observed.

    Attributes:
        now: observation time (seconds since the epoch).
        pods: every non-terminal pod in the watched namespaces, plus those bound to nodes.
        nodes: nodes matching the composer's node selector.
        namespace_pools: namespace -> pool, from the namespace label ``composer.liqid.io/pool``.
        fabric: the Director's truth.
    """

    now: float
    pods: tuple[PodView, ...]
    nodes: tuple[NodeView, ...]
    namespace_pools: Mapping[str, str]
    fabric: FabricView


@dataclass
class Memory:
    """What the controller remembers between rounds (lost on restart, which is always safe:
    timers restart later, never earlier; given-up pods get one more try).

    Attributes:
        idle_since: node -> when it was first seen idle with managed GPUs.
        attempts: pod UID -> failed compose attempts so far.
        abandoned: pod UID -> why the composer gave up on it (not planned again).
        reported: pod UID -> last refusal reason sent as an Event.
        reclaim_retry_at: node -> earliest time to try a failed reclaim again.
        reclaim_failures: node -> failed reclaim attempts in a row.
        gated_seen: pod UID -> when a gated pod was first seen (batching; ``Gated`` Event once).
    """

    idle_since: dict[str, float] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    abandoned: dict[str, str] = field(default_factory=dict)
    reported: dict[str, str] = field(default_factory=dict)
    reclaim_retry_at: dict[str, float] = field(default_factory=dict)
    reclaim_failures: dict[str, int] = field(default_factory=dict)
    gated_seen: dict[str, float] = field(default_factory=dict)

    def forget_missing(self, live_uids: set[str], live_nodes: set[str], now: float = 0.0) -> None:
        """Drop entries of pods and nodes that no longer exist (bounded memory); gated pods
        unseen for an hour before ``now`` (a pod is hidden while its node's job runs)."""
        for d in (self.attempts, self.abandoned, self.reported):
            for uid in [u for u in d if u not in live_uids]:
                del d[uid]
        for uid in [u for u, t in self.gated_seen.items() if u not in live_uids and t < now - 3600]:
            del self.gated_seen[uid]  # kept a while: a pod hidden during its node's job is not new
        for d2 in (self.idle_since, self.reclaim_retry_at, self.reclaim_failures):
            for n in [n for n in d2 if n not in live_nodes]:
                del d2[n]


def pod_event(key: str, uid: str, type_: str, reason: str, message: str) -> EventSpec:
    """An Event about the pod ``namespace/name``."""
    ns, _, name = key.partition("/")
    return EventSpec("Pod", ns, name, uid, type_, reason, message)


def node_event(node: str, type_: str, reason: str, message: str) -> EventSpec:
    """An Event about a node."""
    return EventSpec("Node", "default", node, node, type_, reason, message)


@dataclass(frozen=True, slots=True)
class ReclaimStep:
    """One step of an idle reclaim.

    ``kind``: ``start`` (annotate, taint, re-check, decompose), ``decompose`` (taint already
    set), ``finish`` (lift the taint, clear the annotation), ``abort`` (a GPU pod appeared:
    lift the taint, keep the GPUs).
    """

    kind: str
    devices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ComposeItem:
    """A placement with the request it serves, its earlier failed attempts, and for a gated
    pod the end of its reservation (seconds since the epoch; 0 = none)."""

    placement: Placement
    request: GpuRequest
    attempts: int = 0
    reserve_until: float = 0.0


@dataclass(frozen=True)
class NodeJob:
    """Everything to do on one node this round, in order.

    Attributes:
        node: node name.
        before: the composer record as read.
        after: the record after reconciliation (written if it differs from ``before``).
        restart_plugin: delete the node's device-plugin pod (GPUs not advertised in time).
        cancel_edit: cancel a fabric edit left open by a composer that died mid-compose.
        compose: placements to compose onto the node.
        reclaim: a reclaim step, or None.
    """

    node: str
    before: NodeRecord
    after: NodeRecord
    restart_plugin: bool = False
    cancel_edit: bool = False
    compose: tuple[ComposeItem, ...] = ()
    reclaim: ReclaimStep | None = None

    @property
    def idle(self) -> bool:
        """Nothing to do."""
        return (
            self.before == self.after
            and not self.restart_plugin
            and not self.cancel_edit
            and not self.compose
            and self.reclaim is None
        )


@dataclass(frozen=True)
class Decision:
    """The round's output: node jobs (non-idle only), Events, the plan, and for metrics the
    pending GPU pods, the free pool by (model, pool) and pod-creation-to-advertised latencies.

    Gating: ``pod_actions`` (releases and ungates to patch), ``wake_after`` (seconds until a
    batch closes or a wait ends; None = nothing timed), ``gated`` (pods held by the gate),
    ``reservations`` (intents open), ``expired`` (reservations that expired this round),
    ``taken`` (intents whose GPUs another pod got this round)."""

    jobs: tuple[NodeJob, ...]
    events: tuple[EventSpec, ...]
    plan: Plan
    pending: int
    free_by_model: Mapping[tuple[str, str], int]
    advertised_after: tuple[float, ...] = ()
    pod_actions: tuple[PodAction, ...] = ()
    wake_after: float | None = None
    gated: int = 0
    reservations: int = 0
    expired: int = 0
    taken: int = 0


@dataclass(frozen=True)
class Reconciled:
    """One node's record after :func:`reconcile_record`, and what it implies.

    Attributes:
        record: the reconciled record.
        restart_plugin: restart the node's device-plugin pod.
        cancel_edit: cancel a fabric edit left open by a composer that died mid-compose.
        events: Events to emit.
        given_up: ``(pod uid, reason)`` the controller must not plan again.
        advertised_after: seconds from pod creation to advertisement, per intent advertised now.
        release: ``(pod uid, intent)`` of gated pods whose reserved units are advertised.
        expired: gated pods' reservations dropped because their ``until`` passed.
        taken: intents dropped because another pod was bound to their GPUs.
    """

    record: NodeRecord
    restart_plugin: bool = False
    cancel_edit: bool = False
    events: tuple[EventSpec, ...] = ()
    given_up: tuple[tuple[str, str], ...] = ()
    advertised_after: tuple[float, ...] = ()
    release: tuple[tuple[str, Intent], ...] = ()
    expired: int = 0
    taken: int = 0


def _advertised_units(node: NodeView, usage: NodeUsage, resource: str) -> int:
    return node.gpu_allocatable.get(resource, 0) - usage.gpu.get(resource, 0)


def _taken_by_others(node: NodeView, attached: Mapping[str, str], it: Intent) -> bool:
    """True when every GPU attached to the node is advertised (whole ``nvidia.com/gpu`` only), yet
    too few are free for the intent: pods bound meanwhile (the scheduler may bind a newly
    advertised GPU to another pending pod) took the GPUs composed for it. Waiting or restarting
    the device plugin cannot help; the intent must be planned again."""
    return (
        it.resource == GPU_RESOURCE
        and len(attached) > 0
        and node.gpu_allocatable.get(GPU_RESOURCE, 0) >= len(attached)
    )


def _taken_event(node: NodeView, it: Intent, uid: str) -> EventSpec:
    return pod_event(
        it.pod,
        uid,
        "Normal",
        "GpusTakenByAnotherPod",
        f"the GPUs composed for this pod on {node.name} ({', '.join(it.devices) or 'spare units'}) were "
        "bound to another pod first; planning again",
    )


def reconcile_record(
    node: NodeView,
    *,
    attached: Mapping[str, str],
    usage: NodeUsage,
    pods_by_uid: Mapping[str, PodView],
    now: float,
    policy: Policy,
    in_flight: frozenset[str] = frozenset(),
) -> Reconciled:
    """Bring one node's composer record in line with the Director and the pods.

    Args:
        node: the node (its ``record`` is the record as read).
        attached: device -> model of GPUs the Director shows attached to the node.
        usage: requests of pods bound to the node.
        pods_by_uid: every observed pod.
        now: current time (seconds since the epoch).
        policy: timeouts.
        in_flight: pod UIDs whose compose this process started and has not finished (their
            ``Composing`` intents are not crash leftovers).

    Returns:
        The :class:`Reconciled` record and its consequences.
    """
    rec = node.record
    if not rec.intents and rec.devices <= attached.keys():
        return Reconciled(rec)  # nothing to reconcile (most nodes, most rounds)
    managed = set(rec.devices & attached.keys())
    intents: dict[str, Intent] = {}
    events: list[EventSpec] = []
    given_up: list[tuple[str, str]] = []
    restart = False
    cancel = False
    latencies: list[float] = []
    budget: dict[str, int] = {}
    release: list[tuple[str, Intent]] = []
    expired = taken = 0
    for uid, it in sorted(rec.intents.items(), key=lambda kv: (kv[1].since, kv[0])):
        pod = pods_by_uid.get(uid)
        if pod is None or pod.terminal or pod.deleting or pod.node_name:
            # served, or nothing left to serve; what was composed for it stays managed (reclaimable)
            managed |= {d for d in it.devices if d in attached}
            continue
        if pod.gated and it.until and now >= it.until and uid not in in_flight:
            managed |= {d for d in it.devices if d in attached}  # spare units now, reusable
            expired += 1
            events.append(
                pod_event(
                    it.pod,
                    uid,
                    "Normal",
                    "ReservationExpired",
                    f"the GPUs reserved on {node.name} ({', '.join(it.devices) or 'spare units'}) were "
                    f"not advertised in time ({it.phase}); planning the pod again",
                )
            )
            continue
        if it.phase == IntentPhase.COMPOSING:
            got = {d for d in it.devices if d in attached}
            if it.devices and len(got) == len(it.devices):
                managed |= got
                intents[uid] = it.moved(IntentPhase.ATTACHED, now, retry_at=0.0)
                events.append(
                    pod_event(
                        it.pod,
                        uid,
                        "Normal",
                        "Composed",
                        f"found {', '.join(it.devices)} ({it.model}) already attached to {node.name} "
                        "(a compose interrupted by a restart or a lost answer); not composing again",
                    )
                )
            elif uid in in_flight or (it.retry_at and now < it.retry_at):
                intents[uid] = it
            else:
                managed |= got  # a partial attach becomes spare GPUs on the node, reused by the planner
                if not it.retry_at:
                    cancel = True  # a composer died between fabric/edit and fabric/reprogram
            continue
        if it.phase == IntentPhase.ATTACHED:
            left = budget.setdefault(it.resource, _advertised_units(node, usage, it.resource))
            if left < it.units and _taken_by_others(node, attached, it):
                managed |= {d for d in it.devices if d in attached}
                events.append(_taken_event(node, it, uid))
                taken += 1
                continue  # intent dropped: the pod is planned again next round
            if left >= it.units:
                budget[it.resource] = left - it.units
                intents[uid] = it.moved(IntentPhase.ADVERTISED, now)
                if pod.gated:
                    release.append((uid, intents[uid]))
                if pod.created > 0:
                    latencies.append(max(0.0, now - pod.created))
                continue
            wait = policy.advertise_timeout_seconds * (2 ** min(it.plugin_restarts, 4))
            if now - it.since >= wait:
                if policy.restart_device_plugin:
                    restart = True
                    intents[uid] = replace(it, since=now, plugin_restarts=it.plugin_restarts + 1)
                    events.append(
                        pod_event(
                            it.pod,
                            uid,
                            "Warning",
                            "GpusNotAdvertised",
                            f"{node.name} does not advertise {it.resource} after {wait:.0f} s; "
                            "restarting its NVIDIA device-plugin pod",
                        )
                    )
                else:
                    intents[uid] = replace(it, since=now, plugin_restarts=it.plugin_restarts + 1)
                    events.append(
                        pod_event(
                            it.pod,
                            uid,
                            "Warning",
                            "GpusNotAdvertised",
                            f"{node.name} does not advertise {it.resource} after {wait:.0f} s",
                        )
                    )
            else:
                intents[uid] = it
            continue
        # ADVERTISED: the scheduler should bind it soon (a gated pod: once released)
        left = budget.setdefault(it.resource, _advertised_units(node, usage, it.resource))
        if left < it.units and _taken_by_others(node, attached, it):
            managed |= {d for d in it.devices if d in attached}
            events.append(_taken_event(node, it, uid))
            taken += 1
            continue  # intent dropped: the pod is planned again next round
        budget[it.resource] = left - it.units
        if pod.gated:
            release.append((uid, it))  # an earlier release did not go through: again
        if now - it.since >= policy.schedule_timeout_seconds:
            reason = (
                f"GPUs on {node.name} advertised for {policy.schedule_timeout_seconds:.0f} s but the pod "
                "is still not scheduled; giving up (its GPUs are reclaimed when idle)"
            )
            given_up.append((uid, reason))
            events.append(pod_event(it.pod, uid, "Warning", "ComposedButNotScheduled", reason))
        else:
            intents[uid] = it
    record = NodeRecord(frozenset(managed), intents, rec.reclaim)
    return Reconciled(
        record,
        restart,
        cancel,
        tuple(events),
        tuple(given_up),
        tuple(latencies),
        tuple(release),
        expired,
        taken,
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
            return ReclaimStep("finish")  # taint left behind without a reclaim record
        reclaimable = tuple(sorted((record.devices & attached.keys()) - policy.excluded))
        if busy or not reclaimable:
            memory.idle_since.pop(node.name, None)
            return None
        since = memory.idle_since.setdefault(node.name, now)
        if now - since >= policy.idle_timeout_seconds and now >= memory.reclaim_retry_at.get(node.name, 0.0):
            return ReclaimStep("start", reclaimable)
        return None
    memory.idle_since.pop(node.name, None)
    rc = record.reclaim
    if rc.phase == "Tainted":
        if busy:
            return ReclaimStep("abort")
        return ReclaimStep(
            "decompose", tuple(d for d in rc.devices if d in attached and d not in policy.excluded)
        )
    # Decomposed: lift the taint once the node no longer advertises them
    if node.advertised_gpus <= len(attached) or now - rc.since >= policy.advertise_timeout_seconds:
        return ReclaimStep("finish")
    return None


def decide(
    snapshot: Snapshot, memory: Memory, policy: Policy, *, in_flight: frozenset[str] = frozenset()
) -> Decision:
    """Decide one round. Updates ``memory`` (idle timers, abandoned pods, reported refusals).

    Args:
        snapshot: what was observed.
        memory: the controller's memory (mutated).
        policy: settings.
        in_flight: pod UIDs with a compose still running in this process.

    Returns:
        The :class:`Decision`.
    """
    snapshot = with_pools(snapshot, policy.pool_map)  # configured pools win over labels
    now = snapshot.now
    fabric = snapshot.fabric
    tagged = frozenset(g.name for g in fabric.gpus if g.owner_tag)
    if tagged - policy.excluded:  # GPUs the Pulumi program owns (owner tag): static, never touched
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
    expired = taken = 0
    for node in composable:
        rc = reconcile_record(
            node,
            attached=fabric.attached(node.name),
            usage=usage.get(node.name, empty_usage),
            pods_by_uid=pods_by_uid,
            now=now,
            policy=policy,
            in_flight=in_flight,
        )
        records[node.name] = rc.record
        flags[node.name] = (rc.restart_plugin, rc.cancel_edit)
        events.extend(rc.events)
        latencies.extend(rc.advertised_after)
        for uid, why in rc.given_up:
            memory.abandoned[uid] = why
        expired += rc.expired
        taken += rc.taken
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
            or p.nominated_node
            or p.uid in served
            or not _serves(policy, p)
        ):
            continue
        if p.uid in memory.abandoned:
            if p.gated:
                actions.append(_ungate(p, "Warning", f"the composer gave up: {memory.abandoned[p.uid]}"))
            continue
        req = gpu_request(
            p,
            pool=snapshot.namespace_pools.get(p.namespace, policy.default_pool),
            units_per_gpu=policy.units_per_gpu,
            resource_models=policy.resource_models,
        )
        if isinstance(req, str):
            if p.gated:
                actions.append(_ungate(p, "Warning", f"{Reason.INVALID}: {req}"))
            elif memory.reported.get(p.uid) != "InvalidRequest":
                memory.reported[p.uid] = "InvalidRequest"
                events.append(pod_event(p.key, p.uid, "Warning", "NotComposed", req))
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

    # 4. idle detection and reclaim, then the jobs
    jobs = []
    for node in composable:
        rec = records[node.name]
        u = usage.get(node.name, empty_usage)
        busy = u.gpu_pods > 0 or bool(rec.intents) or node.name in by_node
        step = reclaim_step(
            node, rec, attached=fabric.attached(node.name), busy=busy, now=now, policy=policy, memory=memory
        )
        restart, cancel = flags[node.name]
        job = NodeJob(node.name, node.record, rec, restart, cancel, tuple(by_node.get(node.name, ())), step)
        if not job.idle:
            jobs.append(job)
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
    )


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
    "ComposeItem",
    "busy_releases",
    "Decision",
    "EventSpec",
    "Memory",
    "NodeJob",
    "Policy",
    "ReclaimStep",
    "Reconciled",
    "Snapshot",
    "decide",
    "intents_for",
    "node_event",
    "pod_event",
    "reclaim_step",
    "reconcile_record",
]
