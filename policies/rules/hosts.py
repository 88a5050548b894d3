"""Hosts: DPU zero-trust posture, IOMMU for GPU passthrough/vGPU, one cluster per machine.

Facts (docs/domain.md "Redfish on the BlueField-3 BMC"): the DPU runs in DPU mode
(``GET /redfish/v1/Systems/Bluefield/Oem/Nvidia`` ``Mode`` = ``DpuMode``), host privilege is
restricted (BIOS attribute ``HostPrivilegeLevel`` = ``Restricted``) and the host rshim is
disabled (``HostRshim.Set`` ``Disabled``). Hypervisor hosts boot with ``intel_iommu=on
iommu=pt`` (``amd_iommu=on`` on AMD) and blacklist ``nouveau`` so VFIO can own the GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from domain.contract import (
    DPU,
    DPU_CLUSTER,
    GPU_COMPOSITION,
    GPU_SHARING,
    HOST,
    HYPERVISOR_CLUSTER,
    TENANT_CLUSTER,
)

from .model import UNKNOWN, Findings, ResourceRecord, rule
from .reading import INVALID, domain_name, index_by_name, normalise, of_type, read, read_str_list

GPU_HOST_MODES = {"passthrough", "vgpu"}
GPU_CLUSTER_MODES = {"vm-passthrough", "vm-vgpu"}
VENDOR_IOMMU_ARGS = ("intel_iommu=on", "amd_iommu=on")
PASSTHROUGH_IOMMU_ARG = "iommu=pt"
BLACKLIST_ARG_PREFIXES = ("modprobe.blacklist=", "rd.driver.blacklist=", "module_blacklist=")


def _note_members(
    cluster: ResourceRecord, found: Findings, reasons: dict[str, list[str]], reason: str
) -> None:
    """Append ``reason`` to ``reasons[host]`` for each host the cluster record lists in ``hosts``
    (an unreadable list is reported to ``found`` and adds nothing)."""
    hosts = read_str_list(cluster, "hosts", found, what="a list of host names")
    if hosts is INVALID:
        return
    for host in hosts:
        reasons[host].append(reason)


def tenant_serving_hosts(resources: Sequence[ResourceRecord], found: Findings) -> dict[str, list[str]]:
    """Host name -> reasons it serves tenant workloads.

    A host serves tenant workloads when its ``tenant_workloads`` is true, when it is in a
    hypervisor cluster that runs a TenantCluster's workers (a TenantCluster of this stack, or one
    its ``tenant_clusters`` names: in a split estate the tenant's stack declares the TenantCluster
    and the host group's stack the hypervisor cluster), when a GPU is composed to it for a
    tenant, or when a GpuSharing lets tenants' pods onto it. A TenantCluster whose hypervisor
    cluster another stack declares (``hypervisor_cluster_in_stack`` false) is judged there. Unknown
    inputs are reported to ``found`` (the host set cannot be proven).
    """
    serving: dict[str, list[str]] = defaultdict(list)
    for rec in of_type(resources, HOST):
        name = domain_name(rec, found)
        flag = read(rec, "tenant_workloads", found, kind=bool, what="true or false")
        if name is not INVALID and flag is True:
            serving[name].append("tenant_workloads is true")

    hv_clusters = index_by_name(of_type(resources, HYPERVISOR_CLUSTER), found)
    for hv_name, hv_rec in sorted(hv_clusters.items()):
        runs = read_str_list(hv_rec, "tenant_clusters", found, what="a list of tenant/cluster names")
        if runs is not INVALID and runs:
            _note_members(hv_rec, found, serving,
                          f"its hypervisor cluster '{hv_name}' runs tenant cluster(s) {', '.join(runs)}")
    for rec in of_type(resources, TENANT_CLUSTER):
        hv = read(rec, "hypervisor_cluster", found, kind=str, what="a HypervisorCluster name")
        in_stack = read(rec, "hypervisor_cluster_in_stack", found, kind=bool, what="true or false")
        if hv is INVALID or in_stack is INVALID:
            continue
        cluster = hv_clusters.get(hv)
        if cluster is None and in_stack is False:
            continue  # the stack declaring the hypervisor cluster judges its hosts (tenant_clusters)
        if cluster is None:
            found.add(rec, f"hypervisor_cluster '{hv}' is not a HypervisorCluster declared in this stack, so "
                      "the hosts running its workers cannot be checked",
                      "declare that HypervisorCluster or point hypervisor_cluster at a declared one")
            continue
        why = f"its hypervisor cluster '{hv}' runs tenant cluster {rec.label}"
        _note_members(cluster, found, serving, why)

    for rec in of_type(resources, GPU_COMPOSITION):
        tenant = read(rec, "tenant", found, kind=str, required=False)
        host = read(rec, "host", found, kind=str)
        if tenant is INVALID or host is INVALID or tenant is None:
            continue
        serving[host].append(f"{rec.label} composes GPUs to it for tenant '{tenant}'")

    for rec in of_type(resources, GPU_SHARING):
        tenants = read_str_list(rec, "tenants", found, what="a list of tenant names")
        hosts = read_str_list(rec, "hosts", found, what="a list of host names")
        if tenants is INVALID or hosts is INVALID or not tenants:
            continue
        for host in hosts:
            serving[host].append(f"{rec.label} lets tenant pods onto its GPUs")
    return serving


@rule(
    "tenant-host-dpu-zero-trust",
    "Hosts serving tenant workloads have a DPU in DPU mode, HostPrivilegeLevel Restricted, "
    "host rshim disabled.",
)
def tenant_host_dpu_zero_trust(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``tenant-host-dpu-zero-trust``: every host serving tenant workloads (see
    :func:`tenant_serving_hosts`) has a declared DPU with ``mode`` DpuMode, ``host_privilege``
    Restricted and ``host_rshim`` Disabled, and that DPU's ``host`` is this host."""
    serving = tenant_serving_hosts(resources, found)
    hosts = index_by_name(of_type(resources, HOST), found)
    dpus = index_by_name(of_type(resources, DPU), found)
    expected = {"mode": ("dpumode", "DpuMode"), "host_privilege": ("restricted", "Restricted"),
                "host_rshim": ("disabled", "Disabled")}

    for host_name, reasons in sorted(serving.items()):
        why = "; ".join(dict.fromkeys(reasons))
        host = hosts.get(host_name)
        if host is None:
            found.add(None, f"host '{host_name}' serves tenant workloads ({why}) but is not a declared Host, "
                      "so its DPU posture cannot be checked",
                      f"declare Host '{host_name}' with its DPU")
            continue
        dpu_name = read(host, "dpu", found, kind=str, required=False, what="a DPU name")
        if dpu_name is INVALID:
            continue
        if dpu_name is None:
            found.add(host, f"serves tenant workloads ({why}) but has no DPU",
                      "give the host a BlueField DPU in DPU mode with restricted host privilege, or keep "
                      "tenant workloads off it")
            continue
        dpu = dpus.get(dpu_name)
        if dpu is None:
            found.add(host, f"serves tenant workloads ({why}); its DPU '{dpu_name}' is not a declared Dpu",
                      f"declare Dpu '{dpu_name}' with mode DpuMode, host_privilege Restricted, "
                      "host_rshim Disabled")
            continue
        for prop, (want, shown) in expected.items():
            value = read(dpu, prop, found, kind=str)
            if value is not INVALID and normalise(value) != want:
                found.add(dpu, f"{prop} is '{value}' on the DPU of host '{host_name}', which serves tenant "
                          f"workloads ({why})", f"set {prop} to {shown}")
        owner = dpu.props.get("host")
        if owner is UNKNOWN:
            found.unprovable(dpu, "host")
        elif isinstance(owner, str) and owner != host_name:
            found.add(dpu, f"is declared for host '{owner}' but Host '{host_name}' names it as its DPU",
                      "make Dpu.host and Host.dpu name each other")


def _kernel_tokens(value: list[Any]) -> tuple[list[str], bool]:
    """Kernel arguments split on whitespace, and whether any element is unknown."""
    tokens: list[str] = []
    unknown = False
    for element in value:
        if element is UNKNOWN:
            unknown = True
        elif isinstance(element, str):
            tokens.extend(element.split())
    return tokens, unknown


@rule(
    "gpu-host-iommu",
    "GPU passthrough/vGPU hosts boot with IOMMU on (intel_iommu=on or amd_iommu=on, iommu=pt) "
    "and nouveau blacklisted.",
)
def gpu_host_iommu(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``gpu-host-iommu``: hosts with ``gpu_mode`` passthrough or vgpu, and hosts of a
    HypervisorCluster whose ``gpu_workload_mode`` is vm-passthrough or vm-vgpu, boot with
    ``intel_iommu=on`` or ``amd_iommu=on`` plus ``iommu=pt``, and blacklist ``nouveau``
    (``blacklisted_modules``, or ``modprobe.blacklist=``/``rd.driver.blacklist=`` in the kernel
    arguments). Unknown list elements only fail the rule when a requirement is not met by the
    known ones."""
    why: dict[str, list[str]] = defaultdict(list)
    hosts = index_by_name(of_type(resources, HOST), found)
    for name, rec in hosts.items():
        mode = read(rec, "gpu_mode", found, kind=str, what="passthrough, vgpu, container or none")
        if mode in GPU_HOST_MODES:
            why[name].append(f"gpu_mode is {mode}")
    for rec in of_type(resources, HYPERVISOR_CLUSTER):
        mode = read(rec, "gpu_workload_mode", found, kind=str, what="vm-passthrough, vm-vgpu or container")
        if mode is INVALID or mode not in GPU_CLUSTER_MODES:
            continue
        _note_members(rec, found, why, f"{rec.label} runs GPUs in {mode} mode")

    for name, reasons in sorted(why.items()):
        because = "; ".join(reasons)
        host_rec = hosts.get(name)
        if host_rec is None:
            found.add(None, f"host '{name}' runs GPU passthrough/vGPU ({because}) but is not a declared "
                      "Host, so its kernel arguments cannot be checked", f"declare Host '{name}'")
            continue
        args = read(host_rec, "kernel_args", found, kind=list, what="a list of kernel arguments")
        if args is INVALID:
            continue
        tokens, args_unknown = _kernel_tokens(args)
        missing = []
        if not any(t in VENDOR_IOMMU_ARGS for t in tokens):
            missing.append("intel_iommu=on (or amd_iommu=on)")
        if PASSTHROUGH_IOMMU_ARG not in tokens:
            missing.append(PASSTHROUGH_IOMMU_ARG)
        if missing and args_unknown:
            found.unprovable(host_rec, "kernel_args", f"{', '.join(missing)} not among the known elements")
        elif missing:
            add = " ".join(m.split(" ")[0] for m in missing)
            found.add(host_rec, f"runs GPU passthrough/vGPU ({because}) without {' and '.join(missing)} in "
                      f"kernel_args {tokens}", f"add {add} to kernel_args")

        modules = read(host_rec, "blacklisted_modules", found, kind=list, required=False, default=[],
                       what="a list of module names")
        if modules is INVALID:
            continue
        listed = {m for m in modules if isinstance(m, str)}
        for token in tokens:
            for prefix in BLACKLIST_ARG_PREFIXES:
                if token.startswith(prefix):
                    listed.update(token[len(prefix):].split(","))
        if "nouveau" not in listed:
            if args_unknown or any(m is UNKNOWN for m in modules):
                found.unprovable(host_rec, "blacklisted_modules", "nouveau not among the known entries")
            else:
                found.add(host_rec, f"runs GPU passthrough/vGPU ({because}) without blacklisting nouveau",
                          "add nouveau to blacklisted_modules")


@rule("host-single-cluster", "A host belongs to at most one cluster.")
def host_single_cluster(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``host-single-cluster``: a host is in at most one host cluster, and its DPU in at most one
    DPU cluster.

    Memberships come from ``Host.cluster`` and from the ``hosts`` lists of HypervisorClusters
    and DpuClusters. A DpuCluster's workers are the hosts' DPUs (ARM cores), not the hosts, so
    DPU-cluster membership is counted apart from host-cluster membership (a hypervisor host
    whose DPU joins the DPU cluster is one membership per machine). ``Host.cluster`` naming a
    DpuCluster counts on the DPU side.
    """
    dpu_clusters = index_by_name(of_type(resources, DPU_CLUSTER), found)
    host_side: dict[str, dict[str, ResourceRecord]] = defaultdict(dict)
    dpu_side: dict[str, dict[str, ResourceRecord]] = defaultdict(dict)
    hosts = index_by_name(of_type(resources, HOST), found)

    for name, rec in hosts.items():
        cluster = read(rec, "cluster", found, kind=str, required=False, what="a cluster name or null")
        if cluster in (INVALID, None):
            continue
        (dpu_side if cluster in dpu_clusters else host_side)[name][cluster] = rec
    for token, side in ((HYPERVISOR_CLUSTER, host_side), (DPU_CLUSTER, dpu_side)):
        for rec in of_type(resources, token):
            cname = domain_name(rec, found)
            members = read_str_list(rec, "hosts", found, what="a list of host names")
            if cname is INVALID or members is INVALID:
                continue
            for member in members:
                side[member].setdefault(cname, rec)

    for side, what in ((host_side, "host clusters"), (dpu_side, "DPU clusters (through its DPU)")):
        for host_name, clusters in sorted(side.items()):
            if len(clusters) > 1:
                names = ", ".join(f"'{c}'" for c in sorted(clusters))
                subject = hosts.get(host_name) or next(iter(clusters.values()))
                found.add(subject, f"host '{host_name}' belongs to several {what}: {names}",
                          f"keep host '{host_name}' in one of {names} and remove it from the others")
