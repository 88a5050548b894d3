"""The lab's settings, in one place: where it lives, its ports and its lab-only credentials.

A leaf module (it imports no other lab module but the CRD folder's location), so every lab
module and test reads the same facts. A lab control plane is one ``LabConfig``: its runtime
folder, its ports and its Nodes. The lab runs two: the management cluster (the "mothership",
``LabConfig()``) and, as its :attr:`LabConfig.hypervisor`, a second instance with another
``lab_dir`` (``<lab dir>/lab-workers``) and other ``ports`` (:data:`HYPERVISOR_PORTS`), named
after the dev stack's hypervisor cluster (:data:`HYPERVISOR_CLUSTER`). The bare-metal hosts'
Nodes (``blade-slot-*``) are registered there; the mothership keeps its real node ``mgmt-1``
(``lab.node``) and the platform objects. ``LAB_HOSTS_ON_MOTHERSHIP=1`` (or
``LabConfig(hosts_on_mothership=True)``) registers the hosts on the mothership instead, as the lab
did before it had a second cluster (``make demo`` does, see ``lab.demo``).

The ports and credentials are the ones ``Pulumi.dev.yaml`` names (its passwords are stored
there encrypted with the dev stack's lab-only passphrase). The credentials are lab constants,
passed to the simulators through the environment, never on the command line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from lab.crdsync import CRD_DIR

#: The checkout's root folder.
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ControlPlanePorts:
    """The 127.0.0.1 ports of one lab control plane.

    Attributes:
        etcd: etcd's client port.
        etcd_peer: etcd's peer port.
        apiserver: kube-apiserver's secure port (https).
    """

    etcd: int
    etcd_peer: int
    apiserver: int


#: The management cluster's ports (fixed, so that ``Pulumi.dev.yaml`` can name them).
MOTHERSHIP_PORTS = ControlPlanePorts(etcd=12379, etcd_peer=12380, apiserver=16443)
#: The second control plane's ports (fixed, so that a stack can name its kubeconfig's server).
HYPERVISOR_PORTS = ControlPlanePorts(etcd=12479, etcd_peer=12480, apiserver=16543)

#: The mothership's name as a lab control plane.
MOTHERSHIP_CLUSTER = "mothership"
#: The second control plane's name: the dev stack's hypervisor cluster
#: (``environments/dev/clusters.yaml``), whose ClusterDeployment the program creates on the mothership.
HYPERVISOR_CLUSTER = "lab-workers"
#: The lab's bare-metal hosts (kwok Nodes), as the dev stack names them.
HOST_NODES = ("blade-slot-1", "blade-slot-2")
#: Environment variable: ``1`` registers the hosts' Nodes on the mothership (the lab before it had a
#: second cluster), anything else or unset in the hypervisor cluster.
HOSTS_ON_MOTHERSHIP_ENV = "LAB_HOSTS_ON_MOTHERSHIP"
#: The upstream projects of ``lab/crds`` whose CRDs the hypervisor cluster serves: Multus (the
#: tenants' NetworkAttachmentDefinitions), the GPU Operator (its ClusterPolicy) and
#: prometheus-operator (the composer chart's monitoring objects).
HYPERVISOR_CRD_PROJECTS = ("gpu-operator", "multus", "prometheus-operator")

#: The LIQID Director simulator's HTTP port.
DIRECTOR_PORT = 18080
#: The BlueField-3 DPU BMC simulators' HTTPS ports, by BMC name.
DPU_BMC_PORTS = {"dpu-blade-slot-1": 18441, "dpu-blade-slot-2": 18442}
#: The host BMC simulators' HTTPS ports, by BMC name.
HOST_BMC_PORTS = {"bmc-blade-slot-1": 18451, "bmc-blade-slot-2": 18452}
#: The lab sshd's port (host preparation over SSH).
SSHD_PORT = 18022

#: Lab-only credentials (also in Pulumi.dev.yaml, encrypted).
DIRECTOR_USER, DIRECTOR_PASSWORD = "admin", "lab-director-password"
BMC_USER, BMC_PASSWORD = "root", "lab-bmc-password"


def director_url() -> str:
    """Base URL of the lab Director simulator."""
    return f"http://127.0.0.1:{DIRECTOR_PORT}"


def default_crd_dirs() -> tuple[Path, ...]:
    """The project folders of ``lab/crds`` (one per upstream project), sorted by name."""
    return tuple(sorted(p for p in CRD_DIR.iterdir() if p.is_dir()))


def hypervisor_crd_dirs() -> tuple[Path, ...]:
    """The ``lab/crds`` folders of :data:`HYPERVISOR_CRD_PROJECTS`, sorted by name."""
    return tuple(CRD_DIR / name for name in sorted(HYPERVISOR_CRD_PROJECTS))


def _hosts_on_mothership_from_env() -> bool:
    return os.environ.get(HOSTS_ON_MOTHERSHIP_ENV, "") == "1"


@dataclass(frozen=True)
class LabConfig:
    """One lab control plane: where it lives and what it runs.

    Attributes:
        lab_dir: runtime directory (kubeconfig, pki, etcd data, logs, pids); ``$LAB_DIR`` or
            ``.lab`` in the checkout.
        bin_dir: directory of the Go-built toolchain binaries.
        crd_dirs: directories whose ``*.yaml`` CRDs are installed after start.
        nodes: names of the lab's bare-metal hosts, kwok-managed Nodes, registered in
            :attr:`hosts_cluster` (:attr:`kwok_nodes` of each control plane).
        node_cpu: CPU capacity of each Node (cores).
        node_memory_mib: memory capacity of each Node (MiB).
        ports: the control plane's 127.0.0.1 ports.
        name: the control plane's name (:data:`MOTHERSHIP_CLUSTER` or :data:`HYPERVISOR_CLUSTER`).
        hypervisor_ports: the second control plane's ports; None: this lab has no second control
            plane (an isolated lab such as the benchmarks'), its hosts are the mothership's Nodes.
        hosts_on_mothership: register the hosts on the mothership although a second control plane
            runs (``$LAB_HOSTS_ON_MOTHERSHIP=1``).
    """

    lab_dir: Path = field(default_factory=lambda: Path(os.environ.get("LAB_DIR", ROOT / ".lab")))
    bin_dir: Path = field(default_factory=lambda: ROOT / ".toolchain" / "bin")
    crd_dirs: tuple[Path, ...] = field(default_factory=default_crd_dirs)
    nodes: tuple[str, ...] = HOST_NODES
    node_cpu: int = 64
    node_memory_mib: int = 512 * 1024
    ports: ControlPlanePorts = MOTHERSHIP_PORTS
    name: str = MOTHERSHIP_CLUSTER
    hypervisor_ports: ControlPlanePorts | None = HYPERVISOR_PORTS
    hosts_on_mothership: bool = field(default_factory=_hosts_on_mothership_from_env)

    @property
    def hypervisor(self) -> LabConfig | None:
        """The second control plane (the hypervisor cluster :data:`HYPERVISOR_CLUSTER`), the same
        binaries in ``<lab_dir>/lab-workers`` on :attr:`hypervisor_ports`, with the CRDs of
        :data:`HYPERVISOR_CRD_PROJECTS`; None for the second control plane itself and for a lab
        without one."""
        if self.hypervisor_ports is None or self.name != MOTHERSHIP_CLUSTER:
            return None
        return LabConfig(
            lab_dir=self.lab_dir / HYPERVISOR_CLUSTER, bin_dir=self.bin_dir,
            crd_dirs=hypervisor_crd_dirs(), nodes=() if self.hosts_on_mothership else self.nodes,
            node_cpu=self.node_cpu, node_memory_mib=self.node_memory_mib,
            ports=self.hypervisor_ports, name=HYPERVISOR_CLUSTER, hypervisor_ports=None,
            hosts_on_mothership=False,
        )

    @property
    def hosts_cluster(self) -> LabConfig:
        """The control plane whose Nodes the hosts are: :attr:`hypervisor`, or this one when it has
        none or :attr:`hosts_on_mothership`."""
        hypervisor = self.hypervisor
        return self if hypervisor is None or self.hosts_on_mothership else hypervisor

    @property
    def kwok_nodes(self) -> tuple[str, ...]:
        """The kwok Nodes this control plane registers: :attr:`nodes` when it is the
        :attr:`hosts_cluster`, else none."""
        return self.nodes if self.hosts_cluster is self else ()

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig of the lab API server."""
        return self.lab_dir / "kubeconfig"

    @property
    def pki_dir(self) -> Path:
        """The control plane's CA, serving and client certificates (``lab.pki``)."""
        return self.lab_dir / "pki"

    @property
    def apiserver_url(self) -> str:
        """The API server's URL (``https://127.0.0.1:<port>``)."""
        return f"https://127.0.0.1:{self.ports.apiserver}"


def _default_hypervisor() -> LabConfig:
    hypervisor = LabConfig().hypervisor
    assert hypervisor is not None  # the default lab has a second control plane
    return hypervisor


#: The default lab's second control plane (``$LAB_DIR`` or ``.lab``, as read at import):
#: ``HYPERVISOR.kubeconfig`` is ``.lab/lab-workers/kubeconfig``, its server
#: ``https://127.0.0.1:16543``.
HYPERVISOR = _default_hypervisor()
