"""GPUs taken by another pod: an intent whose advertised GPUs were bound to another pod is dropped
and planned again; a gated pod's nomination keeps its advertised GPUs from an ungated pod."""

from __future__ import annotations

import threading

from composer.decide.decide import Policy, reconcile_record
from composer.decide.gating import nomination_enabled
from composer.decide.round_types import NodeJob, Reconciled, RoundContext
from composer.model import annotations as ann
from composer.model.annotations import Intent, IntentPhase, NodeRecord
from composer.model.models import HostSharing
from composer.model.nodestate import NodeUsage, NodeView
from composer.model.podspec import PodView
from composer.run.controller import Controller
from composer.shell.act import Executor
from composer.shell.metrics import Metrics
from domain.gpu_sharing import Offer
from domain.labels import MIG_CONFIG_STATE_LABEL, MIG_SUCCESS
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod

NOW = 1_000.0
A100 = "NVIDIA-A100-PCIE-40GB"


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


# -- the window: an ungated GPU pod and a gated pod's freshly advertised GPUs ---------------------
def _world() -> FakeWorld:
    """Two hosts of one GPU slot each, four free T4s."""
    kube = FakeKube()
    for n in ("host-1", "host-2"):
        kube.add_node(node(n, labels={ann.MAX_GPUS_LABEL: "1"}))
    return FakeWorld(kube, FakeFabric([FakeGpu(f"gpu{i}") for i in range(4)], ["host-1", "host-2"]))


def _controller(w: FakeWorld, clock: Clock, nominate: bool) -> tuple[Controller, Metrics]:
    pol = Policy(batch_idle_seconds=0.0, batch_max_seconds=0.0)
    metrics = Metrics()
    ex = Executor(w.kube, lambda: w.fabric, pol, metrics, clock=clock)
    ctrl = Controller(w.kube, lambda: w.fabric, pol, metrics, ex, clock=clock, workers=2, nominate=nominate)
    return ctrl, metrics


def _round(ctrl: Controller) -> None:
    ctrl.round()
    assert ctrl.wait_idle(10)
    ctrl.close()  # jobs and the nomination thread done (the controller starts them again)


def test_an_ungated_gpu_pod_does_not_take_a_gated_pods_advertised_gpus_at_kubernetes_1_34(clock):
    """A GPU pod admitted without the gate (the webhook did not answer in time: failurePolicy
    Ignore; or a pod the composer ungated unchanged) is pending when the GPU composed for a gated
    pod is advertised. The scheduler reacts to the node's new allocatable before the composer's
    next round releases the gated pod; only the gated pod's nomination onto its node, which
    kube-scheduler 1.34 counts there for pods of equal or lower priority, keeps the GPU for it."""
    w = _world()
    ctrl, m = _controller(w, clock, nominate=nomination_enabled("auto", (1, 34)))
    w.kube.add_pod(pod("a", 1, gated=True))
    _round(ctrl)  # a's GPU reserved and composed on its host
    (host,) = w.fabric.attached()
    w.kube.add_pod(pod("u", 1))  # admitted ungated
    w.agent_step()  # the host advertises a's GPU
    w.schedule()  # before the composer's next round: u may only take a GPU nobody is nominated to
    assert w.kube.pods["ml/u"]["spec"].get("nodeName") != host
    _round(ctrl)  # a released onto its host; u gets its own GPU on the other host
    w.agent_step()
    w.schedule()
    assert w.kube.pods["ml/a"]["spec"]["nodeName"] == host
    assert w.kube.pods["ml/u"]["spec"]["nodeName"] not in ("", None, host)
    _round(ctrl)
    assert "GpusTakenByAnotherPod" not in w.kube.reasons("a")
    assert m.registry.get_sample_value("composer_gpus_taken_by_another_pod_total") == 0
    assert sorted(len(g) for g in w.fabric.attached().values()) == [1, 1]  # one compose each


def test_a_released_pod_is_not_held_back_by_the_next_reservation_on_its_node(clock):
    """One host filled one compose at a time: b is reserved there while a waits to be bound. b is
    nominated only once a is bound, or the scheduler would count b on the host before b's GPU is
    advertised and keep a off its own GPU until then."""
    kube = FakeKube()
    kube.add_node(node("host-1", labels={ann.MAX_GPUS_LABEL: "2"}))
    w = FakeWorld(kube, FakeFabric([FakeGpu(f"gpu{i}") for i in range(2)], ["host-1"]))
    ctrl, m = _controller(w, clock, nominate=True)
    w.kube.add_pod(pod("a", 1, gated=True))
    _round(ctrl)
    assert w.kube.pods["ml/a"]["status"]["nominatedNodeName"] == "host-1"
    w.agent_step()  # a's GPU advertised
    clock.tick(1)
    w.kube.add_pod(pod("b", 1, gated=True))
    _round(ctrl)  # a released; b reserved on the same host, its GPU composed, not yet advertised
    assert "Released" in w.kube.reasons("a") and w.fabric.attached() == {"host-1": ["gpu0", "gpu1"]}
    w.schedule()
    assert w.kube.pods["ml/a"]["spec"].get("nodeName") == "host-1"  # not held back by b
    assert "nominatedNodeName" not in w.kube.pods["ml/b"]["status"]
    _round(ctrl)  # a bound: b is nominated
    assert w.kube.pods["ml/b"]["status"]["nominatedNodeName"] == "host-1"
    w.agent_step()
    _round(ctrl)
    w.schedule()
    assert w.kube.pods["ml/b"]["spec"]["nodeName"] == "host-1"
    assert m.registry.get_sample_value("composer_gpus_taken_by_another_pod_total") == 0


def test_the_next_reservation_is_nominated_while_its_compose_still_runs(clock):
    """b's compose runs on the host (the node sits out of decide) when a, reserved there before,
    is bound: b is nominated then, before its GPU is attached, not after its job ends."""
    kube = FakeKube()
    kube.add_node(node("host-1"))
    w = FakeWorld(kube, FakeFabric([FakeGpu(f"gpu{i}") for i in range(2)], ["host-1"]))
    ctrl, _ = _controller(w, clock, nominate=True)
    w.kube.add_pod(pod("a", 1, gated=True))
    _round(ctrl)  # a's GPU composed, not advertised yet
    gate = threading.Event()
    real = w.fabric.compose
    w.fabric.compose = lambda machine, names, **kw: (gate.wait(10), real(machine, names, **kw))[1]
    clock.tick(1)
    w.kube.add_pod(pod("b", 1, gated=True))
    try:
        ctrl.round()  # b reserved on host-1 behind a (not nominated); its compose blocks
        w.agent_step()  # a's GPU advertised
        ctrl.round()  # a released although host-1 is busy
        w.schedule()
        assert w.kube.pods["ml/a"]["spec"]["nodeName"] == "host-1"
        ctrl.round()
        gates = ctrl._gate_executor
        assert gates is not None
        gates.close()  # the nomination thread is done
        assert ctrl.jobs.running()  # b's compose still running
        assert w.fabric.attached() == {"host-1": ["gpu0"]}
        assert w.kube.pods["ml/b"]["status"]["nominatedNodeName"] == "host-1"
    finally:
        gate.set()
        assert ctrl.wait_idle(10)
    assert [wr[1:] for wr in w.kube.writes if wr[0] == "nominate"] == [("ml/a", "host-1"), ("ml/b", "host-1")]


# -- shared hosts: nvidia.com/gpu counts replicas or MIG devices, not GPUs ---------------------------
def _shared_reconcile(
    strategy: str, labels: dict[str, str], allocatable: int, used: int, *, restarts: int = 1, age: float = 1
) -> Reconciled:
    """blade-slot-1 shares its GPUs by ``strategy``; gpu0 serves bound pods, gpu1 was composed for
    pod ``a`` (1 unit, ``Attached`` for ``age`` s, after ``restarts`` restarts)."""
    intent = Intent(pod="ml/a", resource="nvidia.com/gpu", units=1, model="NVIDIA-A100-PCIE-40GB",
                    devices=("gpu1",), phase=IntentPhase.ATTACHED, since=NOW - age, plugin_restarts=restarts)
    node = NodeView(name="blade-slot-1", labels=labels, gpu_allocatable={"nvidia.com/gpu": allocatable},
                    record=NodeRecord(frozenset({"gpu0", "gpu1"}), {"a": intent}, None))
    # all-1g.5gb under the single strategy: seven nvidia.com/gpu per A100 (time-slicing: four replicas)
    units = 7 if strategy == "mig" else 4
    label = f"{A100}-MIG-1g.5gb" if strategy == "mig" else f"{A100}-SHARED"
    offers = {A100: (Offer("nvidia.com/gpu", units, label),)}
    sharing = {"blade-slot-1": HostSharing(name="green-gpu-sharing", strategy=strategy, offers=offers)}
    ctx = RoundContext({"a": _pod("a")}, {"blade-slot-1": NodeUsage(gpu={"nvidia.com/gpu": used})}, NOW,
                       Policy(sharing=sharing))
    attached = {"gpu0": "NVIDIA-A100-PCIE-40GB", "gpu1": "NVIDIA-A100-PCIE-40GB"}
    return reconcile_record(node, ctx, attached=attached)


def _reasons(out: Reconciled) -> list[str]:
    return [e.reason for e in out.events]


def test_a_mig_host_releases_nothing_until_mig_manager_reports_success() -> None:
    """gpu0's seven MIG devices are all used; gpu1 arrived unpartitioned and the device plugin shows
    it whole (an 8th unit). Until ``nvidia.com/mig.config.state=success`` the pod is not released
    onto it (it would take the whole A100) and nothing is called taken."""
    for state in ({}, {MIG_CONFIG_STATE_LABEL: "pending"}, {MIG_CONFIG_STATE_LABEL: "failed"}):
        out = _shared_reconcile("mig", state, allocatable=8, used=7)
        assert out.record.intents["a"].phase == IntentPhase.ATTACHED, state
        assert _reasons(out) == [], state
    # success, but from a run before gpu1 came: gpu1 shows whole (7 + 1), not partitioned (7 + 7)
    out = _shared_reconcile("mig", {MIG_CONFIG_STATE_LABEL: MIG_SUCCESS}, allocatable=8, used=7)
    assert out.record.intents["a"].phase == IntentPhase.ATTACHED and _reasons(out) == []
    out = _shared_reconcile("mig", {MIG_CONFIG_STATE_LABEL: MIG_SUCCESS}, allocatable=14, used=7)
    assert out.record.intents["a"].phase == IntentPhase.ADVERTISED and _reasons(out) == []


def test_a_gpu_composed_onto_a_mig_host_restarts_its_mig_manager_at_once() -> None:
    """mig-manager ran before gpu1 arrived (state ``success``) and runs again only when restarted:
    the first look at the Attached intent restarts it (and the device plugin), with a Normal Event,
    not after the advertise timeout; while a run is ``pending`` nothing is restarted, and past the
    advertise timeout the pod gets a Warning naming the state."""
    out = _shared_reconcile("mig", {MIG_CONFIG_STATE_LABEL: MIG_SUCCESS}, allocatable=7, used=7, restarts=0)
    assert out.restart_plugin and _reasons(out) == ["MigReconfigure"]
    assert out.record.intents["a"].plugin_restarts == 1
    pending = _shared_reconcile("mig", {MIG_CONFIG_STATE_LABEL: "pending"}, allocatable=7, used=7, restarts=0)
    assert not pending.restart_plugin and _reasons(pending) == []
    late = _shared_reconcile("mig", {MIG_CONFIG_STATE_LABEL: "pending"}, allocatable=7, used=7, restarts=0,
                             age=600)
    assert not late.restart_plugin and _reasons(late) == ["GpusNotAdvertised"]
    assert "nvidia.com/mig.config.state is pending" in late.events[0].message
    whole = _shared_reconcile("time-slicing", {}, allocatable=4, used=4, restarts=0)
    assert not whole.restart_plugin and _reasons(whole) == []  # not a MIG host: the advertise timeout


def test_a_time_sliced_gpu_not_yet_advertised_is_not_called_taken() -> None:
    """Four replicas of gpu0 are used, gpu1 is attached but not advertised yet: 4 allocatable units
    for 2 attached GPUs is not "every GPU advertised", so the intent waits."""
    out = _shared_reconcile("time-slicing", {}, allocatable=4, used=4)
    assert out.record.intents["a"].phase == IntentPhase.ATTACHED
    assert _reasons(out) == []


def test_a_mig_host_stuck_short_of_success_is_named_in_the_warning() -> None:
    out = _shared_reconcile("mig", {MIG_CONFIG_STATE_LABEL: "failed"}, allocatable=7, used=7, age=600)
    [warning] = [e.message for e in out.events if e.reason == "GpusNotAdvertised"]
    assert "nvidia.com/mig.config.state is failed, not success" in warning
    out = _shared_reconcile("mig", {MIG_CONFIG_STATE_LABEL: MIG_SUCCESS}, allocatable=8, used=7, age=600)
    [warning] = [e.message for e in out.events if e.reason == "GpusNotAdvertised"]
    assert "not every attached GPU is partitioned yet" in warning


def test_the_restart_of_a_mig_host_also_deletes_its_mig_manager_pod() -> None:
    """The executor deletes the device-plugin pods of a restarted node, and on a MIG host also the
    GPU Operator's mig-manager pods (``app=nvidia-mig-manager``); a whole-GPU host keeps its own."""
    kube = FakeKube()
    sharing = {"mig-host": HostSharing(name="green-gpu-sharing", strategy="mig")}
    ex = Executor(kube, lambda: FakeFabric([], []), Policy(sharing=sharing), Metrics(), clock=lambda: NOW)
    for name in ("mig-host", "plain-host"):
        kube.add_node(node(name))
        ex.run(NodeJob(name, NodeRecord(), NodeRecord(), restart_plugin=True))
    assert kube.pod_restarts == [
        ("mig-host", "app=nvidia-device-plugin-daemonset"),
        ("mig-host", "app=nvidia-mig-manager"),
        ("plain-host", "app=nvidia-device-plugin-daemonset"),
    ]
