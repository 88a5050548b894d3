"""DRA mode's node jobs on plain data (composer.decide.dra_round): claims' compositions through
the device-plugin mode's compose path, the idle reclaim with its guards, what the slices publish
beyond the free pool."""

from __future__ import annotations

from composer.decide import reclaim_guard as guard
from composer.decide.dra_round import RECLAIMING, decide_dra
from composer.decide.round_types import Memory, Policy, ReclaimKind, Snapshot
from composer.model.annotations import NodeRecord, Reclaim, ReclaimPhase
from composer.model.fabric import FabricGpu, FabricView
from composer.model.models import Placement
from composer.model.nodestate import NodeView

NOW = 1_800_000_000.0
POLICY = Policy(idle_timeout_seconds=600)


def snap(*nodes: NodeView, gpus: tuple[FabricGpu, ...]) -> Snapshot:
    names = frozenset(n.name for n in nodes)
    return Snapshot(NOW, (), nodes, {}, FabricView(gpus, names, {n: "1" for n in names}))


def idle_node(name: str, *devices: str, since: float = NOW - 700, **kw) -> NodeView:
    return NodeView(name, record=NodeRecord(devices=frozenset(devices), idle_since=since), **kw)


def composed(name: str, node: str) -> FabricGpu:
    return FabricGpu(name, "Tesla-T4", "sw1", machine=node, owner_tag="gpu-composer")


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


def test_a_node_whose_gpu_a_claim_holds_is_not_reclaimed_and_one_whose_claim_is_gone_is():
    s = snap(idle_node("blade-1", "gpu0"), gpus=(composed("gpu0", "blade-1"),))
    held = decide_dra(s, Memory(), POLICY, composes={}, claimed={"blade-1": frozenset({"gpu0"})})
    assert all(j.reclaim is None for j in held.decision.jobs)
    assert held.idle == {} and held.reclaiming == {}
    gone = decide_dra(s, Memory(), POLICY, composes={}, claimed={})  # allocation cleared or claim deleted
    (job,) = gone.decision.jobs
    assert job.reclaim is not None
    assert (job.reclaim.kind, job.reclaim.devices) == (ReclaimKind.START, ("gpu0",))
    assert gone.reclaiming == {"gpu0": RECLAIMING}  # tainted in the slices before the job decomposes it
    assert gone.idle == {"gpu0": "blade-1"}


def test_an_idle_gpu_before_its_timeout_is_published_for_its_node():
    s = snap(idle_node("blade-1", "gpu0", "gpu1", since=NOW - 10),
             gpus=(composed("gpu0", "blade-1"), composed("gpu1", "blade-1")))
    out = decide_dra(s, Memory(), POLICY, composes={}, claimed={"blade-1": frozenset({"gpu1"})})
    assert out.idle == {"gpu0": "blade-1"}
    assert out.reclaiming == {}


def test_a_reclaim_under_way_keeps_its_gpus_tainted():
    rec = NodeRecord(devices=frozenset({"gpu0"}), reclaim=Reclaim(("gpu0",), ReclaimPhase.TAINTED, NOW - 1))
    s = snap(NodeView("blade-1", record=rec), gpus=(composed("gpu0", "blade-1"),))
    out = decide_dra(s, Memory(), POLICY, composes={}, claimed={})
    assert out.reclaiming == {"gpu0": RECLAIMING}
    (job,) = out.decision.jobs
    assert job.reclaim is not None and job.reclaim.kind is ReclaimKind.DECOMPOSE


def test_the_reclaim_guards_hold_as_in_device_plugin_mode():
    gpus = (composed("gpu0", "blade-1"), composed("gpu1", "blade-2"))
    s = snap(idle_node("blade-1", "gpu0"), idle_node("blade-2", "gpu1"), gpus=gpus)
    budget = Policy(idle_timeout_seconds=600, reclaim_budget=guard.parse_budget("1"))
    out = decide_dra(s, Memory(), budget, composes={}, claimed={})
    starts = [j.node for j in out.decision.jobs if j.reclaim and j.reclaim.kind is ReclaimKind.START]
    assert starts == ["blade-1"]
    assert [e.reason for e in out.decision.events] == ["ReclaimHeld"]
    assert out.idle == {"gpu0": "blade-1", "gpu1": "blade-2"}  # both still published for their node
    assert out.reclaiming == {"gpu0": RECLAIMING}  # held: not tainted
    opted = snap(idle_node("blade-1", "gpu0", do_not_reclaim=True), gpus=gpus[:1])
    out = decide_dra(opted, Memory(), POLICY, composes={}, claimed={})
    assert all(j.reclaim is None for j in out.decision.jobs)
    assert out.reclaiming == {}
