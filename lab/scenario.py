"""The article's scenario (2 hosts, 2 pooled GPUs) driven against the deployed composer.

The chart deployed by the dev stack created the composer's ServiceAccount and RBAC; kwok runs
no containers, so the controller runs here as a local lab process (``composer``) that
authenticates with a token for that ServiceAccount from the TokenRequest API. Its RBAC is
therefore exactly what the chart grants.

Timeline printed by :func:`run_article_scenario`: pod on ``blade-slot-1`` asks for 2 GPUs →
Pending → composed (Director) → advertised → Running → pod ends → idle timeout → GPUs back in
the free pool → pod on ``blade-slot-2`` → the same 2 GPUs composed there → Running → reclaimed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dynamic_providers.director.client import DirectorClient
from lab import controlplane, kube, processes, services

DEMO_NAMESPACE = "gpu-demo"
GPU_RESOURCE = "nvidia.com/gpu"
#: Taint the composer puts on a node while it decomposes the node's GPUs (composer/annotations.py).
RECLAIM_TAINT = "composer.liqid.io/reclaiming"


class ScenarioError(RuntimeError):
    """A scenario step did not happen in time; the message says which, and what was seen."""


def _wait(check: Callable[[], Any], *, what: str, timeout_seconds: float, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_seconds
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise ScenarioError(f"{what}: not seen within {timeout_seconds:.0f} s")


def composer_service_account(core: client.CoreV1Api, namespace: str) -> str:
    """Name of the ServiceAccount the composer chart created in ``namespace``."""
    sas = core.list_namespaced_service_account(namespace, label_selector="app.kubernetes.io/name=composer")
    if not sas.items:
        raise ScenarioError(f"no composer ServiceAccount in namespace {namespace}: is the dev stack up?")
    return sas.items[0].metadata.name


def start_composer(cfg: controlplane.LabConfig, composer_out: dict[str, Any], *,
                   idle_timeout_seconds: float) -> int:
    """Start the controller as lab process ``composer`` with the chart's ServiceAccount token."""
    api = kube.admin_client(cfg)
    core = client.CoreV1Api(api)
    ns = composer_out["namespace"]
    sa = composer_service_account(core, ns)
    token = core.create_namespaced_service_account_token(
        sa, ns, {"spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 86400}}
    ).status.token
    kubeconfig = controlplane.write_kubeconfig(cfg, cfg.lab_dir / "composer.kubeconfig", token=token,
                                               user=f"system:serviceaccount:{ns}:{sa}")
    processes.stop(cfg.lab_dir, "composer")  # a fresh token and idle timeout each run
    argv = [
        sys.executable, "-m", "composer",
        "--director-url", services.director_url(),
        "--director-username", services.DIRECTOR_USER,
        "--kubeconfig", str(kubeconfig),
        "--namespace", ns,
        "--pool", str(composer_out.get("pool") or "default"),
        "--idle-timeout-seconds", str(idle_timeout_seconds),
        "--node-selector", "=".join(kube.LAB_FABRIC_LABEL),
        "--namespaces", json.dumps([DEMO_NAMESPACE]),
        "--resync-seconds", "1",
        "--retry-base-seconds", "1",
        "--probe-port", "0",
    ]
    excluded = list(composer_out.get("excluded_devices") or [])
    if excluded:
        argv += ["--excluded-devices", json.dumps(excluded)]
    return processes.start(cfg.lab_dir, "composer", argv,
                           env={"COMPOSER_DIRECTOR_PASSWORD": services.DIRECTOR_PASSWORD},
                           cwd=controlplane.ROOT)


def gpu_pod(name: str, host: str, count: int, model: str) -> dict[str, Any]:
    """A plain pod asking for ``count`` GPUs of ``model`` on ``host`` (no composer-specific fields)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": DEMO_NAMESPACE},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": host, "nvidia.com/gpu.product": model},
            "containers": [{
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                "command": ["nvidia-smi"],
                "resources": {"limits": {GPU_RESOURCE: str(count)}},
            }],
            "terminationGracePeriodSeconds": 0,
        },
    }


def run_article_scenario(cfg: controlplane.LabConfig, estate: dict[str, Any], *,
                         idle_timeout_seconds: float,
                         step: Callable[[str], Callable[[str], None]]) -> list[str]:
    """Run the scenario; returns the device names that moved from host A to host B.

    Raises:
        ScenarioError: a step did not happen in time (composer log: .lab/logs/composer.log).
    """
    if not estate.get("composer"):
        raise ScenarioError("the stack declares no composer")
    api = kube.admin_client(cfg)
    core = client.CoreV1Api(api)
    director = DirectorClient(services.director_url(), username=services.DIRECTOR_USER,
                              password=services.DIRECTOR_PASSWORD, timeout=10.0)
    try:
        core.create_namespace({"metadata": {"name": DEMO_NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    for leftover in core.list_namespaced_pod(DEMO_NAMESPACE).items:
        core.delete_namespaced_pod(leftover.metadata.name, DEMO_NAMESPACE, grace_period_seconds=0)

    free = director.free_gpus()
    model = free[0].model if free else "Tesla-T4"
    say = step("composer: controller with the chart's ServiceAccount token (TokenRequest)")
    start_composer(cfg, estate["composer"], idle_timeout_seconds=idle_timeout_seconds)
    pool = sorted(g.name for g in free)
    stack_idle = estate["composer"].get("idle_timeout_seconds")
    say(f"running; free pool: {pool} ({model}); idle timeout {idle_timeout_seconds:.0f} s for the demo "
        f"(the stack's chart: {stack_idle} s)")

    def attached(host: str) -> list[str]:
        return sorted(g.name for g in director.attached_gpus(host))

    def run_pod(name: str, host: str) -> list[str]:
        say = step(f"pod {name}: 2 x {GPU_RESOURCE} ({model}) pinned to {host}")
        uid = core.create_namespaced_pod(DEMO_NAMESPACE, gpu_pod(name, host, 2, model)).metadata.uid

        def phase() -> str:
            return core.read_namespaced_pod(name, DEMO_NAMESPACE).status.phase or ""

        _wait(lambda: core.read_namespaced_pod(name, DEMO_NAMESPACE).status.conditions,
              what=f"{name} scheduling verdict", timeout_seconds=30)
        say(f"{phase()} (unschedulable: no node advertises {GPU_RESOURCE})")
        devices = _wait(lambda: attached(host) if len(attached(host)) == 2 else None,
                        what=f"2 GPUs composed into {host}", timeout_seconds=120)
        say(f"composed by the Director into {host}: {devices}")
        _wait(lambda: (core.read_node(host).status.allocatable or {}).get(GPU_RESOURCE) == "2",
              what=f"{host} advertising 2 GPUs", timeout_seconds=120)
        say(f"{host} advertises {GPU_RESOURCE}=2")
        _wait(lambda: phase() == "Running", what=f"{name} Running", timeout_seconds=120)
        say("Running")
        events = core.list_namespaced_event(DEMO_NAMESPACE, field_selector=f"involvedObject.uid={uid}")
        for ev in events.items:
            if ev.source and ev.source.component and "composer" in ev.source.component:
                say(f"event {ev.reason}: {ev.message}")
        return devices

    def finish(name: str, host: str) -> None:
        say = step(f"pod {name} ends; waiting for the idle timeout and the reclaim")
        core.delete_namespaced_pod(name, DEMO_NAMESPACE, grace_period_seconds=0)
        say(f"pod deleted; {host} keeps its GPUs until it has been idle for {idle_timeout_seconds:.0f} s")
        seen_taint = False

        def reclaimed() -> bool:
            nonlocal seen_taint
            taints = core.read_node(host).spec.taints or []
            if not seen_taint and any(t.key == RECLAIM_TAINT for t in taints):
                seen_taint = True
                say(f"{host} tainted {RECLAIM_TAINT}:NoSchedule (no new GPU pods) while decomposing")
            return not attached(host) and not any(t.key == RECLAIM_TAINT for t in taints)

        _wait(reclaimed, what=f"GPUs decomposed from {host}", timeout_seconds=idle_timeout_seconds + 120,
              interval=0.2)
        say(f"decomposed and taint removed: free pool is now {sorted(g.name for g in director.free_gpus())}")

    first = run_pod("train-a", "blade-slot-1")
    finish("train-a", "blade-slot-1")
    second = run_pod("train-b", "blade-slot-2")
    if second != first:
        raise ScenarioError(f"host B got {second}, expected the same GPUs as host A {first}")
    step("result")("the same 2 GPUs served both hosts: " + ", ".join(second))
    finish("train-b", "blade-slot-2")
    director.close()
    return second
