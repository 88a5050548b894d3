"""The lab's local Kubernetes control plane (the embedded default "mothership").

Real upstream binaries built from Go modules by ``make setup``: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and kwok, which plays the kubelets of the
simulated bare-metal workers (Nodes ``blade-slot-1`` .. ``blade-slot-N``). Everything
listens on 127.0.0.1. After start the upstream CRDs kept in the repository (``lab/crds/``, made
by ``lab.crdsync``) are installed and each is waited for until Established, so the API server
validates every custom resource the program creates; a CRD that cannot be installed fails the
start with one line naming it and its file.

Ports (fixed, so that ``Pulumi.dev.yaml`` can name them): etcd 12379 (peer 12380),
kube-apiserver 16443 (https).
"""

from __future__ import annotations

import os
import shutil
import ssl
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lab import pki, processes
from lab.crdsync import CRD_DIR

ROOT = Path(__file__).resolve().parent.parent
ETCD_PORT = 12379
ETCD_PEER_PORT = 12380
APISERVER_PORT = 16443
#: Control-plane process names in start order; stopped in reverse.
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


@dataclass(frozen=True)
class LabConfig:
    """Where the lab lives and what it runs.

    Attributes:
        lab_dir: runtime directory (kubeconfig, pki, etcd data, logs, pids).
        bin_dir: directory of the Go-built toolchain binaries.
        crd_dirs: directories whose ``*.yaml`` CRDs are installed after start.
        nodes: names of the kwok-managed Nodes to create.
        node_cpu: CPU capacity of each Node (cores).
        node_memory_mib: memory capacity of each Node (MiB).
    """

    lab_dir: Path = field(default_factory=lambda: Path(os.environ.get("LAB_DIR", ROOT / ".lab")))
    bin_dir: Path = field(default_factory=lambda: ROOT / ".toolchain" / "bin")
    crd_dirs: tuple[Path, ...] = field(default_factory=lambda: default_crd_dirs())
    nodes: tuple[str, ...] = ("blade-slot-1", "blade-slot-2")
    node_cpu: int = 64
    node_memory_mib: int = 512 * 1024

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig of the lab API server."""
        return self.lab_dir / "kubeconfig"

    @property
    def pki_dir(self) -> Path:
        return self.lab_dir / "pki"


def default_crd_dirs() -> tuple[Path, ...]:
    """The project folders of ``lab/crds`` (one per upstream project), sorted by name."""
    return tuple(sorted(p for p in CRD_DIR.iterdir() if p.is_dir()))


def _bin(cfg: LabConfig, name: str) -> str:
    path = cfg.bin_dir / name
    if not path.exists():
        raise processes.LabProcessError(f"{path} is missing: run `make setup` first")
    return str(path)


def write_kubeconfig(cfg: LabConfig, path: Path | None = None, *, token: str | None = None,
                     user: str = "lab-admin", client_cert: tuple[Path, Path] | None = None) -> Path:
    """Write a kubeconfig for the lab API server.

    With ``token`` the user authenticates with that bearer token (for example a
    ServiceAccount token from the TokenRequest API); with ``client_cert`` (cert, key paths) with
    that certificate; otherwise with the admin client cert.
    """
    path = path or cfg.kubeconfig
    crt, key = client_cert or (cfg.pki_dir / "admin.crt", cfg.pki_dir / "admin.key")
    user_entry: dict[str, str] = (
        {"token": token} if token else {"client-certificate": str(crt), "client-key": str(key)}
    )
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "lab",
                "cluster": {
                    "server": f"https://127.0.0.1:{APISERVER_PORT}",
                    "certificate-authority": str(cfg.pki_dir / "ca.crt"),
                },
            }
        ],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": user}}],
        "current-context": "lab",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def _apiserver_ready(cfg: LabConfig) -> bool:
    ctx = ssl.create_default_context(cafile=str(cfg.pki_dir / "ca.crt"))
    ctx.load_cert_chain(str(cfg.pki_dir / "admin.crt"), str(cfg.pki_dir / "admin.key"))
    with urllib.request.urlopen(f"https://127.0.0.1:{APISERVER_PORT}/readyz", context=ctx, timeout=2) as r:
        return r.status == 200


def start(cfg: LabConfig | None = None) -> LabConfig:
    """Start (or adopt) the control plane, install CRDs and create the Nodes. Idempotent.

    Raises:
        processes.LabProcessError: a binary is missing, a component did not get ready (the
            message quotes its log), or a CRD could not be installed (the message names the CRD
            and its file).
    """
    cfg = cfg or LabConfig()
    cfg.lab_dir.mkdir(parents=True, exist_ok=True)
    pki.ensure_pki(cfg.pki_dir)
    write_kubeconfig(cfg)
    p = str(cfg.pki_dir)
    kubeconfig = str(cfg.kubeconfig)

    processes.start(cfg.lab_dir, "etcd", [
        _bin(cfg, "etcd"),
        "--name", "lab",
        "--data-dir", str(cfg.lab_dir / "etcd"),
        "--listen-client-urls", f"http://127.0.0.1:{ETCD_PORT}",
        "--advertise-client-urls", f"http://127.0.0.1:{ETCD_PORT}",
        "--listen-peer-urls", f"http://127.0.0.1:{ETCD_PEER_PORT}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{ETCD_PEER_PORT}",
        "--initial-cluster", f"lab=http://127.0.0.1:{ETCD_PEER_PORT}",
        "--listen-metrics-urls", "",
        "--quota-backend-bytes", str(2 * 1024**3),
        "--log-level", "warn",
    ], ports=[ETCD_PORT, ETCD_PEER_PORT])
    processes.wait_until(lambda: processes.port_open(ETCD_PORT), what="etcd",
                         timeout_seconds=60, lab_dir=cfg.lab_dir, name="etcd")

    processes.start(cfg.lab_dir, "kube-apiserver", [
        _bin(cfg, "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={APISERVER_PORT}",
        f"--tls-cert-file={p}/apiserver.crt",
        f"--tls-private-key-file={p}/apiserver.key",
        f"--client-ca-file={p}/ca.crt",
        f"--service-account-key-file={p}/sa.pub",
        f"--service-account-signing-key-file={p}/sa.key",
        "--service-account-issuer=https://kubernetes.default.svc",
        "--api-audiences=https://kubernetes.default.svc",
        "--authorization-mode=Node,RBAC",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--allow-privileged=true",
        f"--cert-dir={cfg.lab_dir / 'apiserver-certs'}",
        "--endpoint-reconciler-type=none",
        "--enable-priority-and-fairness=false",
        # The lab node's kubelet (lab/node.py) authenticates the API server by this client
        # cert (logs, exec) and is reached at its InternalIP.
        f"--kubelet-client-certificate={p}/admin.crt",
        f"--kubelet-client-key={p}/admin.key",
        "--kubelet-preferred-address-types=InternalIP",
        # No kube-proxy: webhook Services are called at their endpoint address. In v1.34.4 the flag
        # picks the EndpointSlice-based resolver (cmd/kube-apiserver/app/server.go:283-303), which
        # the admission webhooks use (pkg/controlplane/apiserver/config.go:364).
        "--enable-aggregator-routing=true",
        "--v=1",
    ], ports=[APISERVER_PORT])
    processes.wait_until(lambda: _apiserver_ready(cfg), what="kube-apiserver /readyz",
                         timeout_seconds=120, lab_dir=cfg.lab_dir, name="kube-apiserver")

    processes.start(cfg.lab_dir, "kube-controller-manager", [
        _bin(cfg, "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--service-account-private-key-file={p}/sa.key",
        f"--root-ca-file={p}/ca.crt",
        "--use-service-account-credentials=false",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        # No cloud, no node IPAM, no kubelet-facing controllers: kwok plays the kubelets.
        "--controllers=*,-nodeipam,-persistentvolume-binder,-attachdetach,"
        "-persistentvolume-expander,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
        "--v=1",
    ])
    processes.start(cfg.lab_dir, "kube-scheduler", [
        _bin(cfg, "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        "--v=1",
    ])
    processes.start(cfg.lab_dir, "kwok", [
        _bin(cfg, "kwok"),
        f"--kubeconfig={kubeconfig}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--node-ip=127.0.0.1",
        "--cidr=10.244.0.1/16",
        "--node-lease-duration-seconds=40",
        "--server-address=",
    ])

    from lab import kube  # the Kubernetes client is only needed once the API is up

    api = kube.admin_client(cfg)
    kube.install_crds(api, cfg.crd_dirs)
    kube.ensure_nodes(api, cfg.nodes, cpu=cfg.node_cpu, memory_mib=cfg.node_memory_mib)
    processes.wait_until(lambda: kube.default_serviceaccount_ready(api), what="default ServiceAccount",
                         timeout_seconds=60, lab_dir=cfg.lab_dir, name="kube-controller-manager")
    processes.wait_until(lambda: kube.nodes_ready(api, cfg.nodes), what="kwok Nodes Ready",
                         timeout_seconds=60, lab_dir=cfg.lab_dir, name="kwok")
    return cfg


def status(cfg: LabConfig | None = None) -> dict[str, int | None]:
    """Pid (or None) of each control-plane process."""
    cfg = cfg or LabConfig()
    return {name: processes.running(cfg.lab_dir, name) for name in CONTROL_PLANE}


def stop(cfg: LabConfig | None = None, *, wipe: bool = False) -> list[str]:
    """Stop every lab process (services first, then the control plane in reverse order).

    With ``wipe`` also delete etcd data, so the next start is a fresh cluster.
    Returns the names of the processes that were stopped.
    """
    cfg = cfg or LabConfig()
    from lab import node  # the real node first: its pods are killed through its containerd

    node.stop(cfg)
    services = [n for n in processes.recorded(cfg.lab_dir) if n not in CONTROL_PLANE]
    stopped = processes.stop_all(cfg.lab_dir, order=[*services, *reversed(CONTROL_PLANE)])
    if wipe:
        shutil.rmtree(cfg.lab_dir / "etcd", ignore_errors=True)
    # Give the kernel a moment to release the listening sockets.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and processes.port_open(APISERVER_PORT):
        time.sleep(0.2)
    return stopped
