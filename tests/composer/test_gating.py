"""Scheduling gates: the webhook's verdict, the release/ungate patches, and the controller's
gated-pod rules (batch, reserve, pin then release, expiry, never strand a pod) over fakes."""

from __future__ import annotations

import base64
import json
import logging
import threading
from dataclasses import replace
from datetime import UTC, datetime

import jsonpatch
import pytest

from composer.decide.decide import Policy
from composer.decide.gating import (
    PodAction,
    admission_response,
    batch_wait,
    gate_decision,
    nomination_enabled,
    nominations,
    release_patch,
    ungate_patch,
)
from composer.model import annotations as ann
from composer.model.models import EventSpec
from composer.model.podspec import pod_view
from composer.run.controller import SETTLE_MARGIN_SECONDS, Controller, ListingSource
from composer.shell.act import Executor
from composer.shell.gates import GateExecutor
from composer.shell.kube import KubeError
from composer.shell.metrics import Metrics
from composer.shell.pod_steps import LOGGER, parse
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod

T4 = "Tesla-T4"
T0 = 1_800_000_000.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def raw_pod(**spec_extra) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ml", "labels": {}, "annotations": {}},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            **spec_extra,
        },
    }


# -- the webhook's verdict ----------------------------------------------------------------------
def test_gpu_pod_in_served_namespace_is_gated():
    d = gate_decision(raw_pod(), namespace="ml", namespaces=frozenset({"ml"}))
    out = jsonpatch.apply_patch(raw_pod(), list(d.patch))
    assert out["spec"]["schedulingGates"] == [{"name": ann.GATE}]


@pytest.mark.parametrize(
    ("change", "namespace", "why"),
    [
        (lambda p: p["metadata"]["labels"].update({ann.GATING_OPT_OUT: "disabled"}), "ml", "label"),
        (lambda p: p["metadata"]["annotations"].update({ann.GATING_OPT_OUT: "disabled"}), "ml", "annotation"),
        (lambda p: p["spec"].update({"nodeName": "n1"}), "ml", "nodeName"),
        (
            lambda p: p["spec"]["containers"][0]["resources"].update({"limits": {"cpu": "1"}}),
            "ml",
            "no NVIDIA",
        ),
        (lambda p: None, "other", "not served"),
    ],
)
def test_pods_left_alone(change, namespace, why):
    p = raw_pod()
    change(p)
    d = gate_decision(p, namespace=namespace, namespaces=frozenset({"ml"}))
    assert not d.gated and why in d.why


def test_mig_resource_and_existing_gates():
    p = raw_pod(schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    p["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.5gb": "1"}
    out = jsonpatch.apply_patch(p, list(gate_decision(p, namespace="ml").patch))
    assert out["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}, {"name": ann.GATE}]
    assert not gate_decision(out, namespace="ml").gated  # idempotent


def test_admission_review_answer():
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "r1",
            "kind": {"kind": "Pod"},
            "operation": "CREATE",
            "namespace": "ml",
            "object": raw_pod(),
        },
    }
    answer, verdict = admission_response(review)
    assert verdict.gated
    resp = answer["response"]
    assert resp["uid"] == "r1" and resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(resp["patch"])) == list(verdict.patch)
    review["request"]["operation"] = "UPDATE"
    answer, verdict = admission_response(review)
    assert "patch" not in answer["response"] and answer["response"]["allowed"] is True
    with pytest.raises(ValueError, match="request.uid"):
        admission_response({"request": {}})


# -- the patches ---------------------------------------------------------------------------------
def gated_json(**kw) -> dict:
    return pod("a", 2, gated=True, **kw)


def test_release_pins_and_ungates_in_one_patch():
    raw = gated_json()
    raw["spec"]["nodeSelector"] = {}
    v = pod_view(raw)
    out = jsonpatch.apply_patch(
        raw, release_patch(v, node="n1", reservation={"node": "n1", "devices": ["gpu0"]})
    )
    assert "schedulingGates" not in out["spec"]
    assert out["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n1"}
    assert json.loads(out["metadata"]["annotations"][ann.RESERVATION]) == {"devices": ["gpu0"], "node": "n1"}


def test_release_keeps_the_users_own_node_and_other_gates():
    raw = gated_json(host="n1", product=T4)
    raw["spec"]["schedulingGates"].insert(0, {"name": "other/gate"})
    out = jsonpatch.apply_patch(raw, release_patch(pod_view(raw), node="n1", reservation={}))
    assert out["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n1", "nvidia.com/gpu.product": T4}
    assert out["spec"]["schedulingGates"] == [{"name": "other/gate"}]
    with pytest.raises(ValueError, match="selects kubernetes.io/hostname=n1"):
        release_patch(pod_view(raw), node="n2", reservation={})


def test_patches_refuse_a_recreated_pod():
    old = pod_view(gated_json())
    recreated = gated_json(uid="uid-new")
    for patch in (ungate_patch(old), release_patch(old, node="n1", reservation={})):
        with pytest.raises(jsonpatch.JsonPatchTestFailed):
            jsonpatch.apply_patch(recreated, patch)


def test_ungate_changes_nothing_else():
    raw = gated_json(host="n1")
    out = jsonpatch.apply_patch(raw, ungate_patch(pod_view(raw)))
    raw["spec"].pop("schedulingGates")
    assert out == raw


def test_batch_window():
    assert batch_wait({}, now=10, idle_seconds=1, max_seconds=10) == 0
    assert batch_wait({"a": 9.5}, now=10, idle_seconds=1, max_seconds=10) == pytest.approx(0.5)
    assert batch_wait({"a": 8.0}, now=10, idle_seconds=1, max_seconds=10) == 0  # idle window passed
    # a steady trickle keeps the window open only until the oldest waited max_seconds
    assert batch_wait({"a": 0.5, "b": 9.9}, now=10, idle_seconds=1, max_seconds=10) == pytest.approx(0.5)
    assert batch_wait({"a": 0.0, "b": 9.9}, now=10, idle_seconds=1, max_seconds=10) == 0


# -- the controller over fakes -------------------------------------------------------------------
def world(hosts: int = 2, gpus: int = 4, max_gpus: str | None = "2") -> FakeWorld:
    kube = FakeKube()
    names = [f"host-{i}" for i in range(1, hosts + 1)]
    for n in names:
        kube.add_node(node(n, labels={ann.MAX_GPUS_LABEL: max_gpus} if max_gpus else None))
    fabric = FakeFabric([FakeGpu(f"gpu{i}") for i in range(gpus)], names)
    return FakeWorld(kube, fabric)


def make(w: FakeWorld, clock: Clock, *, nominate: bool = False, **policy) -> tuple[Controller, Metrics]:
    pol = Policy(
        **{
            "idle_timeout_seconds": 60,
            "advertise_timeout_seconds": 30,
            "schedule_timeout_seconds": 120,
            "batch_idle_seconds": 0.0,
            "batch_max_seconds": 0.0,
            "reservation_timeout_seconds": 100,
            "unserved_wait_seconds": 20,
            **policy,
        }
    )
    metrics = Metrics()
    ex = Executor(w.kube, lambda: w.fabric, pol, metrics, clock=clock)
    ctrl = Controller(w.kube, lambda: w.fabric, pol, metrics, ex, clock=clock, workers=2, nominate=nominate)
    return ctrl, metrics


def run(ctrl: Controller):
    d = ctrl.round()
    assert ctrl.wait_idle(10)
    return d


def gpods(w: FakeWorld, clock: Clock, *specs: tuple[str, int], **kw) -> None:
    for name, n in specs:
        w.kube.add_pod(pod(name, n, gated=True, created=iso(clock.t), **kw))


def metric(m: Metrics, name: str, **labels) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


def test_two_pods_of_different_sizes_each_get_their_own_gpus(clock):
    """The scheduler (fake: name order, first fitting node by name) would give host-1's GPUs to
    the small pod first; pinned releases make each pod land on its own reservation."""
    w = world()
    ctrl, m = make(w, clock)
    gpods(w, clock, ("a-small", 1), ("b-big", 2))
    run(ctrl)
    w.schedule()
    assert not any(p["spec"].get("nodeName") for p in w.kube.pods.values())  # held by the gate
    big_host = next(n for n in w.kube.nodes if "uid-b-big" in w.kube.intents_json(n))
    small_host = next(n for n in w.kube.nodes if "uid-a-small" in w.kube.intents_json(n))
    assert big_host != small_host
    w.agent_step()
    run(ctrl)  # advertised -> released
    w.schedule()
    assert w.kube.pods["ml/b-big"]["spec"]["nodeName"] == big_host
    assert w.kube.pods["ml/a-small"]["spec"]["nodeName"] == small_host
    assert w.kube.pods["ml/a-small"]["spec"]["nodeSelector"]["kubernetes.io/hostname"] == small_host
    run(ctrl)
    assert "GpusTakenByAnotherPod" not in w.kube.reasons("a-small") + w.kube.reasons("b-big")
    assert metric(m, "composer_gpus_taken_by_another_pod_total") == 0
    assert w.kube.reasons("b-big")[:3] == ["Gated", "Reserved", "Composed"]
    assert "Released" in w.kube.reasons("b-big")
    assert metric(m, "composer_time_gated_seconds_count", outcome="release") == 2
    assert len(w.fabric.attached()[big_host]) == 2 and len(w.fabric.attached()[small_host]) == 1


def test_a_compose_does_not_wait_for_the_rounds_pod_patches(clock):
    """One round releases pod a (its GPU advertised) and places pod b: b's compose starts on its
    worker while a's release patch is still in flight on the loop thread."""
    w = world()
    ctrl, _ = make(w, clock)
    gpods(w, clock, ("a", 1))
    run(ctrl)
    w.agent_step()
    gpods(w, clock, ("b", 1))
    order: list[str] = []
    composing = threading.Event()
    real_compose, real_patch = w.fabric.compose, w.kube.patch_pod

    def compose(machine, names, **kw):
        order.append("compose")
        composing.set()
        return real_compose(machine, names, **kw)

    def patch_pod(namespace, name, patch):
        composing.wait(2.0)  # a slow API server; the old order waited here for nothing
        order.append(f"patch {name}")
        return real_patch(namespace, name, patch)

    w.fabric.compose, w.kube.patch_pod = compose, patch_pod
    run(ctrl)
    assert order[:2] == ["compose", "patch a"]


def test_without_gates_the_same_race_loses_a_gpu(clock):
    """The counter-case (what the gate prevents): ungated pods, same scheduler."""
    w = world()
    ctrl, m = make(w, clock)
    w.kube.add_pod(pod("a-small", 1))
    w.kube.add_pod(pod("b-big", 2))
    run(ctrl)
    w.agent_step()
    w.schedule()
    run(ctrl)
    assert metric(m, "composer_gpus_taken_by_another_pod_total") >= 1


def test_gated_pod_deleted_mid_compose_leaves_no_reservation_and_no_leak(clock):
    w = world()
    ctrl, _ = make(w, clock)
    gpods(w, clock, ("a", 2))
    run(ctrl)
    host = next(iter(w.fabric.attached()))
    assert "uid-a" in w.kube.intents_json(host)
    del w.kube.pods["ml/a"]
    w.agent_step()
    run(ctrl)
    assert w.kube.intents_json(host) == {}
    clock.tick(61)
    run(ctrl)  # idle timeout: reclaim starts
    run(ctrl)
    w.agent_step()
    run(ctrl)
    assert w.fabric.attached() == {}
    assert ann.INTENTS not in w.kube.nodes[host]["metadata"]["annotations"]


def test_pool_empty_pod_is_ungated_unchanged_after_the_wait(clock):
    w = world(gpus=0)
    ctrl, m = make(w, clock)
    gpods(w, clock, ("a", 1))
    before = json.loads(json.dumps(w.kube.pods["ml/a"]["spec"]))
    d = run(ctrl)
    assert w.kube.pods["ml/a"]["spec"].get("schedulingGates")
    assert d.wake_after == pytest.approx(20, abs=1)
    clock.tick(21)
    run(ctrl)
    spec = w.kube.pods["ml/a"]["spec"]
    assert "schedulingGates" not in spec
    before.pop("schedulingGates")
    assert spec == before
    ev = next(e for e in w.kube.events if e.reason == "Ungated")
    assert ev.type == "Normal" and "NoFreeGpus" in ev.message
    # the cause is the one Warning (the ungate is an action, not a second cause)
    assert [(e.type, e.reason) for e in w.kube.events if e.type == "Warning"] == [("Warning", "NoFreeGpus")]
    assert metric(m, "composer_time_gated_seconds_count", outcome="ungate") == 1


def test_more_gpus_than_any_host_takes_is_ungated_at_once_naming_the_limit(clock):
    w = world(max_gpus="8")
    ctrl, _ = make(w, clock)
    gpods(w, clock, ("huge", 9))
    run(ctrl)
    assert "schedulingGates" not in w.kube.pods["ml/huge"]["spec"]
    assert w.kube.reasons("huge") == ["Gated", "TooManyGpus", "Ungated"]
    ev = next(e for e in w.kube.events if e.reason == "TooManyGpus")
    assert ev.type == "Warning" and ev.series and "asks for 9 GPU(s)" in ev.message
    assert "4 free (Tesla-T4: 4 free)" in ev.message and "the most one host can take is 4" in ev.message
    assert "GPU slot limit 8" in ev.message
    assert w.fabric.attached() == {}


def test_unknown_pinned_host_is_ungated_at_once_and_user_pin_is_kept(clock):
    w = world()
    ctrl, _ = make(w, clock)
    gpods(w, clock, ("lost", 1), host="nowhere")
    gpods(w, clock, ("mine", 1), host="host-2")
    run(ctrl)
    assert "schedulingGates" not in w.kube.pods["ml/lost"]["spec"]
    assert w.kube.reasons("lost") == ["Gated", "UnknownHost", "Ungated"]
    assert "UnknownHost" in next(e.message for e in w.kube.events if e.reason == "Ungated")
    w.agent_step()
    run(ctrl)
    w.schedule()
    assert w.kube.pods["ml/mine"]["spec"]["nodeName"] == "host-2"
    released = next(e for e in w.kube.events if e.reason == "Released" and e.name == "mine")
    assert "already selects this node" in released.message


@pytest.mark.parametrize("nominate", [False, True])
def test_reservation_expires_and_the_pod_is_planned_again_without_a_second_compose(clock, nominate):
    """Also with nomination: a gated pod carrying the composer's own nominatedNodeName is its
    reservation, planned again when it expires (not mistaken for a pod the scheduler placed)."""
    w = world()
    ctrl, m = make(w, clock, nominate=nominate, advertise_timeout_seconds=1000)
    gpods(w, clock, ("a", 1))
    run(ctrl)
    ctrl.close()
    assert ("nominatedNodeName" in w.kube.pods["ml/a"]["status"]) is nominate
    attached = w.fabric.attached()
    clock.tick(101)  # never advertised: the reservation runs out
    run(ctrl)
    assert "ReservationExpired" in w.kube.reasons("a")
    assert metric(m, "composer_reservations_expired_total") == 1
    run(ctrl)  # planned again: the GPU attached for it is a spare unit on its node
    assert w.fabric.attached() == attached
    assert any("uid-a" in w.kube.intents_json(n) for n in w.kube.nodes)
    w.agent_step()
    run(ctrl)
    w.schedule()
    assert w.kube.pods["ml/a"]["spec"]["nodeName"] == next(iter(attached))


def test_new_leader_finishes_gated_pods_without_composing_twice(clock):
    w = world()
    ctrl, _ = make(w, clock)
    gpods(w, clock, ("a", 2), ("b", 1))
    run(ctrl)
    attached = w.fabric.attached()
    ctrl.close()  # the old leader is gone; its memory with it
    calls = []
    real = w.fabric.compose
    w.fabric.compose = lambda machine, names, **kw: (calls.append(names), real(machine, names, **kw))[1]
    fresh, _ = make(w, clock)
    w.agent_step()
    run(fresh)
    w.schedule()
    run(fresh)
    assert calls == []
    assert w.fabric.attached() == attached
    assert all(p["status"]["phase"] == "Running" for p in w.kube.pods.values())


class StampedSource(ListingSource):
    """A listing source that knows when each gated pod arrived, as the watch cache does."""

    def __init__(self, kube: FakeKube) -> None:
        super().__init__(kube)
        self.seen: dict[str, float] = {}

    def read(self):
        pods, nodes, pools = super().read()
        return tuple(replace(p, seen_at=self.seen.get(p.uid, 0.0)) for p in pods), nodes, pools

    def gated_seen(self) -> dict[str, float]:
        return dict(self.seen)


def test_the_batch_timer_counts_from_the_rounds_observation_not_from_its_end(clock):
    w = world()
    ctrl, _ = make(w, clock, batch_idle_seconds=1.0, batch_max_seconds=5.0)
    gpods(w, clock, ("a", 1))
    run(ctrl)
    clock.tick(0.4)  # the round (and what followed it) took 0.4 s
    assert ctrl.wait_seconds(5.0) == pytest.approx(0.6)
    clock.tick(0.7)
    assert ctrl.wait_seconds(5.0) == pytest.approx(0.01)  # overdue: the next round at once


def test_a_new_gated_pod_makes_the_loop_settle_for_its_window_and_one_round_plans_it(clock):
    """After the watch delivers a gated pod the loop waits out the rest of its batch window
    (:meth:`Controller.settle_seconds`) and the round after it places the pod, where a round at
    once would only hold it and a second round would plan it."""
    w = world()
    ctrl, _ = make(w, clock, batch_idle_seconds=0.05, batch_max_seconds=1.0)
    src = StampedSource(w.kube)
    ctrl.source = src
    assert ctrl.settle_seconds() == 0.0
    gpods(w, clock, ("a", 1))
    src.seen["uid-a"] = clock.t
    clock.tick(0.02)
    assert ctrl.settle_seconds() == pytest.approx(0.03 + SETTLE_MARGIN_SECONDS)
    clock.tick(ctrl.settle_seconds())
    d = run(ctrl)
    assert [pl.key for pl in d.plan.placements] == ["ml/a"]
    assert ctrl.settle_seconds() == 0.0  # a round has seen it: nothing left to wait for
    clock.tick(0.01)
    gpods(w, clock, ("b", 1))
    src.seen["uid-b"] = clock.t
    assert ctrl.settle_seconds() == pytest.approx(0.05 + SETTLE_MARGIN_SECONDS)


def test_batch_holds_new_gated_pods_until_the_window_closes(clock):
    w = world()
    ctrl, _ = make(w, clock, batch_idle_seconds=1.0, batch_max_seconds=5.0)
    gpods(w, clock, ("a", 1))
    d = run(ctrl)
    assert w.fabric.attached() == {} and d.wake_after == pytest.approx(1.0)
    assert ctrl.wait_seconds(5.0) == pytest.approx(1.0)
    clock.tick(0.5)
    gpods(w, clock, ("b", 2))
    d = run(ctrl)
    assert w.fabric.attached() == {} and d.wake_after == pytest.approx(1.0)
    clock.tick(1.0)
    d = run(ctrl)
    assert len(d.plan.placements) == 2  # planned together, bigger first
    assert d.plan.placements[0].key == "ml/b"


def test_invalid_request_is_ungated_at_once_and_not_composed(clock):
    w = world()
    ctrl, _ = make(w, clock)
    raw = pod("two-kinds", 1, gated=True, created=iso(clock.t))
    raw["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/mig-1g.5gb"] = "1"
    w.kube.add_pod(raw)
    run(ctrl)
    assert "schedulingGates" not in w.kube.pods["ml/two-kinds"]["spec"]
    ev = next(e for e in w.kube.events if e.reason == "InvalidRequest")
    assert ev.type == "Warning" and "several GPU resources" in ev.message
    assert [e.type for e in w.kube.events if e.reason == "Ungated"] == ["Normal"]
    assert w.fabric.attached() == {}


def test_a_refused_release_is_tried_again_next_round(clock):
    w = world()
    ctrl, m = make(w, clock)
    gpods(w, clock, ("a", 1))
    run(ctrl)
    w.agent_step()
    real = w.kube.patch_pod
    w.kube.patch_pod = lambda *a: (_ for _ in ()).throw(KubeError("PATCH", "ml/pods/a", 409, "conflict"))
    run(ctrl)
    assert w.kube.pods["ml/a"]["spec"].get("schedulingGates")
    assert metric(m, "composer_gate_patch_failures_total", kind="release") == 1
    w.kube.patch_pod = real
    run(ctrl)
    assert "schedulingGates" not in w.kube.pods["ml/a"]["spec"]
    assert [e.reason for e in w.kube.events if e.name == "a"].count("Released") == 1


def test_advertised_pod_is_released_while_its_node_composes_for_another(clock):
    """A node with a job running sits out of decide; a pod whose GPUs are already advertised
    there is released anyway (without it, it waits a whole hot-plug)."""
    w = world(hosts=1, max_gpus=None)
    ctrl, _ = make(w, clock)
    gpods(w, clock, ("a", 1))
    run(ctrl)  # a's GPU composed, not advertised yet
    gate = threading.Event()
    real = w.fabric.compose
    w.fabric.compose = lambda machine, names, **kw: (gate.wait(10), real(machine, names, **kw))[1]
    gpods(w, clock, ("b", 1))
    try:
        ctrl.round()  # b's compose starts on host-1 and blocks
        assert ctrl.jobs.running() and "schedulingGates" in w.kube.pods["ml/a"]["spec"]
        w.agent_step()  # now a's GPU is advertised, host-1 still busy
        ctrl.round()
        assert "schedulingGates" not in w.kube.pods["ml/a"]["spec"]
        assert w.kube.pods["ml/b"]["spec"].get("schedulingGates")
        assert ctrl.jobs.running()  # b's job is still running
    finally:
        gate.set()
        assert ctrl.wait_idle(10)
    w.agent_step()
    run(ctrl)
    assert "schedulingGates" not in w.kube.pods["ml/b"]["spec"]
    assert [e.reason for e in w.kube.events if e.name == "a"].count("Released") == 1
    assert [e.reason for e in w.kube.events if e.name == "b"].count("Gated") == 1


# -- nomination (status.nominatedNodeName, KEP-5278) ---------------------------------------------
@pytest.mark.parametrize(
    ("setting", "version", "on"),
    [
        ("auto", (1, 33), False),  # not checked
        ("auto", (1, 34), True),  # the scheduler counts a nominated gated pod on its node
        ("auto", (1, 35), True),  # NominatedNodeNameForExpectation beta, on by default
        ("auto", (1, 37), True),
        ("auto", None, False),  # version unreadable
        ("on", (1, 34), True),
        ("off", (1, 36), False),
    ],
)
def test_nomination_enabled(setting, version, on):
    assert nomination_enabled(setting, version) is on


def _reserved(until: float, phase: ann.IntentPhase = ann.IntentPhase.COMPOSING) -> ann.Intent:
    return ann.Intent(pod="ml/x", resource="nvidia.com/gpu", units=1, model=T4, phase=phase, until=until)


def _views(*specs: tuple[str, dict]) -> dict:
    return {f"uid-{name}": pod_view(pod(name, 1, **kw)) for name, kw in specs}


def test_nominations_wait_for_the_earlier_reservations_pods_to_be_bound():
    pods = _views(("a", {"gated": True}), ("b", {"gated": True}), ("c", {"gated": True}))
    one_round = {"uid-a": _reserved(T0 + 300), "uid-b": _reserved(T0 + 300)}
    assert nominations({"n1": one_round}, pods) == {"uid-a": "n1", "uid-b": "n1"}  # one compose
    later = {**one_round, "uid-c": _reserved(T0 + 301)}
    assert nominations({"n1": later}, pods) == {"uid-a": "n1", "uid-b": "n1"}
    # another node's waiting pods do not hold c back
    assert nominations({"n1": one_round, "n2": {"uid-c": later["uid-c"]}}, pods) == {
        "uid-a": "n1", "uid-b": "n1", "uid-c": "n2"
    }
    pods.update(_views(("a", {"node_name": "n1"}), ("b", {"node_name": "n1"})))
    assert nominations({"n1": later}, pods) == {"uid-c": "n1"}  # a and b bound: c's turn


def test_nominations_leave_out_what_the_scheduler_needs_no_nomination_for():
    pods = _views(("g", {"gated": True}), ("u", {}), ("done", {"gated": True}))
    pods["uid-done"] = pod_view(pod("done", 1, gated=True, phase="Succeeded"))
    assert nominations({"n1": {"uid-u": _reserved(0.0)}}, pods) == {}  # never gated
    # a pod never gated, still to be bound, counts as an earlier reservation
    assert nominations({"n1": {"uid-u": _reserved(0.0), "uid-g": _reserved(T0)}}, pods) == {}
    for earlier in ("uid-done", "uid-gone"):  # finished, or no longer there: nothing to bind
        assert nominations({"n1": {earlier: _reserved(T0 - 1), "uid-g": _reserved(T0)}}, pods) == {
            "uid-g": "n1"
        }
    nominated = pod("g", 1, gated=True)
    nominated["status"]["nominatedNodeName"] = "n1"
    assert nominations({"n1": {"uid-g": _reserved(T0)}}, {"uid-g": pod_view(nominated)}) == {}
    assert nominations({"n2": {"uid-g": _reserved(T0)}}, {"uid-g": pod_view(nominated)}) == {"uid-g": "n2"}


def test_nomination_setting_must_be_known():
    with pytest.raises(ValueError, match="auto, on or off"):
        nomination_enabled("yes", (1, 35))


def test_reserved_gated_pods_are_nominated_onto_their_node_and_still_released(clock):
    w = world()
    ctrl, m = make(w, clock, nominate=True)
    gpods(w, clock, ("a-small", 1), ("b-big", 2))
    run(ctrl)
    ctrl.close()  # waits for the nomination thread too
    hosts = {uid: n for n in w.kube.nodes for uid in w.kube.intents_json(n)}
    for name in ("a-small", "b-big"):
        p = w.kube.pods[f"ml/{name}"]
        assert p["status"]["nominatedNodeName"] == hosts[f"uid-{name}"]
        assert p["spec"].get("schedulingGates")  # nominated, still gated
    w.agent_step()
    run(ctrl)  # a pod the composer nominated is its own reservation: released, not skipped
    w.schedule()
    for name in ("a-small", "b-big"):
        assert w.kube.pods[f"ml/{name}"]["spec"]["nodeName"] == hosts[f"uid-{name}"]
    assert sorted(wr for wr in w.kube.writes if wr[0] == "nominate") == [
        ("nominate", "ml/a-small", hosts["uid-a-small"]),
        ("nominate", "ml/b-big", hosts["uid-b-big"]),
    ]  # once each: a later round does not nominate again
    assert metric(m, "composer_gate_patch_failures_total", kind="nominate") == 0


def test_without_nomination_no_status_is_written(clock):
    w = world()
    ctrl, _ = make(w, clock)
    gpods(w, clock, ("a", 1))
    run(ctrl)
    ctrl.close()
    assert [wr for wr in w.kube.writes if wr[0] == "nominate"] == []
    assert "nominatedNodeName" not in w.kube.pods["ml/a"]["status"]


def test_ungating_unchanged_clears_the_composers_nomination():
    kube = FakeKube()
    kube.add_pod(pod("a", 1, gated=True))
    kube.pods["ml/a"]["status"]["nominatedNodeName"] = "host-1"
    gates = GateExecutor(kube, Metrics(), lambda ev: None, nominate=True)
    ev = EventSpec("Pod", "ml", "a", "uid-a", "Warning", "Ungated", "no free GPU")
    action = PodAction("ungate", "uid-a", "ml/a", "", tuple(ungate_patch(pod_view(kube.pods["ml/a"]))), ev)
    assert gates.apply(action, nominated="host-1")
    gates.close()
    assert "nominatedNodeName" not in kube.pods["ml/a"]["status"]
    assert "schedulingGates" not in kube.pods["ml/a"]["spec"]


def test_a_refused_nomination_is_counted_not_raised():
    kube = FakeKube()  # the pod is gone: 404
    m = Metrics()
    gates = GateExecutor(kube, m, lambda ev: None, nominate=True)
    gates.nominate_reserved("ml/gone", "host-1")
    gates.close()
    assert m.registry.get_sample_value("composer_gate_patch_failures_total", {"kind": "nominate"}) == 1


def test_a_nomination_the_watch_does_not_show_is_sent_again(clock):
    """Lost (the API server refused it once): sent again after NOMINATION_RESEND_SECONDS, not
    every round before that; once the pod shows it, never again."""
    from composer.run.controller import NOMINATION_RESEND_SECONDS

    w = world()
    ctrl, m = make(w, clock, nominate=True, advertise_timeout_seconds=1000)
    real, refused = w.kube.nominate_pod, []

    def refuse_once(ns, name, node):
        if not refused:
            refused.append(name)
            raise KubeError("PATCH", f"{ns}/{name}/status", 500, "etcd timeout")
        real(ns, name, node)

    w.kube.nominate_pod = refuse_once
    gpods(w, clock, ("a", 1))
    run(ctrl)
    ctrl.close()
    assert "nominatedNodeName" not in w.kube.pods["ml/a"]["status"]
    clock.tick(NOMINATION_RESEND_SECONDS - 1)
    run(ctrl)
    ctrl.close()
    assert "nominatedNodeName" not in w.kube.pods["ml/a"]["status"]
    clock.tick(1)
    run(ctrl)
    ctrl.close()
    (host,) = w.fabric.attached()
    assert w.kube.pods["ml/a"]["status"]["nominatedNodeName"] == host
    clock.tick(NOMINATION_RESEND_SECONDS)
    run(ctrl)
    ctrl.close()
    assert [wr[1:] for wr in w.kube.writes if wr[0] == "nominate"] == [("ml/a", host)]  # the one that landed
    assert metric(m, "composer_gate_patch_failures_total", kind="nominate") == 1


class _Versioned:
    def __init__(self, version=None, error=None):
        self.version, self.error, self.calls = version, error, 0

    def server_version(self):
        self.calls += 1
        if self.error:
            raise self.error
        return self.version


def test_auto_nomination_reads_the_server_version_once_at_start():
    from composer.run.wiring import _nominate

    assert _nominate("auto", _Versioned((1, 35))) is True
    assert _nominate("auto", _Versioned((1, 34))) is True
    assert _nominate("auto", _Versioned((1, 33))) is False
    assert _nominate("auto", _Versioned(error=KubeError("GET", "version", 403, "forbidden"))) is False
    explicit = _Versioned((1, 30))
    assert _nominate("on", explicit) is True and explicit.calls == 0


def test_the_batch_window_counts_from_the_pods_arrival_on_the_watch():
    """A gated pod the watch delivered 0.3 s before the round has 0.7 s of a 1 s batch window
    left (the rounds' own delays are not added to its wait); a pod stamped after the round's
    clock (another thread's clock) counts from the round."""
    from composer.decide.decide import decide
    from composer.decide.round_types import Memory, Snapshot
    from composer.model.fabric import FabricGpu, FabricView
    from composer.model.nodestate import NodeView
    from composer.model.podspec import PodView

    now = 1_000.0
    fabric = FabricView((FabricGpu("gpu0", "Tesla-T4"),), frozenset({"h1"}), {"h1": "1"})
    nodes = (NodeView("h1", cpu_millis=8000, memory_bytes=2**34),)
    pol = Policy(batch_idle_seconds=1.0, batch_max_seconds=5.0)

    def wait_for(seen_at: float) -> float | None:
        gated = PodView("ml", "a", "uid-a", gpu={"nvidia.com/gpu": 1}, gates=(ann.GATE,), seen_at=seen_at)
        return decide(Snapshot(now, (gated,), nodes, {}, fabric), Memory(), pol).wake_after

    assert wait_for(now - 0.3) == pytest.approx(0.7)
    assert wait_for(now + 0.2) == pytest.approx(1.0)
    assert wait_for(0.0) == pytest.approx(1.0)  # not known (a listed pod): from this round


def test_each_placement_logs_its_planned_step_with_when_the_watch_saw_the_pod(clock, caplog):
    """The round that places a gated pod logs one ``planned`` line: the round's time, the node,
    the GPUs composed and the pod's first delivery by the watch; a held batch logs none."""

    class Stamped(ListingSource):
        def read(self):
            pods, nodes, pools = super().read()
            return tuple(replace(p, seen_at=seen.get(p.name, 0.0)) for p in pods), nodes, pools

    caplog.set_level(logging.INFO, logger=LOGGER)
    w = world()
    ctrl, _ = make(w, clock, batch_idle_seconds=1.0, batch_max_seconds=5.0)
    ctrl.source = Stamped(w.kube)
    seen = {"a": clock.t - 0.25}
    gpods(w, clock, ("a", 1))
    run(ctrl)
    planned = [parse(r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert planned == []  # held by the batch window: not planned yet
    clock.tick(1.0)
    d = run(ctrl)
    planned = [parse(r.getMessage()) for r in caplog.records if r.name == LOGGER]
    (pl,) = d.plan.placements
    assert planned == [
        {
            "step": "planned",
            "pod": "ml/a",
            "t": clock.t,
            "uid": pl.uid,
            "node": pl.host,
            "devices": 1,
            "gated": True,
            "seen": seen["a"],
        }
    ]
