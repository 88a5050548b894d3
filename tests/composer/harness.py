"""End-to-end harness for the composer on the lab (used by ``test_e2e_lab.py``).

Per scenario it starts, on free ports and under a unique id:

- the Director simulator (``python -m lab.director_sim``) with an inventory whose machine
  names are prefixed with the id (so scenarios never touch the lab's shared blade Nodes);
- kwok-managed Nodes with those names, labelled ``composer-e2e=<id>``;
- the GPU-Operator stand-in (``python -m lab.gpu_agent``) for those Nodes;
- the composer (``python -m composer``) authenticating as the chart's ServiceAccount with a
  TokenRequest token, so the chart's RBAC (rendered by ``helm template`` and applied to the lab
  API server) is what it really gets;
- optionally the chart's pod-gating webhook, registered with a URL on 127.0.0.1 and served by
  the composer over HTTPS with the chart-made certificate (:meth:`Scenario.enable_gating`).

Every process is started by this harness in its own session and stopped by pid.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests
import yaml
from kubernetes import client, config, utils
from kubernetes.client.exceptions import ApiException

from lab import readiness
from lab.processes import port_open

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "composer"
INVENTORIES = ROOT / "lab" / "inventories"
SIM_USER, SIM_PASSWORD = "admin", "e2e-director-password"
E2E_LABEL = "composer-e2e"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(pred: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.1, what: str = "") -> Any:
    """Poll ``pred`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or pred}: last={last!r}")


@dataclass
class Proc:
    """A process this harness started (own session); stopped by pid only."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        if self.popen.poll() is not None:
            return
        os.killpg(self.popen.pid, sig)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.stop(signal.SIGKILL)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""


def start_proc(name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None) -> Proc:
    log = log_dir / f"{name}.log"
    with log.open("ab") as f:
        p = subprocess.Popen(
            argv,
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            start_new_session=True,
        )
    return Proc(name, p, log)


def helm_template(namespace: str, release: str, *values: str) -> list[dict[str, Any]]:
    """Render the chart; returns the documents."""
    argv = ["helm", "template", release, str(CHART), "--namespace", namespace]
    for v in values:
        argv += ["--set", v]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@dataclass
class RbacIdentity:
    """The chart's ServiceAccount applied to the lab, and a kubeconfig with its token."""

    namespace: str
    release: str
    plugin_namespace: str
    kubeconfig: Path
    objects: list[dict[str, Any]]


def apply_chart_rbac(
    api: client.ApiClient, lab_cfg: Any, tmp: Path, *, token_seconds: int = 3600
) -> RbacIdentity:
    """Render the chart's ServiceAccount and RBAC, apply them, and mint a token (TokenRequest) valid
    for ``token_seconds``."""

    sid = uuid.uuid4().hex[:6]
    ns, plugin_ns, release = f"composer-e2e-{sid}", f"gpu-operator-e2e-{sid}", f"e2e{sid}"
    core = client.CoreV1Api(api)
    for n in (ns, plugin_ns):
        core.create_namespace({"metadata": {"name": n, "labels": {E2E_LABEL: sid}}})
    ident = RbacIdentity(ns, release, plugin_ns, tmp / "composer.kubeconfig", [])
    try:
        return _apply_rbac(api, lab_cfg, ident, token_seconds)
    except BaseException:
        delete_chart_rbac(api, ident)
        raise


def _apply_rbac(api: client.ApiClient, lab_cfg: Any, ident: RbacIdentity, token_seconds: int) -> RbacIdentity:
    from lab.kube import write_kubeconfig

    ns, plugin_ns, release = ident.namespace, ident.plugin_namespace, ident.release
    core = client.CoreV1Api(api)
    docs = helm_template(
        ns,
        release,
        "director.existingSecret=unused",
        f"devicePlugin.namespace={plugin_ns}",
        "leaderElection.leaseName=composer-e2e",
    )
    keep = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    ident.objects = objects = [d for d in docs if d["kind"] in keep]
    for d in objects:
        utils.create_from_dict(api, d)
    sa = next(d for d in objects if d["kind"] == "ServiceAccount")["metadata"]["name"]
    spec = {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": token_seconds}
    tr = core.create_namespaced_service_account_token(sa, ns, {"spec": spec})
    write_kubeconfig(lab_cfg, ident.kubeconfig, token=tr.status.token, user=f"sa-{sa}")
    return ident


def delete_chart_rbac(api: client.ApiClient, ident: RbacIdentity) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    core = client.CoreV1Api(api)
    for d in ident.objects:
        name = d["metadata"]["name"]
        try:
            if d["kind"] == "ClusterRole":
                rbac.delete_cluster_role(name)
            elif d["kind"] == "ClusterRoleBinding":
                rbac.delete_cluster_role_binding(name)
        except ApiException:
            pass
    for n in (ident.namespace, ident.plugin_namespace):
        try:
            core.delete_namespace(n)
        except ApiException:
            pass


def node_body(name: str, sid: str, *, cpu: int = 32, memory_gib: int = 128) -> dict[str, Any]:
    res = {"cpu": str(cpu), "memory": f"{memory_gib}Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                E2E_LABEL: sid,
            },
        },
        "spec": {},
        "status": {
            "capacity": res,
            "allocatable": res,
            "nodeInfo": {"kubeletVersion": "fake", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


@dataclass
class Scenario:
    """One running scenario: simulator, nodes, agent, composer, and helpers to drive it."""

    api: client.ApiClient
    ident: RbacIdentity
    sid: str
    tmp: Path
    hosts: dict[str, str]  # inventory machine name -> node name
    admin_kubeconfig: Path
    director_url: str = ""
    probe_port: int = 0
    procs: dict[str, Proc] = field(default_factory=dict)
    composer_args: list[str] = field(default_factory=list)
    webhooks: list[str] = field(default_factory=list)
    #: namespaces the composer watches besides the scenario's own (each deleted at the end)
    extra_namespaces: list[str] = field(default_factory=list)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def ns(self) -> str:
        return self.ident.namespace

    def node(self, machine: str) -> str:
        return self.hosts[machine]

    # -- processes -----------------------------------------------------------------------
    def start_composer(self, *extra: str, name: str = "composer", probe_port: int | None = None,
                       director_url: str | None = None) -> Proc:
        """Start ``python -m composer`` as ``name`` (``director_url``: instead of the simulator's
        own, e.g. a relay in front of it)."""
        self.procs[name] = p = start_proc(
            name,
            [
                sys.executable,
                "-m",
                "composer",
                "--director-url",
                director_url or self.director_url,
                "--director-username",
                SIM_USER,
                "--kubeconfig",
                str(self.ident.kubeconfig),
                "--namespace",
                self.ident.namespace,
                "--identity",
                f"e2e-{self.sid}-{name}",
                "--lease-name",
                "composer-e2e",
                "--lease-duration-seconds",
                "3",
                "--lease-retry-seconds",
                "0.5",
                "--node-selector",
                f"{E2E_LABEL}={self.sid}",
                "--namespaces",
                json.dumps([self.ns, *self.extra_namespaces]),
                "--device-plugin-namespace",
                self.ident.plugin_namespace,
                "--resync-seconds",
                "0.3",
                "--retry-base-seconds",
                "0.5",
                "--retry-max-seconds",
                "2",
                "--advertise-timeout-seconds",
                "3",
                "--schedule-timeout-seconds",
                "30",
                "--director-retries",
                "0",
                "--director-timeout-seconds",
                "5",
                "--probe-address",
                "127.0.0.1",
                "--probe-port",
                str(probe_port or self.probe_port),
                *self.composer_args,
                *extra,
            ],
            self.tmp,
            env={"COMPOSER_DIRECTOR_PASSWORD": SIM_PASSWORD},
        )
        args = [*self.composer_args, *extra]
        if "--webhook-port" in args:  # pods created before it listens would not be gated
            port = int(args[args.index("--webhook-port") + 1])
            wait_for(lambda: port_open(port), timeout=30, what="composer webhook listening")
        return p

    def enable_gating(self) -> list[str]:
        """Register the chart's gating webhook for this scenario's namespace (URL on 127.0.0.1,
        chart-made certificate); returns the composer flags that serve it. The configuration is
        deleted when the scenario ends."""
        from lab.scenario import local_gating_webhook, webhook_flags

        port, cert, key, name = local_gating_webhook(
            self.api, namespace=self.ns, release=f"g{self.sid}", out_dir=self.tmp
        )
        self.webhooks.append(name)
        return webhook_flags(port, cert, key)

    def delay_reprogram(self, seconds: float) -> None:
        """The simulator's next ``fabric/reprogram`` answers ``seconds`` late (a slow hot-plug)."""
        self.sim(
            "POST",
            "faults",
            {
                "kind": "delay",
                "method": "POST",
                "path": "fabric/reprogram",
                "delay_seconds": seconds,
                "times": 1,
            },
        )

    def start_agent(self, *extra: str) -> Proc:
        self.procs["agent"] = p = start_proc(
            "gpu-agent",
            [
                sys.executable,
                "-m",
                "lab.gpu_agent",
                "--kubeconfig",
                str(self.admin_kubeconfig),
                "--director-url",
                self.director_url,
                "--node-selector",
                f"{E2E_LABEL}={self.sid}",
                "--plugin-namespace",
                self.ident.plugin_namespace,
                "--interval",
                "0.2",
                "--advertise-delay",
                "0.3",
                *extra,
            ],
            self.tmp,
            env={"GPU_AGENT_DIRECTOR_PASSWORD": SIM_PASSWORD},
        )
        return p

    # -- Director simulator --------------------------------------------------------------
    def sim(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        r = requests.request(method, f"{self.director_url}/_sim/{path}", json=body, timeout=10)
        r.raise_for_status()
        return r.json()

    def director_udesc(self) -> dict[str, str]:
        """GPU name -> user description (the owner tag) as the Director's REST API shows it
        (``GET device/info/gpu``; ``n/a`` when there is none)."""
        r = requests.get(f"{self.director_url}/liqid/api/v2/device/info/gpu", auth=(SIM_USER, SIM_PASSWORD),
                         timeout=10)
        r.raise_for_status()
        return {g["name"]: g["udesc"] for g in r.json()["response"]["data"]}

    def attached(self) -> dict[str, list[str]]:
        """Node name -> GPUs the Director shows attached to it."""
        return attached_gpus(self.sim("GET", "state"))

    # -- Kubernetes -----------------------------------------------------------------------
    def add_namespace(self, suffix: str) -> str:
        """Create namespace ``<scenario namespace>-<suffix>`` (another tenant's), watched by the
        composers started after; deleted when the scenario ends. Returns its name."""
        name = f"{self.ns}-{suffix}"
        self.core.create_namespace({"metadata": {"name": name, "labels": {E2E_LABEL: self.sid}}})
        self.extra_namespaces.append(name)
        return name

    def gpu_pod(
        self,
        name: str,
        count: int = 1,
        *,
        product: str | None = None,
        host: str | None = None,
        resource: str = "nvidia.com/gpu",
        cpu: str = "500m",
        memory: str = "256Mi",
        namespace: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        selector = {E2E_LABEL: self.sid}  # keep test pods off the lab's other nodes
        if product:
            selector["nvidia.com/gpu.product"] = product
        if host:
            selector["kubernetes.io/hostname"] = host
        ns = namespace or self.ns
        body = {
            "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})},
            "spec": {
                "nodeSelector": selector,
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [
                    {
                        "name": "cuda",
                        "image": "nvcr.io/nvidia/cuda:stand-in",
                        "resources": {"limits": {resource: str(count), "cpu": cpu, "memory": memory}},
                    }
                ],
            },
        }
        self.core.create_namespaced_pod(ns, body)

    def pod(self, name: str, namespace: str | None = None) -> client.V1Pod | None:
        try:
            return self.core.read_namespaced_pod(name, namespace or self.ns)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def running_on(self, name: str, namespace: str | None = None) -> str | None:
        p = self.pod(name, namespace)
        if p and p.spec.node_name and p.status.phase == "Running":
            return p.spec.node_name
        return None

    def delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.ns, grace_period_seconds=0)
        wait_for(lambda: self.pod(name) is None, timeout=30, what=f"pod {name} gone")

    def events(self, name: str, namespace: str | None = None) -> list[tuple[str, str, str]]:
        """(type, reason, message) of the pod's Events from the scheduler and this scenario's
        composers (other composers running in the shared lab are ignored)."""
        evs = [
            e
            for e in self.core.list_namespaced_event(
                namespace or self.ns, field_selector=f"involvedObject.name={name}"
            ).items
            if e.reporting_component != "gpu-composer"
            or (e.reporting_instance or "").startswith(f"e2e-{self.sid}-")
        ]
        return [
            (e.type, e.reason, e.message) for e in sorted(evs, key=lambda e: e.metadata.creation_timestamp)
        ]

    def node_events(self, node: str) -> list[tuple[str, str, str]]:
        """(type, reason, message) of this scenario's composer Events on Node ``node`` (Events of a
        Node are in ``default``), oldest first."""
        evs = self.core.list_namespaced_event("default", field_selector=f"involvedObject.name={node}").items
        return [
            (e.type, e.reason, e.message)
            for e in sorted(evs, key=lambda e: e.metadata.creation_timestamp)
            if (e.reporting_instance or "").startswith(f"e2e-{self.sid}-")
        ]

    def node_obj(self, node: str) -> client.V1Node:
        return self.core.read_node(node)

    def metrics(self, port: int | None = None) -> str:
        """The composer's /metrics text ("" while it is not listening yet)."""
        try:
            return requests.get(f"http://127.0.0.1:{port or self.probe_port}/metrics", timeout=5).text
        except requests.RequestException:  # refused or slow: "not yet", the caller polls again
            return ""

    def diagnostics(self) -> str:
        return "\n".join(f"--- {n} ---\n{p.tail()}" for n, p in self.procs.items())


@contextmanager
def scenario(
    api: client.ApiClient,
    ident: RbacIdentity,
    tmp: Path,
    admin_kubeconfig: Path,
    *,
    inventory: str = "dev.yaml",
    hotplug_latency: float = 0.05,
    director_host: str = "127.0.0.1",
) -> Iterator[Scenario]:
    """Start the simulator (renamed inventory) and the Nodes; the caller starts agent/composer.
    ``director_host``: the address the simulator listens on (the lab node's, ``lab.node.NODE_IP``,
    for a composer whose Pods run on ``mgmt-1``)."""
    sid = uuid.uuid4().hex[:6]
    inv = yaml.safe_load((INVENTORIES / inventory).read_text())
    hosts = {m["name"]: f"e{sid}-{m['name']}" for m in inv["machines"]}
    for m in inv["machines"]:
        m["name"] = hosts[m["name"]]
    for g in inv["gpus"]:
        if g.get("attached_to"):
            g["attached_to"] = hosts[g["attached_to"]]
    inv_path = tmp / "inventory.yaml"
    inv_path.write_text(yaml.safe_dump(inv))
    port = free_port()
    sc = Scenario(
        api,
        ident,
        sid,
        tmp,
        hosts,
        admin_kubeconfig,
        director_url=f"http://{director_host}:{port}",
        probe_port=free_port(),
    )
    sc.procs["director-sim"] = start_proc(
        "director-sim",
        [
            sys.executable,
            "-m",
            "lab.director_sim",
            "--host",
            director_host,
            "--port",
            str(port),
            "--inventory",
            str(inv_path),
            "--state-file",
            str(tmp / "director.json"),
            "--hotplug-latency",
            str(hotplug_latency),
        ],
        tmp,
        env={"DIRECTOR_SIM_USERNAME": SIM_USER, "DIRECTOR_SIM_PASSWORD": SIM_PASSWORD},
    )
    core = sc.core
    try:
        wait_sim_ready(sc.procs["director-sim"], sc.director_url)
        add_kwok_nodes(core, hosts.values(), sid)
        yield sc
    finally:
        for name in sc.webhooks:
            try:
                client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(name)
            except ApiException:
                pass
        for p in reversed(list(sc.procs.values())):
            p.stop()
        for ns in (sc.ns, sc.ident.plugin_namespace, *sc.extra_namespaces):  # before the Nodes go,
            try:  # or pods stay Terminating
                for p in core.list_namespaced_pod(ns).items:
                    core.delete_namespaced_pod(p.metadata.name, ns, grace_period_seconds=0)
            except ApiException:
                pass
        for ns in sc.extra_namespaces:
            try:
                core.delete_namespace(ns)
            except ApiException:
                pass
        for name in hosts.values():
            try:
                core.delete_node(name)
            except ApiException:
                pass


def utc_window(offset_hours: int, hours: int) -> str:
    """A daily UTC reclaim window ``HH:MM-HH:MM`` starting on the hour ``offset_hours`` from now
    (may be negative), ``hours`` long: ``utc_window(2, 2)`` never contains now."""
    start = (datetime.now(UTC) + timedelta(hours=offset_hours)).replace(minute=0)
    end = start + timedelta(hours=hours)
    return f"{start:%H:%M}-{end:%H:%M}"


def attached_gpus(state: dict[str, Any]) -> dict[str, list[str]]:
    """Machine name -> names of the GPUs attached to it (sorted), from the Director simulator's
    ``GET /_sim/state``; machines without GPUs left out. Pure."""
    mach = {m["mach_id"]: m["name"] for m in state["machines"]}
    out: dict[str, list[str]] = {}
    for g in state["gpus"]:
        if g.get("mach_id") is not None:
            out.setdefault(mach[g["mach_id"]], []).append(g["name"])
    return {k: sorted(v) for k, v in out.items()}


def _ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def wait_sim_ready(sim: Proc, url: str) -> None:
    """Wait until the Director simulator ``sim`` serving ``url`` answers its health probe."""
    readiness.wait_until(readiness.http_probe(f"{url}/_sim/health"), what="director-sim",
                         timeout_seconds=120, alive=lambda: sim.popen.poll() is None, log=sim.log)


def add_kwok_nodes(core: client.CoreV1Api, names: Iterable[str], sid: str, *, where: str = "") -> None:
    """Create a kwok Node per name (labelled with the scenario ``sid``) and wait until all are
    Ready (kwok marks them; 60 s at most). ``where`` names the cluster in the failure message."""
    names = list(names)
    for name in names:
        core.create_node(node_body(name, sid))
    wait_for(lambda: all(_ready(core.read_node(n)) for n in names), timeout=60,
             what=f"kwok Nodes Ready{' in ' + where if where else ''}")


def admin_api(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))
