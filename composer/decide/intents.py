"""Intent reconciliation: one node's composer record brought in line with the Director and the
pods, one function per :class:`~composer.model.annotations.IntentPhase`. No I/O.

Each intent of the record, oldest first, is first checked for what ends it whatever its phase
(its pod bound, gone or finished; a gated pod's reservation past its ``until``), then handed to
its phase's function (:data:`PHASES`):

- ``Composing``: devices the Director shows attached are adopted (``Attached``; a restart
  mid-compose never composes twice); a compose still running or backing off waits; otherwise
  a partial attach becomes spare units and an edit left open is cancelled;
- ``Attached``: once the node advertises the units (``Advertised``; a gated pod is released);
  GPUs another pod got first drop the intent; too long unadvertised restarts the device plugin;
- ``Advertised``: waits for the scheduler; given up after ``schedule_timeout_seconds``.

Then the record adopts every GPU the Director shows attached to the node with the composer's
owner tag that neither the record nor an open intent names (the record was removed, emptied or
written by an older composer): the tag, written before every attach, is the ground truth of
whose a GPU is. A Normal ``AdoptedGpus`` Event on the Node names them; from then on they are
managed like any the composer composed (kept while a GPU pod uses the node, reclaimed when idle).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from composer.decide.round_types import Policy, Reconciled, RoundContext, node_event, pod_event
from composer.model.annotations import Intent, IntentPhase, NodeRecord
from composer.model.models import GPU_RESOURCE, EventSpec
from composer.model.nodestate import NodeUsage, NodeView
from composer.model.podspec import PodView
from domain.labels import MIG_CONFIG_STATE_LABEL, MIG_PENDING, MIG_SUCCESS


def _mig_settling(node: NodeView, policy: Policy, attached: Mapping[str, str], resource: str) -> bool:
    """The node is a MIG host (its sharing setting's strategy is ``mig``) whose GPUs are not all
    partitioned yet: mig-manager has not reported ``nvidia.com/mig.config.state=success`` (a run
    is ``pending``, ``failed`` or not reported), or it has but the node advertises fewer units of
    ``resource`` than its attached GPUs (device -> model) yield by the setting's offers (its
    last run was before a GPU was composed: mig-manager runs when it starts or the label changes,
    not on a hot-plug). Until then what the device plugin advertises may be a GPU not yet
    partitioned (with MIG mode off the ``single`` strategy advertises it whole, as one
    ``nvidia.com/gpu``): a pod released onto it would take the whole GPU, and mig-parted cannot
    repartition a GPU in use."""
    if not policy.is_mig_host(node.name):
        return False
    if node.labels.get(MIG_CONFIG_STATE_LABEL) != MIG_SUCCESS:
        return True
    hs = policy.sharing[node.name]
    expected = sum(o.units for m in attached.values() if (o := hs.offer(m, resource)) is not None)
    return node.gpu_allocatable.get(resource, 0) < expected


def _advertised_units(
    node: NodeView, usage: NodeUsage, resource: str, policy: Policy, attached: Mapping[str, str]
) -> int:
    """Advertised units of ``resource`` on ``node`` that bound pods do not use; none on a MIG host
    whose GPUs are not all partitioned (:func:`_mig_settling`)."""
    if _mig_settling(node, policy, attached, resource):
        return 0
    return node.gpu_allocatable.get(resource, 0) - usage.gpu.get(resource, 0)


def _taken_by_others(node: NodeView, attached: Mapping[str, str], it: Intent, policy: Policy) -> bool:
    """True when every GPU attached to the node is advertised, yet too few are free for the
    intent: pods bound meanwhile (the scheduler may bind a newly advertised GPU to another
    pending pod) took the GPUs composed for it. Waiting or restarting the device plugin cannot
    help; the intent must be planned again. Only on a host without a sharing setting, where one
    ``nvidia.com/gpu`` is one GPU: on a shared host that resource counts replicas or MIG devices,
    so comparing it with the attached GPUs says nothing (there an intent waits, and a gated pod's
    reservation expires)."""
    return (
        it.resource == GPU_RESOURCE
        and node.name not in policy.sharing
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


@dataclass
class _Node:
    """One node's reconciliation in progress: what is read, and what is gathered so far."""

    node: NodeView
    attached: Mapping[str, str]
    usage: NodeUsage
    now: float
    policy: Policy
    in_flight: frozenset[str]
    managed: set[str]
    intents: dict[str, Intent] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)
    given_up: list[tuple[str, str]] = field(default_factory=list)
    restart: bool = False
    cancel: bool = False
    latencies: list[float] = field(default_factory=list)
    budget: dict[str, int] = field(default_factory=dict)
    release: list[tuple[str, Intent]] = field(default_factory=list)
    expired: int = 0
    taken: int = 0

    def keep_devices(self, it: Intent) -> None:
        """The intent's attached devices stay managed (spare units, reclaimable when idle)."""
        self.managed |= {d for d in it.devices if d in self.attached}

    def units_left(self, resource: str) -> int:
        """Advertised units of ``resource`` not yet spoken for (by bound pods or older intents)."""
        if resource not in self.budget:
            self.budget[resource] = _advertised_units(
                self.node, self.usage, resource, self.policy, self.attached
            )
        return self.budget[resource]

    def taken_by_others(self, uid: str, it: Intent) -> bool:
        """Drop ``it`` (its devices kept, an Event) when another pod got its GPUs; True if so."""
        if self.units_left(it.resource) >= it.units or not _taken_by_others(
            self.node, self.attached, it, self.policy
        ):
            return False
        self.keep_devices(it)
        self.events.append(_taken_event(self.node, it, uid))
        self.taken += 1
        return True  # the pod is planned again next round


def _ended(st: _Node, uid: str, it: Intent, pod: PodView | None) -> bool:
    """Whatever the phase: True (intent dropped) when its pod is bound, gone or finished, or a
    gated pod's reservation passed its ``until``."""
    if pod is None or pod.terminal or pod.deleting or pod.node_name:
        st.keep_devices(it)  # served, or nothing left to serve
        return True
    if pod.gated and it.until and st.now >= it.until and uid not in st.in_flight:
        st.keep_devices(it)  # spare units now, reusable
        st.expired += 1
        st.events.append(
            pod_event(
                it.pod,
                uid,
                "Normal",
                "ReservationExpired",
                f"the GPUs reserved on {st.node.name} ({', '.join(it.devices) or 'spare units'}) were "
                f"not advertised in time ({it.phase}); planning the pod again",
            )
        )
        return True
    return False


def _composing(st: _Node, uid: str, it: Intent, pod: PodView) -> None:
    """``Composing``: adopt devices already attached; wait for a running or backing-off compose;
    otherwise keep a partial attach as spare units and cancel an edit left open."""
    got = {d for d in it.devices if d in st.attached}
    if it.devices and len(got) == len(it.devices):
        st.managed |= got
        st.intents[uid] = it.moved(IntentPhase.ATTACHED, st.now, retry_at=0.0)
        st.events.append(
            pod_event(
                it.pod,
                uid,
                "Normal",
                "Composed",
                f"found {', '.join(it.devices)} ({it.model}) already attached to {st.node.name} "
                "(a compose interrupted by a restart or a lost answer); not composing again",
            )
        )
    elif uid in st.in_flight or (it.retry_at and st.now < it.retry_at):
        st.intents[uid] = it
    else:
        st.managed |= got  # a partial attach becomes spare GPUs on the node, reused by the planner
        if not it.retry_at:
            st.cancel = True  # a composer died between fabric/edit and fabric/reprogram


def _attached(st: _Node, uid: str, it: Intent, pod: PodView) -> None:
    """``Attached``: ``Advertised`` once the node advertises the units (a gated pod is released);
    past the advertise timeout (doubling per restart) the device plugin is restarted."""
    if st.taken_by_others(uid, it):
        return
    left = st.units_left(it.resource)
    if left >= it.units:
        st.budget[it.resource] = left - it.units
        st.intents[uid] = it.moved(IntentPhase.ADVERTISED, st.now)
        if pod.gated:
            st.release.append((uid, st.intents[uid]))
        if pod.created > 0:
            st.latencies.append(max(0.0, st.now - pod.created))
        return
    mig, state = st.policy.is_mig_host(st.node.name), st.node.labels.get(MIG_CONFIG_STATE_LABEL)
    pending = mig and state == MIG_PENDING  # mig-parted at work: no restart ever interrupts a run
    if mig and not pending and it.plugin_restarts == 0 and st.policy.restart_device_plugin:
        # mig-manager partitions only when it starts or nvidia.com/mig.config changes: restart it now
        st.intents[uid] = replace(it, since=st.now, plugin_restarts=1)
        st.restart = True
        st.events.append(pod_event(it.pod, uid, "Normal", "MigReconfigure", (
            f"restarting the mig-manager and device-plugin pods of MIG host {st.node.name} so that "
            f"mig-parted partitions {', '.join(it.devices) or 'the GPUs'} composed for this pod")))
        return
    wait = st.policy.advertise_timeout_seconds * (2 ** min(it.plugin_restarts, 4))
    if st.now - it.since < wait:
        st.intents[uid] = it
        return
    st.intents[uid] = replace(it, since=st.now, plugin_restarts=it.plugin_restarts + 1)
    message = f"{st.node.name} does not advertise {it.resource} after {wait:.0f} s"
    if mig and state != MIG_SUCCESS:
        message += f" (MIG host: {MIG_CONFIG_STATE_LABEL} is {state or 'not set'}, not {MIG_SUCCESS})"
    elif _mig_settling(st.node, st.policy, st.attached, it.resource):
        message += " (MIG host: not every attached GPU is partitioned yet)"
    if st.policy.restart_device_plugin and not pending:
        st.restart = True
        message += "; restarting its NVIDIA device-plugin pod"
    st.events.append(pod_event(it.pod, uid, "Warning", "GpusNotAdvertised", message))


def _advertised(st: _Node, uid: str, it: Intent, pod: PodView) -> None:
    """``Advertised``: the scheduler should bind the pod soon (a gated pod: once released);
    given up after ``schedule_timeout_seconds``."""
    if st.taken_by_others(uid, it):
        return
    st.budget[it.resource] = st.units_left(it.resource) - it.units
    if pod.gated:
        st.release.append((uid, it))  # an earlier release did not go through: again
    if st.now - it.since >= st.policy.schedule_timeout_seconds:
        reason = (
            f"GPUs on {st.node.name} advertised for {st.policy.schedule_timeout_seconds:.0f} s but the pod "
            "is still not scheduled; giving up (its GPUs are reclaimed when idle)"
        )
        st.given_up.append((uid, reason))
        st.events.append(pod_event(it.pod, uid, "Warning", "ComposedButNotScheduled", reason))
    else:
        st.intents[uid] = it


#: The function that moves an intent of each phase on (it records the outcome in the state).
PHASES: Mapping[IntentPhase, Callable[[_Node, str, Intent, PodView], None]] = {
    IntentPhase.COMPOSING: _composing,
    IntentPhase.ATTACHED: _attached,
    IntentPhase.ADVERTISED: _advertised,
}


def settled(rec: NodeRecord, attached: Mapping[str, str], owned: frozenset[str] = frozenset()) -> bool:
    """Nothing to reconcile: no intent, every GPU of the record is still attached, and every
    attached GPU carrying the composer's owner tag (``owned``) is in the record (most nodes,
    most rounds); :func:`reconcile_record` returns such a record unchanged."""
    if rec.intents or not rec.devices <= attached.keys():
        return False
    rest = owned - rec.devices
    return not rest or rest <= _reclaiming(rec)


def _reclaiming(rec: NodeRecord) -> frozenset[str]:
    return frozenset(rec.reclaim.devices) if rec.reclaim else frozenset()


def reconcile_record(
    node: NodeView,
    ctx: RoundContext,
    *,
    attached: Mapping[str, str],
    in_flight: frozenset[str] = frozenset(),
    owned: frozenset[str] = frozenset(),
) -> Reconciled:
    """Bring one node's composer record in line with the Director and the pods.

    Args:
        node: the node (its ``record`` is the record as read).
        ctx: the round: every observed pod, the requests of pods bound to each node, the
            current time and the policy (timeouts, ``excluded`` devices).
        attached: device -> model of GPUs the Director shows attached to the node.
        in_flight: pod UIDs whose compose this process started and has not finished (their
            ``Composing`` intents are not crash leftovers).
        owned: names of the attached GPUs carrying the composer's owner tag; those neither the
            record nor an intent names (and not ``excluded``) are adopted into the record.

    Returns:
        The :class:`Reconciled` record and its consequences.
    """
    rec = node.record
    if settled(rec, attached, owned):
        return Reconciled(rec)
    reclaiming = set(_reclaiming(rec))
    lost = tuple(sorted(rec.devices - attached.keys() - reclaiming))
    managed = set(rec.devices & attached.keys())
    st = _Node(node, attached, ctx.usage_of(node.name), ctx.now, ctx.policy, in_flight, managed)
    if lost:
        st.events.extend(_lost_events(node, lost, ctx.pods_by_uid))
    for uid, it in sorted(rec.intents.items(), key=lambda kv: (kv[1].since, kv[0])):
        pod = ctx.pods_by_uid.get(uid)
        if not _ended(st, uid, it, pod):
            assert pod is not None  # _ended is True for a missing pod
            PHASES[it.phase](st, uid, it, pod)
    named = st.managed | reclaiming | {d for it in st.intents.values() for d in it.devices}
    adopted = tuple(sorted(owned - named - ctx.policy.excluded))
    if adopted:
        st.managed.update(adopted)
        st.events.append(_adopted_event(node, adopted, ctx.policy))
    return Reconciled(
        replace(rec, devices=frozenset(st.managed), intents=st.intents),
        st.restart,
        st.cancel,
        tuple(st.events),
        tuple(st.given_up),
        tuple(st.latencies),
        tuple(st.release),
        st.expired,
        st.taken,
        lost,
        adopted,
    )


def _adopted_event(node: NodeView, adopted: tuple[str, ...], policy: Policy) -> EventSpec:
    """The Normal Event naming the GPUs adopted into ``node``'s record."""
    return node_event(
        node.name,
        "Normal",
        "AdoptedGpus",
        f"{', '.join(adopted)} attached to {node.name} carry this composer's owner tag "
        f"{policy.owner_tag!r} on the LIQID Director but were not in the node's record: adopted "
        f"(kept while a GPU pod runs on the node, given back after {policy.idle_timeout_seconds:.0f} s idle)",
    )


def _lost_events(
    node: NodeView, lost: tuple[str, ...], pods_by_uid: Mapping[str, PodView]
) -> list[EventSpec]:
    """Warnings for managed GPUs taken off ``node`` behind the composer's back: on the node and
    on each non-terminal GPU pod bound to it (which of them used the GPU is not known here)."""
    names = ", ".join(lost)
    users = [p for p in pods_by_uid.values() if p.node_name == node.name and p.gpu and not p.terminal]
    what = (
        f"{names}, composed onto {node.name} by the composer, is no longer attached to it: the LIQID "
        "Director does not show it attached (detached out of band)"
    )
    out = [
        node_event(
            node.name,
            "Warning",
            "GpuDetachedOutOfBand",
            what + (f"; GPU pod(s) on the node: {', '.join(p.key for p in users)}" if users else ""),
        )
    ]
    out.extend(
        pod_event(
            p.key,
            p.uid,
            "Warning",
            "GpuDetachedOutOfBand",
            what + "; this pod may have lost a GPU it uses. The composer does not compose a "
            "replacement for a running pod: delete the pod to have it planned again",
        )
        for p in users
    )
    return out
