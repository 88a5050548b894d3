"""The composer as its chart deploys it never loses a GPU it composed: its record rebuilt from the
Director's owner tag (adoption), timers that outlive a leader, one true Event per cause.

Lab tests on the chart's Deployment (two replicas on the lab's real kubelet node, image built from
``Containerfile``; :mod:`tests.composer.deployed`), against the Director simulator and kwok Nodes.
Rounds run at least every ``resyncSeconds`` (1 s here) and the Director is read again every
``directorResyncSeconds`` (1 s here). A leader change is a forced delete of the leading Pod
(``--grace-period=0 --force``); the takeover is measured from that delete to the Lease naming
another Pod.

About 5 minutes for the module (three Deployments).
"""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from composer.model import annotations as ann
from dynamic_providers.director.client import DirectorClient
from tests.composer import deployed as dep
from tests.composer.harness import SIM_PASSWORD, SIM_USER, wait_for
from tests.composer.test_deployed import _one_leader
from tests.composer.test_deployed import pytestmark as pytestmark

#: Seconds between two rounds at most (``composer.resyncSeconds``).
ROUND = 1.0
#: Seconds a node job (taint, decompose, untag) or a Director read may add to a deadline.
WORK = 4.0


def _install(d: dep.Deployed, **composer: Any) -> None:
    d.helm("install", composer={"resyncSeconds": ROUND, "directorResyncSeconds": 1, **composer})
    wait_for(lambda: len(d.ready_pods()) == 2, timeout=120, what="two Ready Pods")
    _one_leader(d)


def _node_events(d: dep.Deployed, node: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Deployment's Events on Node ``node``, oldest first."""
    evs = d.sc.core.list_namespaced_event("default", field_selector=f"involvedObject.name={node}").items
    return [(e.type, e.reason, e.message) for e in sorted(evs, key=lambda e: e.metadata.creation_timestamp)
            if (e.reporting_instance or "").startswith(d.release)]


def _pod_events(d: dep.Deployed, pod: str) -> list[Any]:
    """The Deployment's Event objects on pod ``pod`` of the scenario's namespace."""
    evs = d.sc.core.list_namespaced_event(d.sc.ns, field_selector=f"involvedObject.name={pod}").items
    return [e for e in evs if (e.reporting_instance or "").startswith(d.release)]


def _record(d: dep.Deployed, node: str) -> str | None:
    return (d.sc.node_obj(node).metadata.annotations or {}).get(ann.DEVICES)


def _remove_record(d: dep.Deployed, node: str) -> None:
    """``kubectl annotate node <node> composer.liqid.io/devices-``."""
    d.sc.core.patch_node(node, {"metadata": {"annotations": {ann.DEVICES: None}}})


def _udesc(d: dep.Deployed) -> dict[str, str]:
    return {g["name"]: g.get("udesc") or "" for g in d.sc.sim("GET", "state")["gpus"]}


def _change_leader(d: dep.Deployed) -> float:
    """Force-delete the leading Pod; returns the seconds until the Lease names another Pod."""
    leader = _one_leader(d)
    t = time.monotonic()
    d.force_delete(leader)
    wait_for(lambda: (n := d.leader()) != leader and n, timeout=60, interval=0.2, what="the Lease taken over")
    return time.monotonic() - t


def test_adopt_a_lost_record_keep_the_gpu_under_its_pod_reclaim_it_idle_and_compose_again(make_deployed):
    """The record of a composed GPU removed while its pod runs: adopted within a round (one
    ``AdoptedGpus``), the GPU stays under the running pod, and goes back after the pod ends and
    the idle timeout passes; a Pulumi-tagged GPU on the same host is never touched. Removed on an
    idle node: adopted, and back in the free pool within the idle timeout plus two rounds. The
    host then takes a new composition of two GPUs."""
    idle = 15.0
    with make_deployed(install=False) as d:
        sc = d.sc
        b = sc.node("blade-slot-2")
        pulumi = f"pulumi-{sc.sid}"
        try:
            _install(d, idleTimeoutSeconds=idle)
            sc.gpu_pod("runs", 1, host=b)
            wait_for(lambda: sc.running_on("runs") == b, timeout=60, what="pod running")
            (mine,) = sc.attached()[b]
            other = next(g for g in ("gpu0", "gpu1") if g != mine)
            with DirectorClient(sc.director_url, username=SIM_USER, password=SIM_PASSWORD) as director:
                director.compose(b, [other], owner_tag=pulumi)  # the Pulumi program's static GPU
            assert _udesc(d) == {mine: "gpu-composer", other: pulumi}

            # 1. the record goes while the pod runs
            _remove_record(d, b)
            removed = time.monotonic()
            wait_for(lambda: _record(d, b) == mine, timeout=2 * ROUND + WORK, what="GPU adopted")
            assert time.monotonic() - removed <= 2 * ROUND + WORK
            adopted = [m for t, r, m in _node_events(d, b) if r == "AdoptedGpus"]
            assert len(adopted) == 1 and mine in adopted[0] and other not in adopted[0], _node_events(d, b)
            time.sleep(idle + 2 * ROUND)  # longer than the idle timeout: the running pod keeps it
            assert sc.attached() == {b: sorted([mine, other])} and sc.running_on("runs") == b
            assert len([r for _, r, _ in _node_events(d, b) if r == "AdoptedGpus"]) == 1  # named once
            sc.delete_pod("runs")
            ended = time.monotonic()
            wait_for(lambda: sc.attached() == {b: [other]}, timeout=idle + 2 * ROUND + WORK + 5,
                     what="adopted GPU reclaimed after the pod")
            assert time.monotonic() - ended >= idle - 1
            # the adopted GPU is untagged after its detach; the static GPU keeps its tag
            wait_for(lambda: _udesc(d) == {mine: "", other: pulumi}, timeout=WORK, what="owner tags")

            with DirectorClient(sc.director_url, username=SIM_USER, password=SIM_PASSWORD) as director:
                director.decompose(b, [other])  # the program gives its static GPU back
                director.clear_owner_tag([other], only_if=pulumi)

            # 2. the record goes on an idle node
            sc.gpu_pod("idle", 1, host=b)
            wait_for(lambda: sc.running_on("idle") == b, timeout=60, what="second pod running")
            sc.delete_pod("idle")
            gone = time.monotonic()
            (again,) = sc.attached()[b]
            _remove_record(d, b)
            wait_for(lambda: sc.attached() == {}, timeout=idle + 2 * ROUND + WORK, interval=0.2,
                     what="GPU back in the free pool within the idle timeout plus two rounds")
            assert time.monotonic() - gone <= idle + 2 * ROUND + WORK
            assert [m for _, r, m in _node_events(d, b) if r == "AdoptedGpus"][1:] != []

            # 3. the host takes a new composition afterwards (adopted, not static)
            sc.gpu_pod("single", 1, host=b)
            wait_for(lambda: sc.running_on("single") == b, timeout=60, what="third pod running")
            sc.delete_pod("single")
            _remove_record(d, b)
            wait_for(lambda: _record(d, b), timeout=2 * ROUND + WORK, what="adopted again")
            sc.gpu_pod("pair", 2, host=b)
            assert wait_for(lambda: sc.running_on("pair"), timeout=60, what="two-GPU pod running") == b
            assert sc.attached() == {b: ["gpu0", "gpu1"]}
            assert not [e for e in _pod_events(d, "pair") if e.type == "Warning"]
            assert json.dumps(sc.sim("GET", "state")["violations"]) == "[]"
        except AssertionError:
            print(d.describe(), sc.diagnostics())
            raise


def test_orphan_grace_and_idle_timeout_outlive_a_leader_change(make_deployed):
    """At the same moment a Node with a composed GPU is deleted and another node goes idle; half
    way through the grace (and the timeout) the leader is force-deleted. Both GPUs are back in the
    free pool no later than the grace plus two rounds plus the lease takeover after they began,
    and not before the grace."""
    grace = 30.0
    with make_deployed(install=False) as d:
        sc = d.sc
        a, b = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        try:
            _install(d, orphanGraceSeconds=grace, idleTimeoutSeconds=grace)
            sc.gpu_pod("orphan", 1, host=a)
            sc.gpu_pod("idle", 1, host=b)
            wait_for(lambda: sc.running_on("orphan") == a and sc.running_on("idle") == b, timeout=60,
                     what="both pods running")
            d.force_delete("orphan")
            started = {a: time.monotonic()}  # the orphan's condition: its Node goes
            sc.core.delete_node(a)
            ended = {a: time.monotonic()}
            started[b] = time.monotonic()  # the idle one's: its pod goes
            sc.delete_pod("idle")
            ended[b] = time.monotonic()
            wait_for(lambda: _orphan_timer_saved(d), timeout=2 * ROUND + WORK, what="orphan timer saved")
            wait_for(lambda: ann.IDLE_SINCE in (sc.node_obj(b).metadata.annotations or {}),
                     timeout=2 * ROUND + WORK, what="idle timer on the Node")
            time.sleep(max(0.0, grace / 2 - (time.monotonic() - ended[b])))
            takeover = _change_leader(d)
            back: dict[str, float] = {}

            def both_back() -> bool:
                att = sc.attached()
                for n in (a, b):
                    if n not in att and n not in back:
                        back[n] = time.monotonic()
                return len(back) == 2

            deadline = grace + 2 * ROUND + takeover + WORK
            wait_for(both_back, timeout=deadline + 10, interval=0.2, what="both GPUs back in the free pool")
            for n in (a, b):  # not before the grace, and no later than grace + two rounds + takeover
                assert grace - 1 <= back[n] - ended[n] and back[n] - started[n] <= deadline, (
                    n, back[n] - started[n], takeover)
            # each GPU is untagged after its detach (the untag follows the decompose)
            wait_for(lambda: set(_udesc(d).values()) == {""}, timeout=WORK, what="owner tags cleared")
        except AssertionError:
            print(d.describe(), sc.diagnostics())
            raise


def _orphan_timer_saved(d: dep.Deployed) -> bool:
    try:
        cm = d.sc.core.read_namespaced_config_map(f"{dep.LEASE}-orphans", d.sc.ns)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return "gpu" in ((cm.data or {}).get("orphan-since") or "")


def test_one_warning_per_cause_on_each_pod_the_pool_cannot_serve_also_after_a_leader_change(make_deployed):
    """Three pods the pool (two Tesla-T4) cannot serve: three GPUs, a model it lacks, a host that
    is no Node. After many rounds and a leader change each has exactly one Warning from the
    composer, its reason the cause; the new leader's repeat is that Event's count."""
    with make_deployed(install=False) as d:
        sc = d.sc
        try:
            _install(d)
            sc.gpu_pod("three", 3)
            sc.gpu_pod("h100", 1, product="NVIDIA-H100-NVL")
            sc.gpu_pod("nowhere", 1, host=f"e{sc.sid}-no-such-host")
            causes = {"three": "TooManyGpus", "h100": "ModelNotInPool", "nowhere": "UnknownHost"}

            def reasons() -> dict[str, set[str]]:
                return {p: {e.reason for e in _pod_events(d, p)} for p in causes}

            wait_for(lambda: all(reasons()[p] == {c} for p, c in causes.items()), timeout=30,
                     what="one Warning per pod")
            time.sleep(8 * ROUND)  # many rounds
            _change_leader(d)
            _one_leader(d)
            wait_for(lambda: all(e.count == 2 for p in causes for e in _pod_events(d, p)), timeout=30,
                     what="the new leader's repeat counted on the same Events")
            time.sleep(5 * ROUND)
            for pod, cause in causes.items():
                evs = _pod_events(d, pod)
                assert [(e.type, e.reason, e.count) for e in evs] == [("Warning", cause, 2)], (pod, evs)
            three = _pod_events(d, "three")[0].message
            assert "asks for 3 GPU(s)" in three and "2 free (Tesla-T4: 2 free)" in three, three
            assert "the most one host can take is 2" in three, three
            assert _pod_events(d, "h100")[0].message == "asks for NVIDIA-H100-NVL; pool 'default' has " \
                "Tesla-T4: 2 free"
            assert sc.attached() == {}
        except AssertionError:
            print(d.describe(), sc.diagnostics())
            raise
