"""The types of one reconcile round: what :func:`composer.decide.decide.decide` reads and returns. No I/O.

- :class:`Policy`: the decision-relevant settings (built by :mod:`composer.shell.config`);
- :class:`Snapshot`: what one round observed; :class:`Memory`: what the controller keeps
  between rounds;
- :class:`Decision`: the round's output, made of :class:`NodeJob` (per-node work:
  record updates, :class:`ComposeItem` compositions, a :class:`ReclaimStep`, orphans) and
  Events (:func:`pod_event`, :func:`node_event`, :func:`lease_event`);
- :class:`RoundContext`: the round-wide inputs every node's reconciliation reads;
- :class:`Reconciled`: one node's record after intent reconciliation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from composer.decide import reclaim_guard as guard
from composer.decide.gating import PodAction
from composer.decide.pools import PoolMap, node_with_pool
from composer.model import annotations as ann
from composer.model.annotations import Intent, NodeRecord
from composer.model.fabric import FabricView
from composer.model.models import GPU_RESOURCE, EventSpec, GpuRequest, HostSharing, Placement, Plan
from composer.model.nodestate import NodeUsage, NodeView, usage_by_node
from composer.model.podspec import PodView
from domain.gpu_sharing import MIG


@dataclass(frozen=True)
class Policy:
    """Decision-relevant settings (see :class:`composer.shell.config.Settings` for meanings)."""

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
    batch_idle_seconds: float = 0.05
    batch_max_seconds: float = 1.0
    reservation_timeout_seconds: float = 300.0
    unserved_wait_seconds: float = 60.0
    pool_map: PoolMap = field(default_factory=PoolMap)
    reclaim_budget: guard.Budget | None = None
    reclaim_budgets: Mapping[str, guard.Budget] = field(default_factory=dict)
    reclaim_windows: tuple[guard.Window, ...] = ()
    owner_tag: str = "gpu-composer"
    orphan_grace_seconds: float = 600.0
    lease: tuple[str, str] = ("gpu-composer", "gpu-composer")
    #: host (Node name) -> how it shares its GPUs (``composer.sharing``); hosts missing serve whole GPUs
    sharing: Mapping[str, HostSharing] = field(default_factory=dict)
    #: resources only sharing settings offer (hosts without one never advertise them), and the most
    #: units one GPU yields of each resource any sharing setting offers: derived from ``sharing``
    sharing_only: frozenset[str] = field(init=False, repr=False, compare=False)
    most_units: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        most: dict[str, int] = {}
        for hs in self.sharing.values():
            for offers in hs.offers.values():
                for o in offers:
                    most[o.resource] = max(most.get(o.resource, 0), o.units)
        plain = {GPU_RESOURCE, *self.units_per_gpu}
        object.__setattr__(self, "sharing_only", frozenset(r for r in most if r not in plain))
        object.__setattr__(self, "most_units", most)

    def is_mig_host(self, node: str) -> bool:
        """``node`` partitions its GPUs into MIG devices (its sharing setting's strategy is ``mig``)."""
        hs = self.sharing.get(node)
        return hs is not None and hs.strategy == MIG

    def budget_of(self, pool: str) -> guard.Budget | None:
        """The reclaim budget of ``pool`` (its own, else the default; None = no limit)."""
        return self.reclaim_budgets.get(pool, self.reclaim_budget)

    def backoff_seconds(self, attempt: int) -> float:
        """Pause before retry number ``attempt`` (1-based): base * 2^(attempt-1), capped."""
        return float(min(self.retry_max_seconds, self.retry_base_seconds * (2 ** max(0, attempt - 1))))


@dataclass(frozen=True)
class Snapshot:
    """What one round observed.

    Attributes:
        now: observation time (seconds since the epoch).
        pods: every non-terminal pod in the watched namespaces, plus those bound to nodes.
        nodes: nodes matching the composer's node selector.
        namespace_pools: namespace -> pool, from the namespace label ``composer.liqid.io/pool``.
        fabric: the Director's truth.
        hidden: nodes left out of this round (a job of theirs runs): they still exist (no
            orphans there) and count in their pool's size.
        hidden_reclaiming: names of hidden nodes whose running job is a reclaim (they count
            against their pool's reclaim budget).
    """

    now: float
    pods: tuple[PodView, ...]
    nodes: tuple[NodeView, ...]
    namespace_pools: Mapping[str, str]
    fabric: FabricView
    hidden: tuple[NodeView, ...] = ()
    hidden_reclaiming: frozenset[str] = frozenset()

    def with_pools(self, pools: PoolMap) -> Snapshot:
        """This snapshot with the configured membership applied to its nodes (the hidden ones too)
        and its namespace pools; the configured map wins over the labels."""
        if not pools.hosts and not pools.namespaces:
            return self
        return replace(
            self,
            nodes=tuple(node_with_pool(n, pools.hosts) for n in self.nodes),
            hidden=tuple(node_with_pool(n, pools.hosts) for n in self.hidden),
            namespace_pools={**self.namespace_pools, **pools.namespaces},
        )


#: The requests on a node no pod is bound to or nominated onto.
NO_USAGE = NodeUsage()


@dataclass(frozen=True, slots=True)
class RoundContext:
    """What reconciling any node of one round reads from the round as a whole (built once per
    round, shared by every node).

    Attributes:
        pods_by_uid: pod UID -> every observed pod.
        usage: node name -> requests of the pods bound to (or nominated onto) it; a node with
            no such pod is missing.
        now: observation time (seconds since the epoch).
        policy: settings.
    """

    pods_by_uid: Mapping[str, PodView]
    usage: Mapping[str, NodeUsage]
    now: float
    policy: Policy

    @classmethod
    def of(cls, snapshot: Snapshot, policy: Policy) -> RoundContext:
        """The context of ``snapshot``'s round under ``policy``: its pods by UID and per node."""
        return cls({p.uid: p for p in snapshot.pods}, usage_by_node(snapshot.pods), snapshot.now, policy)

    def usage_of(self, node: str) -> NodeUsage:
        """Requests of the pods bound to (or nominated onto) ``node`` (:data:`NO_USAGE` if none)."""
        return self.usage.get(node, NO_USAGE)


@dataclass
class Memory:
    """What the controller remembers between rounds.

    Kept in memory only, and lost on restart, which is always safe (backoffs end sooner, given-up
    pods get one more try, a refusal or a hold is reported once more: the same Event object's
    count, see :class:`~composer.model.models.EventSpec`), except ``orphan_since``: the controller
    loads it when it starts leading and saves every change (:mod:`composer.shell.timers`), so the
    orphan grace counts from the first time any replica saw the orphan. The idle timer is on
    the Node itself (annotation ``composer.liqid.io/idle-since``,
    :func:`composer.decide.reclaim.reclaim_step`); DRA mode's per-GPU idle timers are here
    (``idle_gpus``, :func:`composer.decide.reclaim.gpu_reclaim_step`), so a new leader starts
    them again (a GPU goes back later, never sooner).

    Attributes:
        attempts: pod UID -> failed compose attempts so far.
        abandoned: pod UID -> why the composer gave up on it (not planned again).
        reported: pod UID -> last refusal reason sent as an Event.
        reclaim_retry_at: node -> earliest time to try a failed reclaim again.
        reclaim_failures: node -> failed reclaim attempts in a row.
        gated_seen: pod UID -> when a gated pod was first seen (batching; ``Gated`` Event once).
        held: node -> the reclaim guard last reported holding it (``ReclaimHeld`` once per reason).
        orphan_since: device -> when it was first seen attached to a machine with no Node.
        idle_gpus: DRA mode: node -> composer GPU attached there that no allocated claim holds
            -> when it was first seen so (seconds since the epoch); rewritten by each round's
            reclaim pass (:func:`composer.decide.decide.reclaim`), which keeps only the nodes it
            visits and those left out of the round.
    """

    attempts: dict[str, int] = field(default_factory=dict)
    abandoned: dict[str, str] = field(default_factory=dict)
    reported: dict[str, str] = field(default_factory=dict)
    reclaim_retry_at: dict[str, float] = field(default_factory=dict)
    reclaim_failures: dict[str, int] = field(default_factory=dict)
    gated_seen: dict[str, float] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)
    orphan_since: dict[str, float] = field(default_factory=dict)
    idle_gpus: dict[str, dict[str, float]] = field(default_factory=dict)

    def forget_missing(self, live_uids: set[str], live_nodes: set[str], now: float = 0.0) -> None:
        """Drop entries of pods and nodes that no longer exist (bounded memory); gated pods
        unseen for an hour before ``now`` (a pod is hidden while its node's job runs)."""
        for d in (self.attempts, self.abandoned, self.reported):
            for uid in [u for u in d if u not in live_uids]:
                del d[uid]
        for uid in [u for u, t in self.gated_seen.items() if u not in live_uids and t < now - 3600]:
            del self.gated_seen[uid]  # kept a while: a pod hidden during its node's job is not new
        for d2 in (self.reclaim_retry_at, self.reclaim_failures, self.held):
            for n in [n for n in d2 if n not in live_nodes]:
                del d2[n]


def pod_event(
    key: str, uid: str, type_: str, reason: str, message: str, *, series: bool = False
) -> EventSpec:
    """An Event about the pod ``namespace/name`` (``series``: see :class:`EventSpec`)."""
    ns, _, name = key.partition("/")
    return EventSpec("Pod", ns, name, uid, type_, reason, message, series)


def node_event(node: str, type_: str, reason: str, message: str) -> EventSpec:
    """An Event about a node."""
    return EventSpec("Node", "default", node, node, type_, reason, message)


def lease_event(policy: Policy, type_: str, reason: str, message: str) -> EventSpec:
    """An Event about the composer itself, on its leader-election Lease (``policy.lease``)."""
    ns, name = policy.lease
    return EventSpec("Lease", ns, name, "", type_, reason, message)


#: Job key of the free pool's tag clean-up (contains "/": never a Node name).
FREE_POOL = ann.PREFIX + "free-pool"


class ReclaimKind(StrEnum):
    """What one reclaim step does (values are the strings logged and compared). The node's
    taint is set and lifted only by a step with :attr:`ReclaimStep.node_taint`."""

    #: annotate the node, taint it, re-check it has no GPU pod, decompose.
    START = "start"
    #: decompose (the taint is already set).
    DECOMPOSE = "decompose"
    #: lift the taint, clear the reclaim record.
    FINISH = "finish"
    #: a GPU pod appeared or the node is protected: lift the taint, keep the GPUs.
    ABORT = "abort"


@dataclass(frozen=True, slots=True)
class ReclaimStep:
    """One step of an idle reclaim: its kind and the devices to decompose (``START`` and
    ``DECOMPOSE`` only).

    ``node_taint``: the step works on the whole node, as in device-plugin mode: ``START`` taints
    the node and aborts if a GPU pod is bound to it after the taint, ``FINISH``, ``ABORT`` and a
    failed decompose lift the taint. False: it gives back ``devices`` only, the node untainted
    and its GPU pods left alone (DRA mode: other claims' pods go on running on the node; the
    devices' own ``NoSchedule`` taint is in the driver's ResourceSlices, written before the job
    runs, :mod:`composer.decide.dra_round`).
    """

    kind: ReclaimKind
    devices: tuple[str, ...] = ()
    node_taint: bool = True


@dataclass(frozen=True, slots=True)
class ComposeItem:
    """A placement with the request it serves, its earlier failed attempts, and for a gated
    pod the end of its reservation (seconds since the epoch; 0 = none).

    ``kind``: the kind of the object the placement serves, named by its ``key``/``uid`` in
    Events (``Pod``; ``ResourceClaim`` in DRA mode). ``retry``: a failed compose is retried with
    backoff up to ``compose_max_attempts``; False: the first failure gives up (DRA mode: the
    claim gets the failure condition and the scheduler picks again).
    """

    placement: Placement
    request: GpuRequest
    attempts: int = 0
    reserve_until: float = 0.0
    kind: str = "Pod"
    retry: bool = True


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
        orphans: for a Director machine with no Node (``node`` is the machine's name): the
            composer-tagged GPUs to decompose back to the free pool.
        untag: for the free pool (``node`` is :data:`FREE_POOL`): free GPUs whose composer owner
            tag is to be cleared.
    """

    node: str
    before: NodeRecord
    after: NodeRecord
    restart_plugin: bool = False
    cancel_edit: bool = False
    compose: tuple[ComposeItem, ...] = ()
    reclaim: ReclaimStep | None = None
    orphans: tuple[str, ...] = ()
    untag: tuple[str, ...] = ()

    @property
    def idle(self) -> bool:
        """Nothing to do."""
        return (
            self.before == self.after
            and not self.restart_plugin
            and not self.cancel_edit
            and not self.compose
            and self.reclaim is None
            and not self.orphans
            and not self.untag
        )


@dataclass(frozen=True)
class Decision:
    """The round's output: node jobs (non-idle only), Events, the plan, and for metrics the
    pending GPU pods, the free pool by (model, pool) and pod-creation-to-advertised latencies.

    Gating: ``pod_actions`` (releases and ungates to patch), ``wake_after`` (seconds until a
    batch closes or a wait ends; None = nothing timed), ``gated`` (pods held by the gate),
    ``reservations`` (intents open), ``expired`` (reservations that expired this round),
    ``taken`` (intents whose GPUs another pod got this round). ``lost`` / ``adopted``: managed
    GPUs detached out of band / composer-tagged GPUs taken into a record, this round."""

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
    lost: int = 0
    adopted: int = 0
    held: Mapping[str, int] = field(default_factory=dict)


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
        lost: managed devices the Director no longer shows attached (not by a reclaim).
        adopted: GPUs carrying the composer's owner tag taken into the record (it named none
            of them).
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
    lost: tuple[str, ...] = ()
    adopted: tuple[str, ...] = ()
