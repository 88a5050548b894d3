"""Two composers sharing one Director, each in its own cluster with its own owner tag, over the
in-memory fakes: one :class:`~tests.composer.fakes.FakeFabric` (the Director) and one
:class:`~tests.composer.fakes.FakeKube` per cluster.

Composer A (tag ``composer-a``) serves the cluster holding Node ``blade-slot-1``, composer B (tag
``composer-b``) the cluster holding ``blade-slot-2``. Each sees the other's host as a Director
machine with no Node, and the other's GPUs as tagged by someone else: it must never compose,
decompose, adopt, reclaim (as an orphan or as idle), untag or count them. The checks that make
it so are the owner-tag comparisons in :mod:`composer.decide.decide` (other tags are static),
:mod:`composer.decide.reclaim` (orphans are the composer's own tag only),
:mod:`composer.model.fabric` (``owned_on``, ``free``) and :mod:`composer.decide.capacity`.
"""

from __future__ import annotations

from composer.decide.capacity import PoolCapacity
from composer.decide.round_types import Policy
from composer.model import annotations as ann
from composer.model.fabric import FabricGpu, FabricView
from composer.model.nodestate import node_view
from composer.run.controller import Controller
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod
from tests.composer.test_controller import make, run

A, B = "composer-a", "composer-b"
HOST_A, HOST_B = "blade-slot-1", "blade-slot-2"
GRACE = 120.0


def _two_clusters() -> tuple[FakeWorld, FakeWorld]:
    """Two clusters (one Node each) sharing one Director with four free GPUs."""
    director = FakeFabric([FakeGpu(f"gpu{i}") for i in range(4)], [HOST_A, HOST_B])
    kube_a, kube_b = FakeKube(), FakeKube()
    kube_a.add_node(node(HOST_A))
    kube_b.add_node(node(HOST_B))
    return FakeWorld(kube_a, director), FakeWorld(kube_b, director)


def _pair(clock: Clock) -> tuple[FakeWorld, Controller, FakeWorld, Controller]:
    wa, wb = _two_clusters()
    ca = make(wa, clock, owner_tag=A, orphan_grace_seconds=GRACE, lease=("ns-a", "composer-a"))
    cb = make(wb, clock, owner_tag=B, orphan_grace_seconds=GRACE, lease=("ns-b", "composer-b"))
    return wa, ca, wb, cb


def _serve(w: FakeWorld, ctrl: Controller, name: str, host: str, gpus: int) -> None:
    """Pod ``name`` asks ``gpus`` GPUs on ``host``; composed, advertised and bound."""
    w.kube.add_pod(pod(name, gpus, host=host))
    run(ctrl)
    w.agent_step()
    run(ctrl)
    w.schedule()
    run(ctrl)
    assert w.kube.pods[f"ml/{name}"]["spec"]["nodeName"] == host


def _calls_on(w: FakeWorld, devices: set[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """Director calls (compose, decompose, tag, untag) that name any of ``devices``."""
    calls = [*w.fabric.calls, *w.fabric.tag_calls]
    return [c for c in calls if devices & set(c[2])]


def test_each_composes_only_for_its_cluster_and_tags_with_its_own_tag(clock):
    wa, ca, wb, cb = _pair(clock)
    _serve(wa, ca, "a", HOST_A, 2)
    run(cb)  # B's round sees A's GPUs on a machine that has no Node in B's cluster
    _serve(wb, cb, "b", HOST_B, 2)
    director = wa.fabric
    owners = {g.name: (g.machine, g.owner_tag) for g in director.gpu_list}
    assert owners == {"gpu0": (HOST_A, A), "gpu1": (HOST_A, A), "gpu2": (HOST_B, B), "gpu3": (HOST_B, B)}
    assert {c[1] for c in director.calls if c[0] == "compose"} == {HOST_A, HOST_B}
    assert wa.kube.record(HOST_A).devices == {"gpu0", "gpu1"}
    assert wb.kube.record(HOST_B).devices == {"gpu2", "gpu3"}


def test_neither_reclaims_the_others_gpus_as_orphans_nor_warns_about_them(clock):
    """Each sees the other's host with no Node: its own tag's GPUs there would be orphans after
    ``orphan_grace_seconds``; the other's tag's GPUs are not its business, however long."""
    wa, ca, wb, cb = _pair(clock)
    _serve(wa, ca, "a", HOST_A, 2)
    _serve(wb, cb, "b", HOST_B, 1)
    calls_before = len(wa.fabric.calls)
    for _ in range(5):
        clock.tick(GRACE)
        run(ca)
        run(cb)
    assert wa.fabric.attached() == {HOST_A: ["gpu0", "gpu1"], HOST_B: ["gpu2"]}
    assert [c for c in wa.fabric.calls[calls_before:] if c[0] == "decompose"] == []
    assert "OrphanedGpus" not in [e.reason for e in (*wa.kube.events, *wb.kube.events)]


def test_idle_reclaim_gives_back_only_the_composers_own_gpus(clock):
    wa, ca, wb, cb = _pair(clock)
    _serve(wa, ca, "a", HOST_A, 1)
    _serve(wb, cb, "b", HOST_B, 1)
    wa.finish("ml/a")
    for _ in range(3):
        clock.tick(61)
        run(ca)
        run(cb)
    assert wa.fabric.attached() == {HOST_B: ["gpu1"]}  # A's went back, B's pod keeps its GPU
    assert _calls_on(wa, {"gpu1"}) == [("compose", HOST_B, ("gpu1",)), ("tag", B, ("gpu1",))]


def test_a_gpu_tagged_by_the_other_composer_on_its_host_is_never_adopted_or_reclaimed(clock):
    """A GPU carrying B's tag attached to A's host (B composed it there, e.g. before the hosts were
    split): A's record does not name it, A neither adopts it nor gives it back, idle or not."""
    wa, ca, _, _ = _pair(clock)
    stranger = wa.fabric.by("gpu3")
    stranger.machine, stranger.owner_tag = HOST_A, B
    mine = wa.fabric.by("gpu0")
    mine.machine, mine.owner_tag = HOST_A, A  # composed by A, record lost
    run(ca)
    assert wa.kube.record(HOST_A).devices == {"gpu0"}
    adopted = [e.message for e in wa.kube.events if e.reason == "AdoptedGpus"]
    assert len(adopted) == 1 and "gpu3" not in adopted[0]
    for _ in range(4):
        clock.tick(100)
        run(ca)
    assert wa.fabric.attached() == {HOST_A: ["gpu3"]}
    assert _calls_on(wa, {"gpu3"}) == []
    assert stranger.owner_tag == B


def test_a_free_gpu_tagged_by_the_other_composer_is_neither_composed_nor_untagged(clock):
    """A free GPU still carrying B's tag (B is between detach and untag) is not A's to take or
    to clear, also when A's pod could use it."""
    wa, ca, _, _ = _pair(clock)
    for name in ("gpu0", "gpu1", "gpu2"):
        wa.fabric.by(name).owner_tag = B
    wa.kube.add_pod(pod("a", 1, host=HOST_A))
    for _ in range(3):
        clock.tick(GRACE)
        run(ca)
    assert wa.fabric.attached() == {HOST_A: ["gpu3"]}
    assert _calls_on(wa, {"gpu0", "gpu1", "gpu2"}) == []
    assert {wa.fabric.by(n).owner_tag for n in ("gpu0", "gpu1", "gpu2")} == {B}


def test_capacity_does_not_count_the_other_composers_free_gpus():
    """The verdict "the pool can never serve this" counts free GPUs without a tag or with the
    composer's own (left by a crash), never another composer's."""
    gpus = (
        FabricGpu("gpu0", "Tesla-T4"),
        FabricGpu("gpu1", "Tesla-T4", owner_tag=A),
        FabricGpu("gpu2", "Tesla-T4", owner_tag=B),
        FabricGpu("gpu3", "Tesla-T4", owner_tag=B),
    )
    fabric = FabricView(gpus, frozenset({HOST_A}), {HOST_A: "1"})
    nodes = [node_view(node(HOST_A, annotations={ann.DEVICES: ""}))]
    cap = PoolCapacity.of(fabric, nodes, Policy(owner_tag=A))
    assert cap.free == {(None, "Tesla-T4"): 2}
    attached = FabricView(
        (
            FabricGpu("gpu0", "Tesla-T4", machine=HOST_A, owner_tag=A),
            FabricGpu("gpu3", "Tesla-T4", machine=HOST_A, owner_tag=B),
        ),
        frozenset({HOST_A}),
        {HOST_A: "1"},
    )
    assert attached.owned_on(A, HOST_A) == {"gpu0"}  # adoption's candidates: A's tag only
    assert attached.tagged_other_than(A) == {"gpu3"}  # static for A: never decomposed
    assert fabric.free(excluded=frozenset(), device_pools={}) == fabric.free(
        excluded=frozenset({"gpu1", "gpu2", "gpu3"}), device_pools={}
    )
