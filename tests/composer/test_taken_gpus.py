"""An intent whose advertised GPUs were bound to another pod is dropped and planned again."""

from __future__ import annotations

from composer.decide.decide import Policy, reconcile_record
from composer.decide.round_types import RoundContext
from composer.model.annotations import Intent, IntentPhase, NodeRecord
from composer.model.nodestate import NodeUsage, NodeView
from composer.model.podspec import PodView

NOW = 1_000.0


def _pod(uid: str, node: str = "") -> PodView:
    return PodView(namespace="ml", name=uid, uid=uid, node_name=node, unschedulable=not node,
                   created=NOW - 30, gpu={"nvidia.com/gpu": 2})


def _reconcile(allocatable: int, used: int, phase: IntentPhase) -> tuple[NodeRecord, list[str]]:
    intent = Intent(pod="ml/a", resource="nvidia.com/gpu", units=2, model="Tesla-T4",
                    devices=("gpu0", "gpu1"), phase=phase, since=NOW - 5)
    node = NodeView(name="blade-slot-1", gpu_allocatable={"nvidia.com/gpu": allocatable},
                    record=NodeRecord(frozenset({"gpu0", "gpu1"}), {"a": intent}, None))
    pods = {"a": _pod("a"), "b": _pod("b", node="blade-slot-1")}
    ctx = RoundContext(pods, {"blade-slot-1": NodeUsage(gpu={"nvidia.com/gpu": used})}, NOW, Policy())
    out = reconcile_record(node, ctx, attached={"gpu0": "Tesla-T4", "gpu1": "Tesla-T4"})
    return out.record, [e.reason for e in out.events]


def test_advertised_gpus_taken_by_another_pod_drop_the_intent() -> None:
    for phase in (IntentPhase.ATTACHED, IntentPhase.ADVERTISED):
        record, reasons = _reconcile(allocatable=2, used=2, phase=phase)
        assert "a" not in record.intents, phase  # planned again next round
        assert record.devices == {"gpu0", "gpu1"}  # still managed, reclaimable when idle
        assert reasons == ["GpusTakenByAnotherPod"]


def test_not_yet_advertised_gpus_keep_the_intent_waiting() -> None:
    # Another pod holds 2 older GPUs; the 2 new ones are attached but not advertised yet (2 of 4).
    intent = Intent(pod="ml/a", resource="nvidia.com/gpu", units=2, model="Tesla-T4",
                    devices=("gpu2", "gpu3"), phase=IntentPhase.ATTACHED, since=NOW - 5)
    node = NodeView(name="blade-slot-1", gpu_allocatable={"nvidia.com/gpu": 2},
                    record=NodeRecord(frozenset({"gpu0", "gpu1", "gpu2", "gpu3"}), {"a": intent}, None))
    pods = {"a": _pod("a"), "b": _pod("b", node="blade-slot-1")}
    ctx = RoundContext(pods, {"blade-slot-1": NodeUsage(gpu={"nvidia.com/gpu": 2})}, NOW, Policy())
    out = reconcile_record(node, ctx, attached={f"gpu{i}": "Tesla-T4" for i in range(4)})
    assert out.record.intents["a"].phase == IntentPhase.ATTACHED
    assert not out.events


def test_free_advertised_gpus_advance_the_intent() -> None:
    record, reasons = _reconcile(allocatable=2, used=0, phase=IntentPhase.ATTACHED)
    assert record.intents["a"].phase == IntentPhase.ADVERTISED
    assert reasons == []
