"""The composer as the chart deploys it: a Deployment whose Pods run on the lab's real node.

Used by ``test_deployed.py``. Per scenario:

- a Director simulator listening on the node address (``lab.node.NODE_IP``), where the Pods
  reach it, with an inventory whose machines are renamed with the scenario id;
- kwok Nodes with those names (``composer-e2e=<id>``) and the GPU-Operator stand-in for them;
- ``helm install`` of ``charts/composer`` into namespace ``cdep-<id>``: the image built from
  ``Containerfile``, two replicas (Lease), Pods on ``mgmt-1`` (node selector and toleration),
  the API server at the node address (the lab has no kube-proxy), the Director password in the
  chart's Secret. The composer serves only this scenario's Nodes and namespace.

The Pods are reached at their pod IPs (the bridge is on this host) for ``/metrics``.

With ``real_node`` (DRA mode) the inventory also has a machine ``mgmt-1``, the lab's real node:
the composer composes onto it like onto the kwok Nodes, the GPU-Operator stand-in keeps the
attached GPUs' device files under ``<lab dir>/gpus/mgmt-1`` (playing the NVIDIA driver), and the
chart's kubelet-plugin DaemonSet prepares the claims there (the lab's own plugin process is stopped
meanwhile: two copies of one driver cannot register with one kubelet).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from domain.composer_mode import DRA_DRIVER
from lab import node as lab_node
from lab.kube import pod_ready
from lab.settings import MOTHERSHIP_PORTS, LabConfig
from tests.composer.harness import (
    CHART,
    E2E_LABEL,
    INVENTORIES,
    SIM_PASSWORD,
    SIM_USER,
    RbacIdentity,
    Scenario,
    add_kwok_nodes,
    free_port,
    start_proc,
    wait_for,
    wait_sim_ready,
)

LEASE = "gpu-composer"
#: What a Pod placed on ``mgmt-1`` tolerates: the node's system taint (``lab.node.TAINT_KEY``).
SYSTEM_TOLERATIONS = [{"key": lab_node.TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]


@dataclass
class Deployed:
    """A scenario whose composer is the chart's Deployment (``release`` in ``sc.ns``)."""

    sc: Scenario
    release: str
    image: str
    image_id: str
    kubeconfig: Path
    values: dict[str, Any] = field(default_factory=dict)

    # -- the Deployment ------------------------------------------------------------------
    def helm(self, verb: str, **overrides: Any) -> str:
        """``helm install|upgrade`` the chart with the scenario's values (and ``overrides``, deep
        merged); waits for the rollout. Returns helm's output."""
        values = _merge(self.values, overrides)
        vfile = self.sc.tmp / f"values-{uuid.uuid4().hex[:6]}.yaml"
        vfile.write_text(yaml.safe_dump(values))
        vfile.chmod(0o600)  # holds the simulator's password
        out = subprocess.run(
            ["helm", verb, self.release, str(CHART), "--namespace", self.sc.ns, "--kubeconfig",
             str(self.kubeconfig), "-f", str(vfile), "--wait", "--timeout", "180s"],
            capture_output=True, text=True, timeout=240, check=False)
        vfile.unlink()
        if out.returncode != 0:
            raise AssertionError(f"helm {verb} failed: {out.stderr}\n{self.describe()}")
        self.values = values
        return out.stdout

    def pods(self) -> list[client.V1Pod]:
        """The Deployment's Pods (not terminating), oldest first."""
        selector = f"app.kubernetes.io/name=composer,app.kubernetes.io/instance={self.release}"
        pods = self.sc.core.list_namespaced_pod(self.sc.ns, label_selector=selector).items
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        return sorted(live, key=lambda p: p.metadata.creation_timestamp)

    def plugin_pods(self) -> list[client.V1Pod]:
        """The kubelet plugin DaemonSet's Pods (not terminating)."""
        pods = self.sc.core.list_namespaced_pod(self.sc.ns, label_selector=(
            f"app.kubernetes.io/name=composer-kubelet-plugin,app.kubernetes.io/instance={self.release}")).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    def ready_pods(self) -> list[client.V1Pod]:
        """Pods Running with every container ready (probes green): :func:`lab.kube.pod_ready`."""
        return [p for p in self.pods() if pod_ready(p)]

    def leader(self) -> str | None:
        """holderIdentity of the scenario's Lease (a Pod name)."""
        try:
            lease = client.CoordinationV1Api(self.sc.api).read_namespaced_lease(LEASE, self.sc.ns)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return lease.spec.holder_identity

    def metrics(self, pod: client.V1Pod) -> str:
        """``/metrics`` of ``pod`` at its pod IP ("" while it does not answer)."""
        try:
            return requests.get(f"http://{pod.status.pod_ip}:8080/metrics", timeout=5).text
        except requests.RequestException:
            return ""

    def composer_events(self, pod: str) -> list[tuple[str, str, str]]:
        """(reason, message, reporting Pod) of the Events the Deployment's Pods posted about ``pod``."""
        evs = self.sc.core.list_namespaced_event(self.sc.ns,
                                                 field_selector=f"involvedObject.name={pod}").items
        return [(e.reason, e.message, e.reporting_instance or "") for e in
                sorted(evs, key=lambda e: e.metadata.creation_timestamp)
                if (e.reporting_instance or "").startswith(self.release)]

    def force_delete(self, name: str) -> None:
        """``kubectl delete pod --grace-period=0 --force``: the object goes at once, the kubelet
        kills the container when it notices."""
        self.sc.core.delete_namespaced_pod(name, self.sc.ns, grace_period_seconds=0,
                                           body=client.V1DeleteOptions(grace_period_seconds=0))

    def logs(self, name: str) -> str:
        """The composer container's log (through the API server and the kubelet)."""
        return self.sc.core.read_namespaced_pod_log(name, self.sc.ns, container="composer")

    def describe(self) -> str:
        """Pods, their statuses and recent log lines, for failure messages."""
        lines = []
        try:
            for p in self.sc.core.list_namespaced_pod(self.sc.ns).items:
                cs = [(c.name, c.ready, c.restart_count, str(c.state)[:300])
                      for c in (p.status.container_statuses or [])]
                lines.append(f"pod {p.metadata.name} {p.status.phase} node={p.spec.node_name} {cs}")
                try:
                    lines += ["  " + ln for ln in self.logs(p.metadata.name).splitlines()[-15:]]
                except ApiException as exc:
                    lines.append(f"  (log unavailable: {exc.status})")
            for e in self.sc.core.list_namespaced_event(self.sc.ns).items[-15:]:
                lines.append(f"event {e.involved_object.name} {e.reason}: {e.message}")
        except ApiException as exc:
            lines.append(f"(describe failed: {exc.status})")
        return "\n".join(lines)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def values_for(*, sid: str, image: str, director_url: str, plugin_namespace: str, namespace: str,
               idle_timeout_seconds: int = 2) -> dict[str, Any]:
    """Chart values of a scenario's Deployment (see the module docstring)."""
    repository, tag = image.rsplit(":", 1)
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "replicaCount": 2,
        "kubernetesService": {"host": lab_node.NODE_IP, "port": MOTHERSHIP_PORTS.apiserver},
        "director": {"url": director_url, "username": SIM_USER, "password": SIM_PASSWORD,
                     "retries": 0, "timeoutSeconds": 5},
        "composer": {
            "nodeSelector": f"{E2E_LABEL}={sid}",
            "namespaces": [namespace],
            "idleTimeoutSeconds": idle_timeout_seconds,
            "resyncSeconds": 1,
            "retryBaseSeconds": 1,
            "logLevel": "INFO",
        },
        "devicePlugin": {"restart": True, "namespace": plugin_namespace},
        "leaderElection": {"enabled": True, "leaseName": LEASE, "leaseDurationSeconds": 6, "retrySeconds": 1},
        "webhook": {"enabled": False},
        "metrics": {"service": {"enabled": False}},
        "resources": {"requests": {"cpu": "50m", "memory": "96Mi"}, "limits": {"memory": "384Mi"}},
        "nodeSelector": {"kubernetes.io/hostname": lab_node.NODE_NAME},
        "tolerations": SYSTEM_TOLERATIONS,
    }


#: Prefixes of what the composer and the GPU-Operator stand-in write on a Node they serve.
SERVED_PREFIXES = ("nvidia.com/", "gpu.composer.liqid.io/", "composer.liqid.io/", E2E_LABEL)


def real_node_values(node: LabConfig, plugin_image: str) -> dict[str, Any]:
    """Chart values of the kubelet plugin's DaemonSet on ``mgmt-1``: its image, the node's kubelet
    root, CDI and device directories (``lab.node.paths``), the node's taint tolerated."""
    p = lab_node.paths(node)
    repository, tag = plugin_image.rsplit(":", 1)
    return {"kubeletPlugin": {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "kubeletDir": str(p.kubelet_root), "cdiDir": str(p.cdi_dir),
        "deviceDir": str(lab_node.device_dir(node).parent), "deviceDirPerNode": True,
        "nodeSelector": {"kubernetes.io/hostname": lab_node.NODE_NAME},
        "tolerations": SYSTEM_TOLERATIONS,
    }}


def release_real_node(core: client.CoreV1Api) -> None:
    """Remove from ``mgmt-1`` the labels, annotations and taints a scenario's composer and agent
    wrote (:data:`SERVED_PREFIXES`), keeping the node's own."""
    node = core.read_node(lab_node.NODE_NAME)
    meta = node.metadata
    labels = {k: None for k in meta.labels or {} if k.startswith(SERVED_PREFIXES)}
    notes = {k: None for k in meta.annotations or {} if k.startswith(SERVED_PREFIXES)}
    taints = [t for t in node.spec.taints or () if not t.key.startswith(SERVED_PREFIXES)]
    body: dict[str, Any] = {"metadata": {"labels": labels, "annotations": notes}}
    if len(taints) != len(node.spec.taints or ()):
        body["spec"] = {"taints": [client.ApiClient().sanitize_for_serialization(t) for t in taints]}
    core.patch_node(lab_node.NODE_NAME, body)


def remove_dra_objects(api: client.ApiClient) -> None:
    """Delete the driver's ResourceSlices and its DeviceClass (both outlive ``helm uninstall``:
    docs/dra.md), so the next scenario starts without a stale pool or an extended-resource class."""
    res = client.ResourceV1Api(api)
    for s in res.list_resource_slice(field_selector=f"spec.driver={DRA_DRIVER}").items:
        try:
            res.delete_resource_slice(s.metadata.name)
        except ApiException as exc:
            if exc.status != 404:
                raise
    try:
        res.delete_device_class(DRA_DRIVER)
    except ApiException as exc:
        if exc.status != 404:
            raise


@contextmanager
def deployed(api: client.ApiClient, admin_kubeconfig: Path, image: str, tmp: Path, *, image_id: str,
             inventory: str = "dev.yaml", hotplug_latency: float = 0.05,
             install: bool = True, mode: str = "deviceplugin", real_node: LabConfig | None = None,
             plugin_image: str = "") -> Iterator[Deployed]:
    """Start simulator, Nodes and agent, ``helm install`` the chart (unless ``install`` is
    False), yield; uninstall and clean up after.

    ``mode="dra"``: the chart's ``dra.mode: dra`` (the composer is the DRA driver), the GPU-Operator
    stand-in writes GFD's labels only (``--dra``: no ``nvidia.com/gpu`` capacity), and the
    driver's slices and DeviceClass are removed after. ``real_node`` (the lab, DRA mode only) adds
    machine ``mgmt-1`` and the kubelet plugin's DaemonSet with image ``plugin_image`` (module
    docstring)."""
    if real_node is not None and (mode != "dra" or not plugin_image):
        raise ValueError("real_node needs mode='dra' and the kubelet plugin's image")
    sid = uuid.uuid4().hex[:6]
    ns, plugin_ns, release = f"cdep-{sid}", f"cdep-plugin-{sid}", f"c{sid}"
    core = client.CoreV1Api(api)
    for n in (ns, plugin_ns):
        core.create_namespace({"metadata": {"name": n, "labels": {E2E_LABEL: sid}}})
    inv = yaml.safe_load((INVENTORIES / inventory).read_text())
    hosts = {m["name"]: f"e{sid}-{m['name']}" for m in inv["machines"]}
    for m in inv["machines"]:
        m["name"] = hosts[m["name"]]
    kwok_hosts = list(hosts.values())
    if real_node is not None:
        inv["machines"].append({**inv["machines"][0], "name": lab_node.NODE_NAME})
        hosts[lab_node.NODE_NAME] = lab_node.NODE_NAME
    for g in inv["gpus"]:
        if g.get("attached_to"):
            g["attached_to"] = hosts[g["attached_to"]]
    inv_path = tmp / "inventory.yaml"
    inv_path.write_text(yaml.safe_dump(inv))
    port = free_port()
    url = f"http://{lab_node.NODE_IP}:{port}"
    ident = RbacIdentity(ns, release, plugin_ns, admin_kubeconfig, [])
    sc = Scenario(api, ident, sid, tmp, hosts, admin_kubeconfig, director_url=url)
    values = values_for(sid=sid, image=image, director_url=url, plugin_namespace=plugin_ns, namespace=ns)
    if mode == "dra":
        values = _merge(values, {"dra": {"mode": "dra"}, "devicePlugin": {"restart": False}})
    if real_node is not None:
        values = _merge(values, real_node_values(real_node, plugin_image))
    d = Deployed(sc, release, image, image_id, admin_kubeconfig, values)
    installed = False
    try:
        sc.procs["director-sim"] = sim = start_proc(
            "director-sim",
            [sys.executable, "-m", "lab.director_sim", "--host", lab_node.NODE_IP, "--port", str(port),
             "--inventory", str(inv_path), "--state-file", str(tmp / "director.json"),
             "--hotplug-latency", str(hotplug_latency)],
            tmp, env={"DIRECTOR_SIM_USERNAME": SIM_USER, "DIRECTOR_SIM_PASSWORD": SIM_PASSWORD})
        wait_sim_ready(sim, url)
        add_kwok_nodes(core, kwok_hosts, sid)
        agent_flags = ["--dra"] if mode == "dra" else []
        if real_node is not None:
            lab_node.stop_kubelet_plugin(real_node)
            core.patch_node(lab_node.NODE_NAME, {"metadata": {"labels": {E2E_LABEL: sid}}})
            agent_flags += ["--device-dir", str(lab_node.device_dir(real_node).parent)]
        sc.start_agent(*agent_flags)
        if install:
            installed = True
            d.helm("install")
        yield d
    finally:
        if installed:
            subprocess.run(["helm", "uninstall", release, "--namespace", ns, "--kubeconfig",
                            str(admin_kubeconfig), "--wait", "--timeout", "60s"],
                           capture_output=True, timeout=120, check=False)
        for p in reversed(list(sc.procs.values())):
            p.stop()
        for n in (ns, plugin_ns):
            try:
                for p in core.list_namespaced_pod(n).items:
                    core.delete_namespaced_pod(p.metadata.name, n, grace_period_seconds=0)
                core.delete_namespace(n)
            except ApiException:
                pass
        for name in kwok_hosts:
            try:
                core.delete_node(name)
            except ApiException:
                pass
        if mode == "dra":
            remove_dra_objects(api)
        if real_node is not None:
            release_real_node(core)
            for name in kwok_hosts:  # the agent's device-file directories of the kwok Nodes
                shutil.rmtree(lab_node.device_dir(real_node).parent / name, ignore_errors=True)
            lab_node.start_kubelet_plugin(real_node)


def compose_across_a_leader_kill(d: Deployed, pod: str, host: str, *, gpus: int = 2,
                                 leader: str | None = None) -> dict[str, int]:
    """Pod ``pod`` pinned to ``host`` asks ``gpus`` GPUs while the Director's fabric reprogram
    hangs for 4 s before the fabric changes; the leader's Pod (``leader``, else whichever holds
    the Lease) is force-deleted meanwhile. Waits until another Pod holds the Lease and the pod runs
    on ``host``; returns the Director simulator's call counters."""
    sc = d.sc
    leader = leader or wait_for(d.leader, timeout=60, what="a leader")
    sc.sim("POST", "faults", {"kind": "delay", "method": "POST", "path": "fabric/reprogram",
                              "delay_seconds": 4, "times": 1})
    sc.gpu_pod(pod, gpus, host=host)
    wait_for(lambda: sc.sim("GET", "state")["counters"].get("POST fabric/reprogram"),
             timeout=90, what="reprogram in flight")
    d.force_delete(leader)
    wait_for(lambda: (n := d.leader()) != leader and n, timeout=60, what="the Lease taken over")
    assert wait_for(lambda: sc.running_on(pod), timeout=120, what=f"pod {pod} running") == host
    counters: dict[str, int] = sc.sim("GET", "state")["counters"]
    return counters


def metric(text: str, name: str) -> float:
    """Sum of the samples of metric ``name`` in Prometheus text ``text``."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith((name + " ", name + "{")))


def dump(obj: Any) -> str:
    """Compact JSON of a client object, for messages."""
    return json.dumps(client.ApiClient().sanitize_for_serialization(obj))[:2000]
