"""The lab's settings, in one place: where it lives, its ports and its lab-only credentials.

A leaf module (it imports no other lab module but the CRD folder's location), so every lab
module and test reads the same facts. A lab control plane is one ``LabConfig``: its runtime
folder, its ports and its Nodes; a second control plane is a second instance with another
``lab_dir`` and other ``ports``.

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


@dataclass(frozen=True)
class LabConfig:
    """One lab control plane: where it lives and what it runs.

    Attributes:
        lab_dir: runtime directory (kubeconfig, pki, etcd data, logs, pids); ``$LAB_DIR`` or
            ``.lab`` in the checkout.
        bin_dir: directory of the Go-built toolchain binaries.
        crd_dirs: directories whose ``*.yaml`` CRDs are installed after start.
        nodes: names of the kwok-managed Nodes to create.
        node_cpu: CPU capacity of each Node (cores).
        node_memory_mib: memory capacity of each Node (MiB).
        ports: the control plane's 127.0.0.1 ports.
    """

    lab_dir: Path = field(default_factory=lambda: Path(os.environ.get("LAB_DIR", ROOT / ".lab")))
    bin_dir: Path = field(default_factory=lambda: ROOT / ".toolchain" / "bin")
    crd_dirs: tuple[Path, ...] = field(default_factory=default_crd_dirs)
    nodes: tuple[str, ...] = ("blade-slot-1", "blade-slot-2")
    node_cpu: int = 64
    node_memory_mib: int = 512 * 1024
    ports: ControlPlanePorts = MOTHERSHIP_PORTS

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
