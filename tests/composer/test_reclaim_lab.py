"""Reclaim guards, out-of-band detaches and orphaned GPUs end to end on the lab, configured
through ``pulumi up``.

Each test writes a stack (:func:`tests.composer.stack_lab.lab_estate`: the scenario's two hosts, a
composer serving the scenario's namespace ``sc.ns`` from one pool of both hosts), applies it with
the real pulumi CLI (:func:`tests.composer.stack_lab.lab_stack`), checks that the composer's
Deployment carries the values the test relies on, and starts the composer of
:mod:`tests.composer.harness` (a process with the chart's RBAC, its ServiceAccount token) with the
Deployment's ``COMPOSER_*`` values (:func:`tests.composer.stack_lab.deployed_flags`), against the
Director simulator, kwok Nodes, the GPU-Operator stand-in and the lab's real API server and
scheduler. What each test sets in the stack's ``composer`` section (besides ``namespaces``):

- guards and autoscaler annotations: ``idle_timeout_seconds: 1``, ``reclaim_budget: "1"``,
  ``owner_tag``;
- GPU detached out of band: nothing (defaults). The flag ``--director-resync-seconds 0.5`` stays
  hand-written: the stack config has no key for the chart's ``composer.directorResyncSeconds``
  (the Deployment carries the chart's default, 10 s), and the test has the Director read at least
  every 0.5 s, so the detach is seen well inside its 30 s wait;
- node deleted mid-compose: ``orphan_grace_seconds: 2``, ``idle_timeout_seconds: 600``,
  ``owner_tag``;
- reclaim window: ``idle_timeout_seconds: 1``, ``reclaim_windows_utc`` (a window excluding now,
  then a second ``pulumi up`` with one around now);
- composer killed while giving back orphans: ``orphan_grace_seconds: 1``,
  ``idle_timeout_seconds: 600``, ``owner_tag``.

About 30 to 45 s a test (``pulumi up`` and ``destroy`` included), 3 min for the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from composer.model import annotations as ann
from tests.composer.harness import Scenario, utc_window, wait_for
from tests.composer.stack_lab import PULUMI_LAB_MARKS, deployed_flags, lab_estate, lab_stack

pytestmark = PULUMI_LAB_MARKS

HOLD_KEYS = (ann.AUTOSCALER_HOLD, *ann.AUTOSCALER_ANNOTATIONS)


def _metric(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + " ") or line.startswith(name + "{")
    )


def _annotations(sc, node: str) -> dict[str, str]:
    return sc.node_obj(node).metadata.annotations or {}


def _annotate_node(sc, node: str, value: str | None) -> None:
    sc.core.patch_node(node, {"metadata": {"annotations": {ann.DO_NOT_RECLAIM: value}}})


def _udesc(sc) -> dict[str, str]:
    return {g["name"]: g.get("udesc") or "" for g in sc.sim("GET", "state")["gpus"]}


def _estate(sc: Scenario, run: str, kubeconfig: Path, **composer: Any) -> dict[str, Any]:
    """The lab estate whose composer serves the scenario's namespace (one pool of both hosts, no
    static GPU), with the ``composer`` keys given."""
    return lab_estate(sc, run, kubeconfig, composer={"namespaces": [sc.ns], **composer})


def _serves_the_scenario(sc: Scenario, env: dict[str, str]) -> None:
    """The Deployment's composer serves the scenario's namespace, from one pool, excluding no GPU."""
    assert json.loads(env["COMPOSER_NAMESPACES"]) == [sc.ns]
    assert json.loads(env["COMPOSER_POOLS"]) == []  # the default pool: both hosts
    assert json.loads(env["COMPOSER_EXCLUDED_DEVICES"]) == []


@contextmanager
def _orphan_stack(
    sc: Scenario, run: str, grace: int, kubeconfig: Path, tmp_path: Path, api: Any
) -> Iterator[tuple[dict[str, str], str]]:
    """``pulumi up`` of a stack whose composer gives orphaned GPUs back after ``grace`` seconds, keeps
    idle GPUs for 600 s (longer than the test) and tags what it attaches ``composer-<run>``; checks
    the Deployment carries those values, starts the agent and the composer with them, and yields
    (the Deployment's ``COMPOSER_*`` values, the owner tag)."""
    tag = f"composer-{run}"
    estate = _estate(sc, run, kubeconfig, orphan_grace_seconds=grace, idle_timeout_seconds=600, owner_tag=tag)
    with lab_stack(sc, tmp_path, estate, api) as lab:
        env = lab.env
        _serves_the_scenario(sc, env)
        assert float(env["COMPOSER_ORPHAN_GRACE_SECONDS"]) == grace
        assert float(env["COMPOSER_IDLE_TIMEOUT_SECONDS"]) == 600
        assert env["COMPOSER_OWNER_TAG"] == tag
        sc.start_agent()
        sc.start_composer(*deployed_flags(env))
        yield env, tag


def test_reclaim_guards_and_autoscaler_annotations(make_scenario, composer_lab, lab_api, tmp_path):
    """do-not-reclaim on a node and on a pod hold the GPUs (ReclaimHeld naming them); once
    lifted, a budget of 1 reclaims one node at a time (ReclaimHeld naming the budget); the
    autoscaler annotations are on the nodes while they hold composer GPUs and gone after."""
    with make_scenario(inventory="dev.yaml") as sc:
        a, b = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        run = f"g{sc.sid}"
        tag = f"composer-{run}"
        estate = _estate(sc, run, composer_lab.kubeconfig, idle_timeout_seconds=1, reclaim_budget="1",
                         owner_tag=tag)
        with lab_stack(sc, tmp_path, estate, lab_api) as lab:
            env = lab.env
            _serves_the_scenario(sc, env)
            assert float(env["COMPOSER_IDLE_TIMEOUT_SECONDS"]) == 1
            assert (env["COMPOSER_RECLAIM_BUDGET"], env["COMPOSER_OWNER_TAG"]) == ("1", tag)
            assert json.loads(env["COMPOSER_RECLAIM_WINDOWS_UTC"]) == []  # no window: any time
            sc.start_agent()
            sc.start_composer(*deployed_flags(env))

            sc.gpu_pod("pa", 1, host=a)
            sc.gpu_pod("pb", 1, host=b)
            wait_for(lambda: sc.running_on("pa") and sc.running_on("pb"), timeout=60, what="pods running")
            for n in (a, b):
                assert all(_annotations(sc, n).get(k) == "true" for k in HOLD_KEYS), _annotations(sc, n)
            assert set(_udesc(sc).values()) == {tag}  # the stack's owner tag on what it attached

            _annotate_node(sc, a, "true")
            toleration = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
            keeper = {
                "metadata": {"name": "keeper", "annotations": {ann.DO_NOT_RECLAIM: "true"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": b},
                    "tolerations": [toleration],
                    "containers": [{"name": "c", "image": "stand-in"}],
                },
            }
            sc.core.create_namespaced_pod(sc.ns, keeper)
            wait_for(lambda: sc.running_on("keeper"), timeout=30, what="keeper running")
            sc.delete_pod("pa")
            sc.delete_pod("pb")
            wait_for(
                lambda: any(r == "ReclaimHeld" for _, r, _ in sc.node_events(a))
                and any(r == "ReclaimHeld" for _, r, _ in sc.node_events(b)),
                timeout=30,
                what="both reclaims held",
            )
            assert "node " + a in [m for _, r, m in sc.node_events(a) if r == "ReclaimHeld"][0]
            assert f"pod {sc.ns}/keeper" in [m for _, r, m in sc.node_events(b) if r == "ReclaimHeld"][0]
            assert sc.attached() == {a: ["gpu0"], b: ["gpu1"]}

            # both guards lifted at once: the budget (1) lets one node reclaim at a time
            _annotate_node(sc, a, None)
            sc.delete_pod("keeper")
            wait_for(lambda: sc.attached() == {}, timeout=60, what="both nodes reclaimed")
            held = [
                m for n in (a, b) for _, r, m in sc.node_events(n) if r == "ReclaimHeld" and "(budget)" in m
            ]
            assert held, [sc.node_events(n) for n in (a, b)]
            wait_for(
                lambda: not any(k in _annotations(sc, n) for n in (a, b) for k in HOLD_KEYS),
                timeout=30,
                what="autoscaler annotations removed after the reclaim",
            )
            assert set(_udesc(sc).values()) == {""}  # untagged once given back


def test_gpu_detached_out_of_band_is_reported_on_pod_and_node_and_not_replaced(
    make_scenario, composer_lab, lab_api, tmp_path
):
    with make_scenario(inventory="dev.yaml") as sc:
        a = sc.node("blade-slot-1")
        with lab_stack(sc, tmp_path, _estate(sc, f"d{sc.sid}", composer_lab.kubeconfig), lab_api) as lab:
            env = lab.env
            _serves_the_scenario(sc, env)
            sc.start_agent()
            # no stack key for the Director resync period (module docstring)
            sc.start_composer(*deployed_flags(env), "--director-resync-seconds", "0.5")

            sc.gpu_pod("train", 1, host=a)
            assert wait_for(lambda: sc.running_on("train"), timeout=60, what="pod running") == a
            assert sc.attached() == {a: ["gpu0"]}
            relates = sc.sim("GET", "state")["counters"].get("POST relate/gpu")
            sc.sim("POST", "detach", {"device": "gpu0"})
            wait_for(
                lambda: "GpuDetachedOutOfBand" in [r for _, r, _ in sc.events("train")],
                timeout=30,
                what="Warning on the pod",
            )
            pod_ev = [(t, m) for t, r, m in sc.events("train") if r == "GpuDetachedOutOfBand"]
            node_ev = [(t, m) for t, r, m in sc.node_events(a) if r == "GpuDetachedOutOfBand"]
            assert pod_ev[0][0] == "Warning" and "gpu0" in pod_ev[0][1] and "Director" in pod_ev[0][1]
            assert node_ev and node_ev[0][0] == "Warning" and f"{sc.ns}/train" in node_ev[0][1]
            assert _metric(sc.metrics(), "composer_gpus_detached_out_of_band_total") == 1
            wait_for(lambda: ann.DEVICES not in _annotations(sc, a), timeout=10, what="record updated")
            assert sc.running_on("train") == a
            # nothing composed in its place for the running pod
            assert sc.sim("GET", "state")["counters"].get("POST relate/gpu") == relates
            assert sc.attached() == {}
            assert len(pod_ev) == 1


def test_node_deleted_while_the_composer_is_down_mid_compose_gpus_go_back(
    make_scenario, composer_lab, lab_api, tmp_path
):
    """The composer is killed mid-compose (the GPUs already carry its owner tag), and the Node
    is deleted while it is down: the next composer finds the tagged GPUs on a machine with no
    Node and gives them back after the grace period, with Events on its Lease; nothing attached
    twice."""
    with make_scenario(inventory="dev.yaml") as sc:
        a = sc.node("blade-slot-1")
        with _orphan_stack(sc, f"o{sc.sid}", 2, composer_lab.kubeconfig, tmp_path, lab_api) as (env, tag):
            sc.delay_reprogram(3)
            sc.gpu_pod("crash", 2, host=a)
            wait_for(
                lambda: sc.sim("GET", "state")["counters"].get("POST fabric/reprogram"),
                timeout=30,
                what="reprogram in flight",
            )
            assert set(_udesc(sc).values()) == {tag}  # tagged before the attach
            sc.procs["composer"].kill()
            wait_for(lambda: sc.attached() == {a: ["gpu0", "gpu1"]}, timeout=20, what="hot-plug finishing")
            sc.core.delete_namespaced_pod("crash", sc.ns, grace_period_seconds=0)
            sc.core.delete_node(a)
            sc.start_composer(*deployed_flags(env))
            wait_for(lambda: sc.attached() == {}, timeout=40, what="orphaned GPUs given back")

            def lease_events() -> list:
                evs = sc.core.list_namespaced_event(sc.ns, field_selector="involvedObject.kind=Lease").items
                return [e for e in evs if (e.reporting_instance or "").startswith(f"e2e-{sc.sid}-")]

            wait_for(
                lambda: "OrphanedGpusReclaimed" in [e.reason for e in lease_events()],
                timeout=10,
                what="Event on the Lease",
            )
            evs = lease_events()
            assert "OrphanedGpus" in [e.reason for e in evs]
            lease = next(e for e in evs if e.reason == "OrphanedGpusReclaimed")
            assert lease.involved_object.name == "composer-e2e" and "gpu0, gpu1" in lease.message
            assert _metric(sc.metrics(), "composer_orphaned_gpus_reclaimed_total") == 2
            counters = sc.sim("GET", "state")["counters"]
            assert counters.get("POST relate/gpu") == 2, counters  # each GPU attached exactly once
            assert set(_udesc(sc).values()) == {""}
            assert json.dumps(sc.sim("GET", "state")["violations"]) == "[]"


def test_reclaim_waits_for_its_window(make_scenario, composer_lab, lab_api, tmp_path):
    """Outside the configured UTC window an idle node keeps its GPUs (ReclaimHeld naming the
    window); after a ``pulumi up`` with a window around now, the composer started with the new
    Deployment's values gives them back."""
    with make_scenario(inventory="dev.yaml") as sc:
        a = sc.node("blade-slot-1")
        later = utc_window(2, 2)
        estate = _estate(sc, f"w{sc.sid}", composer_lab.kubeconfig, idle_timeout_seconds=1,
                         reclaim_windows_utc=[later])
        with lab_stack(sc, tmp_path, estate, lab_api) as lab:
            env = lab.env
            _serves_the_scenario(sc, env)
            assert float(env["COMPOSER_IDLE_TIMEOUT_SECONDS"]) == 1
            assert json.loads(env["COMPOSER_RECLAIM_WINDOWS_UTC"]) == [later]
            assert "COMPOSER_RECLAIM_BUDGET" not in env  # no budget: only the window holds
            sc.start_agent()
            sc.start_composer(*deployed_flags(env))

            sc.gpu_pod("pa", 1, host=a)
            wait_for(lambda: sc.running_on("pa"), timeout=60, what="pod running")
            sc.delete_pod("pa")
            wait_for(
                lambda: [m for _, r, m in sc.node_events(a) if r == "ReclaimHeld"],
                timeout=30,
                what="reclaim held by the window",
            )
            assert "(window)" in [m for _, r, m in sc.node_events(a) if r == "ReclaimHeld"][0]
            assert sc.attached() == {a: ["gpu0"]}
            sc.procs["composer"].stop()

            now = utc_window(-1, 3)
            estate["composer"]["reclaim_windows_utc"] = [now]
            env = lab.up(estate)
            assert json.loads(env["COMPOSER_RECLAIM_WINDOWS_UTC"]) == [now]
            assert float(env["COMPOSER_IDLE_TIMEOUT_SECONDS"]) == 1
            sc.start_composer(*deployed_flags(env))
            wait_for(lambda: sc.attached() == {}, timeout=40, what="reclaimed inside the window")


def test_composer_killed_while_giving_back_orphans_leaks_nothing(
    make_scenario, composer_lab, lab_api, tmp_path
):
    """The composer is killed while it decomposes the GPUs of a deleted Node (the detach hangs
    3 s): the next composer finds them free but still tagged, clears the tag after the grace
    period, and nothing is attached twice or left attached."""
    with make_scenario(inventory="dev.yaml") as sc:
        a = sc.node("blade-slot-1")
        with _orphan_stack(sc, f"k{sc.sid}", 1, composer_lab.kubeconfig, tmp_path, lab_api) as (env, tag):
            sc.gpu_pod("pa", 1, host=a)
            wait_for(lambda: sc.running_on("pa"), timeout=60, what="pod running")
            reprograms = sc.sim("GET", "state")["counters"].get("POST fabric/reprogram", 0)
            sc.delay_reprogram(3)
            sc.core.delete_namespaced_pod("pa", sc.ns, grace_period_seconds=0)
            sc.core.delete_node(a)
            wait_for(
                lambda: sc.sim("GET", "state")["counters"].get("POST fabric/reprogram", 0) > reprograms,
                timeout=30,
                what="orphan decompose in flight",
            )
            sc.procs["composer"].kill()
            wait_for(lambda: sc.attached() == {}, timeout=20, what="detach finishing")
            assert _udesc(sc)["gpu0"] == tag  # killed before the tag was cleared
            sc.start_composer(*deployed_flags(env))
            wait_for(lambda: set(_udesc(sc).values()) == {""}, timeout=30, what="stale tag cleared")
            counters = sc.sim("GET", "state")["counters"]
            assert counters.get("POST relate/gpu") == 1, counters  # attached once, never again
            assert sc.attached() == {}
