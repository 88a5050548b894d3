"""Adoption from the owner tag, over the in-memory fakes: a GPU the Director shows attached to a
Node with the composer's owner tag is in that Node's record after one round, whatever happened
to the record; GPUs with another owner tag (the Pulumi program's) or none stay static.

Rules (``docs/composer-reclaim.md``, "Adoption"): the adopted GPUs are named once in a Normal
``AdoptedGpus`` Event on the Node; a pod running on the node keeps them; an idle node gives them
back after ``idle_timeout_seconds``; the host takes new compositions afterwards.
"""

from __future__ import annotations

import pytest

from composer.decide.decide import Memory, Policy, Snapshot, decide
from composer.decide.intents import settled
from composer.model import annotations as ann
from composer.model.fabric import FabricGpu, FabricView
from composer.model.nodestate import node_view
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod
from tests.composer.test_controller import make, run

TAG = "gpu-composer"
PULUMI = "pulumi:estate"
HOST = "blade-slot-2"


def _world() -> FakeWorld:
    kube = FakeKube()
    kube.add_node(node("blade-slot-1"))
    kube.add_node(node(HOST))
    return FakeWorld(kube, FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["blade-slot-1", HOST]))


def _composed_and_running(w: FakeWorld, ctrl, name: str = "a") -> None:
    """Pod ``name`` asks 1 GPU on HOST; composed, advertised and bound (Running)."""
    w.kube.add_pod(pod(name, 1, host=HOST))
    run(ctrl)
    w.agent_step()
    run(ctrl)
    w.schedule()
    run(ctrl)
    assert w.kube.pods[f"ml/{name}"]["spec"]["nodeName"] == HOST


def _remove_record(w: FakeWorld, how: str) -> None:
    """The composer's record on HOST removed, emptied, or as an older composer left it (unreadable)."""
    a = w.kube.nodes[HOST]["metadata"]["annotations"]
    if how == "removed":
        for k in (ann.DEVICES, ann.INTENTS, ann.RECLAIM, *ann.hold_changes(False)):
            a.pop(k, None)
    elif how == "empty":
        a[ann.DEVICES] = ""
    else:  # another shape: not a device list this composer reads as its own
        a[ann.DEVICES] = ","


def _adopted_events(w: FakeWorld) -> list[str]:
    return [e.message for e in w.kube.events if e.name == HOST and e.reason == "AdoptedGpus"]


@pytest.mark.parametrize("how", ["removed", "empty", "older-composer"])
def test_adopt_a_running_pods_gpu_after_its_record_is_lost_and_reclaim_it_after_the_pod(clock, how):
    w = _world()
    ctrl = make(w, clock)
    _composed_and_running(w, ctrl)
    assert w.fabric.attached() == {HOST: ["gpu0"]} and w.fabric.by("gpu0").owner_tag == TAG
    _remove_record(w, how)
    run(ctrl)
    assert w.kube.record(HOST).devices == {"gpu0"}  # back in the record after one round
    assert w.kube.nodes[HOST]["metadata"]["annotations"][ann.AUTOSCALER_HOLD] == "true"
    events = [e for e in w.kube.events if e.reason == "AdoptedGpus"]
    assert [(e.kind, e.name, e.type) for e in events] == [("Node", HOST, "Normal")]
    assert "gpu0" in events[0].message and TAG in events[0].message
    assert ctrl.metrics.gpus_adopted._value.get() == 1
    for _ in range(3):  # the pod runs: it keeps its GPU, and the GPUs are named once
        clock.tick(600)
        run(ctrl)
    assert w.fabric.attached() == {HOST: ["gpu0"]}
    assert len(_adopted_events(w)) == 1
    w.finish("ml/a")
    run(ctrl)
    clock.tick(59)
    run(ctrl)
    assert w.fabric.attached() == {HOST: ["gpu0"]}  # idle, not for idle_timeout_seconds yet
    clock.tick(1)
    run(ctrl)
    assert w.fabric.attached() == {}
    assert ("decompose", HOST, ("gpu0",)) in w.fabric.calls
    assert "Reclaimed" in w.kube.reasons(HOST)


def test_adopt_on_an_idle_node_gives_the_gpu_back_after_the_idle_timeout(clock):
    w = _world()
    ctrl = make(w, clock)
    _composed_and_running(w, ctrl)
    w.finish("ml/a")
    run(ctrl)
    _remove_record(w, "removed")
    removed_at = clock()
    run(ctrl)
    assert w.kube.record(HOST).devices == {"gpu0"}
    while w.fabric.attached() and clock() - removed_at < 600:
        clock.tick(1)
        run(ctrl)
    assert w.fabric.attached() == {}
    assert clock() - removed_at <= 60 + 2  # the idle timeout plus two rounds (one a second here)
    assert w.fabric.by("gpu0").owner_tag is None  # given back untagged
    assert len(_adopted_events(w)) == 1


def test_adopt_never_touches_a_pulumi_tagged_or_untagged_gpu_on_the_same_host(clock):
    w = _world()
    w.fabric.gpu_list += [FakeGpu("gpu7", machine=HOST, owner_tag=PULUMI), FakeGpu("gpu8", machine=HOST)]
    ctrl = make(w, clock)
    w.fabric.by("gpu0").machine, w.fabric.by("gpu0").owner_tag = HOST, TAG  # composed, record lost
    run(ctrl)
    assert w.kube.record(HOST).devices == {"gpu0"}
    assert "gpu7" not in _adopted_events(w)[0] and "gpu8" not in _adopted_events(w)[0]
    for _ in range(4):
        clock.tick(100)
        run(ctrl)
    assert w.fabric.attached() == {HOST: ["gpu7", "gpu8"]}
    assert [c for c in w.fabric.calls if c[0] == "decompose"] == [("decompose", HOST, ("gpu0",))]
    assert (w.fabric.by("gpu7").owner_tag, w.fabric.by("gpu8").owner_tag) == (PULUMI, None)
    assert [t for t in w.fabric.tag_calls if {"gpu7", "gpu8"} & set(t[2])] == []


def test_adopt_lets_the_host_take_a_new_composition_afterwards(clock):
    """The issue's case: the record was lost, then a pod asks for 2 GPUs on that host. The
    adopted GPU is the composer's (spare), so one more is composed next to it."""
    w = _world()
    ctrl = make(w, clock)
    _composed_and_running(w, ctrl)
    del w.kube.pods["ml/a"]
    _remove_record(w, "removed")
    run(ctrl)
    w.kube.add_pod(pod("b", 2, host=HOST))
    run(ctrl)
    assert [e for e in w.kube.events if e.name == "b" and e.type == "Warning"] == []
    assert w.fabric.attached() == {HOST: ["gpu0", "gpu1"]}
    assert w.kube.record(HOST).devices == {"gpu0", "gpu1"}
    w.agent_step()
    run(ctrl)
    w.schedule()
    run(ctrl)
    assert w.kube.pods["ml/b"]["spec"]["nodeName"] == HOST


def _snapshot(annotations: dict[str, str], gpus: tuple[FabricGpu, ...]) -> Snapshot:
    nodes = (node_view(node(HOST, annotations=annotations)),)
    fabric = FabricView(gpus, frozenset({HOST}), {HOST: "1"})
    return Snapshot(Clock()(), (), nodes, {}, fabric)


def test_adopt_in_one_decision_names_only_the_composers_tag_and_not_what_the_record_holds():
    gpus = (
        FabricGpu("gpu0", "Tesla-T4", machine=HOST, owner_tag=TAG),
        FabricGpu("gpu1", "Tesla-T4", machine=HOST, owner_tag=TAG),
        FabricGpu("gpu2", "Tesla-T4", machine=HOST, owner_tag=PULUMI),
        FabricGpu("gpu3", "Tesla-T4", machine=HOST),
        FabricGpu("gpu4", "Tesla-T4", machine="other", owner_tag=TAG),
        FabricGpu("gpu5", "Tesla-T4", owner_tag=TAG),
    )
    d = decide(_snapshot({ann.DEVICES: "gpu1"}, gpus), Memory(), Policy(owner_tag=TAG))
    (job,) = [j for j in d.jobs if j.node == HOST]
    assert job.after.devices == {"gpu0", "gpu1"} and job.after.hold
    assert [(e.reason, e.message.split(" attached")[0]) for e in d.events if e.name == HOST] == [
        ("AdoptedGpus", "gpu0")
    ]
    assert d.adopted == 1
    # excluded by configuration: static even with the tag
    d = decide(_snapshot({}, gpus[:1]), Memory(), Policy(owner_tag=TAG, excluded=frozenset({"gpu0"})))
    assert d.jobs == () and d.events == ()


def test_a_record_naming_every_owned_gpu_is_settled_and_one_missing_one_is_not():
    attached = {"gpu0": "Tesla-T4", "gpu1": "Tesla-T4"}
    assert settled(ann.NodeRecord(frozenset({"gpu0", "gpu1"})), attached, frozenset({"gpu0", "gpu1"}))
    assert not settled(ann.NodeRecord(frozenset({"gpu1"})), attached, frozenset({"gpu0", "gpu1"}))
    reclaiming = ann.NodeRecord(frozenset(), reclaim=ann.Reclaim(("gpu0",), ann.ReclaimPhase.DECOMPOSED))
    assert settled(reclaiming, attached, frozenset({"gpu0"}))  # being given back: not adopted again
