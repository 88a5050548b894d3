"""Controller logic over in-memory fakes: rounds, intents, retries, reclaim, convergence."""

from __future__ import annotations

import threading
import time

import pytest

from composer.decide.decide import Policy
from composer.model import annotations as ann
from composer.model.models import EventSpec
from composer.run.controller import Controller
from composer.shell.act import Executor
from composer.shell.metrics import Metrics
from dynamic_providers.director.errors import DirectorServerError, DirectorUnavailableError
from tests.composer.fakes import (
    Clock,
    FakeFabric,
    FakeGpu,
    FakeKube,
    FakeWorld,
    node,
    pod,
    probe_at_first_change,
)

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"


def make(world: FakeWorld, clock: Clock, **policy) -> Controller:
    pol = Policy(
        **{
            "idle_timeout_seconds": 60,
            "advertise_timeout_seconds": 30,
            "schedule_timeout_seconds": 120,
            "retry_base_seconds": 5,
            "retry_max_seconds": 20,
            "compose_max_attempts": 3,
            **policy,
        }
    )
    metrics = Metrics()
    ex = Executor(world.kube, lambda: world.fabric, pol, metrics, clock=clock)
    return Controller(world.kube, lambda: world.fabric, pol, metrics, ex, clock=clock, workers=2)


def run(ctrl: Controller):
    d = ctrl.round()
    assert ctrl.wait_idle(10)
    return d


def handover_world() -> FakeWorld:
    kube = FakeKube()
    kube.add_node(node("blade-slot-1"))
    kube.add_node(node("blade-slot-2"))
    fabric = FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["blade-slot-1", "blade-slot-2"])
    return FakeWorld(kube, fabric)


def test_two_hosts_hand_over_two_pooled_gpus_in_memory(clock):
    w = handover_world()
    ctrl = make(w, clock)
    seen_before_compose = []
    probe_at_first_change(w.fabric, lambda machine: seen_before_compose.append(w.kube.intents_json(machine)))
    w.kube.add_pod(pod("a", 2, product=T4, host="blade-slot-1"))
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0", "gpu1"]}
    # the intent was on the node before the Director changed anything (crash safety)
    assert seen_before_compose[0]["uid-a"]["phase"] == "Composing"
    assert w.kube.record("blade-slot-1").devices == {"gpu0", "gpu1"}
    assert w.kube.reasons("a") == ["Composed"]

    w.agent_step()
    run(ctrl)
    assert w.kube.record("blade-slot-1").intents["uid-a"].phase == ann.IntentPhase.ADVERTISED
    w.schedule()
    run(ctrl)
    assert w.kube.record("blade-slot-1").intents == {}  # served
    clock.tick(3600)
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0", "gpu1"]}  # busy: a GPU pod runs there

    w.finish("ml/a")
    run(ctrl)  # idle timer starts
    clock.tick(59)
    run(ctrl)
    assert w.fabric.attached() != {}
    clock.tick(2)
    run(ctrl)  # reclaim: taint, decompose
    assert w.fabric.attached() == {}
    assert w.fabric.released == ["gpu0", "gpu1"]
    node_a = w.kube.nodes["blade-slot-1"]
    assert any(t["key"] == ann.RECLAIM_TAINT_KEY for t in node_a["spec"]["taints"])
    assert w.kube.record("blade-slot-1").reclaim.phase == "Decomposed"
    run(ctrl)  # still advertised: the taint stays
    assert node_a["spec"]["taints"]
    w.agent_step()
    run(ctrl)
    assert node_a["spec"]["taints"] == []
    assert not any(k.startswith(ann.PREFIX) for k in node_a["metadata"]["annotations"])

    w.kube.add_pod(pod("b", 2, host="blade-slot-2"))
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-2": ["gpu0", "gpu1"]}
    m = ctrl.metrics.render().decode()
    assert "composer_compositions_total 2.0" in m and "composer_decompositions_total 1.0" in m


def test_restart_after_attach_adopts_without_composing_again(clock):
    w = handover_world()
    w.kube.add_pod(pod("a", 2, host="blade-slot-1"))
    intent = ann.Intent("ml/a", "nvidia.com/gpu", 2, T4, ("gpu0", "gpu1"), ann.IntentPhase.COMPOSING, clock())
    w.kube.nodes["blade-slot-1"]["metadata"]["annotations"][ann.INTENTS] = ann.encode_intents(
        {"uid-a": intent}
    )
    w.fabric.by("gpu0").machine = w.fabric.by("gpu1").machine = "blade-slot-1"  # the reprogram finished
    ctrl = make(w, clock)  # a fresh process: empty memory
    run(ctrl)
    assert [c for c in w.fabric.calls if c[0] == "compose"] == []
    rec = w.kube.record("blade-slot-1")
    assert rec.devices == {"gpu0", "gpu1"}
    assert rec.intents["uid-a"].phase == ann.IntentPhase.ATTACHED
    assert any("already attached" in e.message for e in w.kube.events)


def test_restart_before_reprogram_cancels_the_edit_and_composes_once(clock):
    w = handover_world()
    w.kube.add_pod(pod("a", 2, host="blade-slot-1"))
    intent = ann.Intent("ml/a", "nvidia.com/gpu", 2, T4, ("gpu0", "gpu1"), ann.IntentPhase.COMPOSING, clock())
    w.kube.nodes["blade-slot-1"]["metadata"]["annotations"][ann.INTENTS] = ann.encode_intents(
        {"uid-a": intent}
    )
    ctrl = make(w, clock)
    run(ctrl)
    assert w.fabric.cancelled == ["blade-slot-1"]
    assert [c for c in w.fabric.calls if c[0] == "compose"] == [("compose", "blade-slot-1", ("gpu0", "gpu1"))]
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0", "gpu1"]}


def test_compose_failures_back_off_then_give_up(clock):
    w = handover_world()
    err = DirectorServerError("reprogram failed", method="POST", path="fabric/reprogram", status=503)
    w.fabric.fail["compose"] = [err, err, err, err]
    w.kube.add_pod(pod("a", 1))
    ctrl = make(w, clock)
    run(ctrl)
    assert w.kube.reasons("a") == ["ComposeFailed"]
    assert w.kube.record("blade-slot-1").intents["uid-a"].retry_at == pytest.approx(clock() + 5)
    run(ctrl)  # within the backoff: no new attempt
    assert len(w.fabric.calls) == 1
    clock.tick(5)
    run(ctrl)
    assert len(w.fabric.calls) == 2 and w.kube.reasons("a") == ["ComposeFailed"] * 2
    clock.tick(9)
    run(ctrl)
    assert len(w.fabric.calls) == 2  # the second backoff is twice the first
    clock.tick(1)
    run(ctrl)
    assert w.kube.reasons("a")[-1] == "ComposeGaveUp"
    clock.tick(100)
    run(ctrl)
    run(ctrl)
    assert len(w.fabric.calls) == 3  # given up: no more attempts, no attach/detach loop
    assert w.fabric.attached() == {}
    assert (
        'composer_composition_failures_total{reason="DirectorServerError"} 3.0'
        in ctrl.metrics.render().decode()
    )


def test_director_unreadable_round_is_skipped(clock):
    w = handover_world()
    w.fabric.fail["gpus"] = [DirectorUnavailableError("connection refused")]
    w.kube.add_pod(pod("a", 1))
    ctrl = make(w, clock)
    assert ctrl.round() is None
    assert w.kube.writes == [] and w.kube.events == []
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}


def test_unsatisfiable_request_is_reported_once_and_never_composed(clock):
    w = handover_world()
    w.kube.add_pod(pod("big", 3))
    w.kube.add_pod(pod("a100", 1, product=A100))
    ctrl = make(w, clock)
    for _ in range(4):
        run(ctrl)
        clock.tick(120)
    assert w.kube.reasons("big") == ["TooManyGpus"]
    big = next(e for e in w.kube.events if e.name == "big")
    assert "asks for 3 GPU(s)" in big.message and "2 free (Tesla-T4: 2 free)" in big.message
    assert "the most one host can take is 2" in big.message
    assert w.kube.reasons("a100") == ["ModelNotInPool"]
    a100 = next(e for e in w.kube.events if e.name == "a100")
    assert a100.message == f"asks for {A100}; pool 'default' has Tesla-T4: 2 free"
    assert w.fabric.calls == []


def test_reclaim_aborts_when_a_gpu_pod_lands_meanwhile(clock):
    w = handover_world()
    w.fabric.by("gpu0").machine = "blade-slot-1"
    w.kube.nodes["blade-slot-1"]["metadata"]["annotations"][ann.DEVICES] = "gpu0"
    ctrl = make(w, clock)
    run(ctrl)
    clock.tick(61)
    w.kube.late_pods["blade-slot-1"] = ["ml/sneaky"]
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    assert [x for x in w.kube.writes if x[0] == "taint"] == [
        ("taint", "blade-slot-1", True),
        ("taint", "blade-slot-1", False),
    ]
    assert w.kube.record("blade-slot-1").reclaim is None


def test_static_and_excluded_gpus_are_never_reclaimed(clock):
    w = handover_world()
    w.fabric.gpu_list.append(FakeGpu("gpu7", machine="blade-slot-2"))  # static: not in the annotation
    # listed as managed, but the Pulumi program's owner tag says it is static now
    w.fabric.gpu_list.append(FakeGpu("gpu8", machine="blade-slot-2", owner_tag="pulumi:estate"))
    w.kube.nodes["blade-slot-2"]["metadata"]["annotations"][ann.DEVICES] = "gpu8"
    w.fabric.by("gpu0").machine = "blade-slot-1"
    w.kube.nodes["blade-slot-1"]["metadata"]["annotations"][ann.DEVICES] = "gpu0"
    ctrl = make(w, clock, excluded=frozenset({"gpu0"}))
    for _ in range(3):
        run(ctrl)
        clock.tick(1000)
    assert [c for c in w.fabric.calls if c[0] == "decompose"] == []
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"], "blade-slot-2": ["gpu7", "gpu8"]}


def test_decompose_failure_lifts_the_taint_and_retries_later(clock):
    w = handover_world()
    w.fabric.by("gpu0").machine = "blade-slot-1"
    w.kube.nodes["blade-slot-1"]["metadata"]["annotations"][ann.DEVICES] = "gpu0"
    w.fabric.fail["decompose"] = [DirectorUnavailableError("down")]
    ctrl = make(w, clock)
    run(ctrl)
    clock.tick(61)
    run(ctrl)
    assert w.kube.nodes["blade-slot-1"]["spec"]["taints"] == []
    assert "ReclaimFailed" in w.kube.reasons("blade-slot-1")
    run(ctrl)  # backing off
    assert len([c for c in w.fabric.calls if c[0] == "decompose"]) == 1
    clock.tick(6)
    run(ctrl)
    assert w.fabric.attached() == {}


def test_gpus_not_advertised_restart_the_device_plugin(clock):
    w = handover_world()
    w.kube.add_pod(pod("a", 1))
    ctrl = make(w, clock)
    run(ctrl)
    clock.tick(29)
    run(ctrl)
    assert w.kube.plugin_restarts == []
    clock.tick(2)
    run(ctrl)
    assert w.kube.plugin_restarts == ["blade-slot-1"]
    assert "GpusNotAdvertised" in w.kube.reasons("a")
    clock.tick(31)
    run(ctrl)
    assert w.kube.plugin_restarts == ["blade-slot-1"]  # backoff doubles the wait
    w.agent_step()
    run(ctrl)
    assert w.kube.record("blade-slot-1").intents["uid-a"].phase == ann.IntentPhase.ADVERTISED


def test_pod_never_scheduled_is_given_up_and_its_gpus_reclaimed_without_a_loop(clock):
    w = handover_world()
    w.kube.add_pod(pod("stuck", 1))
    ctrl = make(w, clock)
    run(ctrl)
    w.agent_step()
    run(ctrl)
    clock.tick(121)
    run(ctrl)
    assert "ComposedButNotScheduled" in w.kube.reasons("stuck")
    clock.tick(61)
    run(ctrl)
    assert w.fabric.attached() == {}
    for _ in range(3):
        clock.tick(100)
        run(ctrl)
    assert len([c for c in w.fabric.calls if c[0] == "compose"]) == 1


def test_a_gpu_being_composed_is_not_planned_for_another_pod(clock):
    kube = FakeKube()
    for n in ("h1", "h2"):
        kube.add_node(node(n))
    fabric = FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1"), FakeGpu("gpu2")], ["h1", "h2"])
    w = FakeWorld(kube, fabric)
    gate, started = threading.Event(), threading.Event()
    real = fabric.compose

    def slow(machine, names, **kw):
        started.set()
        assert gate.wait(10)
        return real(machine, names, **kw)

    fabric.compose = slow
    kube.add_pod(pod("first", 2, host="h1"))
    ctrl = make(w, clock)
    ctrl.round()
    assert started.wait(5)
    kube.add_pod(pod("second", 1, host="h2"))
    fabric.compose = real
    ctrl.round()  # h1's job still runs: its GPUs and pod sit this round out
    deadline = time.monotonic() + 5  # h2's job runs on a worker thread
    while not fabric.attached() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fabric.attached() == {"h2": ["gpu2"]}
    gate.set()
    assert ctrl.wait_idle(10)
    assert fabric.attached() == {"h1": ["gpu0", "gpu1"], "h2": ["gpu2"]}
    ctrl.close()


def test_pool_quota_and_namespace_pools(clock):
    kube = FakeKube(pools={"team-a": "a"})
    kube.add_node(node("ha", labels={ann.POOL_LABEL: "a"}))
    kube.add_node(node("hd"))
    fabric = FakeFabric([FakeGpu(f"gpu{i}") for i in range(4)], ["ha", "hd"])
    w = FakeWorld(kube, fabric)
    kube.add_pod(pod("x", 2, ns="team-a"))
    kube.add_pod(pod("y", 1, ns="team-a"))
    kube.add_pod(pod("z", 1, ns="other"))
    ctrl = make(w, clock, quotas={"a": 2})
    run(ctrl)
    assert fabric.attached() == {"ha": ["gpu0", "gpu1"], "hd": ["gpu2"]}
    assert kube.reasons("y") == ["QuotaExceeded"]


def test_director_group_pools_and_owner_tagged_gpus_are_respected(clock):
    kube = FakeKube()
    kube.add_node(node("h1"))
    fabric = FakeFabric(
        [
            FakeGpu("gpu0", group_id=2),  # in another group's pool: the Director would refuse it for h1
            FakeGpu("gpu1", owner_tag="pulumi:static"),  # being composed statically by the program
            FakeGpu("gpu2", group_id=1),  # in h1's group pool
            FakeGpu("gpu3", device_state="ERROR"),
        ],
        ["h1"],
    )
    w = FakeWorld(kube, fabric)
    kube.add_pod(pod("a", 1))
    kube.add_pod(pod("b", 1, created="2026-01-01T00:00:01Z"))
    run(make(w, clock))
    assert fabric.attached() == {"h1": ["gpu2"]}
    assert kube.reasons("b") == ["NoHostFits"]


def test_a_node_whose_job_failed_on_kubernetes_sits_out_the_backoff(clock):
    """An API server that refuses writes must not turn into a loop of failing jobs (each round
    would otherwise plan the same job again at once)."""
    from composer.shell.kube import KubeError

    w = handover_world()
    w.kube.add_pod(pod("a", 1, host="blade-slot-1"))
    real = w.kube.patch_node_annotations
    attempts: list[str] = []

    def refused(name, changes):
        attempts.append(name)
        raise KubeError("PATCH", f"nodes/{name}", None, "connection refused")

    w.kube.patch_node_annotations = refused  # type: ignore[method-assign]
    ctrl = make(w, clock)  # retry_base_seconds=5
    run(ctrl)
    assert attempts == ["blade-slot-1"]
    for _ in range(3):
        run(ctrl)  # within the backoff: the node sits out
    assert attempts == ["blade-slot-1"] and w.fabric.calls == []
    clock.tick(5.1)
    run(ctrl)
    assert attempts == ["blade-slot-1"] * 2
    clock.tick(5.1)
    run(ctrl)  # the second failure doubled the pause
    assert len(attempts) == 2
    w.kube.patch_node_annotations = real  # type: ignore[method-assign]
    clock.tick(5.1)
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    ctrl.close()


def test_a_pod_recreated_before_its_gpu_was_advertised_gets_that_gpu_not_another(clock):
    """A GPU composed for a pod that went away before the node advertised it is on its way:
    the next pod for that host uses it (a StatefulSet pod or Job retry recreated at once)."""
    w = handover_world()
    w.kube.add_pod(pod("a", 1, host="blade-slot-1"))
    ctrl = make(w, clock)
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    del w.kube.pods["ml/a"]  # gone before the agent advertised gpu0
    w.kube.add_pod(pod("a2", 1, host="blade-slot-1"))
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}  # no second compose
    assert w.kube.reasons("a2") == ["UsingSpareGpus"]
    w.agent_step()
    w.schedule()
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    ctrl.close()


def test_async_events_do_not_wait_for_the_api_and_keep_their_order():
    """With ``async_events`` an Event's API call never holds up the emitting thread (a round, a
    release, a compose); Events reach the API server in the order emitted; close() drains."""
    gate = threading.Event()

    class SlowKube(FakeKube):
        def create_event(self, ev: EventSpec) -> None:
            gate.wait(5)
            super().create_event(ev)

    kube = SlowKube()
    ex = Executor(kube, lambda: FakeFabric([], []), Policy(), Metrics(), async_events=True)
    evs = [EventSpec("Pod", "ml", "p1", "u1", "Normal", r, "m") for r in ("Gated", "Reserved")]
    t0 = time.monotonic()
    for ev in evs:
        ex.emit(ev)
    assert time.monotonic() - t0 < 1 and kube.events == []  # queued, not sent
    composed = EventSpec("Pod", "ml", "p1", "u1", "Normal", "Composed", "m")
    worker = threading.Thread(target=ex.emit, args=(composed,))  # a node job's thread
    worker.start()
    worker.join()
    gate.set()
    ex.close()
    assert [e.reason for e in kube.events] == ["Gated", "Reserved", "Composed"]


def test_the_intent_write_runs_while_the_director_is_read_and_ends_before_any_change(clock):
    """The Composing intent's PATCH and the compose's Director reads overlap: the compose has
    started while the PATCH is still in flight, and its first change waits for the PATCH."""
    w = handover_world()
    ctrl = make(w, clock)
    entered = threading.Event()
    patch_saw_compose: list[bool] = []
    at_first_change: list[str | None] = []
    real_patch = w.kube.patch_node_annotations

    def patch(node_name, changes):
        if ann.INTENTS in changes and not patch_saw_compose:  # the Composing write
            patch_saw_compose.append(entered.wait(5))
        return real_patch(node_name, changes)

    probe_at_first_change(
        w.fabric, lambda machine: at_first_change.append(w.kube.intents_json(machine)["uid-a"]["phase"])
    )
    real_compose = w.fabric.compose

    def compose(machine, names, **kw):
        entered.set()  # the compose starts (its Director reads)
        return real_compose(machine, names, **kw)

    w.kube.patch_node_annotations = patch
    w.fabric.compose = compose
    w.kube.add_pod(pod("a", 2, product=T4, host="blade-slot-1"))
    run(ctrl)
    assert patch_saw_compose == [True]  # the Director was being read while the PATCH ran
    assert at_first_change == ["Composing"]  # and nothing changed on it before the PATCH ended
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0", "gpu1"]}
    assert w.kube.record("blade-slot-1").intents["uid-a"].phase == ann.IntentPhase.ATTACHED
    ctrl.close()


def test_a_failed_intent_write_stops_the_compose_before_the_director_changes_anything(clock, caplog):
    """A Kubernetes error on the Composing write ends the job as any Kubernetes failure does:
    nothing attached, no owner tag written; the next round starts from what is there."""
    from composer.shell.kube import KubeError

    w = handover_world()
    ctrl = make(w, clock)
    real_patch = w.kube.patch_node_annotations
    failed: list[str] = []

    def patch(node_name, changes):
        if ann.INTENTS in changes and not failed:
            failed.append(node_name)
            raise KubeError("PATCH", f"nodes/{node_name}", 500, "etcd timeout")
        return real_patch(node_name, changes)

    w.kube.patch_node_annotations = patch
    w.kube.add_pod(pod("a", 2, product=T4, host="blade-slot-1"))
    run(ctrl)
    assert failed == ["blade-slot-1"]
    assert w.fabric.attached() == {} and not [c for c in w.fabric.calls if c[0] == "compose"]
    assert all(g.owner_tag is None for g in w.fabric.gpu_list)
    assert w.kube.record("blade-slot-1").intents == {}  # the job ended: no failed attempt recorded
    assert "job on blade-slot-1 failed" in caplog.text and "etcd timeout" in caplog.text
    clock.tick(6)  # past the failed node's back-off
    run(ctrl)  # the next round composes
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0", "gpu1"]}
    ctrl.close()
