"""DRA mode's node jobs on plain data (composer.decide.dra_round): claims' compositions through
the device-plugin mode's compose path, the idle reclaim per GPU with device-plugin mode's guards,
what the slices publish beyond the free pool.

:class:`Life` plays the node jobs' effects back into the next round's snapshot (a reclaim step
decomposes and records ``Decomposed``, ``FINISH``/``ABORT`` clear the record), as the executor
and the Director would, so a test reads as a sequence of rounds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from composer.decide import reclaim_guard as guard
from composer.decide.dra_round import RECLAIMING, DraDecision, decide_dra
from composer.decide.pools import PoolMap
from composer.decide.round_types import Memory, Policy, ReclaimKind, ReclaimStep, Snapshot
from composer.model import annotations as ann
from composer.model.annotations import NodeRecord, Reclaim, ReclaimPhase
from composer.model.fabric import FabricGpu, FabricView
from composer.model.models import Placement, Taint
from composer.model.nodestate import NodeView
from composer.model.podspec import pod_view
from tests.composer.fakes import pod

NOW = 1_800_000_000.0
TIMEOUT = 600.0
POLICY = Policy(idle_timeout_seconds=TIMEOUT)
OWNER = "gpu-composer"


def snap(*nodes: NodeView, gpus: tuple[FabricGpu, ...], now: float = NOW) -> Snapshot:
    names = frozenset(n.name for n in nodes)
    return Snapshot(now, (), nodes, {}, FabricView(gpus, names, {n: "1" for n in names}))


def managed(name: str, *devices: str, **kw) -> NodeView:
    return NodeView(name, record=NodeRecord(devices=frozenset(devices)), **kw)


def composed(name: str, node: str) -> FabricGpu:
    return FabricGpu(name, "Tesla-T4", "sw1", machine=node, owner_tag=OWNER)


def idle_for(node: str, seconds: float, *gpus: str) -> Memory:
    """A memory whose timers say ``gpus`` of ``node`` have been idle ``seconds`` at :data:`NOW`."""
    return Memory(idle_gpus={node: {g: NOW - seconds for g in gpus}})


def starts(out: DraDecision) -> dict[str, ReclaimStep]:
    return {
        j.node: j.reclaim for j in out.decision.jobs
        if j.reclaim is not None and j.reclaim.kind is ReclaimKind.START
    }


@dataclass
class Life:
    """Nodes, GPUs and the controller's memory across rounds; each round's jobs are played back."""

    nodes: dict[str, NodeView]
    gpus: dict[str, FabricGpu]
    now: float = NOW
    memory: Memory = field(default_factory=Memory)
    pods: tuple = ()

    @classmethod
    def of(cls, layout: Mapping[str, tuple[str, ...]], **kw) -> Life:
        """``layout``: node -> the composer GPUs attached to it."""
        nodes = {n: managed(n, *ds) for n, ds in layout.items()}
        gpus = {d: composed(d, n) for n, ds in layout.items() for d in ds}
        return cls(nodes, gpus, **kw)

    def round(self, claimed: Mapping[str, set[str]] | None = None, policy: Policy = POLICY,
              tick: float = 0.0) -> DraDecision:
        self.now += tick
        names = frozenset(self.nodes)
        view = FabricView(tuple(self.gpus.values()), names, {n: "1" for n in names})
        s = Snapshot(self.now, self.pods, tuple(self.nodes.values()), {}, view)
        held = {n: frozenset(ds) for n, ds in (claimed or {}).items()}
        out = decide_dra(s, self.memory, policy, composes={}, claimed=held)
        for job in out.decision.jobs:
            rec, step = job.after, job.reclaim
            if step is not None and step.kind in (ReclaimKind.START, ReclaimKind.DECOMPOSE):
                for d in step.devices:
                    self.gpus[d] = replace(self.gpus[d], machine=None, owner_tag=None)
                rec = replace(rec, devices=rec.devices - set(step.devices),
                              reclaim=Reclaim(step.devices, ReclaimPhase.DECOMPOSED, self.now))
            elif step is not None:
                rec = replace(rec, reclaim=None)
            if job.node in self.nodes:  # the autoscaler annotations ride on each write
                self.nodes[job.node] = replace(self.nodes[job.node], record=ann.with_hold(rec))
        return out

    def attached(self, node: str) -> set[str]:
        return {d for d, g in self.gpus.items() if g.machine == node}


def test_a_claims_placement_becomes_a_compose_item_of_the_nodes_job():
    pl = Placement("ml/c1", "uid-c1", "blade-1", "Tesla-T4", ("gpu0",), 0, ("sw1",))
    s = snap(NodeView("blade-1"), gpus=(FabricGpu("gpu0", "Tesla-T4", "sw1"),))
    out = decide_dra(s, Memory(), POLICY, composes={"blade-1": (pl,), "not-a-node": (pl,)},
                     claimed={"blade-1": frozenset({"gpu0"})})
    (job,) = out.decision.jobs
    (item,) = job.compose
    assert (job.node, item.placement, item.kind, item.retry) == ("blade-1", pl, "ResourceClaim", False)
    assert (item.request.key, item.request.uid, item.request.units) == ("ml/c1", "uid-c1", 1)
    assert job.reclaim is None


def test_a_gpu_a_claim_holds_is_not_reclaimed_and_one_whose_claim_is_gone_is_after_its_own_timeout():
    life = Life.of({"blade-1": ("gpu0",)})
    for _ in range(3):
        held = life.round({"blade-1": {"gpu0"}}, tick=TIMEOUT)
        assert starts(held) == {} and held.idle == {} and held.reclaiming == {}
    gone = life.round({}, tick=1)  # allocation cleared or claim deleted: its timer starts now
    assert starts(gone) == {} and gone.idle == {"gpu0": "blade-1"} and gone.reclaiming == {}
    assert life.nodes["blade-1"].record.idle_since == life.now  # shown on the node, for people
    assert starts(life.round({}, tick=TIMEOUT - 1)) == {}
    out = life.round({}, tick=1)
    assert starts(out) == {"blade-1": ReclaimStep(ReclaimKind.START, ("gpu0",), node_taint=False)}
    assert out.reclaiming == {"gpu0": RECLAIMING}  # tainted in the slices before the job decomposes it
    assert out.idle == {"gpu0": "blade-1"}
    assert life.attached("blade-1") == set()
    (job,) = life.round({}, tick=1).decision.jobs
    assert job.reclaim == ReclaimStep(ReclaimKind.FINISH, node_taint=False)  # nothing to lift on the node
    assert life.round({}, tick=1).decision.jobs == ()
    assert life.memory.idle_gpus == {}


def test_a_gpu_whose_claim_is_gone_is_reclaimed_alone_while_another_claim_holds_a_gpu_of_its_node():
    # fails with the node-level reclaim: a node holding any claimed GPU was busy
    both = (composed("gpu0", "blade-1"), composed("gpu1", "blade-1"))
    s = snap(managed("blade-1", "gpu0", "gpu1"), gpus=both)
    out = decide_dra(s, idle_for("blade-1", TIMEOUT, "gpu0"), POLICY, composes={},
                     claimed={"blade-1": frozenset({"gpu1"})})
    assert starts(out) == {"blade-1": ReclaimStep(ReclaimKind.START, ("gpu0",), node_taint=False)}
    assert out.reclaiming == {"gpu0": RECLAIMING}
    assert out.idle == {"gpu0": "blade-1"}  # gpu1, claimed, is offered to nobody


def test_a_gpu_claimed_again_before_its_timeout_keeps_it_and_starts_a_new_timer_after():
    # both idle from NOW; gpu1 claimed at +300 (its timer reset), gpu0 goes back alone at +600
    life = Life.of({"blade-1": ("gpu0", "gpu1")})
    life.round({})
    assert starts(life.round({"blade-1": {"gpu1"}}, tick=300)) == {}
    assert life.memory.idle_gpus == {"blade-1": {"gpu0": NOW}}
    out = life.round({"blade-1": {"gpu1"}}, tick=300)
    assert starts(out) == {"blade-1": ReclaimStep(ReclaimKind.START, ("gpu0",), node_taint=False)}
    assert life.attached("blade-1") == {"gpu1"}
    life.round({}, tick=100)  # FINISH of gpu0's reclaim; gpu1's claim gone: a timer from now
    released = life.now
    assert starts(life.round({}, tick=TIMEOUT - 1)) == {}
    out = life.round({}, tick=1)
    assert starts(out) == {"blade-1": ReclaimStep(ReclaimKind.START, ("gpu1",), node_taint=False)}
    assert life.now - released == TIMEOUT


def test_an_idle_gpu_before_its_timeout_is_published_for_its_node():
    both = (composed("gpu0", "blade-1"), composed("gpu1", "blade-1"))
    s = snap(managed("blade-1", "gpu0", "gpu1"), gpus=both)
    out = decide_dra(s, idle_for("blade-1", 10, "gpu0"), POLICY, composes={},
                     claimed={"blade-1": frozenset({"gpu1"})})
    assert out.idle == {"gpu0": "blade-1"}
    assert out.reclaiming == {}


def test_a_reclaim_under_way_keeps_its_gpus_tainted_and_aborts_when_a_claim_holds_one():
    under_way = Reclaim(("gpu0",), ReclaimPhase.TAINTED, NOW - 1)
    rec = NodeRecord(devices=frozenset({"gpu0", "gpu1"}), reclaim=under_way)
    s = snap(NodeView("blade-1", record=rec), gpus=(composed("gpu0", "blade-1"), composed("gpu1", "blade-1")))
    # a claim on gpu1 of the same node does not stop gpu0's decompose (it did with the node-level reclaim)
    out = decide_dra(s, Memory(), POLICY, composes={}, claimed={"blade-1": frozenset({"gpu1"})})
    assert out.reclaiming == {"gpu0": RECLAIMING}
    (job,) = out.decision.jobs
    assert job.reclaim == ReclaimStep(ReclaimKind.DECOMPOSE, ("gpu0",), node_taint=False)
    # a claim allocated to gpu0 itself (before its taint reached the scheduler) keeps it
    out = decide_dra(s, Memory(), POLICY, composes={}, claimed={"blade-1": frozenset({"gpu0"})})
    (job,) = out.decision.jobs
    assert job.reclaim == ReclaimStep(ReclaimKind.ABORT, node_taint=False)
    assert out.reclaiming == {}


def test_a_node_taint_left_by_device_plugin_mode_is_lifted():
    tainted = Taint(ann.RECLAIM_TAINT_KEY, ann.RECLAIM_TAINT_VALUE, ann.RECLAIM_TAINT_EFFECT)
    s = snap(managed("blade-1", "gpu0", taints=(tainted,)), gpus=(composed("gpu0", "blade-1"),))
    out = decide_dra(s, Memory(), POLICY, composes={}, claimed={"blade-1": frozenset({"gpu0"})})
    (job,) = out.decision.jobs
    assert job.reclaim == ReclaimStep(ReclaimKind.FINISH, node_taint=True)


def two_nodes_each_with_an_idle_and_a_claimed_gpu(**kw) -> tuple[Snapshot, Memory, dict[str, frozenset[str]]]:
    gpus = tuple(composed(f"gpu{i}", f"blade-{i // 2 + 1}") for i in range(4))
    s = snap(managed("blade-1", "gpu0", "gpu1", **kw), managed("blade-2", "gpu2", "gpu3"), gpus=gpus)
    memory = Memory(idle_gpus={"blade-1": {"gpu0": NOW - TIMEOUT}, "blade-2": {"gpu2": NOW - TIMEOUT}})
    return s, memory, {"blade-1": frozenset({"gpu1"}), "blade-2": frozenset({"gpu3"})}


def test_the_budget_holds_a_gpu_reclaim_as_a_node_reclaim_and_names_the_gpu_held():
    s, memory, claimed = two_nodes_each_with_an_idle_and_a_claimed_gpu()
    budget = Policy(idle_timeout_seconds=TIMEOUT, reclaim_budget=guard.parse_budget("1"))
    out = decide_dra(s, memory, budget, composes={}, claimed=claimed)
    assert list(starts(out)) == ["blade-1"]
    (held,) = out.decision.events
    assert (held.name, held.reason) == ("blade-2", "ReclaimHeld")
    assert held.message.startswith("idle GPUs gpu2 not reclaimed (budget)")  # not gpu3, claimed
    assert out.idle == {"gpu0": "blade-1", "gpu2": "blade-2"}  # both still published for their node
    assert out.reclaiming == {"gpu0": RECLAIMING}  # held: not tainted
    assert out.decision.held["budget"] == 1
    assert memory.idle_gpus["blade-2"] == {"gpu2": NOW - TIMEOUT}  # its timer goes on


def test_per_pool_budgets_and_tenant_pools_count_nodes_of_their_own_pool():
    s, memory, claimed = two_nodes_each_with_an_idle_and_a_claimed_gpu()
    pools = PoolMap(hosts={"blade-1": "team-a", "blade-2": "team-b"})
    apart = Policy(idle_timeout_seconds=TIMEOUT, pool_map=pools, reclaim_budget=guard.parse_budget("1"))
    out = decide_dra(s, memory, apart, composes={}, claimed=claimed)
    assert sorted(starts(out)) == ["blade-1", "blade-2"]
    s, memory, claimed = two_nodes_each_with_an_idle_and_a_claimed_gpu()
    one = PoolMap(hosts={"blade-1": "team-a", "blade-2": "team-a"})
    own = Policy(idle_timeout_seconds=TIMEOUT, pool_map=one,
                 reclaim_budgets={"team-a": guard.parse_budget("1")})
    assert sorted(starts(decide_dra(s, memory, own, composes={}, claimed=claimed))) == ["blade-1"]


def test_a_node_reclaiming_one_gpu_counts_against_the_budget_until_it_finishes():
    life = Life.of({"blade-1": ("gpu0", "gpu1"), "blade-2": ("gpu2",)})
    budget = Policy(idle_timeout_seconds=TIMEOUT, reclaim_budget=guard.parse_budget("1"),
                    advertise_timeout_seconds=10 * TIMEOUT)
    life.round({"blade-1": {"gpu1"}, "blade-2": {"gpu2"}}, policy=budget)
    assert list(starts(life.round({"blade-1": {"gpu1"}}, policy=budget, tick=TIMEOUT))) == ["blade-1"]
    # blade-1's reclaim stays Decomposed while the node still sees 2 GPUs: gpu2 waits for the budget
    life.nodes["blade-1"] = replace(life.nodes["blade-1"], labels={"nvidia.com/gpu.count": "2"})
    out = life.round({"blade-1": {"gpu1"}}, policy=budget, tick=TIMEOUT)
    assert starts(out) == {} and [e.reason for e in out.decision.events] == ["ReclaimHeld"]
    life.nodes["blade-1"] = replace(life.nodes["blade-1"], labels={"nvidia.com/gpu.count": "1"})
    out = life.round({"blade-1": {"gpu1"}}, policy=budget, tick=1)
    assert [j.reclaim.kind for j in out.decision.jobs if j.reclaim] == [ReclaimKind.FINISH]
    assert list(starts(life.round({"blade-1": {"gpu1"}}, policy=budget, tick=1))) == ["blade-2"]


def test_do_not_reclaim_on_the_node_or_a_pod_on_it_and_windows_hold_its_idle_gpus():
    s, memory, claimed = two_nodes_each_with_an_idle_and_a_claimed_gpu(do_not_reclaim=True)
    out = decide_dra(s, memory, POLICY, composes={}, claimed=claimed)
    assert list(starts(out)) == ["blade-2"]
    assert [(e.name, e.reason) for e in out.decision.events] == [("blade-1", "ReclaimHeld")]
    s, memory, claimed = two_nodes_each_with_an_idle_and_a_claimed_gpu()
    p = pod("keep", node_name="blade-1", phase="Running")
    p["metadata"]["annotations"] = {ann.DO_NOT_RECLAIM: "true"}
    out = decide_dra(replace(s, pods=(pod_view(p),)), memory, POLICY, composes={}, claimed=claimed)
    assert list(starts(out)) == ["blade-2"]
    s, memory, claimed = two_nodes_each_with_an_idle_and_a_claimed_gpu()
    hour = int(NOW // 3600 % 24)
    window = guard.parse_window(f"{(hour + 2) % 24:02d}:00-{(hour + 3) % 24:02d}:00")
    out = decide_dra(s, memory, replace(POLICY, reclaim_windows=(window,)), composes={}, claimed=claimed)
    assert starts(out) == {}
    assert out.decision.held["window"] == 2


def test_do_not_reclaim_set_on_a_reclaim_under_way_aborts_it_without_touching_the_node_taint():
    rec = NodeRecord(devices=frozenset({"gpu0"}), reclaim=Reclaim(("gpu0",), ReclaimPhase.TAINTED, NOW - 1))
    s = snap(NodeView("blade-1", record=rec, do_not_reclaim=True), gpus=(composed("gpu0", "blade-1"),))
    out = decide_dra(s, Memory(), POLICY, composes={}, claimed={})
    (job,) = out.decision.jobs
    assert job.reclaim == ReclaimStep(ReclaimKind.ABORT, node_taint=False)
    assert out.reclaiming == {}


# -- properties ------------------------------------------------------------------------------

LAYOUT = {"blade-1": ("gpu0", "gpu1", "gpu2"), "blade-2": ("gpu3", "gpu4")}
HOME = {d: n for n, ds in LAYOUT.items() for d in ds}
STEP = st.tuples(
    st.sets(st.sampled_from(sorted(HOME))),  # GPUs whose claim is allocated this round
    st.sampled_from([0.0, 1.0, 100.0, 299.0, 301.0, 599.0, 600.0]),  # seconds since the last round
)


@settings(max_examples=150, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=25), st.sampled_from([None, "1"]))
def test_a_gpu_goes_back_only_after_the_timeout_unclaimed_and_tainted_before_its_decompose(steps, budget):
    """Over any sequence of claims allocated and released and time passing: a reclaim step never
    gives back a GPU a claim holds, each GPU it starts to give back has been attached and
    unclaimed for the whole idle timeout (its timer reset by every claim), is published for its
    node with the Reclaiming taint in the same round (before its decompose runs), and at most
    ``budget`` nodes have a reclaim open at once."""
    policy = Policy(idle_timeout_seconds=TIMEOUT,
                    reclaim_budget=guard.parse_budget(budget) if budget else None)
    life = Life.of(LAYOUT)
    unclaimed_since: dict[str, float] = {d: NOW for d in HOME}
    for wanted, tick in steps:
        life.now += tick
        held = {d for d in wanted if life.gpus[d].machine == HOME[d]}  # a claim on an attached GPU
        for d in HOME:
            if d in held or life.gpus[d].machine is None:
                unclaimed_since.pop(d, None)
            else:
                unclaimed_since.setdefault(d, life.now)
        claimed: dict[str, set[str]] = {}
        for d in held:
            claimed.setdefault(HOME[d], set()).add(d)
        out = life.round(claimed, policy=policy)
        for job in out.decision.jobs:
            step = job.reclaim
            if step is None or step.kind not in (ReclaimKind.START, ReclaimKind.DECOMPOSE):
                continue
            assert not step.node_taint
            for d in step.devices:
                assert d not in held
                assert out.reclaiming.get(d) == RECLAIMING and out.idle.get(d) == job.node
                if step.kind is ReclaimKind.START:
                    assert life.now - unclaimed_since[d] >= TIMEOUT
        if budget is not None:
            assert sum(n.record.reclaim is not None for n in life.nodes.values()) <= int(budget)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.sampled_from(sorted(HOME))), min_size=1, max_size=8))
def test_every_gpu_no_claim_holds_goes_back_within_the_timeout_and_a_few_rounds(claims_over_time):
    """Once every claim is gone, each composer GPU is given back within the idle timeout plus
    the rounds its node's earlier reclaims take (one reclaim per node at a time)."""
    life = Life.of(LAYOUT)
    for wanted in claims_over_time:
        claimed: dict[str, set[str]] = {}
        for d in wanted:
            if life.gpus[d].machine == HOME[d]:
                claimed.setdefault(HOME[d], set()).add(d)
        life.round(claimed, tick=200.0)
    for _ in range(3 * max(len(ds) for ds in LAYOUT.values())):
        life.round({}, tick=TIMEOUT)
    assert all(g.machine is None for g in life.gpus.values())
    assert all(n.record == NodeRecord() for n in life.nodes.values())
