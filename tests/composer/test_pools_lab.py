"""The stack's ``composer`` section end to end: through ``pulumi up`` to the composer.

The stack (:func:`tests.composer.stack_lab.lab_estate`, applied with the real pulumi CLI by
:func:`tests.composer.stack_lab.lab_stack`) names two tenants, each with a composer pool of one host,
on a scenario's own Director simulator and kwok Nodes (:mod:`tests.composer.harness`). Nothing is
labelled or configured by hand: the composer is started with the configuration ``pulumi up``
rendered into its Deployment (``COMPOSER_POOLS`` and the other ``COMPOSER_*`` values read back from
the API server, :func:`tests.composer.stack_lab.deployed_flags`), as its Pods would run it.

Pools (``test_tenant_pods_get_gpus_of_their_pool_only``): beta's static GPU (a GpuComposition of
the stack) serves beta's pod on beta's host, and nothing is composed onto that host; tenant alpha's
pod gets a GPU composed onto alpha's host (blade-slot-2, although blade-slot-1 comes first by
name); a second alpha pod is refused by the pool quota (1 GPU, while the namespace's ResourceQuota
admits 2); a beta pod pinned to alpha's host is refused (``NoHostFits``: the host is in pool alpha)
and no GPU moves. The composer writes the pool label on both Nodes. About 50 s.

Reclaim guards (``test_reclaim_guards_and_owner_tag_come_from_the_stack_config``): the stack sets
``composer.reclaim_windows_utc`` to a window that excludes now, a budget, an owner tag and a grace
period; the Deployment carries them, the GPU composed for a pod carries the stack's owner tag on the
Director (``GET device/info/gpu``), and once the pod is gone the idle node (idle timeout 1 s) keeps
its GPU with a ``ReclaimHeld`` Event naming the window. About 45 s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client

from composer.model.annotations import POOL_LABEL
from tests.composer.harness import E2E_LABEL, Scenario, utc_window, wait_for
from tests.composer.stack_lab import PULUMI_LAB_MARKS, deployed_flags, lab_estate, lab_stack

pytestmark = PULUMI_LAB_MARKS


def _estate(sc: Scenario, run: str, kubeconfig: Path) -> dict[str, Any]:
    """The lab estate with two tenants, one composer pool of one host each, and beta's static GPU."""
    n1, n2 = sc.node("blade-slot-1"), sc.node("blade-slot-2")
    # namespace quotas (ResourceQuota, checked at admission) above the pool quotas, so the composer's
    # own limits are what refuses; beta's 3 admit the three beta pods the test creates
    tenants = [
        {"name": t, "namespace": f"{run}-{t}", "gpu_quota": q, "allowed_models": ["Tesla-T4"]}
        for t, q in (("alpha", 2), ("beta", 3))
    ]
    composer = {
        "namespaces": [t["namespace"] for t in tenants],
        # alpha on the second host: the first by name is where an unpooled pod would go
        # alpha's namespace admits 2 GPUs, its composer pool holds 1 at a time (the composer can
        # hand out 1: the fabric pool's 2 minus the static one)
        "pools": [
            {"name": "alpha", "hosts": [n2], "quota_gpus": 1},
            {"name": "beta", "hosts": [n1], "quota_gpus": 1},
        ],
    }
    # beta's static GPU, on beta's host
    static = [
        {"host": n1, "pool": "gpu-pool", "device_names": ["gpu1"], "model": "Tesla-T4", "tenant": "beta"}
    ]
    return lab_estate(sc, run, kubeconfig, composer=composer, tenants=tenants, gpu_compositions=static)


def _pod(core: client.CoreV1Api, namespace: str, name: str, sid: str, *, host: str | None = None) -> None:
    selector = {E2E_LABEL: sid, **({"kubernetes.io/hostname": host} if host else {})}
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": selector,
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:stand-in", "resources": {
                "limits": {"nvidia.com/gpu": "1", "cpu": "100m", "memory": "64Mi"}}}],
        },
    })


def _not_composed(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    """``reason: message`` of the composer's Warnings on pod ``namespace/name`` (the reason is the cause)."""
    evs = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [f"{e.reason}: {e.message}" for e in evs
            if e.type == "Warning" and e.reporting_component == "gpu-composer"]


def test_tenant_pods_get_gpus_of_their_pool_only(make_scenario, composer_lab, lab_api, tmp_path):
    core = client.CoreV1Api(lab_api)
    with make_scenario(inventory="dev.yaml") as sc:
        n1, n2 = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        run = f"p{sc.sid}"
        alpha, beta = f"{run}-alpha", f"{run}-beta"
        with lab_stack(sc, tmp_path, _estate(sc, run, composer_lab.kubeconfig), lab_api) as lab:
            env = lab.env
            pools = json.loads(env["COMPOSER_POOLS"])
            assert pools == [
                {"name": "alpha", "quotaGpus": 1, "hosts": [n2], "namespaces": [alpha]},
                {"name": "beta", "quotaGpus": 1, "hosts": [n1], "namespaces": [beta]},
            ]
            assert json.loads(env["COMPOSER_EXCLUDED_DEVICES"]) == ["gpu1"]
            assert sc.attached() == {n1: ["gpu1"]}  # the static composition
            sc.start_agent()
            sc.start_composer(*deployed_flags(env))
            # the composer labels the Nodes from the same configuration
            wait_for(lambda: _pools(core, n1, n2) == {n1: "beta", n2: "alpha"}, timeout=30, what="labels")
            # beta's pod uses beta's static GPU (same pool); nothing is composed onto that host
            _pod(core, beta, "b1", sc.sid)
            assert wait_for(lambda: _running_on(core, beta, "b1"), timeout=60, what="beta pod running") == n1
            _pod(core, beta, "b2", sc.sid, host=n1)
            msg = wait_for(lambda: _not_composed(core, beta, "b2"), timeout=30, what="b2 refused")[0]
            assert msg.startswith(f"NoHostFits: host {n1} carries 1 statically composed GPU(s)")

            # pinned: ungated (no webhook here), the scheduler alone would bind it to beta's spare static GPU
            _pod(core, alpha, "a1", sc.sid, host=n2)
            node = wait_for(lambda: _running_on(core, alpha, "a1"), timeout=60, what="alpha pod running")
            assert node == n2
            assert sc.attached() == {n1: ["gpu1"], n2: ["gpu0"]}

            _pod(core, alpha, "a2", sc.sid)  # alpha's pool quota is 1 GPU
            msg = wait_for(lambda: _not_composed(core, alpha, "a2"), timeout=30, what="a2 refused")[0]
            assert msg.startswith("QuotaExceeded: pool 'alpha' has 0 GPU(s) of quota left")

            _pod(core, beta, "b3", sc.sid, host=n2)  # beta asks for alpha's host
            msg = wait_for(lambda: _not_composed(core, beta, "b3"), timeout=30, what="b3 refused")[0]
            assert msg == f"NoHostFits: host {n2} belongs to pool 'alpha', the pod to 'beta'"
            assert sc.attached() == {n1: ["gpu1"], n2: ["gpu0"]}  # nothing moved or added
            assert _running_on(core, beta, "b3") is None


def test_reclaim_guards_and_owner_tag_come_from_the_stack_config(
    make_scenario, composer_lab, lab_api, tmp_path
):
    core = client.CoreV1Api(lab_api)
    with make_scenario(inventory="dev.yaml") as sc:
        n1, n2 = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        run = f"r{sc.sid}"
        alpha = f"{run}-alpha"
        later, tag = utc_window(2, 2), f"composer-{run}"  # the window never contains now
        estate = _estate(sc, run, composer_lab.kubeconfig)
        estate["composer"].update(idle_timeout_seconds=1, reclaim_windows_utc=[later], reclaim_budget="1",
                                  owner_tag=tag, orphan_grace_seconds=120)
        estate["composer"]["pools"][1]["reclaim_budget"] = 0
        with lab_stack(sc, tmp_path, estate, lab_api) as lab:
            env = lab.env
            assert json.loads(env["COMPOSER_RECLAIM_WINDOWS_UTC"]) == [later]
            assert (env["COMPOSER_RECLAIM_BUDGET"], env["COMPOSER_OWNER_TAG"]) == ("1", tag)
            assert float(env["COMPOSER_ORPHAN_GRACE_SECONDS"]) == 120
            assert [p.get("reclaimBudget") for p in json.loads(env["COMPOSER_POOLS"])] == [None, "0"]
            sc.start_agent()
            sc.start_composer(*deployed_flags(env))

            # pinned: ungated (no webhook here), the scheduler alone would bind it to beta's spare static GPU
            _pod(core, alpha, "a1", sc.sid, host=n2)
            node = wait_for(lambda: _running_on(core, alpha, "a1"), timeout=60, what="alpha pod running")
            assert node == n2
            assert sc.attached() == {n1: ["gpu1"], n2: ["gpu0"]}
            udesc = sc.director_udesc()
            assert udesc["gpu0"] == tag  # the stack's owner tag on the GPU the composer attached
            assert udesc["gpu1"].startswith("pulumi:")  # the static GPU keeps the program's own tag

            core.delete_namespaced_pod("a1", alpha, grace_period_seconds=0)
            held = wait_for(
                lambda: [m for _, r, m in sc.node_events(n2) if r == "ReclaimHeld"],
                timeout=30,
                what="the idle node's reclaim held by the window",
            )
            assert "(window)" in held[0] and "gpu0" in held[0], held
            assert sc.attached() == {n1: ["gpu1"], n2: ["gpu0"]}  # idle for longer than 1 s, still held
            assert sc.director_udesc()["gpu0"] == tag


def _running_on(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    p = core.read_namespaced_pod(name, namespace)
    return p.spec.node_name if p.spec.node_name and p.status.phase == "Running" else None


def _pools(core: client.CoreV1Api, *nodes: str) -> dict[str, str | None]:
    return {n: (core.read_node(n).metadata.labels or {}).get(POOL_LABEL) for n in nodes}

