"""The reconcile loop: observe -> decide -> hand node jobs to workers, every round.

A round decides on the whole observed state (pods, nodes, labelled namespaces, the Director's
GPUs and machines), never on a delta, so the loop is level-triggered: whatever happened before
(a crash, a lost lease, an operator's change) the next round starts from what is there.

Where the cluster state comes from is a :class:`ClusterSource`: :class:`ListingSource` lists
everything each round (tests, the periodic-scan baseline); ``python -m composer`` uses the
watch-fed :class:`composer.shell.cache.ClusterCache`, which also wakes the loop on every relevant
change. The Director read is a :class:`composer.shell.fabric_cache.FabricCache`: read again on the
loop's thread after a node job that changed the fabric other than by a clean compose (a clean
compose is applied to the cached read, since the Director client verified it), and in the
background when older than ``fabric_max_age_seconds`` (0 = every round, on the loop's thread;
a real Director's background read runs in a worker process, :mod:`composer.shell.fabric_process`);
changes made behind the composer's back are seen within that age (plus one read), and a
compose planned on a GPU someone else took in the meantime fails cleanly and is retried.

Gate decisions (release a gated pod onto its reserved GPUs, or ungate it unchanged) are pod
patches applied on the loop thread right after the decision (:mod:`composer.shell.gates`), also for
pods whose GPUs are advertised on a node that has a job running for another pod
(:func:`composer.decide.decide.busy_releases`); a decision with a timer (a batch of gated pods
closing) makes the loop wake that much sooner.

Node jobs run on worker threads, one job per node at a time (:class:`composer.run.node_jobs.NodeJobs`,
shared with DRA mode); a node whose job is still running is left out of the next rounds'
decisions (its GPUs and pods are reserved) until it finishes, so a slow hot-plug never blocks
other nodes and no GPU is planned twice. A node whose job raised (a Kubernetes write failed) sits
out for the retry backoff (``retryBaseSeconds`` doubling), so an unreachable API server does not
turn into a loop of failing jobs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from composer.decide.decide import busy_releases, decide, intents_for
from composer.decide.gating import batch_wait, nominations
from composer.decide.pools import label_changes
from composer.decide.round_types import Decision, Memory, NodeJob, Policy, Snapshot
from composer.model import annotations as ann
from composer.model.annotations import Intent
from composer.model.fabric import FabricFactory
from composer.model.nodestate import NodeView, node_view
from composer.model.podspec import PodView, pod_view
from composer.run.node_jobs import NodeJobs, follow_fabric, remember, without_busy
from composer.run.skip import run_or_skip, unsynced
from composer.shell.act import Executor
from composer.shell.fabric_cache import FabricCache
from composer.shell.fabric_process import background_reader
from composer.shell.gates import GateExecutor
from composer.shell.kube import KubeApi, KubeError
from composer.shell.metrics import Metrics
from composer.shell.pod_steps import log_step
from composer.shell.timers import OrphanTimers, configmap_name

log = logging.getLogger(__name__)

#: Added to :meth:`Controller.settle_seconds` so that the round's clock reads past the batch
#: window, not on it (the loop's wait and the wall clock are different clocks), seconds.
SETTLE_MARGIN_SECONDS = 0.005

Observed = tuple[tuple[PodView, ...], tuple[NodeView, ...], dict[str, str]]


class ClusterSource(Protocol):
    """Where a round's pods, nodes and namespace pools come from."""

    @property
    def synced(self) -> bool:
        """Ready to be read (a cache: every kind listed once)."""
        ...

    def read(self) -> Observed:
        """(pods, managed nodes, namespace -> pool). Raises KubeError when unreadable."""
        ...

    def assume(self, node: Mapping[str, Any]) -> None:
        """A Node object the composer just wrote (the API server's answer)."""
        ...

    def assume_pod(self, pod: Mapping[str, Any]) -> None:
        """A Pod object the composer just patched (the API server's answer)."""
        ...

    def gated_seen(self) -> Mapping[str, float]:
        """Gated pod UID -> when the source first saw it (seconds since the epoch); empty when
        the source cannot tell without an API call."""
        ...


@dataclass
class ListingSource:
    """Lists pods, nodes and namespaces on every read (no cache to go stale)."""

    kube: KubeApi
    node_selector: str = ""
    synced: bool = True

    def read(self) -> Observed:
        """See :meth:`ClusterSource.read`."""
        pods = tuple(pod_view(p) for p in self.kube.list_pods())
        nodes = tuple(node_view(n) for n in self.kube.list_nodes(self.node_selector))
        return pods, nodes, self.kube.namespace_pools()

    def assume(self, node: Mapping[str, Any]) -> None:
        """Nothing to do: the next read lists afresh."""

    def assume_pod(self, pod: Mapping[str, Any]) -> None:
        """Nothing to do: the next read lists afresh."""

    def gated_seen(self) -> Mapping[str, float]:
        """Nothing without listing: empty (the round after a change is not held back)."""
        return {}


@dataclass
class Controller:
    """The composer's control loop.

    Attributes:
        kube: Kubernetes API (reads and writes).
        fabric_factory: builds Director clients (one for the loop, one per worker thread).
        policy: decision settings.
        metrics: where to count.
        executor: runs node jobs.
        node_selector: label selector of managed nodes ("" = all).
        workers: parallel node jobs.
        clock: seconds since the epoch.
        source: pods/nodes/pools; None = :class:`ListingSource` over ``kube``. Every Node write
            of the node jobs goes to its ``assume`` as it is made (the executor's
            ``on_node_written``, connected here unless set already).
        fabric_max_age_seconds: age at which the Director read is refreshed in the background
            (0 = read every round, on the loop's thread).
        on_job_done: called (on the worker thread) when a node job ends, and when a background
            Director read found a change, to wake the loop.
        nominate: set ``status.nominatedNodeName`` of gated pods to the node their GPUs are
            reserved on (see :func:`composer.decide.gating.nomination_enabled`; which pods and
            when: :func:`composer.decide.gating.nominations`).
        timers: where the orphan timers (``memory.orphan_since``) are loaded from on the first
            round and saved to after each round that changed them; None = the ConfigMap
            ``<lease name>-orphans`` next to the Lease (``policy.lease``), through ``kube``.
    """

    kube: KubeApi
    fabric_factory: FabricFactory
    policy: Policy
    metrics: Metrics
    executor: Executor
    node_selector: str = ""
    workers: int = 4
    clock: Callable[[], float] = time.time
    source: ClusterSource | None = None
    fabric_max_age_seconds: float = 0.0
    on_job_done: Callable[[], None] | None = None
    nominate: bool = False
    timers: OrphanTimers | None = None
    memory: Memory = field(default_factory=Memory)
    last_round_ok: float = 0.0
    _fabric: FabricCache | None = None
    jobs: NodeJobs = field(init=False, repr=False)
    _gate_executor: GateExecutor | None = None
    _nominated: dict[str, tuple[str, float]] = field(default_factory=dict)
    next_round_at: float | None = None

    def __post_init__(self) -> None:
        self.jobs = NodeJobs(
            self.workers, policy=self.policy, metrics=self.metrics, clock=self.clock, on_done=self.on_job_done
        )
        if self.timers is None:
            namespace, lease = self.policy.lease
            self.timers = OrphanTimers(self.kube, namespace, configmap_name(lease))
        if self.source is not None and self.executor.on_node_written is None:
            self.executor.on_node_written = self.source.assume

    # -- observe ---------------------------------------------------------------------------
    def observe(self) -> Snapshot:
        """Read pods, nodes, namespace pools and the fabric.

        Raises:
            KubeError: the API server could not be read.
            DirectorError: the Director could not be read.
        """
        now = self.clock()
        if self.source is None:
            self.source = ListingSource(self.kube, self.node_selector)
        pods, nodes, pools = self.source.read()
        fabric = self.fabric.view()
        return Snapshot(now, pods, nodes, pools, fabric)

    @property
    def fabric(self) -> FabricCache:
        """The Director read rounds plan on."""
        if self._fabric is None:
            self._fabric = FabricCache(
                self.fabric_factory,
                max_age_seconds=self.fabric_max_age_seconds,
                on_refresh=self._wake,
                clock=self.clock,
                reader=background_reader(self.fabric_factory),
            )
        return self._fabric

    def _wake(self) -> None:
        if self.on_job_done is not None:
            self.on_job_done()

    # -- round -----------------------------------------------------------------------------
    def _collect(self) -> None:
        for done in self.jobs.collect():
            follow_fabric(self.fabric, done.job, done.result, owner_tag=self.policy.owner_tag)
            if done.result is not None:
                remember(self.memory, done.result, now=self.clock(), policy=self.policy)

    def round(self) -> Decision | None:
        """One round; returns the decision, or None when observing failed (nothing was done)."""
        t0 = time.monotonic()
        self._collect()
        if unsynced(self.source, log):
            return None
        running = self.jobs.running()  # fixed before observing (see module doc)
        busy = self.jobs.busy()  # and the nodes sitting out a failed job's backoff
        snap = run_or_skip(self.observe, self.metrics, log)
        if snap is None:
            return None
        self._label_pools(snap)
        whole = snap
        composing = {n: frozenset(it.placement.uid for it in job.compose) for n, job in running.items()}
        early = busy_releases(snap, composing, self.policy) if composing else ()
        snap = without_busy(snap, busy)
        timers = self.timers
        assert timers is not None  # set in __post_init__
        timers.load_into(self.memory.orphan_since)
        decision = decide(snap, self.memory, self.policy)
        if decision.plan.placements:
            _log_planned(snap, decision, self.clock())
        timers.save(self.memory.orphan_since)
        for ev in decision.events:
            self.executor.emit(ev)
        # The node jobs go to their workers first: a compose does not wait for the pod patches.
        created = {p.uid: p.created for p in snap.pods}
        for job in decision.jobs:
            self.jobs.submit(job, partial(self.executor.run, job, created))
        gates = self._gates()
        nominated = {p.uid: p.nominated_node for p in snap.pods if p.nominated_node}
        for action in (*early, *decision.pod_actions):
            gates.apply(action, nominated=nominated.get(action.uid, ""))
        self.next_round_at = None if decision.wake_after is None else snap.now + decision.wake_after
        if self.nominate:
            self._nominate(whole, running, decision)
        for seconds in decision.advertised_after:
            self.metrics.pending_to_advertised.observe(seconds)
        self.metrics.pending_pods.set(decision.pending)
        self.metrics.gated_pods.set(decision.gated)
        self.metrics.reservations_active.set(decision.reservations)
        self.metrics.reservations_expired.inc(decision.expired)
        self.metrics.gpus_taken.inc(decision.taken)
        self.metrics.gpus_lost.inc(decision.lost)
        self.metrics.gpus_adopted.inc(decision.adopted)
        for reason, count in decision.held.items():
            self.metrics.reclaims_held.labels(reason).set(count)
        self.metrics.set_free(decision.free_by_model)
        self.metrics.rounds.inc()
        self.metrics.round_seconds.observe(time.monotonic() - t0)
        self.last_round_ok = self.clock()
        if decision.plan.placements or decision.plan.refusals:
            log.info(
                "round: %d placement(s), %d refusal(s), %d job(s)",
                len(decision.plan.placements),
                len(decision.plan.refusals),
                len(decision.jobs),
            )
        return decision

    def _label_pools(self, snap: Snapshot) -> None:
        """Write the configured pool (``Policy.pool_map``) as the label ``composer.liqid.io/pool`` on the
        managed Nodes whose label differs: once per Node (the cache then holds the answer); decisions
        do not wait for it (they apply the map themselves). A failed write is retried next round."""
        for node, pool in label_changes(snap.nodes, self.policy.pool_map.hosts).items():
            try:
                obj = self.kube.patch_node_labels(node, {ann.POOL_LABEL: pool})
            except KubeError as exc:
                log.warning("pool label %s=%s not written on %s: %s", ann.POOL_LABEL, pool, node, exc)
                continue
            if obj is not None and self.source is not None:
                self.source.assume(obj)

    def _gates(self) -> GateExecutor:
        if self._gate_executor is None:
            self._gate_executor = GateExecutor(
                self.kube, self.metrics, self.executor.emit, self.clock, nominate=self.nominate,
                assume=self.source.assume_pod if self.source is not None else None,
            )
        return self._gate_executor

    def _nominate(self, snap: Snapshot, running: Mapping[str, NodeJob], decision: Decision) -> None:
        """Nominate the gated pods :func:`composer.decide.gating.nominations` names: once per
        node, and again every :data:`NOMINATION_RESEND_SECONDS` while the watch does not show it
        (a failed or lost patch is sent again; a late watch costs one repeated patch).

        ``snap`` is the whole observation, busy nodes included; the intents of a node with a
        job (``running`` when observed, or the decision's) are the ones the job writes."""
        pods = {p.uid: p for p in snap.pods}
        for uid in [u for u in self._nominated if u not in pods or not pods[u].gated]:
            del self._nominated[uid]
        if not any(p.gated for p in snap.pods):
            return
        reserved: dict[str, Mapping[str, Intent]] = {
            n.name: n.record.intents for n in snap.nodes if n.record.intents
        }
        now = self.clock()
        for job in (*running.values(), *decision.jobs):
            reserved[job.node] = {**job.after.intents, **intents_for(job.compose, now)}
        for uid, node in nominations(reserved, pods).items():
            sent = self._nominated.get(uid)
            if sent is None or sent[0] != node or now - sent[1] >= NOMINATION_RESEND_SECONDS:
                self._nominated[uid] = (node, now)
                self._gates().nominate_reserved(pods[uid].key, node)

    def wait_seconds(self, resync_seconds: float) -> float:
        """How long the loop may sleep before the next round: ``resync_seconds``, or less when
        the last decision has a timer running (a batch closing, a wait ending). The timer counts
        from the round's observation, so the time the round itself took is not waited again."""
        if self.next_round_at is None:
            return resync_seconds
        return max(0.01, min(resync_seconds, self.next_round_at - self.clock()))

    def settle_seconds(self) -> float:
        """How long the loop waits after a wake before the round (seconds): what is left of the
        batch window (:func:`composer.decide.gating.batch_wait`, as the round computes it) of the
        gated pods no round has seen yet, so that the round after their arrival plans them instead
        of holding them and costing a second round; 0 when there is none (the loop's debounce
        applies)."""
        if self.source is None:
            return 0.0
        seen = self.memory.gated_seen
        pending = {uid: t for uid, t in self.source.gated_seen().items() if uid not in seen}
        left = batch_wait(pending, now=self.clock(), idle_seconds=self.policy.batch_idle_seconds,
                          max_seconds=self.policy.batch_max_seconds)
        return left + SETTLE_MARGIN_SECONDS if left > 0 else 0.0

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until no node job is running and collect their results (for tests and shutdown);
        True if idle."""
        if not self.jobs.wait_idle(timeout):
            return False
        self._collect()
        return True

    def close(self) -> None:
        """Wait for running jobs and release clients."""
        self.jobs.close()
        self._collect()
        if self._fabric is not None:
            self._fabric.close()
        if self._gate_executor is not None:
            self._gate_executor.close()
        self.executor.close()


def _log_planned(snap: Snapshot, decision: Decision, now: float) -> None:
    """One ``planned`` step line per pod placed by ``decision`` (:mod:`composer.shell.pod_steps`):
    the node, the pod's UID, how many GPUs are composed for it (0: spare units, no Director call),
    whether it is gated and when the pod informer first delivered it."""
    pods = {p.uid: p for p in snap.pods}
    for pl in decision.plan.placements:
        pod = pods.get(pl.uid)
        seen = {"seen": pod.seen_at} if pod is not None and pod.seen_at else {}
        log_step(
            "planned",
            pl.key,
            now,
            uid=pl.uid,
            node=pl.host,
            devices=len(pl.devices),
            gated=bool(pod and pod.gated),
            **seen,
        )


#: Seconds after which a nomination the watch does not show yet is sent again.
NOMINATION_RESEND_SECONDS = 10.0
