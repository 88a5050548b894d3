"""Two hosts hand over two pooled GPUs: the handover scenario driven against the deployed composer.

By default the composer is the chart's Deployment as the dev stack installed it: its Pods run
on the lab's real kubelet node (``lab.node``, ``mgmt-1``); :func:`deployed_composer` waits for
them to be Ready and for one to hold the Lease. With ``local_process=True`` (the fast mode the
kwok-only lab used) the controller runs here as lab process ``composer`` authenticated with a
TokenRequest token of the chart's ServiceAccount, so its RBAC is exactly what the chart grants.

Timeline printed by :func:`run_handover_scenario`: pod on ``blade-slot-1`` asks for 2 GPUs →
Pending, held by the composer's scheduling gate (the chart's admission webhook: the Pods behind
its Service, or with ``local_process`` the local process the webhook is re-pointed to) →
reserved → composed (Director) → advertised → released (gate removed) → Running → pod ends →
idle timeout → GPUs back in the free pool → pod on ``blade-slot-2`` → the same 2 GPUs composed
there → Running → reclaimed.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from domain import labels
from dynamic_providers.director.client import DirectorClient
from lab import kube, processes, settings

DEMO_NAMESPACE = "gpu-demo"
GPU_RESOURCE = labels.GPU_RESOURCE
#: Taint the composer puts on a node while it decomposes the node's GPUs (domain.labels).
RECLAIM_TAINT = labels.RECLAIM_TAINT_KEY


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


def chart_webhook_name(api: client.ApiClient) -> str | None:
    """Name of the MutatingWebhookConfiguration the composer chart created (None: webhook off)."""
    hooks = client.AdmissionregistrationV1Api(api).list_mutating_webhook_configuration(
        label_selector="app.kubernetes.io/name=composer")
    return hooks.items[0].metadata.name if hooks.items else None


def start_composer(cfg: settings.LabConfig, composer_out: dict[str, Any], *,
                   idle_timeout_seconds: float) -> int:
    """Start the controller as lab process ``composer`` with the chart's ServiceAccount token.

    When the chart registered its pod-gating webhook, that configuration is re-pointed at this
    local process (:func:`local_gating_webhook`), which serves it over HTTPS on 127.0.0.1.
    """
    api = kube.admin_client(cfg)
    core = client.CoreV1Api(api)
    ns = composer_out["namespace"]
    hook = chart_webhook_name(api)
    sa = composer_service_account(core, ns)
    token = core.create_namespaced_service_account_token(
        sa, ns, {"spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 86400}}
    ).status.token
    kubeconfig = kube.write_kubeconfig(cfg, cfg.lab_dir / "composer.kubeconfig", token=token,
                                               user=f"system:serviceaccount:{ns}:{sa}")
    processes.stop(cfg.lab_dir, "composer")  # a fresh token and idle timeout each run
    argv = [
        sys.executable, "-m", "composer",
        "--director-url", settings.director_url(),
        "--director-username", settings.DIRECTOR_USER,
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
    if hook is not None:
        port, crt, key, _ = local_gating_webhook(api, namespace=DEMO_NAMESPACE, release="lab-demo",
                                                 out_dir=cfg.lab_dir / "composer-webhook",
                                                 replace_name=hook)
        argv += webhook_flags(port, crt, key)
    pid = processes.start(cfg.lab_dir, "composer", argv,
                          env={"COMPOSER_DIRECTOR_PASSWORD": settings.DIRECTOR_PASSWORD},
                          cwd=settings.ROOT)
    if hook is not None:  # a pod created before the webhook listens is not gated
        _wait(lambda: processes.port_open(port), what="composer webhook listening", timeout_seconds=60,
              interval=0.2)
    return pid


def local_gating_webhook(api: client.ApiClient, *, namespace: str, release: str, out_dir: Path,
                         port: int | None = None,
                         replace_name: str | None = None) -> tuple[int, Path, Path, str]:
    """Register the chart's pod-gating webhook for a composer running as a local process.

    kwok runs no containers, so in the lab the API server cannot reach a composer Pod behind the
    chart's Service; the composer runs on 127.0.0.1 instead. This renders the chart's own
    ``templates/webhook.yaml`` with ``webhook.url=https://127.0.0.1:<port>``, an IP SAN
    127.0.0.1 and ``composer.namespaces=[namespace]``, writes the chart-made serving certificate
    and key to ``out_dir`` (for ``--webhook-cert-file``/``--webhook-key-file``), and creates the
    MutatingWebhookConfiguration, or replaces the one named ``replace_name`` (the dev stack's,
    re-pointed at the local process).

    Returns:
        (port, certificate file, key file, configuration name).

    Raises:
        subprocess.CalledProcessError: helm failed; ApiException: the API server refused.
    """
    port = port or _free_port()
    argv = ["helm", "template", release, str(settings.ROOT / "charts" / "composer"),
            "--namespace", namespace, "--show-only", "templates/webhook.yaml"]
    for v in ("director.existingSecret=unused", f"webhook.url=https://127.0.0.1:{port}",
              "webhook.ipSANs[0]=127.0.0.1", f"composer.namespaces[0]={namespace}"):
        argv += ["--set", v]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    secret = next(d for d in docs if d["kind"] == "Secret")
    out_dir.mkdir(parents=True, exist_ok=True)
    cert, key = out_dir / "webhook.crt", out_dir / "webhook.key"
    cert.write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    key.write_bytes(base64.b64decode(secret["data"]["tls.key"]))
    key.chmod(0o600)
    hook = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")
    adm = client.AdmissionregistrationV1Api(api)
    if replace_name:
        old = adm.read_mutating_webhook_configuration(replace_name)
        hook["metadata"] = {"name": replace_name, "labels": old.metadata.labels,
                            "resourceVersion": old.metadata.resource_version}
        adm.replace_mutating_webhook_configuration(replace_name, hook)
    else:
        adm.create_mutating_webhook_configuration(hook)
    return port, cert, key, hook["metadata"]["name"]


def webhook_flags(port: int, cert: Path, key: Path) -> list[str]:
    """``python -m composer`` flags serving the gating webhook on 127.0.0.1:``port``."""
    return ["--webhook-address", "127.0.0.1", "--webhook-port", str(port),
            "--webhook-cert-file", str(cert), "--webhook-key-file", str(key)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gpu_pod(name: str, host: str, count: int, model: str) -> dict[str, Any]:
    """A plain pod asking for ``count`` GPUs of ``model`` on ``host`` (no composer-specific fields)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": DEMO_NAMESPACE},
        "spec": {
            "nodeSelector": {labels.HOSTNAME_LABEL: host, labels.PRODUCT_LABEL: model},
            "containers": [{
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                "command": ["nvidia-smi"],
                "resources": {"limits": {GPU_RESOURCE: str(count)}},
            }],
            "terminationGracePeriodSeconds": 0,
        },
    }


@dataclass(frozen=True)
class ComposerPod:
    """A Ready Pod of the composer Deployment: ``name``, ``node``, ``image`` (spec) and
    ``image_id`` (the runtime's image reference with digest, from the Pod status)."""

    name: str
    node: str
    image: str
    image_id: str


def composer_pods(core: client.CoreV1Api, namespace: str) -> list[ComposerPod]:
    """Ready (probes green), not terminating Pods of the composer chart in ``namespace``."""
    out = []
    for p in core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/name=composer").items:
        if kube.pod_ready(p, container="composer"):
            status = next(c for c in p.status.container_statuses if c.name == "composer")
            out.append(ComposerPod(p.metadata.name, p.spec.node_name, status.image, status.image_id))
    return sorted(out, key=lambda c: c.name)


def deployed_composer(cfg: settings.LabConfig, composer_out: dict[str, Any], *,
                      pods_cfg: settings.LabConfig | None = None,
                      timeout_seconds: float = 180) -> tuple[ComposerPod, list[ComposerPod]]:
    """Wait until the chart's composer Pods are Ready and one of them holds the Lease.

    The Lease is in ``cfg``, the cluster the composer serves; its Pods in ``pods_cfg`` (default:
    the same; the mothership for a composer with ``runs_on: mothership``).

    Returns:
        (the leader, every Ready Pod).
    Raises:
        ScenarioError: no Ready leader in time (the message lists the Pods' states).
    """
    from components.composer import LEASE_NAME

    api = kube.admin_client(cfg)
    core = client.CoreV1Api(kube.admin_client(pods_cfg) if pods_cfg is not None else api)
    ns = composer_out["namespace"]
    coord = client.CoordinationV1Api(api)

    def leader() -> tuple[ComposerPod, list[ComposerPod]] | None:
        pods = composer_pods(core, ns)
        try:
            holder = coord.read_namespaced_lease(LEASE_NAME, ns).spec.holder_identity
        except ApiException:
            return None
        lead = [p for p in pods if p.name == holder]
        return (lead[0], pods) if lead else None

    try:
        return _wait(leader, what=f"a Ready composer Pod holding Lease {ns}/{LEASE_NAME}",
                     timeout_seconds=timeout_seconds, interval=1.0)
    except ScenarioError as exc:
        states = [f"{p.metadata.name}: {p.status.phase} "
                  f"{[(c.ready, str(c.state)[:200]) for c in (p.status.container_statuses or [])]}"
                  for p in core.list_namespaced_pod(ns).items]
        raise ScenarioError(f"{exc}; pods: {states or 'none'}") from exc


def run_handover_scenario(cfg: settings.LabConfig, estate: dict[str, Any], *,
                         idle_timeout_seconds: float | None = None, local_process: bool = False,
                         composer_cfg: settings.LabConfig | None = None,
                         step: Callable[[str], Callable[[str], None]]) -> list[str]:
    """Run the scenario in ``cfg`` (the cluster whose Nodes the hosts are); returns the device names
    that moved from host A to host B. ``composer_cfg``: the cluster the chart's composer Pods run in
    (default: ``cfg``; the mothership for a composer with ``runs_on: mothership``).

    ``idle_timeout_seconds`` applies to the local process only; the deployed composer runs with
    the stack's value.
    Raises:
        ScenarioError: a step did not happen in time (composer logs: ``kubectl logs`` of its
            Pods, or .lab/logs/composer.log for the local process).
    """
    if not estate.get("composer"):
        raise ScenarioError("the stack declares no composer")
    api = kube.admin_client(cfg)
    core = client.CoreV1Api(api)
    director = DirectorClient(settings.director_url(), username=settings.DIRECTOR_USER,
                              password=settings.DIRECTOR_PASSWORD, timeout=10.0)
    try:
        core.create_namespace({"metadata": {"name": DEMO_NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    for leftover in core.list_namespaced_pod(DEMO_NAMESPACE).items:
        core.delete_namespaced_pod(leftover.metadata.name, DEMO_NAMESPACE, grace_period_seconds=0)

    free = director.free_gpus()
    model = free[0].model if free else "Tesla-T4"
    pool = sorted(g.name for g in free)
    stack_idle = estate["composer"].get("idle_timeout_seconds")
    if local_process:
        idle_timeout_seconds = idle_timeout_seconds or float(stack_idle or 60)
        say = step("composer: controller with the chart's ServiceAccount token (TokenRequest)")
        start_composer(cfg, estate["composer"], idle_timeout_seconds=idle_timeout_seconds)
        say(f"running; free pool: {pool} ({model}); idle timeout {idle_timeout_seconds:.0f} s for the "
            f"demo (the stack's chart: {stack_idle} s)")
    else:
        idle_timeout_seconds = float(stack_idle or 600)
        say = step(f"composer: the chart's Deployment in {estate['composer']['namespace']}")
        lead, pods = deployed_composer(cfg, estate["composer"], pods_cfg=composer_cfg)
        for p in pods:
            say(f"Pod {p.name} Ready on node {p.node}{' (leader)' if p is lead else ''}; "
                f"image {p.image} digest {p.image_id.rsplit('@', 1)[-1]}")
        say(f"free pool: {pool} ({model}); idle timeout {idle_timeout_seconds:.0f} s (the stack's)")

    def attached(host: str) -> list[str]:
        return sorted(g.name for g in director.attached_gpus(host))

    def run_pod(name: str, host: str) -> list[str]:
        say = step(f"pod {name}: 2 x {GPU_RESOURCE} ({model}) pinned to {host}")
        created = core.create_namespaced_pod(DEMO_NAMESPACE, gpu_pod(name, host, 2, model))
        uid = created.metadata.uid
        gates = [g.name for g in (created.spec.scheduling_gates or [])]

        def phase() -> str:
            return core.read_namespaced_pod(name, DEMO_NAMESPACE).status.phase or ""

        _wait(lambda: core.read_namespaced_pod(name, DEMO_NAMESPACE).status.conditions,
              what=f"{name} scheduling verdict", timeout_seconds=30)
        if gates:
            say(f"{phase()}, held by scheduling gate {', '.join(gates)} (added by the composer's "
                "admission webhook; the manifest has none)")
        else:
            say(f"{phase()} (unschedulable: no node advertises {GPU_RESOURCE})")
        devices = _wait(lambda: attached(host) if len(attached(host)) == 2 else None,
                        what=f"2 GPUs composed into {host}", timeout_seconds=120)
        say(f"composed by the Director into {host}: {devices}")
        _wait(lambda: (core.read_node(host).status.allocatable or {}).get(GPU_RESOURCE) == "2",
              what=f"{host} advertising 2 GPUs", timeout_seconds=120)
        say(f"{host} advertises {GPU_RESOURCE}=2")
        if gates:
            _wait(lambda: not core.read_namespaced_pod(name, DEMO_NAMESPACE).spec.scheduling_gates,
                  what=f"{name} released by the composer", timeout_seconds=60, interval=0.1)
            say("released: scheduling gate removed by the composer (its reserved GPUs are advertised)")
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
