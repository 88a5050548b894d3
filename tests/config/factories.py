"""A valid estate config (raw, as Pulumi hands it to the program) that exercises every feature.

Tests copy it and break one thing. Passwords are distinct strings so tests can search for them.
"""

from __future__ import annotations

import copy
from typing import Any

DIRECTOR_PASSWORD = "director-pw-1f3a"
HOST_BMC_PASSWORD = "host-bmc-pw-77c2"
DPU_BMC_PASSWORD = "dpu-bmc-pw-90ab"
ALL_PASSWORDS = (DIRECTOR_PASSWORD, HOST_BMC_PASSWORD, DPU_BMC_PASSWORD)


def _host(name: str, role: str, n: int, *, dpu: bool = True) -> dict[str, Any]:
    host: dict[str, Any] = {
        "name": name,
        "role": role,
        "boot_mac": f"52:54:00:00:00:{n:02x}",
        "bmc": {"endpoint": f"https://10.0.0.{n}", "username": "root", "password": HOST_BMC_PASSWORD},
    }
    if dpu:
        host["dpu"] = {
            "bmc": {"endpoint": f"https://10.0.1.{n}", "username": "root", "password": DPU_BMC_PASSWORD}
        }
    return host


_ESTATE: dict[str, Any] = {
    "environment": "staging",
    "mothership": {"kubeconfig": "kubeconfig.yaml", "namespace": "infra"},
    "fabric": {
        "director": {
            "endpoint": "https://director.example:8443",
            "username": "admin",
            "password": DIRECTOR_PASSWORD,
        },
        "pools": [{"name": "pool-a", "models": ["Tesla-T4", "NVIDIA-A100-PCIE-40GB"], "size": 8}],
    },
    "hosts": [
        _host("hv-1", "hypervisor", 1),
        _host("bm-1", "baremetal-worker", 2),
        _host("bm-2", "baremetal-worker", 3, dpu=False),
        _host("dpu-host-1", "dpu-cluster-host", 4),
    ],
    "hypervisor_clusters": [
        {"name": "hv", "hosts": ["hv-1"], "gpu_workload_mode": "vm-passthrough"},
        {"name": "workers", "hosts": ["bm-1", "bm-2"], "gpu_workload_mode": "container", "kubevirt": False},
    ],
    "dpu_cluster": {"name": "dpus"},
    "tenants": [
        {
            "name": "red",
            "networks": [{"name": "red-net", "cidr": "10.1.0.0/24", "vxlan_id": 101, "vlan_id": 11}],
            "clusters": [
                {
                    "name": "red-k8s",
                    "hypervisor_cluster": "hv",
                    "gpu_mode": "passthrough",
                    "gpu_model": "NVIDIA-A100-PCIE-40GB",
                    "gpu_count_per_worker": 2,
                }
            ],
            "gpu_quota": 4,
            "allowed_models": ["NVIDIA-A100-PCIE-40GB"],
        },
        {
            "name": "blue",
            "networks": [
                {
                    "name": "blue-a",
                    "cidr": "10.2.0.0/24",
                    "vxlan_id": 102,
                    "vlan_id": 12,
                    "gateway": "10.2.0.1",
                },
                {"name": "blue-b", "cidr": "10.3.0.0/24", "vxlan_id": 103, "vlan_id": 13},
            ],
            "clusters": [
                {"name": "blue-k8s", "hypervisor_cluster": "hv", "cni": "cilium", "networks": ["blue-a"]}
            ],
            "gpu_quota": 2,
            "allowed_models": ["Tesla-T4"],
            "gpu_sharing": {"strategy": "time-slicing", "hosts": ["bm-1"], "replicas": 4},
        },
        {
            "name": "green",
            "gpu_quota": 4,
            "allowed_models": ["NVIDIA-A100-PCIE-40GB"],
            "gpu_sharing": {"strategy": "mig", "hosts": ["bm-2"], "mig_config": "all-1g.5gb"},
        },
    ],
    "gpu_compositions": [
        {"host": "hv-1", "pool": "pool-a", "count": 2, "model": "NVIDIA-A100-PCIE-40GB"},
        {"host": "bm-1", "pool": "pool-a", "device_names": ["gpu5"], "model": "Tesla-T4", "tenant": "blue"},
    ],
    "composer": {
        "pool": "pool-a",
        "target_cluster": "workers",
        "idle_timeout_seconds": 300,
        "pools": [{"name": "blue", "hosts": ["bm-1"]}, {"name": "green", "hosts": ["bm-2"]}],
    },
}


#: A GPU product declared in config (NVIDIA A30: PCI ID from the GPU Operator's mig-parted default
#: config ``0x20B710DE``, MIG profiles from the NVIDIA MIG user guide's A30-24GB table, MIG layouts
#: from that default config, gpu-operator v25.3.0 ``assets/state-mig-manager/0400_configmap.yaml``).
A30: dict[str, Any] = {
    "product": "NVIDIA-A30",
    "pci_device_id": "20b7",
    "memory_mib": 24576,
    "passthrough_resource": "nvidia.com/GA100_A30_PCIE",
    "mig_profiles": ["1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"],
    "mig_extra_configs": ["all-balanced"],
    "mig_layouts": {
        "all-1g.6gb": {"1g.6gb": 4}, "all-1g.6gb.me": {"1g.6gb+me": 1}, "all-2g.12gb": {"2g.12gb": 2},
        "all-2g.12gb.me": {"2g.12gb+me": 1}, "all-4g.24gb": {"4g.24gb": 1},
        "all-balanced": {"1g.6gb": 2, "2g.12gb": 1},
    },
    "vgpu_types": ["NVIDIA A30-4C", "NVIDIA A30-24C"],
    "sources": {"mig_profiles": "NVIDIA MIG user guide, A30 MIG profiles"},
}


def valid_estate() -> dict[str, Any]:
    """A fresh deep copy of the valid estate."""
    return copy.deepcopy(_ESTATE)


# SSH preparation sections (hosts[].prep, hosts[].dpu.prep). The key is not a real key (the config
# does not parse it); its body holds a marker tests search for.
SSH_KEY_MARKER = "c3NoLXByZXAta2V5LTViMmU"
SSH_PRIVATE_KEY = (
    f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_KEY_MARKER}=\n-----END OPENSSH PRIVATE KEY-----\n"
)
SSH_HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPk7QQyorUMUBNFyEv+OJflqKnT3t9VcSIjUW9bYs/ly"


def host_prep(**over: Any) -> dict[str, Any]:
    """A valid ``hosts[].prep`` section (raw, private key decrypted)."""
    return {
        "host": "10.0.2.1",
        "user": "gpuprep",
        "private_key": SSH_PRIVATE_KEY,
        "host_key": SSH_HOST_KEY,
        **over,
    }


def dpu_prep(**over: Any) -> dict[str, Any]:
    """A valid ``hosts[].dpu.prep`` section (raw, private key decrypted)."""
    return {**host_prep(host="10.0.3.1"), **over}


#: The encrypted form of a secret leaf, as ``pulumi config set --secret`` writes it in a stack file.
ENCRYPTED = {"secure": "v1:c2FsdA==:Y2lwaGVydGV4dA=="}
_SECRET_KEYS = ("password", "private_key")


def encrypted(raw: Any) -> Any:
    """A copy of ``raw`` as a stack file holds it: every ``password`` and ``private_key`` string
    replaced by :data:`ENCRYPTED` (what ``pulumi config set --secret --path`` writes)."""
    if isinstance(raw, dict):
        return {
            k: ENCRYPTED if k in _SECRET_KEYS and isinstance(v, str) else encrypted(v) for k, v in raw.items()
        }
    if isinstance(raw, list):
        return [encrypted(v) for v in raw]
    return raw


def two_composers(raw: dict[str, Any]) -> None:
    """Turn the valid estate ``raw`` into one with a composer per GPU cluster (in place): the
    existing composer becomes ``composers[0]`` (cluster ``workers``, fabric pool ``pool-a``, the
    default owner tag and release name), and ``composers[1]`` serves a second container cluster
    ``workers-b`` (host ``bm-3``) from fabric pool ``pool-b`` with owner tag and release name
    ``composer-b``. Valid: it breaks no rule."""
    raw["fabric"]["pools"].append({"name": "pool-b", "models": ["Tesla-T4"], "size": 4})
    raw["hosts"].append(_host("bm-3", "baremetal-worker", 5, dpu=False))
    raw["hypervisor_clusters"].append(
        {"name": "workers-b", "hosts": ["bm-3"], "gpu_workload_mode": "container", "kubevirt": False}
    )
    raw["composers"] = [
        raw.pop("composer"),
        {
            "pool": "pool-b",
            "target_cluster": "workers-b",
            "owner_tag": "composer-b",
            "release_name": "composer-b",
        },
    ]
