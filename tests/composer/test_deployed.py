"""The composer as deployed by its chart: a Deployment whose Pods run the image built from
``Containerfile`` on the lab's real kubelet node (``mgmt-1``).

The handover scenario (two hosts hand over two pooled GPUs), the two-replica failover and the
killed-mid-compose case, with a forced delete of the leader's Pod (``--grace-period=0 --force``) as
the kill. The fixtures (``make_deployed``: the Deployment serving a fresh scenario) are in
``conftest.py``.
"""

from __future__ import annotations

import pytest

from tests.composer import deployed as dep
from tests.composer.harness import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _one_leader(d: dep.Deployed) -> str:
    """Name of the leading Pod once exactly one Pod reports composer_leader 1 and holds the Lease."""

    def leader() -> str | None:
        pods = d.ready_pods()
        leading = [p.metadata.name for p in pods if dep.metric(d.metrics(p), "composer_leader") == 1]
        return leading[0] if len(leading) == 1 and d.leader() == leading[0] else None

    return wait_for(leader, timeout=60, interval=0.5, what="one leader among the Pods")


def test_deployment_runs_ready_on_the_real_node_and_plays_the_handover_scenario(make_deployed):
    with make_deployed() as d:
        sc = d.sc
        try:
            pods = wait_for(lambda: d.ready_pods() if len(d.ready_pods()) == 2 else None, timeout=120,
                            what="two Ready Pods")
            assert {p.spec.node_name for p in pods} == {"mgmt-1"}
            for p in pods:
                statuses = p.status.container_statuses
                assert statuses[0].image_id.endswith(d.image_id), statuses[0].image_id
                assert p.spec.containers[0].security_context.read_only_root_filesystem
            leader = _one_leader(d)

            a, b = sc.node("blade-slot-1"), sc.node("blade-slot-2")
            sc.gpu_pod("train-a", 2, host=a)
            assert wait_for(lambda: sc.running_on("train-a"), timeout=60, what="pod A running") == a
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
            sc.delete_pod("train-a")
            wait_for(lambda: sc.attached() == {}, timeout=60, what="GPUs back in the free pool")
            sc.gpu_pod("train-b", 2, host=b)
            assert wait_for(lambda: sc.running_on("train-b"), timeout=60, what="pod B running") == b
            assert sc.attached() == {b: ["gpu0", "gpu1"]}
            composed = [(m, by) for r, m, by in d.composer_events("train-b") if r == "Composed"]
            assert composed and b in composed[0][0], d.composer_events("train-b")
            assert composed[0][1] in {p.metadata.name for p in pods}  # posted by a Deployment Pod
            counters = sc.sim("GET", "state")["counters"]
            assert counters.get("POST relate/gpu") == 4, counters  # 2 to A, then the same 2 to B

            text = d.metrics(next(p for p in pods if p.metadata.name == leader))
            assert dep.metric(text, "composer_leader") == 1
            for p in pods:  # no secret in the logs (the password is in the chart's Secret)
                log = d.logs(p.metadata.name)
                assert dep.SIM_PASSWORD not in log
        except AssertionError:
            print(d.describe(), sc.diagnostics())
            raise


def test_two_replicas_one_acts_and_the_standby_takes_over_a_force_deleted_leader(make_deployed):
    with make_deployed() as d:
        sc = d.sc
        try:
            wait_for(lambda: len(d.ready_pods()) == 2, timeout=120, what="two Ready Pods")
            first = _one_leader(d)
            sc.gpu_pod("one", 1)
            wait_for(lambda: sc.running_on("one"), timeout=60, what="pod one running")
            assert sc.sim("GET", "state")["counters"].get("POST relate/gpu") == 1
            standby = next(p for p in d.ready_pods() if p.metadata.name != first)
            assert dep.metric(d.metrics(standby), "composer_rounds_total") == 0  # the standby idles

            d.force_delete(first)
            second = wait_for(lambda: (n := d.leader()) != first and n, timeout=60,
                              what="the Lease taken over")
            # the standby or the Deployment's replacement Pod, whichever campaigned first
            assert second in {p.metadata.name for p in d.pods()}, (second, standby.metadata.name)
            assert _one_leader(d) == second
            sc.gpu_pod("two", 1)
            wait_for(lambda: sc.running_on("two"), timeout=60, what="pod two running")
            assert sc.sim("GET", "state")["counters"].get("POST relate/gpu") == 2
            # the Deployment replaces the deleted Pod; it stands by
            wait_for(lambda: len(d.ready_pods()) == 2, timeout=120, what="replacement Pod Ready")
            assert d.leader() == second
        except AssertionError:
            print(d.describe(), sc.diagnostics())
            raise


def test_leader_force_deleted_mid_compose_converges_without_double_attach(make_deployed):
    with make_deployed() as d:
        sc = d.sc
        a = sc.node("blade-slot-1")
        try:
            wait_for(lambda: len(d.ready_pods()) == 2, timeout=120, what="two Ready Pods")
            counters = dep.compose_across_a_leader_kill(d, "crash", a, leader=_one_leader(d))
            assert counters.get("POST relate/gpu") == 2, counters  # each GPU related exactly once
            assert counters.get("POST fabric/reprogram") == 1, counters
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
            wait_for(lambda: (sc.node_obj(a).metadata.annotations or {}).get("composer.liqid.io/devices")
                     == "gpu0,gpu1", timeout=60, what="devices adopted by the new leader")
            sc.delete_pod("crash")
            wait_for(lambda: sc.attached() == {}, timeout=60, what="adopted GPUs reclaimed")
        except AssertionError:
            print(d.describe(), sc.diagnostics())
            raise


def test_config_change_rolls_the_deployment_mid_compose_without_losing_or_repeating_it(make_deployed):
    """A new idle timeout (what a changed stack config gives the chart) is a ``helm upgrade``
    that rolls both Pods while a compose is in flight: the compose completes once."""
    with make_deployed() as d:
        sc = d.sc
        a = sc.node("blade-slot-1")
        try:
            wait_for(lambda: len(d.ready_pods()) == 2, timeout=120, what="two Ready Pods")
            _one_leader(d)
            before = {p.metadata.name for p in d.pods()}
            sc.sim("POST", "faults", {"kind": "delay", "method": "POST", "path": "fabric/reprogram",
                                      "delay_seconds": 4, "times": 1})
            sc.gpu_pod("during-upgrade", 2, host=a)
            wait_for(lambda: sc.sim("GET", "state")["counters"].get("POST fabric/reprogram"),
                     timeout=60, what="reprogram in flight")
            d.helm("upgrade", composer={"idleTimeoutSeconds": 30})
            wait_for(lambda: len(d.ready_pods()) == 2 and not before & {p.metadata.name for p in d.pods()},
                     timeout=180, what="both Pods replaced")
            for p in d.ready_pods():
                env = {e.name: e.value for e in p.spec.containers[0].env}
                assert env["COMPOSER_IDLE_TIMEOUT_SECONDS"] == "30"
            assert wait_for(lambda: sc.running_on("during-upgrade"), timeout=120, what="pod running") == a
            assert _one_leader(d) not in before
            counters = sc.sim("GET", "state")["counters"]
            assert counters.get("POST relate/gpu") == 2, counters  # composed once, nothing lost
            assert counters.get("POST fabric/reprogram") == 1, counters
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
        except AssertionError:
            print(d.describe(), sc.diagnostics())
            raise
