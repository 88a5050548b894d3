"""The stack's ``composer`` section end to end: through ``pulumi up`` to the composer.

The stack (written here, applied with the real pulumi CLI through the Automation API) names two
tenants, each with a composer pool of one host, on a scenario's own Director simulator and kwok
Nodes (:mod:`tests.composer.harness`). Nothing is labelled or configured by hand: the composer is
started with the configuration ``pulumi up`` rendered into its Deployment (``COMPOSER_POOLS`` and
the other ``COMPOSER_*`` values read back from the API server, :func:`_deployed_flags`), as its
Pods would run it. The chart's Pods themselves go to kwok Nodes, which do not run them; the
composer runs as a local process with the chart's ServiceAccount rights.

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
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from pulumi import automation as auto

from composer.annotations import POOL_LABEL
from tests.composer.harness import E2E_LABEL, SIM_PASSWORD, SIM_USER, Scenario, utc_window, wait_for
from tests.pulumi_project import file_backend, local_project

ROOT = Path(__file__).resolve().parents[2]
BINARIES = ("pulumi", "pulumi-language-python", "helm")
MISSING = [b for b in BINARIES if not (ROOT / ".toolchain" / "bin" / b).exists() and shutil.which(b) is None]
PASSPHRASE = "pools-e2e-lab-only"

pytestmark = [
    pytest.mark.lab,
    pytest.mark.cli,
    pytest.mark.slow,
    pytest.mark.skipif(bool(MISSING), reason=f"binaries missing ({', '.join(MISSING)}): run make setup"),
]


def _estate(sc: Scenario, run: str, kubeconfig: Path) -> dict[str, Any]:
    """A small lab stack on the scenario's Director and Nodes: two hosts, two tenants, one pool each."""
    n1, n2 = sc.node("blade-slot-1"), sc.node("blade-slot-2")
    hosts = [
        {
            "name": n,
            "role": "baremetal-worker",
            "boot_mac": f"52:54:00:00:0e:0{i}",
            "bmc": {"endpoint": f"https://127.0.0.1:1845{i}", "username": "root", "verify_tls": False},
        }
        for i, n in ((1, n1), (2, n2))
    ]
    # namespace quotas (ResourceQuota, checked at admission) above the pool quotas, so the composer's
    # own limits are what refuses; beta's 3 admit the three beta pods the test creates
    tenants = [
        {"name": t, "namespace": f"{run}-{t}", "gpu_quota": q, "allowed_models": ["Tesla-T4"]}
        for t, q in (("alpha", 2), ("beta", 3))
    ]
    return {
        "environment": "lab",
        "mothership": {"kubeconfig": str(kubeconfig), "namespace": f"{run}-infra"},
        "fabric": {
            "director": {"endpoint": sc.director_url, "username": SIM_USER},
            "pools": [{"name": "gpu-pool", "models": ["Tesla-T4"], "size": 2}],
        },
        "hosts": hosts,
        "hypervisor_clusters": [
            {
                "name": "workers",
                "hosts": [n1, n2],
                "gpu_workload_mode": "container",
                "kubevirt": False,
                "control_plane_replicas": 1,
            }
        ],
        "tenants": tenants,
        # beta's static GPU, on beta's host
        "gpu_compositions": [
            {"host": n1, "pool": "gpu-pool", "device_names": ["gpu1"], "model": "Tesla-T4", "tenant": "beta"}
        ],
        "composer": {
            "pool": "gpu-pool",
            "target_cluster": "workers",
            "namespace": f"{run}-composer",
            "release_name": f"{run}-composer",
            "restart_device_plugin": False,
            "namespaces": [t["namespace"] for t in tenants],
            # alpha on the second host: the first by name is where an unpooled pod would go
            # alpha's namespace admits 2 GPUs, its composer pool holds 1 at a time (the composer can
            # hand out 1: the fabric pool's 2 minus the static one)
            "pools": [
                {"name": "alpha", "hosts": [n2], "quota_gpus": 1},
                {"name": "beta", "hosts": [n1], "quota_gpus": 1},
            ],
        },
    }


def _stack(tmp_path: Path, estate: dict[str, Any]) -> auto.Stack:
    work = local_project(tmp_path)
    (work / "Pulumi.pools.yaml").write_text(yaml.safe_dump({"config": {"composable-gpu:estate": estate}}))
    env = {"PULUMI_BACKEND_URL": file_backend(work), "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE}
    stack = auto.create_stack("pools", work_dir=str(work), opts=auto.LocalWorkspaceOptions(env_vars=env))
    secrets = {"fabric.director.password": SIM_PASSWORD, "hosts[0].bmc.password": "lab-bmc-password",
               "hosts[1].bmc.password": "lab-bmc-password"}
    for path, value in secrets.items():
        stack.set_config(f"estate.{path}", auto.ConfigValue(value, secret=True), path=True)
    return stack


@contextmanager
def _up(
    sc: Scenario, tmp_path: Path, estate: dict[str, Any], api: client.ApiClient
) -> Iterator[dict[str, str]]:
    """``pulumi up`` of ``estate``; yields the plain ``COMPOSER_*`` values of the composer's Deployment,
    prints the scenario's process logs when an assertion fails, and destroys the stack at the end."""
    release, namespace = estate["composer"]["release_name"], estate["composer"]["namespace"]
    stack = _stack(tmp_path, estate)
    try:
        assert stack.up(on_output=lambda _line: None).summary.result == "succeeded"
        env = _deployed_env(api, namespace, release)
        # The chart's Pods do not run on kwok Nodes, so its gating webhook could only time out
        # (failurePolicy Ignore, 5 s per GPU pod): drop it; the local composer serves ungated pods.
        _drop_webhooks(api, release)
        yield env
    except AssertionError:
        print(sc.diagnostics())
        raise
    finally:
        stack.destroy(on_output=lambda _line: None)
        stack.workspace.remove_stack("pools")


def _deployed_env(api: client.ApiClient, namespace: str, name: str) -> dict[str, str]:
    """The plain ``COMPOSER_*`` values of the composer container of Deployment ``name``."""
    dep = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    container = next(c for c in dep.spec.template.spec.containers if c.name == "composer")
    return {e.name: e.value for e in container.env or () if e.name.startswith("COMPOSER_") and e.value}


#: The Deployment's variables the local composer is started with (as flags, after the harness's own).
DEPLOYED = ("POOLS", "NAMESPACES", "EXCLUDED_DEVICES", "IDLE_TIMEOUT_SECONDS", "RECLAIM_BUDGET",
            "RECLAIM_WINDOWS_UTC", "OWNER_TAG", "ORPHAN_GRACE_SECONDS")


def _deployed_flags(env: dict[str, str]) -> list[str]:
    """``--pools <COMPOSER_POOLS> ...``: the :data:`DEPLOYED` values the Deployment sets, as flags."""
    return [arg for name in DEPLOYED if f"COMPOSER_{name}" in env
            for arg in (f"--{name.lower().replace('_', '-')}", env[f"COMPOSER_{name}"])]


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
    evs = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.message for e in evs if e.reason == "NotComposed"]


def test_tenant_pods_get_gpus_of_their_pool_only(make_scenario, composer_lab, lab_api, tmp_path):
    core = client.CoreV1Api(lab_api)
    with make_scenario(inventory="dev.yaml") as sc:
        n1, n2 = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        run = f"p{sc.sid}"
        alpha, beta = f"{run}-alpha", f"{run}-beta"
        with _up(sc, tmp_path, _estate(sc, run, composer_lab.kubeconfig), lab_api) as env:
            pools = json.loads(env["COMPOSER_POOLS"])
            assert pools == [
                {"name": "alpha", "quotaGpus": 1, "hosts": [n2], "namespaces": [alpha]},
                {"name": "beta", "quotaGpus": 1, "hosts": [n1], "namespaces": [beta]},
            ]
            assert json.loads(env["COMPOSER_EXCLUDED_DEVICES"]) == ["gpu1"]
            assert sc.attached() == {n1: ["gpu1"]}  # the static composition
            sc.start_agent()
            sc.start_composer(*_deployed_flags(env))
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
        with _up(sc, tmp_path, estate, lab_api) as env:
            assert json.loads(env["COMPOSER_RECLAIM_WINDOWS_UTC"]) == [later]
            assert (env["COMPOSER_RECLAIM_BUDGET"], env["COMPOSER_OWNER_TAG"]) == ("1", tag)
            assert float(env["COMPOSER_ORPHAN_GRACE_SECONDS"]) == 120
            assert [p.get("reclaimBudget") for p in json.loads(env["COMPOSER_POOLS"])] == [None, "0"]
            sc.start_agent()
            sc.start_composer(*_deployed_flags(env))

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


def _drop_webhooks(api: client.ApiClient, release: str) -> None:
    adm = client.AdmissionregistrationV1Api(api)
    for w in adm.list_mutating_webhook_configuration().items:
        if w.metadata.name.startswith(release):
            adm.delete_mutating_webhook_configuration(w.metadata.name)
