"""Lab stacks through ``pulumi up``, and the composer started as their Deployment configures it.

Used by ``test_pools_lab.py``, ``test_reclaim_lab.py`` and ``test_sharing_lab.py``. A test builds an
estate on its scenario's Director simulator and kwok Nodes (:func:`lab_estate`, the ``composer``
section its own), and :func:`lab_stack` applies it with the real pulumi CLI (Automation API, a
throw-away project of this repository's program and a file backend): the program renders
``charts/composer`` into a Deployment on the lab's API server. The test then starts the composer of
:mod:`tests.composer.harness` with the ``COMPOSER_*`` values read back from that Deployment
(:func:`deployed_flags`), as its Pods would run it. The chart's Pods themselves go to kwok Nodes,
which do not run them; the composer runs as a local process with the chart's ServiceAccount rights.

Because those Pods never serve, the chart's gating webhook (failurePolicy Ignore) could only time
out, 5 s per GPU pod: :func:`lab_stack` deletes it after each ``pulumi up``; the local composer
serves ungated pods.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pulumi import automation as auto

from domain.reclaim import DEFAULT_OWNER_TAG
from dynamic_providers.director.client import DirectorClient
from lab.kube import pod_ready
from tests.composer.harness import SIM_PASSWORD, SIM_USER, Scenario, wait_for
from tests.pulumi_project import file_backend, local_project

ROOT = Path(__file__).resolve().parents[2]
BINARIES = ("pulumi", "pulumi-language-python", "helm")
MISSING = [b for b in BINARIES if not (ROOT / ".toolchain" / "bin" / b).exists() and shutil.which(b) is None]

#: Marks of a module whose tests run ``pulumi up`` on the lab (skipped, and so failed under CI=true,
#: only when ``make setup`` has not built the CLI binaries).
PULUMI_LAB_MARKS = [
    pytest.mark.lab,
    pytest.mark.cli,
    pytest.mark.slow,
    pytest.mark.skipif(bool(MISSING), reason=f"binaries missing ({', '.join(MISSING)}): run make setup"),
]

STACK = "lab"
PASSPHRASE = "composer-lab-only"
CONFIG_KEY = "composable-gpu:estate"
BMC_PASSWORD = "lab-bmc-password"

#: The Deployment's variables the local composer is started with (as flags, after the harness's own).
DEPLOYED = ("POOLS", "NAMESPACES", "EXCLUDED_DEVICES", "IDLE_TIMEOUT_SECONDS", "RECLAIM_BUDGET",
            "RECLAIM_WINDOWS_UTC", "OWNER_TAG", "ORPHAN_GRACE_SECONDS", "SHARING")


def lab_estate(
    sc: Scenario,
    run: str,
    kubeconfig: Path,
    *,
    composer: dict[str, Any],
    tenants: list[dict[str, Any]] | None = None,
    gpu_compositions: list[dict[str, Any]] | None = None,
    machines: Sequence[str] = ("blade-slot-1", "blade-slot-2"),
    models: Sequence[str] = ("Tesla-T4",),
    label_nodes: bool = False,
) -> dict[str, Any]:
    """A small lab estate (``composable-gpu:estate``, plain values) on the scenario's Director and
    Nodes: the hosts of ``machines`` (at most 9; default ``blade-slot-1`` and ``blade-slot-2``, as the
    scenario's Node names) in one ``container``-mode cluster ``workers``, the fabric pool
    ``gpu-pool`` (2 GPUs of ``models``, default Tesla-T4), and a composer targeting ``workers`` from
    that pool, in namespace ``<run>-composer`` (release of the same name), without device-plugin
    restarts. ``label_nodes``: the program patches the hosts' GPU Operator labels (device-plugin
    config, MIG config, workload) onto their Nodes (``mothership.label_nodes``).

    ``composer`` adds or overrides keys of the ``composer`` section (``namespaces``, ``pools``,
    ``idle_timeout_seconds``, ``reclaim_budget``, ...: :class:`stack_config.models.ComposerConfig`);
    ``tenants`` and ``gpu_compositions`` are the sections of those names (default: none). ``run``
    prefixes every namespace the stack creates (a DNS label of a few characters).
    """
    nodes = [sc.node(m) for m in machines]
    hosts = [
        {
            "name": n,
            "role": "baremetal-worker",
            "boot_mac": f"52:54:00:00:0e:0{i}",
            "bmc": {"endpoint": f"https://127.0.0.1:1845{i}", "username": "root", "verify_tls": False},
        }
        for i, n in enumerate(nodes, start=1)
    ]
    return {
        "environment": "lab",
        "mothership": {"kubeconfig": str(kubeconfig), "namespace": f"{run}-infra",
                       **({"label_nodes": True} if label_nodes else {})},
        "fabric": {
            "director": {"endpoint": sc.director_url, "username": SIM_USER},
            "pools": [{"name": "gpu-pool", "models": list(models), "size": 2}],
        },
        "hosts": hosts,
        "hypervisor_clusters": [
            {
                "name": "workers",
                # adopted with the mothership's kubeconfig: the scenario's Nodes are there (else
                # the program reads Secret workers-kubeconfig, which nothing writes in this lab)
                "kubeconfig": str(kubeconfig),
                "hosts": nodes,
                "gpu_workload_mode": "container",
                "kubevirt": False,
                "control_plane_replicas": 1,
            }
        ],
        "tenants": tenants or [],
        "gpu_compositions": gpu_compositions or [],
        "composer": {
            "pool": "gpu-pool",
            "target_cluster": "workers",
            "namespace": f"{run}-composer",
            "release_name": f"{run}-composer",
            "restart_device_plugin": False,
            **composer,
        },
    }


def _configure(stack: auto.Stack, estate: dict[str, Any]) -> None:
    """Write ``estate`` as the stack's config (keeping its encryption salt), then its secrets: the
    Director password and each host's BMC password."""
    path = Path(stack.workspace.work_dir) / f"Pulumi.{stack.name}.yaml"
    doc = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    doc["config"] = {CONFIG_KEY: estate}
    path.write_text(yaml.safe_dump(doc))
    secrets = {"fabric.director.password": SIM_PASSWORD,
               **{f"hosts[{i}].bmc.password": BMC_PASSWORD for i in range(len(estate["hosts"]))}}
    stack.set_all_config({f"estate.{k}": auto.ConfigValue(v, secret=True) for k, v in secrets.items()},
                         path=True)


@dataclass
class LabStack:
    """A lab stack that ``pulumi up`` has applied; ``env`` holds the plain ``COMPOSER_*`` values of
    its composer's Deployment after the last :meth:`up` (name -> value, as strings)."""

    stack: auto.Stack
    api: client.ApiClient
    env: dict[str, str] = field(default_factory=dict)
    #: the chart's Pods serve (on the lab's real node): its gating webhook stays
    chart_serves: bool = False

    def up(self, estate: dict[str, Any]) -> dict[str, str]:
        """Configure the stack with ``estate`` (:func:`lab_estate`), ``pulumi up``, read the composer
        Deployment's ``COMPOSER_*`` values back (also kept in :attr:`env`) and delete the chart's
        gating webhook (kept when :attr:`chart_serves`). Raises ``auto.CommandError`` when ``pulumi up``
        fails."""
        _configure(self.stack, estate)
        assert self.stack.up(on_output=lambda _line: None).summary.result == "succeeded"
        release, namespace = estate["composer"]["release_name"], estate["composer"]["namespace"]
        self.env = deployed_env(self.api, namespace, release)
        if not self.chart_serves:
            drop_webhooks(self.api, release)
        return self.env


@contextmanager
def lab_stack(
    sc: Scenario, tmp_path: Path, estate: dict[str, Any], api: client.ApiClient, *, chart_serves: bool = False
) -> Iterator[LabStack]:
    """``pulumi up`` of ``estate`` in a new stack under ``tmp_path/project``; yields the
    :class:`LabStack` (call :meth:`LabStack.up` again to apply a changed estate), prints the
    scenario's process logs when an assertion fails, and destroys the stack at the end.
    ``chart_serves``: the estate's composer runs from the chart on the lab's real node (its
    ``image``, ``node_selector``, ...): the gating webhook stays, and the Deployment is scaled to 0
    before the composer's GPUs are given back."""
    work = local_project(tmp_path)
    env = {"PULUMI_BACKEND_URL": file_backend(work), "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE}
    stack = auto.create_stack(STACK, work_dir=str(work), opts=auto.LocalWorkspaceOptions(env_vars=env))
    try:
        lab = LabStack(stack, api, chart_serves=chart_serves)
        lab.up(estate)
        yield lab
    except AssertionError:
        print(sc.diagnostics())
        raise
    finally:
        if chart_serves:
            stop_deployed_composer(api, estate)
        release_composer_gpus(sc, estate)
        stack.destroy(on_output=lambda _line: None)
        stack.workspace.remove_stack(STACK)


def stop_deployed_composer(api: client.ApiClient, estate: dict[str, Any], timeout: float = 60) -> None:
    """Scale the estate's composer Deployment to 0 and wait until its Pods are gone (so none
    composes while the test gives its GPUs back); a Deployment already gone is fine."""
    c = estate["composer"]
    namespace, name = c["namespace"], c["release_name"]
    try:
        client.AppsV1Api(api).patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": 0}})
    except ApiException as exc:
        if exc.status == 404:
            return
        raise
    wait_for(lambda: not composer_pods(api, estate), timeout=timeout,
             what=f"composer {namespace}/{name} Pods gone")


def composer_pods(
    api: client.ApiClient, estate: dict[str, Any], *, ready: bool = False
) -> list[client.V1Pod]:
    """The Pods of the estate's composer Deployment (the chart's ``app.kubernetes.io/name=composer``
    and instance labels); ``ready``: only those :func:`lab.kube.pod_ready`."""
    c = estate["composer"]
    selector = f"app.kubernetes.io/name=composer,app.kubernetes.io/instance={c['release_name']}"
    pods = client.CoreV1Api(api).list_namespaced_pod(c["namespace"], label_selector=selector).items
    return [p for p in pods if not ready or pod_ready(p)]


def release_composer_gpus(sc: Scenario, estate: dict[str, Any]) -> list[str]:
    """What an operator does before destroying a stack whose composer holds GPUs (its
    ``ComposerGpuGuard`` refuses the destroy otherwise): stop the scenario's composers, then
    decompose, through the Director's API, every GPU that carries the estate's owner tag.
    Returns the GPUs decomposed, sorted."""
    for name, proc in sc.procs.items():
        if name.startswith("composer"):
            proc.stop()
    tag = estate["composer"].get("owner_tag", DEFAULT_OWNER_TAG)
    with DirectorClient(sc.director_url, username=SIM_USER, password=SIM_PASSWORD) as director:
        held = [g for g in director.gpus() if g.machine is not None and g.owner_tag == tag]
        for machine in sorted({g.machine for g in held if g.machine is not None}):
            director.decompose(machine, [g.name for g in held if g.machine == machine])
    return sorted(g.name for g in held)


def deployed_env(api: client.ApiClient, namespace: str, name: str) -> dict[str, str]:
    """The plain ``COMPOSER_*`` values (name -> value) of the ``composer`` container of Deployment
    ``name`` in ``namespace``; variables from a Secret or empty are left out."""
    dep = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    container = next(c for c in dep.spec.template.spec.containers if c.name == "composer")
    return {e.name: e.value for e in container.env or () if e.name.startswith("COMPOSER_") and e.value}


def deployed_flags(env: dict[str, str]) -> list[str]:
    """``["--pools", <COMPOSER_POOLS>, ...]``: the :data:`DEPLOYED` values ``env`` sets, as flags of
    ``python -m composer``."""
    return [arg for name in DEPLOYED if f"COMPOSER_{name}" in env
            for arg in (f"--{name.lower().replace('_', '-')}", env[f"COMPOSER_{name}"])]


def drop_webhooks(api: client.ApiClient, release: str) -> None:
    """Delete the MutatingWebhookConfigurations whose name starts with ``release``."""
    adm = client.AdmissionregistrationV1Api(api)
    for w in adm.list_mutating_webhook_configuration().items:
        if w.metadata.name.startswith(release):
            adm.delete_mutating_webhook_configuration(w.metadata.name)
