"""The composer end to end on the lab.

API server, scheduler and kwok from the lab; per scenario a Director simulator, kwok Nodes,
the GPU-Operator stand-in and the composer as a process authenticated as the chart's
ServiceAccount (its RBAC is all it gets). Latencies are near zero; timeouts are short.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from composer.model import annotations as ann
from tests.composer.harness import free_port, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
ANNOTATIONS = ("composer.liqid.io/devices", "composer.liqid.io/intents", "composer.liqid.io/reclaim")


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _reasons(events: list[tuple[str, str, str]]) -> list[str]:
    return [r for _, r, _ in events]


def _clean(sc, node: str) -> bool:
    n = sc.node_obj(node)
    ann = n.metadata.annotations or {}
    taints = [t.key for t in (n.spec.taints or [])]
    return not any(a in ann for a in ANNOTATIONS) and "composer.liqid.io/reclaiming" not in taints


def test_two_hosts_hand_over_two_pooled_gpus(make_scenario):
    """Host A's pod gets both GPUs; it ends; after the idle timeout they return to the pool;
    a pod pinned to host B gets the same two GPUs."""
    with make_scenario(inventory="dev.yaml") as sc:
        a, b = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        sc.start_agent()
        sc.start_composer("--idle-timeout-seconds", "2")
        try:
            sc.gpu_pod("train-a", 2, product=T4, host=a)
            assert wait_for(lambda: sc.running_on("train-a"), timeout=40, what="pod A running") == a
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
            node = sc.node_obj(a)
            assert node.metadata.labels["nvidia.com/gpu.product"] == T4
            assert node.metadata.annotations["composer.liqid.io/devices"] == "gpu0,gpu1"
            composed = [m for t, r, m in sc.events("train-a") if r == "Composed"]
            assert composed and "gpu0, gpu1" in composed[0] and a in composed[0]

            # still busy: no reclaim while the pod runs, even past the idle timeout
            time.sleep(3)
            assert sc.attached() == {a: ["gpu0", "gpu1"]}

            sc.delete_pod("train-a")
            wait_for(lambda: sc.attached() == {}, timeout=30, what="GPUs back in the free pool")
            wait_for(lambda: _clean(sc, a), timeout=20, what="taint and annotations gone from host A")
            assert "nvidia.com/gpu.product" not in (sc.node_obj(a).metadata.labels or {})

            sc.gpu_pod("train-b", 2, host=b)
            assert wait_for(lambda: sc.running_on("train-b"), timeout=40, what="pod B running") == b
            assert sc.attached() == {b: ["gpu0", "gpu1"]}
            m = sc.metrics()
            assert _metric(m, "composer_compositions_total") == 2
            assert _metric(m, "composer_decompositions_total") == 1
            assert _metric(m, "composer_pending_to_composed_seconds_count") == 2
            assert re.search(r'composer_free_gpus\{model="Tesla-T4",pool=""\} 0\.0', m)
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_model_selection_pinning_and_static_gpus(make_scenario):
    """T4 versus A100 by the GFD product selector; a hostname pin is honoured; blade-slot-4, which
    carries a GPU the composer did not attach (gpu7, composed statically), is no composition target
    although it carries the model; gpu7, the broken GPU (gpu9) and the one in another group's pool
    (gpu8) are never touched."""
    with make_scenario(inventory="rich.yaml") as sc:
        s1, s2 = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        s3, s4 = sc.node("blade-slot-3"), sc.node("blade-slot-4")
        sc.start_agent()
        sc.start_composer("--idle-timeout-seconds", "2")
        try:
            assert sc.attached() == {s4: ["gpu7"]}
            wait_for(
                lambda: (sc.node_obj(s4).status.allocatable or {}).get("nvidia.com/gpu") == "1",
                timeout=20,
                what="static A100 advertised on blade-slot-4",
            )
            sc.gpu_pod("a100", 2, product=A100)
            sc.gpu_pod("t4-pinned", 1, product=T4, host=s3)
            # blade-slot-4 carries a static A100: not topped up; two A100s of one switch go to an
            # empty host instead (blade-slot-3 took the pinned T4 pod first)
            a100_host = wait_for(lambda: sc.running_on("a100"), timeout=40, what="A100 pod running")
            assert a100_host in {s1, s2}
            assert wait_for(lambda: sc.running_on("t4-pinned"), timeout=40, what="T4 pod running") == s3
            att = sc.attached()
            assert att[s4] == ["gpu7"] and att[a100_host] == ["gpu4", "gpu5"]
            assert len(att[s3]) == 1 and att[s3][0] in {"gpu0", "gpu1", "gpu2", "gpu3"}
            assert sc.node_obj(a100_host).metadata.labels["nvidia.com/gpu.product"] == A100
            assert sc.node_obj(s3).metadata.labels["nvidia.com/gpu.product"] == T4
            assert "composer.liqid.io/devices" not in (sc.node_obj(s4).metadata.annotations or {})
            assert not {g for gs in att.values() for g in gs} & {"gpu6", "gpu8", "gpu9"}

            sc.delete_pod("a100")
            sc.delete_pod("t4-pinned")
            wait_for(
                lambda: sc.attached() == {s4: ["gpu7"]}, timeout=30, what="reclaim of composed GPUs only"
            )
            time.sleep(2.5)  # another idle period: the static GPU stays
            assert sc.attached() == {s4: ["gpu7"]}
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_unsatisfiable_request_gets_an_event_and_no_attach_detach_loop(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent()
        sc.start_composer("--idle-timeout-seconds", "1")
        try:
            sc.gpu_pod("too-big", 3, product=T4)
            sc.gpu_pod("wrong-model", 1, product=A100)
            ev = wait_for(
                lambda: [e for e in sc.events("too-big") if e[1] == "TooManyGpus"],
                timeout=30,
                what="TooManyGpus event",
            )
            assert ev[0][0] == "Warning" and "asks for 3 GPU(s)" in ev[0][2] and "2 free" in ev[0][2]
            wait_for(
                lambda: [e for e in sc.events("wrong-model") if e[1] == "ModelNotInPool"],
                timeout=30,
                what="ModelNotInPool event for the A100 pod",
            )
            time.sleep(3)  # many rounds and idle timeouts later
            assert sc.attached() == {}
            for name, cause in (("too-big", "TooManyGpus"), ("wrong-model", "ModelNotInPool")):
                warnings = [r for t, r, _ in sc.events(name) if t == "Warning" and r != "FailedScheduling"]
                assert warnings == [cause], sc.events(name)  # one Warning, the cause
            m = sc.metrics()
            assert _metric(m, "composer_compositions_total") == 0
            assert _metric(m, "composer_decompositions_total") == 0
            assert _metric(m, "composer_pending_gpu_pods") == 2
            counters = sc.sim("GET", "state")["counters"]
            assert not any(k.startswith(("POST fabric", "POST relate", "DELETE relate")) for k in counters)
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_director_errors_during_compose_are_retried_with_backoff(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent()
        sc.start_composer()
        try:
            sc.sim(
                "POST",
                "faults",
                {
                    "kind": "error",
                    "method": "POST",
                    "path": "fabric/reprogram",
                    "status": 503,
                    "message": "fabric busy",
                    "times": 2,
                },
            )
            sc.gpu_pod("retry", 2)
            node = wait_for(lambda: sc.running_on("retry"), timeout=60, what="pod running after retries")
            reasons = _reasons(sc.events("retry"))
            assert reasons.count("ComposeFailed") == 2, reasons
            assert "Composed" in reasons
            assert sc.attached() == {node: ["gpu0", "gpu1"]}
            assert _metric(sc.metrics(), "composer_composition_failures_total") == 2
            assert not sc.sim("GET", "state")["edits"]  # every failed transaction was cancelled
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_director_down_then_back(make_scenario):
    """The Director is unreachable when the pod arrives: rounds are skipped (nothing is
    written), and the pod is served once the Director answers again."""
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent()
        sc.start_composer()
        try:
            wait_for(
                lambda: _metric(sc.metrics(), "composer_rounds_total") >= 1, timeout=20, what="first round"
            )
            sim = sc.procs["director-sim"]
            argv = sim.popen.args
            sim.stop()
            sc.gpu_pod("outage", 1)
            wait_for(
                lambda: _metric(sc.metrics(), 'composer_round_failures_total{stage="observe-director"}') >= 2,
                timeout=20,
                what="rounds failing on the Director",
            )
            assert sc.running_on("outage") is None
            from tests.composer.harness import start_proc

            sc.procs["director-sim"] = start_proc(
                "director-sim-2",
                list(argv),
                sc.tmp,
                env={"DIRECTOR_SIM_USERNAME": "admin", "DIRECTOR_SIM_PASSWORD": "e2e-director-password"},
            )
            node = wait_for(lambda: sc.running_on("outage"), timeout=60, what="pod running after the outage")
            assert sc.attached() == {node: ["gpu0"]}
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_composer_killed_mid_compose_converges_without_double_attach(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        a = sc.node("blade-slot-1")
        sc.start_agent()
        sc.start_composer("--idle-timeout-seconds", "1")
        try:
            # the reprogram call hangs for 3 s before the fabric changes: kill the composer meanwhile
            sc.sim(
                "POST",
                "faults",
                {
                    "kind": "delay",
                    "method": "POST",
                    "path": "fabric/reprogram",
                    "delay_seconds": 3,
                    "times": 1,
                },
            )
            sc.gpu_pod("crash", 2, host=a)

            def composing() -> bool:
                intents = (sc.node_obj(a).metadata.annotations or {}).get("composer.liqid.io/intents", "")
                return '"phase":"Composing"' in intents

            wait_for(composing, timeout=30, what="Composing intent recorded")
            wait_for(
                lambda: sc.sim("GET", "state")["counters"].get("POST fabric/reprogram"),
                timeout=10,
                what="reprogram in flight",
            )
            sc.procs["composer"].kill()
            wait_for(lambda: sc.attached() == {a: ["gpu0", "gpu1"]}, timeout=20, what="hot-plug finishing")
            sc.start_composer("--idle-timeout-seconds", "1")
            assert wait_for(lambda: sc.running_on("crash"), timeout=60, what="pod running") == a
            counters = sc.sim("GET", "state")["counters"]
            assert counters.get("POST relate/gpu") == 2, counters  # each GPU related exactly once
            assert counters.get("POST fabric/reprogram") == 1, counters
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
            # the new leader adopts what the killed one composed, so it is reclaimed when idle
            wait_for(
                lambda: (
                    (sc.node_obj(a).metadata.annotations or {}).get("composer.liqid.io/devices")
                    == "gpu0,gpu1"
                ),
                timeout=30,
                what="devices adopted",
            )
            sc.delete_pod("crash")
            wait_for(lambda: sc.attached() == {}, timeout=30, what="adopted GPUs reclaimed")
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_device_plugin_restarted_when_gpus_are_not_advertised(make_scenario):
    """With the device plugin's hot-plug quirk, the composer restarts its pod after the
    advertise timeout, then the GPUs are advertised and the pod runs."""
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent("--plugin-restart-quirk")
        sc.start_composer("--advertise-timeout-seconds", "1")
        try:
            sc.gpu_pod("quirk", 1)
            node = wait_for(
                lambda: sc.running_on("quirk"), timeout=60, what="pod running after plugin restart"
            )
            assert "GpusNotAdvertised" in _reasons(sc.events("quirk"))
            assert _metric(sc.metrics(), "composer_device_plugin_restarts_total") >= 1
            assert sc.attached() == {node: ["gpu0"]}
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_edit_left_open_by_a_crashed_composer_is_cancelled(make_scenario):
    """A composer died between fabric/edit and fabric/reprogram: its Composing intent is on the
    node and the edit is still open on the machine. The next composer cancels the edit and
    composes once."""
    with make_scenario(inventory="dev.yaml") as sc:
        a = sc.node("blade-slot-1")
        sc.start_agent()
        try:
            sc.gpu_pod("orphan", 2, host=a)
            uid = sc.pod("orphan").metadata.uid
            intent = ann.Intent(
                f"{sc.ns}/orphan",
                "nvidia.com/gpu",
                2,
                T4,
                ("gpu0", "gpu1"),
                ann.IntentPhase.COMPOSING,
                time.time(),
            )
            sc.core.patch_node(
                a, {"metadata": {"annotations": {ann.INTENTS: ann.encode_intents({uid: intent})}}}
            )
            sc.sim("POST", "faults", {"kind": "open_edit", "machine": a})
            assert sc.sim("GET", "state")["edits"]
            sc.start_composer()
            assert wait_for(lambda: sc.running_on("orphan"), timeout=60, what="pod running") == a
            st = sc.sim("GET", "state")
            assert st["edits"] == {}
            assert st["counters"].get("POST fabric/edit/cancel") == 1, st["counters"]
            assert st["counters"].get("POST relate/gpu") == 2, st["counters"]
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_two_replicas_never_act_at_once_and_the_standby_takes_over(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        sc.start_agent()
        p1, p2 = sc.probe_port, free_port()
        sc.start_composer("--idle-timeout-seconds", "60", name="composer-1", probe_port=p1)
        sc.start_composer("--idle-timeout-seconds", "60", name="composer-2", probe_port=p2)
        try:

            def leaders() -> list[int]:
                return [p for p in (p1, p2) if _metric(sc.metrics(p), "composer_leader") == 1]

            (first,) = wait_for(
                lambda: leaders() if len(leaders()) == 1 else None, timeout=20, what="one leader"
            )
            sc.gpu_pod("one", 1)
            wait_for(lambda: sc.running_on("one"), timeout=40, what="pod one running")
            time.sleep(1)
            assert len(leaders()) == 1
            assert sc.sim("GET", "state")["counters"].get("POST relate/gpu") == 1
            assert (
                _metric(sc.metrics(p1 if first == p2 else p2), "composer_rounds_total") == 0
            )  # standby idles

            sc.procs["composer-1" if first == p1 else "composer-2"].kill()
            other = p2 if first == p1 else p1
            wait_for(lambda: _metric(sc.metrics(other), "composer_leader") == 1, timeout=20, what="takeover")
            sc.gpu_pod("two", 1)
            wait_for(lambda: sc.running_on("two"), timeout=40, what="pod two running")
            assert sc.sim("GET", "state")["counters"].get("POST relate/gpu") == 2, (
                sc.attached(),
                sc.running_on("one"),
                sc.running_on("two"),
                sc.events("two"),
            )
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_sigterm_stops_the_composer_at_once_and_quietly(make_scenario):
    """A clean stop is not a failure: no WARNING for our own watches, exit code 0, and the stop
    does not wait for a watch's next event (the watches are idle here)."""
    with make_scenario(inventory="dev.yaml") as sc:
        proc = sc.start_composer()
        wait_for(lambda: "composer_leader 1.0" in sc.metrics(), timeout=60, what="composer leading")
        time.sleep(1.0)  # rounds done, watches open and idle
        before = proc.log.read_text(errors="replace")
        t0 = time.monotonic()
        proc.popen.send_signal(signal.SIGTERM)
        code = proc.popen.wait(30)
        took = time.monotonic() - t0
        after = proc.log.read_text(errors="replace")[len(before):]
        print(f"composer stopped {took:.2f} s after SIGTERM")
        assert code == 0, after
        assert "WARNING" not in after and "Traceback" not in after, after
        assert took < 5.0, f"stop took {took:.1f} s"  # generous bound: the stop wait is 0.5 s
