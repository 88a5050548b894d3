"""Stack layouts for the policy tests: one compliant estate and, per rule, a violating variant.

A layout is a JSON-serialisable list of ``{"type", "name", "props"}`` (optionally ``parent``:
the name of an earlier entry). Two markers stand for what a Pulumi program would pass:
``{"$secret": value}`` a Pulumi secret, ``{"$unknown": true}`` a value unknown during preview.
The same layouts drive the rule unit tests (through :func:`to_records`) and the real-CLI tests
(``fixture_program.py`` registers them as ComponentResources with these type tokens and props).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from policies.rules.model import UNKNOWN, Path, ResourceRecord

Layout = list[dict[str, Any]]

SECRET_MARK = "$secret"
UNKNOWN_MARK = "$unknown"


def secret(value: Any) -> dict[str, Any]:
    """Marker: ``value`` passed as a Pulumi secret."""
    return {SECRET_MARK: value}


def unknown() -> dict[str, Any]:
    """Marker: a value not known during preview."""
    return {UNKNOWN_MARK: True}


def _host(name: str, *, dpu: str | None, cluster: str, gpu_mode: str, iommu: bool) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": name,
        "role": "hypervisor" if iommu else "baremetal-worker",
        "bmc_address": f"https://{name}-bmc.lab.local:8443",
        "bmc_verify_tls": False,
        "bmc_password": secret(f"{name}-bmc-pass"),
        "kernel_args": ["intel_iommu=on", "iommu=pt", "pci=realloc"] if iommu else ["pci=realloc"],
        "blacklisted_modules": ["nouveau"] if iommu else [],
        "cluster": cluster,
        "tenant_workloads": True,
        "dpu": dpu,
        "gpu_mode": gpu_mode,
    }
    return {"type": "composable:infra:Host", "name": name, "props": props}


def _dpu(name: str, host: str) -> dict[str, Any]:
    return {
        "type": "composable:infra:Dpu",
        "name": name,
        "props": {
            "name": name,
            "host": host,
            "bmc_address": f"https://{name}-bmc.lab.local:8443",
            "bmc_verify_tls": False,
            "mode": "DpuMode",
            "host_privilege": "Restricted",
            "host_rshim": "Disabled",
            "mlxconfig": {"VIRTIO_NET_EMULATION_ENABLE": "1", "PCI_SWITCH_EMULATION_ENABLE": "1"},
        },
    }


def compliant() -> Layout:
    """A lab estate (2 tenants, 2 hypervisor hosts + 1 bare-metal worker, 3 DPUs, 2 GPUs composed
    statically, a time-slicing and a MIG sharing, the composer) that passes every rule."""
    return [
        {
            "type": "composable:infra:Estate",
            "name": "estate",
            "props": {"stack": "dev", "environment": "lab"},
        },
        {
            "type": "composable:infra:Tenant",
            "name": "tenant-a",
            "props": {"name": "tenant-a", "gpu_quota": 2, "allowed_models": ["Tesla-T4"]},
        },
        {
            "type": "composable:infra:Tenant",
            "name": "tenant-b",
            "props": {
                "name": "tenant-b",
                "gpu_quota": 2,
                "allowed_models": ["Tesla-T4", "NVIDIA-A100-PCIE-40GB"],
            },
        },
        _host("hv-1", dpu="dpu-1", cluster="hv-cluster", gpu_mode="passthrough", iommu=True),
        _host("hv-2", dpu="dpu-2", cluster="hv-cluster", gpu_mode="passthrough", iommu=True),
        _host("blade-slot-1", dpu="dpu-3", cluster="workload", gpu_mode="container", iommu=False),
        _dpu("dpu-1", "hv-1"),
        _dpu("dpu-2", "hv-2"),
        _dpu("dpu-3", "blade-slot-1"),
        {
            "type": "composable:infra:TenantNetwork",
            "name": "tenant-a-net-a",
            "props": {
                "tenant": "tenant-a",
                "name": "net-a",
                "cidr": "10.10.0.0/24",
                "vxlan_id": 5001,
                "vlan_id": 101,
                "nad": "tenant-tenant-a/net-a",
            },
        },
        {
            "type": "composable:infra:TenantNetwork",
            "name": "tenant-b-net-b",
            "props": {
                "tenant": "tenant-b",
                "name": "net-b",
                "cidr": "10.20.0.0/24",
                "vxlan_id": 5002,
                "vlan_id": 102,
                "nad": "tenant-tenant-b/net-b",
            },
        },
        {
            "type": "composable:infra:HypervisorCluster",
            "name": "hv-cluster",
            "props": {
                "name": "hv-cluster",
                "hosts": ["hv-1", "hv-2"],
                "gpu_workload_mode": "vm-passthrough",
                "kubevirt": True,
                "tenant_clusters": [],
            },
        },
        {
            "type": "composable:infra:DpuCluster",
            "name": "dpu-cluster",
            "props": {
                "name": "dpu-cluster",
                "hosts": ["hv-1", "hv-2", "blade-slot-1"],
                "template": "dpf-hosted-cp",
            },
        },
        _tenant_cluster("a-cluster", "tenant-a", "net-a"),
        _tenant_cluster("b-cluster", "tenant-b", "net-b"),
        {
            "type": "composable:infra:GpuComposition",
            "name": "blade-slot-1-gpus",
            "props": {
                "host": "blade-slot-1",
                "tenant": "tenant-a",
                "count": 1,
                "model": "Tesla-T4",
                "device_names": ["gpu0"],
                "pool": "default",
            },
        },
        {
            "type": "composable:infra:GpuComposition",
            "name": "hv-1-gpus",
            "props": {
                "host": "hv-1",
                "count": 1,
                "model": "Tesla-T4",
                "device_names": ["gpu1"],
                "pool": "default",
            },
        },
        {
            "type": "composable:infra:GpuSharing",
            "name": "blade-time-slicing",
            "props": {
                "name": "blade-time-slicing",
                "hosts": ["blade-slot-1"],
                "strategy": "time-slicing",
                "replicas": 4,
                "tenants": ["tenant-a"],
            },
        },
        {
            "type": "composable:infra:GpuSharing",
            "name": "hv-2-mig",
            "props": {
                "name": "hv-2-mig",
                "hosts": ["hv-2"],
                "strategy": "mig",
                "mig_profile": "all-1g.5gb",
                "tenants": ["tenant-a", "tenant-b"],
            },
        },
        {
            "type": "composable:infra:Composer",
            "name": "composer",
            "props": {
                "pool": "default",
                "idle_timeout_seconds": 300,
                "target_cluster": "workload",
                "cluster_admin": False,
                "excluded_devices": ["gpu0", "gpu1"],
                "host_pools": {"blade-slot-1": "tenant-a"},
                "pool_tenants": {"tenant-a": ["tenant-a"]},
                "rbac_rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["pods", "nodes"],
                        "verbs": ["get", "list", "watch", "patch"],
                    }
                ],
            },
        },
    ]


def _tenant_cluster(name: str, tenant: str, network: str) -> dict[str, Any]:
    return {
        "type": "composable:infra:TenantCluster",
        "name": name,
        "props": {
            "tenant": tenant,
            "name": name,
            "template": "kubevirt-hosted-cp",
            "hosted_control_plane": True,
            "control_plane": "K0smotronControlPlane",
            "networks": [f"{tenant}/{network}"],
            "network_attachments": [f"tenant-{tenant}/{network}"],
            "hypervisor_cluster": "hv-cluster",
            "hypervisor_cluster_in_stack": True,
            "gpu_mode": "passthrough",
            "gpu_model": "Tesla-T4",
            "gpu_count": 1,
            "cni": "calico",
        },
    }


def find(layout: Layout, name: str) -> dict[str, Any]:
    """The props of the entry called ``name`` (mutable, for building variants)."""
    for entry in layout:
        if entry["name"] == name:
            return entry["props"]
    raise KeyError(name)


def variant(mutate: Callable[[Layout], None]) -> Layout:
    """A fresh compliant layout changed by ``mutate``."""
    layout = compliant()
    mutate(layout)
    return layout


def _set(name: str, **props: Any) -> Callable[[Layout], None]:
    def mutate(layout: Layout) -> None:
        find(layout, name).update(copy.deepcopy(props))

    return mutate


# One violating change per rule: each makes exactly that rule fail.
VIOLATIONS: dict[str, Callable[[Layout], None]] = {
    "tenant-network-uniqueness": _set("tenant-b-net-b", vxlan_id=5001),
    "tenant-cluster-own-networks": _set("b-cluster", networks=["tenant-a/net-a"]),
    "tenant-cluster-hosted-control-plane": _set(
        "a-cluster",
        template="kubevirt-standalone-cp",
        hosted_control_plane=False,
        control_plane="K0sControlPlane",
    ),
    "tenant-host-dpu-zero-trust": _set("dpu-2", host_rshim="Enabled"),
    "gpu-host-iommu": _set("hv-2", kernel_args=["intel_iommu=on"]),
    "host-single-cluster": _set("hv-2", cluster="other-cluster"),
    "gpu-single-host": _set("hv-1-gpus", device_names=["gpu0"]),
    "static-gpus-outside-composer-pool": _set("composer", excluded_devices=["gpu1"]),
    # on hv-1, which time-slices nothing (on blade-slot-1 a pool of tenant-b would also time-share
    # tenant-a's GPUs with it: gpu-sharing-tenant-isolation)
    "static-gpus-in-tenant-pool": lambda layout: (
        _set("hv-1-gpus", tenant="tenant-a")(layout),
        _set("composer", host_pools={"blade-slot-1": "tenant-a", "hv-1": "tenant-b"},
             pool_tenants={"tenant-a": ["tenant-a"], "tenant-b": ["tenant-b"]})(layout),
    ),
    "gpu-sharing-tenant-isolation": _set("blade-time-slicing", tenants=["tenant-a", "tenant-b"]),
    "tenant-gpu-quota": _set("tenant-a", gpu_quota=0),
    "credentials-are-secrets": _set("hv-1", bmc_password="plaintext-password"),
    "bmc-tls-verification": _set("estate", environment="production"),
    "composer-not-cluster-admin": _set("composer", cluster_admin=True),
}

# Further single changes, each violating one rule alone (case name -> (rule, change)): the parts of a
# rule that one VIOLATIONS entry does not reach.
EXTRA_VIOLATIONS: dict[str, tuple[str, Callable[[Layout], None]]] = {
    "vm-uses-nad-of-other-tenant": (
        "tenant-cluster-own-networks",
        _set("b-cluster", network_attachments=["tenant-tenant-a/net-a"]),
    ),
    "vm-uses-nad-not-created": (
        "tenant-cluster-own-networks",
        _set("b-cluster", network_attachments=["tenant-tenant-b/net-z"]),
    ),
    # The name says hosted and the program's flag agrees, but the template declares a control plane
    # on machines: only the declared kind can catch it.
    "hosted-name-machine-control-plane": (
        "tenant-cluster-hosted-control-plane",
        _set("a-cluster", template="kubevirt-hosted-cp", control_plane="K0sControlPlane"),
    ),
}

# Per rule, a needed value made unknown: the rule must fail saying it cannot be proven.
UNKNOWNS: dict[str, Callable[[Layout], None]] = {
    "tenant-network-uniqueness": _set("tenant-b-net-b", vxlan_id=unknown()),
    "tenant-cluster-own-networks": _set("a-cluster", networks=["tenant-a/net-a", unknown()]),
    "tenant-cluster-hosted-control-plane": _set("a-cluster", hosted_control_plane=unknown()),
    "tenant-host-dpu-zero-trust": _set("dpu-1", host_privilege=unknown()),
    "gpu-host-iommu": _set("hv-1", kernel_args=[unknown()]),
    "host-single-cluster": _set("hv-cluster", hosts=unknown()),
    "gpu-single-host": _set("hv-1-gpus", device_names=unknown()),
    "static-gpus-outside-composer-pool": _set("composer", excluded_devices=unknown()),
    "static-gpus-in-tenant-pool": _set("composer", host_pools=unknown()),
    "gpu-sharing-tenant-isolation": _set("blade-time-slicing", tenants=unknown()),
    "tenant-gpu-quota": _set("blade-slot-1-gpus", count=unknown()),
    "credentials-are-secrets": _set("hv-1", bmc_password=unknown()),
    "bmc-tls-verification": _set("estate", environment=unknown()),
    "composer-not-cluster-admin": _set("composer", cluster_admin=unknown()),
}


def _convert(value: Any, path: Path, secrets: set[Path]) -> Any:
    if isinstance(value, dict):
        if value.get(UNKNOWN_MARK) is True:
            return UNKNOWN
        if SECRET_MARK in value:
            secrets.add(path)
            return _convert(value[SECRET_MARK], path, secrets)
        return {k: _convert(v, (*path, k), secrets) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_convert(v, (*path, i), secrets) for i, v in enumerate(value)]
    return value


def to_records(
    layout: Layout, *, stack: str = "test", project: str = "policy-fixture"
) -> list[ResourceRecord]:
    """Records as the adapter would build them from a preview of ``fixture_program.py``
    (nulls dropped, secrets observed, unknown markers as :data:`UNKNOWN`)."""
    types = {e["name"]: e["type"] for e in layout}
    records = []
    for entry in layout:
        secrets: set[Path] = set()
        props = {k: _convert(v, (k,), secrets) for k, v in entry["props"].items() if v is not None}
        chain = [entry["type"]]
        parent = entry.get("parent")
        while parent is not None:
            chain.insert(0, types[parent])
            parent = next(e.get("parent") for e in layout if e["name"] == parent)
        urn = f"urn:pulumi:{stack}::{project}::{'$'.join(chain)}::{entry['name']}"
        records.append(ResourceRecord(entry["type"], entry["name"], urn, props, frozenset(secrets)))
    return records
