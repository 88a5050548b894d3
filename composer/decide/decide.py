"""One reconcile round's decisions, from a snapshot of the world. No I/O.

:func:`decide` takes what was observed (pods, nodes, the Director's truth) plus the
controller's small in-memory :class:`Memory` (backoff counters, idle timers, what was already
reported) and returns a :class:`Decision`: per-node jobs (annotation updates, device-plugin
restarts, compositions, reclaim steps) and Events. The controller executes the jobs
(:mod:`composer.shell.act`); tests call :func:`decide` with plain data. The round's types live in
:mod:`composer.decide.round_types`, intent reconciliation (one function per intent phase) in
:mod:`composer.decide.intents`, reclaim steps, guards and orphans in :mod:`composer.decide.reclaim`; this
module puts them together and plans, as :data:`PHASES`: functions run in order on one round's
:class:`Round`, each reading what earlier ones added and adding its own.

Convergence rules:

- intents are reconciled against the Director first: devices of a ``Composing`` intent that
  the Director shows attached are adopted (a restart mid-compose never composes twice); an
  intent whose pod is bound, gone or finished is dropped; a GPU attached to the node with the
  composer's owner tag that the record does not name is adopted into it (``AdoptedGpus``);
- a node is *busy* while a non-terminal GPU pod is bound or nominated to it, or an intent is
  open on it; only composer-managed devices (annotation ``composer.liqid.io/devices``) of a
  node idle for ``idle_timeout_seconds`` (counted from its ``idle-since`` annotation) are
  reclaimed, never static ones (configured as excluded, or carrying the Pulumi program's owner
  tag in the Director, or none);
- a reclaim taints the node first, re-checks, decomposes, and lifts the taint once the node
  stops advertising the GPUs (or after ``advertise_timeout_seconds``);
- a request nothing can satisfy gets one Warning Event per cause, its reason the cause
  (:class:`~composer.model.models.Reason`; ``TooManyGpus`` and ``ModelNotInPool`` from
  :mod:`composer.decide.capacity` before planning, the others from the planner), a repeat counted on
  that Event (``series``), and nothing is attached for it, so there is no attach/detach loop; a
  pod composed for but never scheduled is given up after ``schedule_timeout_seconds`` and not
  planned again.

Reclaim guards and out-of-band changes (:mod:`composer.decide.reclaim_guard`, ``docs/composer-reclaim.md``):

- an idle node's reclaim starts only when no guard holds it (``do-not-reclaim`` on the node or a
  pod on it, a reclaim window, the pool's budget); a held reclaim gets one ``ReclaimHeld`` Event
  per reason change; ``do-not-reclaim`` appearing on a tainted node aborts its reclaim;
- a managed GPU the Director no longer shows attached to its node (not by a reclaim) gives a
  Warning ``GpuDetachedOutOfBand`` Event on the node and on each GPU pod bound to it; nothing is
  composed in its place for a running pod;
- GPUs carrying the composer's owner tag attached to a machine with no Node are orphans: after
  ``orphan_grace_seconds`` they are decomposed (an ``orphan`` job; Events on the composer's
  Lease); a free GPU still carrying the tag is free to plan.

Pods held by the composer's scheduling gate (:mod:`composer.decide.gating`) are demand like
unschedulable pods, with these rules:

- newly gated pods are collected for a short batch (``batch_idle_seconds`` without a new one,
  at most ``batch_max_seconds``) and planned together;
- a placement reserves its GPUs until ``reservation_timeout_seconds`` (the intent's ``until``);
  a reservation not released by then expires (``ReservationExpired``) and the pod is planned
  again; its GPUs stay on the node as spare units;
- once the node advertises the reserved units the pod is released: pinned to the node and
  ungated in one patch (``Released``);
- a pod nothing can serve is ungated unchanged ``unserved_wait_seconds`` after its creation;
  one that can never be served here (:data:`NEVER_HERE`: an invalid request, more GPUs than a
  host of its pool takes or its pool has, a model its pool lacks, an unknown pinned host; or
  given up) at once. The ungate is a Normal ``Ungated`` Event naming the cause, whose Warning
  is the one above.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from composer.decide.capacity import PoolCapacity
from composer.decide.gating import PodAction, batch_wait, release_patch, ungate_patch
from composer.decide.intents import reconcile_record, settled
from composer.decide.planner import pinned_hosts
from composer.decide.planner import plan as make_plan
from composer.decide.reclaim import ReclaimGuards, gpu_reclaim_step, orphan_jobs, reclaim_step
from composer.decide.round_types import (
    FREE_POOL,
    ComposeItem,
    Decision,
    Memory,
    NodeJob,
    Policy,
    ReclaimKind,
    ReclaimStep,
    Reconciled,
    RoundContext,
    Snapshot,
    lease_event,
    node_event,
    pod_event,
)
from composer.decide.twins import empty_host_kind, without_twins
from composer.model import annotations as ann
from composer.model.annotations import Intent, IntentPhase, NodeRecord
from composer.model.models import (
    HOSTNAME_LABEL,
    EventSpec,
    FreeGpu,
    GpuRequest,
    HostState,
    Plan,
    Reason,
    Refusal,
)
from composer.model.nodestate import NodeView, host_state, max_gpus_of
from composer.model.podspec import InvalidRequest, PodView, gpu_request


@dataclass
class Round:
    """The state of one round, read and extended by the :data:`PHASES` in order.

    :meth:`start` fills the first block; each later block is added by the phase named beside it
    (its docstring says what it reads). ``events``, ``actions`` and ``wake`` are appended to by
    several phases, in phase order, which is the order of the Decision's Events and pod actions.

    Attributes:
        snapshot: the observation, its pools resolved (configured pools win over labels).
        memory: the controller's memory (mutated by the phases).
        policy: settings, with GPUs carrying the Pulumi program's owner tag added to ``excluded``.
        ctx: what reconciling any node reads from the round as a whole.
        composable: observed Nodes that are Director machines.
        events: Events of the round so far.
        actions: gated pods' releases and ungates so far.
        wake: seconds after which a timer wants another round (batch, unserved wait).
        records: node name -> its record, reconciled (:func:`reconcile`).
        flags: node name -> (restart the device plugin, cancel a ``fabric/edit``) (:func:`reconcile`).
        latencies: seconds from compose to advertise of intents that became advertised (:func:`reconcile`).
        expired, taken, lost, adopted: counts of reservations expired, GPUs taken by another pod,
            GPUs lost out of band, GPUs adopted (:func:`reconcile`).
        early: refusals found before planning (:func:`collect_requests`).
        requests: pod UID -> its GPU request to plan (:func:`collect_requests`; :func:`hold_batch`
            removes a batch still open).
        gated: pod UID -> gated pods among ``requests`` (:func:`collect_requests`).
        plan: placements and every refusal, early ones first (:func:`plan_requests`).
        free_by_model: (model, pool or "") -> free GPUs (:func:`plan_requests`).
        by_node: node name -> its compositions this round (:func:`place`).
        held: guard -> nodes it holds, after this round's checks (:func:`reclaim`).
        jobs: node jobs that do something (:func:`reclaim`, :func:`orphans`).
        claimed: DRA mode: node name -> GPUs allocated ResourceClaims hold on it, the reclaim
            being per GPU (:func:`~composer.decide.reclaim.gpu_reclaim_step`; filled with the
            start by :mod:`composer.decide.dra_round`); None in device-plugin mode, where the
            reclaim is per node.
    """

    snapshot: Snapshot
    memory: Memory
    policy: Policy
    ctx: RoundContext
    composable: list[NodeView]
    events: list[EventSpec] = field(default_factory=list)
    actions: list[PodAction] = field(default_factory=list)
    wake: list[float] = field(default_factory=list)
    records: dict[str, NodeRecord] = field(default_factory=dict)
    flags: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    expired: int = 0
    taken: int = 0
    lost: int = 0
    adopted: int = 0
    early: list[Refusal] = field(default_factory=list)
    requests: dict[str, GpuRequest] = field(default_factory=dict)
    gated: dict[str, PodView] = field(default_factory=dict)
    plan: Plan = field(default_factory=Plan)
    free_by_model: dict[tuple[str, str], int] = field(default_factory=dict)
    by_node: dict[str, list[ComposeItem]] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)
    jobs: list[NodeJob] = field(default_factory=list)
    claimed: Mapping[str, frozenset[str]] | None = None

    @classmethod
    def start(cls, snapshot: Snapshot, memory: Memory, policy: Policy) -> Round:
        """The round's first state: pools resolved, the Pulumi program's GPUs (its owner tag)
        excluded as static, never touched, and ``memory`` forgetting pods and nodes that are gone."""
        snapshot = snapshot.with_pools(policy.pool_map)
        tagged = snapshot.fabric.tagged_other_than(policy.owner_tag)
        if tagged - policy.excluded:
            policy = replace(policy, excluded=policy.excluded | tagged)
        ctx = RoundContext.of(snapshot, policy)
        composable = [n for n in snapshot.nodes if n.name in snapshot.fabric.machines]
        memory.forget_missing(set(ctx.pods_by_uid), {n.name for n in composable}, snapshot.now)
        return cls(snapshot, memory, policy, ctx, composable)


def reconcile(r: Round) -> None:
    """Reconcile each composable node's record with the Director and the pods.

    Reads ``composable``, ``ctx``, the fabric; adds ``records``, ``flags``, ``latencies``, the
    counts, given-up pods to ``memory.abandoned``, Events, and releases to ``actions``. A node
    whose record is :func:`settled` keeps it unchanged and flags nothing.
    """
    fabric, owner = r.snapshot.fabric, r.policy.owner_tag
    for node in r.composable:
        attached = fabric.attached(node.name)
        owned = fabric.owned_on(owner, node.name)
        if settled(node.record, attached, owned):
            r.records[node.name] = node.record
            r.flags[node.name] = (False, False)
            continue
        rc = reconcile_record(node, r.ctx, attached=attached, owned=owned)
        r.records[node.name] = rc.record
        r.flags[node.name] = (rc.restart_plugin, rc.cancel_edit)
        r.events.extend(rc.events)
        r.latencies.extend(rc.advertised_after)
        for uid, why in rc.given_up:
            r.memory.abandoned[uid] = why
        r.expired += rc.expired
        r.taken += rc.taken
        r.lost += len(rc.lost)
        r.adopted += len(rc.adopted)
        for uid, it in rc.release:
            r.actions.append(_release(r.ctx.pods_by_uid[uid], node.name, it))


def collect_requests(r: Round) -> None:
    """The requests: unschedulable or gated GPU pods nobody is serving yet.

    Reads ``records`` (pods with an intent are served), the pods, ``memory``; adds ``requests``,
    ``gated``, ``early`` (invalid requests, and requests their pool can never serve, by
    :class:`~composer.decide.capacity.PoolCapacity`, counted once and only when a pod asks for
    GPUs), a ``Gated`` Event per newly gated pod (recorded in ``memory.gated_seen``) and an
    ungate of each gated pod the composer gave up on.
    """
    snapshot, memory, policy, now = r.snapshot, r.memory, r.policy, r.snapshot.now
    served = {uid for rec in r.records.values() for uid in rec.intents}
    capacity: list[PoolCapacity] = []
    for p in snapshot.pods:
        if p.gated and p.uid not in memory.gated_seen and p.uid not in served and _serves(policy, p):
            # the batch window counts from the pod's arrival on the watch, not from this round
            memory.gated_seen[p.uid] = min(now, p.seen_at) if p.seen_at else now
            r.events.append(
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
            if p.gated:  # its cause was reported when the composer gave up
                r.actions.append(_ungate(p, "Normal", f"the composer gave up: {memory.abandoned[p.uid]}"))
            continue
        try:
            req = gpu_request(
                p,
                pool=snapshot.namespace_pools.get(p.namespace, policy.default_pool),
                units_per_gpu=policy.units_per_gpu,
                resource_models=policy.resource_models,
                sharing_only=policy.sharing_only,
                most_units=policy.most_units,
            )
        except InvalidRequest as exc:
            r.early.append(Refusal(p.key, p.uid, Reason.INVALID, str(exc)))
            continue
        if not capacity:
            whole = [n for n in (*r.composable, *snapshot.hidden) if n.name in snapshot.fabric.machines]
            capacity.append(PoolCapacity.of(snapshot.fabric, whole, policy))
        never = capacity[0].refusal(req)
        if never is not None:
            r.early.append(Refusal(p.key, p.uid, *never))
            continue
        r.requests[p.uid] = req
        if p.gated:
            r.gated[p.uid] = p


def hold_batch(r: Round) -> None:
    """Newly gated pods wait for their batch to close (pods refused or retried before do not).

    Reads ``gated``, ``memory``; while the batch is open, removes its pods from ``requests``
    and adds the seconds until it closes to ``wake``.
    """
    memory, policy = r.memory, r.policy
    fresh = {
        uid: memory.gated_seen[uid]
        for uid in r.gated
        if uid not in memory.reported and uid not in memory.attempts and uid in memory.gated_seen
    }
    hold = batch_wait(
        fresh,
        now=r.snapshot.now,
        idle_seconds=policy.batch_idle_seconds,
        max_seconds=policy.batch_max_seconds,
    )
    if hold > 0:
        r.wake.append(hold)
        for uid in fresh:
            del r.requests[uid]


def plan_requests(r: Round) -> None:
    """Hosts, pool usage and the free pool, then the plan (hosts and plan only when something
    asks for GPUs).

    Reads ``requests``, ``records``, ``composable``, ``ctx``, ``early``, the fabric; adds
    ``plan`` (placements; refusals: ``early`` first, then the planner's) and ``free_by_model``.
    A batch of pinned pods describes only its own hosts; a node holding no composer GPU adds
    nothing to its pool's usage.
    """
    fabric, policy, requests = r.snapshot.fabric, r.policy, r.requests
    hosts = []
    pool_usage: dict[str, int] = {}
    only = pinned_hosts(requests.values())
    for node in r.composable if requests else ():
        rec = r.records[node.name]
        described = only is None or node.name in only
        if not described and not rec.devices and not rec.intents:
            continue
        attached = fabric.attached(node.name)
        pool = node.labels.get(ann.POOL_LABEL, policy.default_pool)
        if described:
            hosts.append(
                host_state(
                    node,
                    record=rec,
                    usage=r.ctx.usage_of(node.name),
                    attached_models=attached,
                    pending=r.ctx.pods_by_uid,
                    pool=pool,
                    max_gpus=max_gpus_of(node, policy.max_gpus_per_node),
                    units_per_gpu=policy.units_per_gpu,
                    group=fabric.machine_groups.get(node.name),
                    sharing=policy.sharing.get(node.name),
                )
            )
        if not rec.devices and not rec.intents:
            continue  # holds no composer GPU: adds nothing to its pool's usage
        held = set(rec.devices & attached.keys())
        for it in rec.intents.values():
            held.update(it.devices)
        pool_usage[pool] = pool_usage.get(pool, 0) + len(held - policy.excluded)
    free = fabric.free(excluded=policy.excluded, device_pools=policy.device_pools)
    if requests:  # the composer's own tag on a free GPU (left by a crash) does not make it static
        free += [
            FreeGpu(g.name, g.model, g.switch, policy.device_pools.get(g.name), g.group)
            for g in fabric.tagged(policy.owner_tag)
            if g.machine is None
            and g.healthy
            and g.name not in policy.excluded
        ]
    for g in free:
        k = (g.model, g.pool or "")
        r.free_by_model[k] = r.free_by_model.get(k, 0) + 1
    plan = Plan()
    if requests:
        if only is None:  # a batch that may go anywhere needs a few of each kind of empty host
            hosts = without_twins(list(requests.values()), hosts, kind=empty_host_kind, name=_host_name)
        plan = make_plan(
            requests.values(), hosts, free, quotas=policy.quotas, usage=pool_usage, excluded=policy.excluded
        )
    r.plan = Plan(plan.placements, (*r.early, *plan.refusals))


def _host_name(h: HostState) -> str:
    return h.name


def answer_refusals(r: Round) -> None:
    """One Warning Event per refusal cause (a repeat counts on it), and the gated refused pods'
    ungates.

    Reads ``plan.refusals``, ``memory``; adds Events, ``memory.reported``, ungates to
    ``actions`` (at once for :data:`NEVER_HERE` causes, else after ``unserved_wait_seconds``
    from the pod's creation) and the seconds left of that wait to ``wake``.
    """
    memory, policy, now = r.memory, r.policy, r.snapshot.now
    for ref in r.plan.refusals:
        if memory.reported.get(ref.uid) != ref.reason:
            memory.reported[ref.uid] = ref.reason
            r.events.append(pod_event(ref.key, ref.uid, "Warning", str(ref.reason), ref.message, series=True))
        gp = r.ctx.pods_by_uid[ref.uid]
        if not gp.gated:
            continue
        waited = now - gp.created if gp.created > 0 else now - memory.gated_seen.get(ref.uid, now)
        if ref.reason in NEVER_HERE:
            r.actions.append(_ungate(gp, "Normal", f"the composer cannot serve it ({ref.reason})"))
        elif waited >= policy.unserved_wait_seconds:
            r.actions.append(
                _ungate(
                    gp,
                    "Normal",
                    f"nothing in the pool can serve it after {policy.unserved_wait_seconds:.0f} s "
                    f"({ref.reason}); handing it to the scheduler unchanged",
                )
            )
        else:
            r.wake.append(policy.unserved_wait_seconds - waited)


def place(r: Round) -> None:
    """The placements as compositions per node; a gated pod's placement is its reservation.

    Reads ``plan.placements``, ``requests``, ``gated``, ``memory.attempts``; adds ``by_node``
    (a gated pod's item reserved until now + ``reservation_timeout_seconds``) and a
    ``Reserved`` Event per reservation; forgets each placed pod's reported refusal.
    """
    memory, policy, now = r.memory, r.policy, r.snapshot.now
    for pl in r.plan.placements:
        memory.reported.pop(pl.uid, None)
        until = now + policy.reservation_timeout_seconds if pl.uid in r.gated else 0.0
        r.by_node.setdefault(pl.host, []).append(
            ComposeItem(pl, r.requests[pl.uid], memory.attempts.get(pl.uid, 0), until)
        )
        if until:
            rq = r.requests[pl.uid]
            what = f"composing {', '.join(pl.devices)}" if pl.devices else "spare units"
            r.events.append(
                pod_event(
                    pl.key,
                    pl.uid,
                    "Normal",
                    "Reserved",
                    f"{rq.units} {rq.resource} on {pl.host} ({what}, {pl.model}) reserved for this pod for "
                    f"up to {policy.reservation_timeout_seconds:.0f} s",
                )
            )


def reclaim(r: Round) -> None:
    """Idle detection and reclaim (behind its guards), then each node's job.

    Reads ``composable``, ``records``, ``flags``, ``by_node``, ``ctx``, ``claimed``; adds ``guards`` and
    ``jobs`` (the jobs that do something), the guards' Events, their holds in ``memory`` and
    ``held``, the holds counted.
    A node that is :func:`_untouched` is skipped.

    Device-plugin mode (``claimed`` None): per node, :func:`~composer.decide.reclaim.reclaim_step`,
    a node being busy while a GPU pod is bound or nominated to it, an intent is open or a compose
    is placed on it. DRA mode: per GPU, :func:`~composer.decide.reclaim.gpu_reclaim_step`, a GPU
    being held while an allocated claim holds it, an open intent or this round's compose names it;
    its timers replace ``memory.idle_gpus`` (those of nodes left out of the round are kept), and
    the node's ``idle-since`` annotation shows the earliest of them (for people and ``ops``: a
    new leader does not read it back). The guards are the same in both modes, per node.
    """
    fabric, policy, memory, now = r.snapshot.fabric, r.policy, r.memory, r.snapshot.now
    guards = ReclaimGuards(r.snapshot, r.composable, r.records, policy)
    hidden = {n.name for n in r.snapshot.hidden}
    timers = {n: t for n, t in memory.idle_gpus.items() if n in hidden}
    for node in r.composable:
        if _untouched(node, r.records[node.name], node.name in r.by_node, memory):
            continue
        rec = ann.with_hold(r.records[node.name])
        placed = r.by_node.get(node.name, ())
        attached = fabric.attached(node.name)
        since: float | None
        if r.claimed is None:
            busy = r.ctx.usage_of(node.name).gpu_pods > 0 or bool(rec.intents) or bool(placed)
            step, since = reclaim_step(
                node, rec, attached=attached, busy=busy, now=now, policy=policy, memory=memory
            )
        else:
            held = r.claimed.get(node.name, frozenset()).union(
                *(it.devices for it in rec.intents.values()), *(item.placement.devices for item in placed)
            )
            step, gpu_timers = gpu_reclaim_step(
                node, rec, attached=attached, held=held, now=now, policy=policy, memory=memory
            )
            if gpu_timers:
                timers[node.name] = gpu_timers
            since = min(gpu_timers.values(), default=None)
        step = guards.check(node, step, memory, r.events, idle=since is not None)
        if rec.idle_since != since:
            rec = replace(rec, idle_since=since)
        restart, cancel = r.flags[node.name]
        job = NodeJob(node.name, node.record, rec, restart, cancel, tuple(placed), step)
        if not job.idle:
            r.jobs.append(job)
    if r.claimed is not None:
        memory.idle_gpus.clear()
        memory.idle_gpus.update(timers)
    r.held = guards.held_counts(memory)


def orphans(r: Round) -> None:
    """The composer's GPUs on Director machines that have no Node.

    Reads ``records``, ``plan.placements`` (GPUs planned this round are no orphans),
    ``memory.orphan_since``; adds ``orphan`` jobs to ``jobs`` and their Events.
    """
    planned = frozenset(d for pl in r.plan.placements for d in pl.devices)
    r.jobs.extend(orphan_jobs(r.snapshot, r.records, planned, r.policy, r.memory, r.events))


#: The phases of :func:`decide`, run in this order on one :class:`Round`.
PHASES: tuple[Callable[[Round], None], ...] = (
    reconcile,
    collect_requests,
    hold_batch,
    plan_requests,
    answer_refusals,
    place,
    reclaim,
    orphans,
)


def decide(snapshot: Snapshot, memory: Memory, policy: Policy) -> Decision:
    """Decide one round: :meth:`Round.start`, then each of :data:`PHASES` in order
    (:func:`reconcile`, :func:`collect_requests`, :func:`hold_batch`, :func:`plan_requests`,
    :func:`answer_refusals`, :func:`place`, :func:`reclaim`, :func:`orphans`). Updates ``memory``
    (idle timers, abandoned pods, reported refusals, held reclaims, orphan timers).

    Args:
        snapshot: what was observed.
        memory: the controller's memory (mutated).
        policy: settings.

    Returns:
        The :class:`Decision`.
    """
    r = Round.start(snapshot, memory, policy)
    for phase in PHASES:
        phase(r)
    return _decision(r)


def _decision(r: Round) -> Decision:
    """The :class:`Decision` of a round all :data:`PHASES` have run on, with the round's pod
    counts (pending: unschedulable or gated GPU pods of served namespaces; gated)."""
    snapshot, policy = r.snapshot, r.policy
    pending = sum(
        1
        for p in snapshot.pods
        if (p.unschedulable or p.gated) and p.wants_gpu and not p.deleting and _serves(policy, p)
    )
    n_gated = sum(1 for p in snapshot.pods if p.gated and not p.deleting and _serves(policy, p))
    return Decision(
        tuple(r.jobs),
        tuple(r.events),
        r.plan,
        pending,
        r.free_by_model,
        tuple(r.latencies),
        pod_actions=tuple(r.actions),
        wake_after=min(r.wake) if r.wake else None,
        gated=n_gated,
        reservations=sum(len(rec.intents) for rec in r.records.values()),
        expired=r.expired,
        taken=r.taken,
        lost=r.lost,
        adopted=r.adopted,
        held=r.held,
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
    ctx = RoundContext.of(snapshot, policy)
    out: list[PodAction] = []
    for node in snapshot.nodes:
        if node.name not in busy or node.name not in snapshot.fabric.machines:
            continue
        attached = snapshot.fabric.attached(node.name)
        rc = reconcile_record(node, ctx, attached=attached, in_flight=busy[node.name])
        out.extend(_release(ctx.pods_by_uid[uid], node.name, it) for uid, it in rc.release)
    return tuple(out)


#: The record of a node the composer never touched (or gave everything back).
_NOTHING = NodeRecord()


def _untouched(node: NodeView, record: NodeRecord, placed: bool, memory: Memory) -> bool:
    """A node the reclaim pass can skip (most nodes, most rounds): no composer record (nor idle
    timer), before and after reconciliation (``record``; an empty record reconciles to itself
    and flags nothing to restart or cancel, unless GPUs were adopted into it), nothing placed on
    it this round, no held reclaim and no reclaim taint. For such a node
    :func:`reclaim_step` and the guards give no step and its job is idle;
    ``tests/composer/test_decide_fast_paths.py`` checks that :func:`decide` decides the same
    with this skip (and the ``settled`` one) off."""
    return (
        node.record == _NOTHING
        and record == _NOTHING
        and not placed
        and node.name not in memory.held
        and not node.reclaim_tainted
    )


def _serves(policy: Policy, pod: PodView) -> bool:
    return not policy.namespaces or pod.namespace in policy.namespaces


#: Refusals of a gated pod that waiting does not change: it is ungated at once.
NEVER_HERE = frozenset({Reason.INVALID, Reason.UNKNOWN_HOST, Reason.TOO_MANY_GPUS, Reason.NO_SUCH_MODEL})


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
    "RoundContext",
    "Snapshot",
    "decide",
    "intents_for",
    "lease_event",
    "node_event",
    "pod_event",
    "reclaim_step",
    "reconcile_record",
]
