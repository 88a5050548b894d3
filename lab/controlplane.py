"""The lab's local Kubernetes control planes: the embedded default "mothership" and the
hypervisor cluster ``lab-workers``.

Real upstream binaries built from Go modules by ``make setup``: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and kwok, which plays the kubelets of the
simulated bare-metal workers (Nodes ``blade-slot-1`` .. ``blade-slot-N``). Everything
listens on 127.0.0.1. After start the upstream CRDs kept in the repository (``lab/crds/``, made
by ``lab.crdsync``) are installed and each is waited for until Established, so the API server
validates every custom resource the program creates; a CRD that cannot be installed fails the
start with one line naming it and its file. kwok's Lease duration, the node lifecycle controller's
grace period and the wait for the Nodes grow with their number (``lab.fleet_timing``).

Where a control plane lives, its ports and its Nodes are one ``lab.settings.LabConfig``; the
management cluster's ports are fixed (``lab.settings.MOTHERSHIP_PORTS``: etcd 12379, peer 12380,
kube-apiserver 16443), so that ``Pulumi.dev.yaml`` can name them. :func:`start` of the mothership
also starts its second control plane (``LabConfig.hypervisor``: the same processes in
``<lab dir>/lab-workers`` on etcd 12479, peer 12480, kube-apiserver 16543, with the hypervisor
cluster's CRDs), registers the hosts' Nodes in the cluster ``LabConfig.hosts_cluster`` names
(and removes them from the other), and starts ``capi-standin`` (``lab.capi_standin``), which
publishes the second cluster's kubeconfig as Secret ``lab-workers-kubeconfig`` for the
ClusterDeployment of that name.
"""

from __future__ import annotations

import shutil
import ssl
import sys
import time
import urllib.request

from lab import fleet_timing, kube, node, pki, processes
from lab.settings import ROOT, LabConfig

#: Control-plane process names in start order; stopped in reverse.
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
#: The mothership's process that publishes the second cluster's kubeconfig (``lab.capi_standin``).
CAPI_STANDIN = "capi-standin"


def _bin(cfg: LabConfig, name: str) -> str:
    path = cfg.bin_dir / name
    if not path.exists():
        raise processes.LabProcessError(f"{path} is missing: run `make setup` first")
    return str(path)


def _apiserver_ready(cfg: LabConfig) -> bool:
    ctx = ssl.create_default_context(cafile=str(cfg.pki_dir / "ca.crt"))
    ctx.load_cert_chain(str(cfg.pki_dir / "admin.crt"), str(cfg.pki_dir / "admin.key"))
    with urllib.request.urlopen(f"{cfg.apiserver_url}/readyz", context=ctx, timeout=2) as r:
        return r.status == 200


def start(cfg: LabConfig | None = None) -> LabConfig:
    """Start (or adopt) the control plane, install CRDs and create its Nodes (``cfg.kwok_nodes``;
    the lab's host Nodes it does not register are deleted); then the same for ``cfg.hypervisor``
    and the ``capi-standin`` process. Idempotent.

    Raises:
        processes.LabProcessError: a binary is missing, a component did not get ready (the
            message quotes its log), or a CRD could not be installed (the message names the CRD
            and its file).
    """
    cfg = cfg or LabConfig()
    cfg.lab_dir.mkdir(parents=True, exist_ok=True)
    pki.ensure_pki(cfg.pki_dir)
    kube.write_kubeconfig(cfg)
    p = str(cfg.pki_dir)
    kubeconfig = str(cfg.kubeconfig)

    processes.start(cfg.lab_dir, "etcd", [
        _bin(cfg, "etcd"),
        "--name", "lab",
        "--data-dir", str(cfg.lab_dir / "etcd"),
        "--listen-client-urls", f"http://127.0.0.1:{cfg.ports.etcd}",
        "--advertise-client-urls", f"http://127.0.0.1:{cfg.ports.etcd}",
        "--listen-peer-urls", f"http://127.0.0.1:{cfg.ports.etcd_peer}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{cfg.ports.etcd_peer}",
        "--initial-cluster", f"lab=http://127.0.0.1:{cfg.ports.etcd_peer}",
        "--listen-metrics-urls", "",
        "--quota-backend-bytes", str(2 * 1024**3),
        "--log-level", "warn",
    ], ports=[cfg.ports.etcd, cfg.ports.etcd_peer])
    processes.wait_until(lambda: processes.port_open(cfg.ports.etcd), what="etcd",
                         timeout_seconds=60, lab_dir=cfg.lab_dir, name="etcd")

    processes.start(cfg.lab_dir, "kube-apiserver", [
        _bin(cfg, "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{cfg.ports.etcd}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={cfg.ports.apiserver}",
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
        # No kube-proxy: webhook Services are called at their endpoint address. In v1.36.3 the flag
        # picks the EndpointSlice-based resolver (cmd/kube-apiserver/app/server.go:283-300), which
        # the admission webhooks use (pkg/controlplane/apiserver/config.go:369).
        "--enable-aggregator-routing=true",
        "--v=1",
    ], ports=[cfg.ports.apiserver])
    processes.wait_until(lambda: _apiserver_ready(cfg), what="kube-apiserver /readyz",
                         timeout_seconds=120, lab_dir=cfg.lab_dir, name="kube-apiserver")

    # Lease and grace grow with the fleet, or kwok's Lease renewals swamp the API server.
    lease, grace = fleet_timing.node_heartbeat(len(cfg.kwok_nodes))
    processes.start(cfg.lab_dir, "kube-controller-manager", [
        _bin(cfg, "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--service-account-private-key-file={p}/sa.key",
        f"--root-ca-file={p}/ca.crt",
        f"--node-monitor-grace-period={grace}s",
        "--use-service-account-credentials=false",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        # No cloud, no node IPAM, no kubelet-facing controllers: kwok plays the kubelets.
        "--controllers=*,-nodeipam,-persistentvolume-binder,-attachdetach,"
        "-persistentvolume-expander,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
        # The node lifecycle controller removes each new Node's not-ready taint with its own API
        # calls: at the default 20 requests/s 1,000 kwok Nodes stay tainted for minutes.
        "--kube-api-qps=200",
        "--kube-api-burst=400",
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
        f"--node-lease-duration-seconds={lease}",
        "--server-address=",
    ])

    api = kube.admin_client(cfg)
    kube.install_crds(api, cfg.crd_dirs)
    nodes = cfg.kwok_nodes
    kube.remove_lab_nodes(api, keep=nodes)
    kube.ensure_nodes(api, nodes, cpu=cfg.node_cpu, memory_mib=cfg.node_memory_mib)
    processes.wait_until(lambda: kube.default_serviceaccount_ready(api), what="default ServiceAccount",
                         timeout_seconds=60, lab_dir=cfg.lab_dir, name="kube-controller-manager")
    timeout, interval = fleet_timing.nodes_ready_wait(len(nodes))
    processes.wait_until(lambda: kube.nodes_ready(api, nodes),
                         what=f"{len(nodes)} kwok Nodes Ready and untainted",
                         timeout_seconds=timeout, interval_seconds=interval, lab_dir=cfg.lab_dir, name="kwok")
    hypervisor = cfg.hypervisor
    if hypervisor is not None:
        start(hypervisor)
        processes.start(cfg.lab_dir, CAPI_STANDIN, [
            sys.executable, "-m", "lab.capi_standin", "--kubeconfig", kubeconfig,
            "--cluster", f"{hypervisor.name}={hypervisor.kubeconfig}",
        ], cwd=ROOT)
    return cfg


def restart_apiserver(cfg: LabConfig) -> float:
    """Stop the running kube-apiserver of ``cfg`` (by its recorded pid) and start it again with the
    same command line, as an operator restarting it would; returns the seconds until ``/readyz``
    answered again. For fault injection (the soak, ``bench.soak``).

    Raises:
        processes.LabProcessError: it was not running, or did not get ready within 120 s.
    """
    pid = processes.running(cfg.lab_dir, "kube-apiserver")
    argv = processes.command_line(pid) if pid else None
    if not argv:
        raise processes.LabProcessError(f"kube-apiserver is not running in {cfg.lab_dir}")
    t0 = time.monotonic()
    processes.stop(cfg.lab_dir, "kube-apiserver")
    processes.start(cfg.lab_dir, "kube-apiserver", argv, ports=[cfg.ports.apiserver])
    processes.wait_until(lambda: _apiserver_ready(cfg), what="kube-apiserver /readyz",
                         timeout_seconds=120, lab_dir=cfg.lab_dir, name="kube-apiserver")
    return time.monotonic() - t0


def status(cfg: LabConfig | None = None) -> dict[str, int | None]:
    """Pid (or None) of each control-plane process, the second control plane's named
    ``<its name>/<process>`` (``lab-workers/etcd``), and of ``capi-standin``."""
    cfg = cfg or LabConfig()
    found = {name: processes.running(cfg.lab_dir, name) for name in CONTROL_PLANE}
    hypervisor = cfg.hypervisor
    if hypervisor is not None:
        found.update({f"{hypervisor.name}/{n}": pid for n, pid in status(hypervisor).items()})
        found[CAPI_STANDIN] = processes.running(cfg.lab_dir, CAPI_STANDIN)
    return found


def stop(cfg: LabConfig | None = None, *, wipe: bool = False) -> list[str]:
    """Stop every lab process: the real node, the services, the second control plane (as this
    function stops a control plane), then this control plane in reverse start order.

    With ``wipe`` also delete etcd data (of both), so the next start is a fresh cluster.
    Returns the names of the processes that were stopped (the second control plane's as
    ``<its name>/<process>``).
    """
    cfg = cfg or LabConfig()
    node.stop(cfg)  # the real node first: its pods are killed through its containerd
    services = [n for n in processes.recorded(cfg.lab_dir) if n not in CONTROL_PLANE]
    stopped = [n for n in services if processes.stop(cfg.lab_dir, n)]
    hypervisor = cfg.hypervisor
    if hypervisor is not None:
        stopped += [f"{hypervisor.name}/{n}" for n in stop(hypervisor, wipe=wipe)]
    stopped += processes.stop_all(cfg.lab_dir, order=list(reversed(CONTROL_PLANE)))
    if wipe:
        shutil.rmtree(cfg.lab_dir / "etcd", ignore_errors=True)
    # Give the kernel a moment to release the listening sockets.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and processes.port_open(cfg.ports.apiserver):
        time.sleep(0.2)
    return stopped
