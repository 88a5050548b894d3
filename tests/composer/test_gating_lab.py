"""Scheduling gates end to end on the lab: the real API server calls the chart's webhook over
HTTPS (chart-made certificate, URL on 127.0.0.1), the real scheduler places released pods, the
composer runs as the chart's ServiceAccount (its RBAC, pods patch included, is all it gets)."""

from __future__ import annotations

import json
import time

import pytest

from composer.model import annotations as ann
from tests.composer.harness import free_port, wait_for
from tests.composer.test_e2e_lab import _metric

pytestmark = [pytest.mark.lab, pytest.mark.slow]

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"


def _gates(sc, name: str) -> list[str]:
    p = sc.pod(name)
    return [g.name for g in (p.spec.scheduling_gates or [])] if p else []


def _reservation(sc, name: str) -> dict:
    p = sc.pod(name)
    return json.loads((p.metadata.annotations or {}).get(ann.RESERVATION) or "{}") if p else {}


def _intents(sc, node: str) -> str:
    return (sc.node_obj(node).metadata.annotations or {}).get(ann.INTENTS, "")


def test_two_pods_of_different_sizes_racing_each_get_their_own_gpus(make_scenario):
    with make_scenario(inventory="rich.yaml", hotplug_latency=0.5) as sc:
        sc.start_agent()
        hook = sc.enable_gating()
        sc.start_composer("--max-gpus-per-node", "2", "--idle-timeout-seconds", "60", *hook)
        try:
            sc.gpu_pod("big", 2, product=T4)
            sc.gpu_pod("small", 1, product=T4)
            assert _gates(sc, "big") == [ann.GATE] and _gates(sc, "small") == [ann.GATE]
            sc.gpu_pod("huge", 3, product=T4)  # more than any host takes: ungated at once
            big = wait_for(lambda: sc.running_on("big"), timeout=60, what="big running")
            small = wait_for(lambda: sc.running_on("small"), timeout=60, what="small running")
            assert big != small
            assert _reservation(sc, "big")["node"] == big and len(_reservation(sc, "big")["devices"]) == 2
            assert _reservation(sc, "small")["node"] == small
            assert sc.pod("small").spec.node_selector["kubernetes.io/hostname"] == small
            att = sc.attached()
            assert len(att[big]) == 2 and len(att[small]) == 1
            for name in ("big", "small"):
                reasons = [r for _, r, _ in sc.events(name)]
                assert {"Gated", "Reserved", "Composed", "Released"} <= set(reasons), reasons
                assert "GpusTakenByAnotherPod" not in reasons
            huge = [e for e in sc.events("huge") if e[1] == "Ungated"]
            assert huge and huge[0][0] == "Normal" and "TooManyGpus" in huge[0][2]
            (cause,) = [e for e in sc.events("huge") if e[0] == "Warning" and e[1] != "FailedScheduling"]
            assert cause[1] == "TooManyGpus" and "GPU slot limit 2" in cause[2], cause
            assert _gates(sc, "huge") == []
            m = sc.metrics()
            assert _metric(m, "composer_compositions_total") == 2
            assert _metric(m, "composer_gpus_taken_by_another_pod_total") == 0
            assert _metric(m, "composer_pods_gated_total") == 3
            assert _metric(m, "composer_time_gated_seconds_count") == 3
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_reserved_pod_is_nominated_onto_its_node_while_gated(make_scenario):
    """KEP-5278 on the real API server: the composer (as the chart's ServiceAccount, whose
    pods/status patch permission this needs) names the reserved node in
    ``status.nominatedNodeName`` while the pod waits behind its gate for the hot-plug."""
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent()
        hook = sc.enable_gating()
        sc.start_composer("--idle-timeout-seconds", "60", "--nominate-node", "on", *hook)
        try:
            sc.delay_reprogram(3)
            sc.gpu_pod("nominee", 1, product=T4)
            node = wait_for(
                lambda: sc.pod("nominee").status.nominated_node_name, timeout=30, what="nominatedNodeName"
            )
            assert _gates(sc, "nominee") == [ann.GATE]  # nominated while still gated
            assert sc.pod("nominee").metadata.uid in _intents(sc, node)  # the node holding its reservation
            assert wait_for(lambda: sc.running_on("nominee"), timeout=60, what="pod running") == node
            m = sc.metrics()
            assert _metric(m, "composer_gate_patch_failures_total") == 0
        except AssertionError:
            print(sc.diagnostics())
            raise


def _advertise(sc, node: str, gpus: int) -> None:
    """Set the Node's nvidia.com/gpu capacity and allocatable, as the GPU agent does."""
    res = {"nvidia.com/gpu": str(gpus)}
    sc.core.patch_node_status(node, {"status": {"capacity": res, "allocatable": res}})


def test_the_real_scheduler_keeps_a_nominated_gated_pods_gpu_from_an_ungated_pod(make_scenario):
    """Why the composer nominates a gated pod from Kubernetes 1.34 (composer/decide/gating.py):
    the lab's real kube-scheduler counts a gated pod whose ``status.nominatedNodeName`` another
    writer set on that node, so a GPU pod the gate does not hold is not bound to the GPU
    advertised for it, while it is bound at once to a GPU nobody is nominated for. No composer
    runs: the test writes the nomination and the advertised GPUs itself."""
    with make_scenario(inventory="dev.yaml") as sc:
        reserved, other = sorted(sc.hosts.values())
        try:
            sc.core.create_namespaced_pod(sc.ns, {
                "metadata": {"name": "held"},
                "spec": {
                    "schedulingGates": [{"name": ann.GATE}],
                    "nodeSelector": {"kubernetes.io/hostname": reserved},
                    "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists",
                                     "effect": "NoSchedule"}],
                    "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:stand-in",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                },
            })
            sc.core.patch_namespaced_pod_status("held", sc.ns, {"status": {"nominatedNodeName": reserved}})
            assert sc.pod("held").status.nominated_node_name == reserved
            sc.gpu_pod("ungated", 1)  # no webhook here: this pod has no gate
            _advertise(sc, reserved, 1)
            time.sleep(10)  # two scheduling attempts at least (the node update requeues the pod)
            assert sc.pod("ungated").spec.node_name is None, "bound to the GPU advertised for a nominated pod"
            assert [g.name for g in sc.pod("held").spec.scheduling_gates] == [ann.GATE]
            _advertise(sc, other, 1)
            bound = wait_for(lambda: sc.pod("ungated").spec.node_name, timeout=60, what="ungated bound")
            assert bound == other
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_gated_pod_deleted_mid_compose_leaves_no_reservation_and_no_leaked_gpu(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        a = sc.node("blade-slot-1")
        sc.start_agent()
        hook = sc.enable_gating()
        sc.start_composer("--idle-timeout-seconds", "2", *hook)
        try:
            sc.delay_reprogram(2)
            sc.gpu_pod("gone", 2, host=a)
            wait_for(lambda: "Composing" in _intents(sc, a), timeout=30, what="reservation recorded")
            sc.delete_pod("gone")
            wait_for(lambda: sc.attached() == {a: ["gpu0", "gpu1"]}, timeout=20, what="hot-plug finishing")
            wait_for(lambda: _intents(sc, a) == "", timeout=20, what="reservation released")
            wait_for(lambda: sc.attached() == {}, timeout=30, what="GPUs reclaimed after the idle timeout")
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_webhook_down_pods_are_created_and_served_the_old_way(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent()
        sc.enable_gating()  # registered, but nothing serves it
        sc.start_composer("--idle-timeout-seconds", "60")
        try:
            t0 = time.monotonic()
            sc.gpu_pod("plain", 1, product=T4)
            assert time.monotonic() - t0 < 5  # failurePolicy Ignore: refused connection, no wait
            assert _gates(sc, "plain") == []
            assert wait_for(lambda: sc.running_on("plain"), timeout=60, what="pod running")
            assert "Gated" not in [r for _, r, _ in sc.events("plain")]
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_pool_empty_pod_is_ungated_with_an_event_after_the_wait(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent()
        hook = sc.enable_gating()
        # both GPUs static: the pool has none (GPUs may come: the pod waits, then goes unchanged)
        sc.start_composer("--unserved-wait-seconds", "3", "--excluded-devices", '["gpu0", "gpu1"]', *hook)
        try:
            sc.gpu_pod("no-a100", 1, product=A100)
            assert _gates(sc, "no-a100") == [ann.GATE]
            time.sleep(1)
            assert _gates(sc, "no-a100") == [ann.GATE]  # still waiting
            ev = wait_for(
                lambda: [e for e in sc.events("no-a100") if e[1] == "Ungated"],
                timeout=30,
                what="Ungated event",
            )
            assert ev[0][0] == "Normal" and "NoFreeGpus" in ev[0][2]
            warnings = [r for t, r, _ in sc.events("no-a100") if t == "Warning" and r != "FailedScheduling"]
            assert warnings == ["NoFreeGpus"]  # the cause, once; the ungate is no second Warning
            p = sc.pod("no-a100")
            assert not p.spec.scheduling_gates
            assert "kubernetes.io/hostname" not in (p.spec.node_selector or {})  # unchanged
            assert sc.attached() == {}
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_gated_pods_the_pool_cannot_serve_get_one_warning_each_naming_the_cause(make_scenario):
    """Gated pods asking for three GPUs (the pool has two), a model the pool lacks, a host that is
    no Node: each is ungated at once (Normal ``Ungated``) and has, after many rounds and a restart
    of the composer, exactly one Warning from it, its reason the cause, counted twice."""
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent()
        hook = sc.enable_gating()
        sc.start_composer(*hook)
        try:
            sc.gpu_pod("three", 3)
            sc.gpu_pod("h100", 1, product="NVIDIA-H100-NVL")
            sc.gpu_pod("nowhere", 1, host=f"e{sc.sid}-no-such-host")
            causes = {"three": "TooManyGpus", "h100": "ModelNotInPool", "nowhere": "UnknownHost"}

            def composer_events(name: str) -> list:
                evs = sc.core.list_namespaced_event(sc.ns, field_selector=f"involvedObject.name={name}").items
                return [e for e in evs if (e.reporting_instance or "").startswith(f"e2e-{sc.sid}-")]

            def settled() -> bool:
                return all({e.reason for e in composer_events(p)} == {"Gated", c, "Ungated"}
                           for p, c in causes.items())

            wait_for(settled, timeout=30, what="each pod gated, refused once and ungated")
            time.sleep(3)  # many rounds (resync 0.3 s)
            sc.procs["composer"].stop()  # a new composer: its memory is empty
            sc.start_composer(*hook)
            wait_for(lambda: all(e.count == 2 for p, c in causes.items() for e in composer_events(p)
                                 if e.reason == c), timeout=30, what="the repeat counted on the same Event")
            time.sleep(2)
            for pod, cause in causes.items():
                evs = composer_events(pod)
                assert sorted((e.type, e.reason, e.count) for e in evs) == [
                    ("Normal", "Gated", 1), ("Normal", "Ungated", 1), ("Warning", cause, 2)], (pod, evs)
            assert sc.attached() == {}
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_composer_killed_while_pods_are_gated_new_leader_finishes_without_double_compose(make_scenario):
    with make_scenario(inventory="rich.yaml", hotplug_latency=0.2) as sc:
        sc.start_agent()
        hook = sc.enable_gating()
        probe = free_port()
        sc.start_composer("--idle-timeout-seconds", "60", *hook)
        try:
            sc.delay_reprogram(3)
            sc.gpu_pod("first", 2, product=T4)
            sc.gpu_pod("second", 1, product=T4)
            wait_for(
                lambda: sc.sim("GET", "state")["counters"].get("POST fabric/reprogram"),
                timeout=30,
                what="reprogram in flight",
            )
            assert _gates(sc, "first") == [ann.GATE]
            sc.procs["composer"].kill()
            time.sleep(4)  # the lease (3 s) runs out
            sc.start_composer("--idle-timeout-seconds", "60", *hook, name="composer-2", probe_port=probe)
            first = wait_for(lambda: sc.running_on("first"), timeout=60, what="first running")
            second = wait_for(lambda: sc.running_on("second"), timeout=60, what="second running")
            att = sc.attached()
            assert sorted(len(v) for v in att.values()) == sorted({first: 2, second: 1}.values()) or (
                first == second and len(att[first]) == 3
            )
            counters = sc.sim("GET", "state")["counters"]
            assert counters.get("POST relate/gpu") == 3, counters  # each GPU related exactly once
            for name, node in (("first", first), ("second", second)):
                assert _reservation(sc, name)["node"] == node
        except AssertionError:
            print(sc.diagnostics())
            raise
