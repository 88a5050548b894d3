"""GPUs: one host per GPU, static GPUs outside the composer's pool, no cross-tenant time-sharing
(also through a composer pool), tenant quotas and models.

Facts (docs/domain.md "LIQID Director REST API" and "GPU Feature Discovery"): the LIQID
Director composes a GPU (by device name such as ``gpu7``) into one machine at a time; the
composer attaches free GPUs of its pool on demand. Time-slicing and MPS (device-plugin
``sharing.timeSlicing`` / ``sharing.mps``) hand replicas of one physical GPU to several pods
with no memory or fault isolation; MIG gives spatially isolated instances. NVIDIA vGPU without
MIG is time-sliced between VMs as well.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from domain.contract import COMPOSER, GPU_COMPOSITION, GPU_SHARING, HYPERVISOR_CLUSTER, TENANT, TENANT_CLUSTER

from .model import UNKNOWN, Findings, ResourceRecord, rule
from .reading import INVALID, domain_name, index_by_name, of_type, read, read_int, read_str_list

TIME_SHARED = {"time-slicing", "mps"}
STRATEGIES = TIME_SHARED | {"mig"}
VM_GPU_MODES = {"passthrough", "vgpu"}


@rule("gpu-single-host", "A GPU is composed to at most one host.")
def gpu_single_host(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``gpu-single-host``: no GPU (device name) appears in more than one GpuComposition, so no
    GPU is composed to two hosts (or twice to one). Compositions with no ``device_names`` ("any
    free GPU") cannot collide by name: the Director hands each free GPU out once."""
    claims: dict[str, list[tuple[ResourceRecord, str]]] = defaultdict(list)
    for rec in of_type(resources, GPU_COMPOSITION):
        host = read(rec, "host", found, kind=str, what="a host name")
        devices = read_str_list(rec, "device_names", found, required=False, what="a list of GPU names")
        if host is INVALID or devices is INVALID:
            continue
        for device in dict.fromkeys(devices):
            claims[device].append((rec, host))
    for device, holders in sorted(claims.items()):
        if len(holders) < 2:
            continue
        hosts = sorted({h for _, h in holders})
        who = ", ".join(f"{r.label} (host '{h}')" for r, h in holders)
        problem = (f"GPU '{device}' is composed to {len(hosts)} hosts" if len(hosts) > 1
                   else f"GPU '{device}' is composed twice to host '{hosts[0]}'")
        for rec, _ in holders[1:]:
            found.add(rec, f"{problem}: {who}", f"compose '{device}' in one GpuComposition only")


@rule(
    "static-gpus-outside-composer-pool",
    "GPUs composed statically stay outside the composer's dynamic pool (Composer excluded_devices).",
)
def static_gpus_outside_composer_pool(
    resources: Sequence[ResourceRecord], config: None, found: Findings
) -> None:
    """``static-gpus-outside-composer-pool``: every GPU a GpuComposition composes from a pool that
    a Composer also manages is listed in that Composer's ``excluded_devices``. A composition of
    "any free GPU" (empty ``device_names``) from such a pool cannot be proven outside the
    composer's reach and fails."""
    composers: list[tuple[ResourceRecord, str, set[str]]] = []
    for rec in of_type(resources, COMPOSER):
        pool = read(rec, "pool", found, kind=str, what="a pool name")
        excluded = read_str_list(rec, "excluded_devices", found, what="a list of GPU names")
        if pool is not INVALID and excluded is not INVALID:
            composers.append((rec, pool, set(excluded)))
    if not composers:
        return
    for rec in of_type(resources, GPU_COMPOSITION):
        pool = read(rec, "pool", found, kind=str, what="a pool name")
        devices = read_str_list(rec, "device_names", found, required=False, what="a list of GPU names")
        if pool is INVALID or devices is INVALID:
            continue
        for composer, cpool, excluded in composers:
            if cpool != pool:
                continue
            if not devices:
                found.add(rec, f"composes any free GPU from pool '{pool}', which {composer.label} "
                          "also manages dynamically, so the GPU it gets cannot be kept out of the "
                          "composer's reach",
                          f"pin device_names on {rec.label} and list them in the Composer's "
                          "excluded_devices, or compose from a pool the composer does not manage")
                continue
            leaked = [d for d in devices if d not in excluded]
            if leaked:
                found.add(rec, f"statically composes {', '.join(leaked)} from pool '{pool}', but "
                          f"{composer.label} does not exclude them, so the composer may detach or "
                          "reassign them",
                          f"add {', '.join(leaked)} to {composer.label}'s excluded_devices")


@rule(
    "static-gpus-in-tenant-pool",
    "A tenant's static GPUs are on a host of that tenant's composer pool (never of a pool of other tenants).",
)
def static_gpus_in_tenant_pool(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``static-gpus-in-tenant-pool``: a GpuComposition dedicated to a tenant does not compose onto a
    host that serves a Composer pool of other tenants. The composer lets the pods of a host's pool
    use the host's spare GPUs (``docs/composer-pools.md``), so there the tenant's static GPUs would
    serve another tenant's pods. Reads the Composer's ``host_pools`` (host -> pool) and
    ``pool_tenants`` (pool -> tenants); a Composer without them has no pools (one pool for all)."""
    composers: list[tuple[ResourceRecord, dict[str, Any], dict[str, Any]]] = []
    for rec in of_type(resources, COMPOSER):
        host_pools = read(rec, "host_pools", found, kind=dict, required=False, default={}, what="a dict")
        pool_tenants = read(rec, "pool_tenants", found, kind=dict, required=False, default={}, what="a dict")
        if host_pools is not INVALID and pool_tenants is not INVALID:
            composers.append((rec, host_pools, pool_tenants))
    for rec in of_type(resources, GPU_COMPOSITION):
        tenant = read(rec, "tenant", found, kind=str, required=False, what="a tenant name")
        if tenant is None or tenant is INVALID:
            continue
        host = read(rec, "host", found, kind=str, what="a host name")
        if host is INVALID:
            continue
        for composer, host_pools, pool_tenants in composers:
            pool = host_pools.get(host)
            tenants = pool_tenants.get(pool, []) if pool is not None else []
            if pool is UNKNOWN or tenants is UNKNOWN or UNKNOWN in tenants:
                found.unprovable(composer, "host_pools")
            elif pool is not None and tenant not in tenants:
                others = ", ".join(f"'{t}'" for t in sorted(tenants)) or "no tenant"
                found.add(rec, f"composes GPUs of tenant '{tenant}' onto host '{host}', which serves "
                          f"{composer.label}'s pool '{pool}' of {others}: the composer would hand them "
                          "to that pool's pods",
                          f"move host '{host}' into the composer pool of '{tenant}', or compose onto a "
                          f"host of that pool")


@rule(
    "gpu-sharing-tenant-isolation",
    "GPU time-slicing, MPS or time-sliced vGPU never shares one physical GPU between tenants (MIG may).",
)
def gpu_sharing_tenant_isolation(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``gpu-sharing-tenant-isolation``: GPU time-slicing or MPS never shares one physical GPU
    between tenants; MIG may.

    - Per host with a time-slicing or MPS GpuSharing, the tenants are those listed by every
      such GpuSharing on the host, the tenants of GpuCompositions to the host (the device
      plugin shares every GPU of the node) and the tenants of the Composer pool the host serves
      (``host_pools`` -> ``pool_tenants``: the composer places that pool's pods on the host's
      GPUs); more than one is a violation.
    - Per hypervisor host, tenant clusters of more than one tenant using ``gpu_mode: vgpu``
      share GPUs through time-sliced vGPU unless a ``mig`` GpuSharing covers the host.
    """
    shared_by: dict[str, list[ResourceRecord]] = defaultdict(list)
    tenants_on: dict[str, dict[str, str]] = defaultdict(dict)  # host -> tenant -> where
    mig_hosts: set[str] = set()
    for rec in of_type(resources, GPU_SHARING):
        strategy = read(rec, "strategy", found, kind=str, what="time-slicing, mps or mig")
        hosts = read_str_list(rec, "hosts", found, what="a list of host names")
        tenants = read_str_list(rec, "tenants", found, what="a list of tenant names")
        if strategy is INVALID or hosts is INVALID:
            continue
        if strategy not in STRATEGIES:
            found.add(rec, f"strategy '{strategy}' is not one of {', '.join(sorted(STRATEGIES))}",
                      "set strategy to time-slicing, mps or mig")
            continue
        if strategy == "mig":
            mig_hosts.update(hosts)
            continue
        if tenants is INVALID:
            continue
        for host in hosts:
            shared_by[host].append(rec)
            for tenant in tenants:
                tenants_on[host].setdefault(tenant, f"{rec.label} ({strategy})")

    for rec in of_type(resources, GPU_COMPOSITION):
        host = rec.props.get("host")
        if host is UNKNOWN and shared_by and rec.props.get("tenant") is not None:
            found.unprovable(rec, "host", "time-slicing/MPS is on for some hosts, and this tenant GPU may "
                             "land on one of them")
            continue
        if not isinstance(host, str) or host not in shared_by:
            continue
        tenant = read(rec, "tenant", found, kind=str, required=False)
        if isinstance(tenant, str):
            tenants_on[host].setdefault(tenant, f"{rec.label} (GPUs composed for it)")

    for composer in of_type(resources, COMPOSER):
        host_pools = read(composer, "host_pools", found, kind=dict, required=False, default={}, what="a dict")
        pool_tenants = read(composer, "pool_tenants", found, kind=dict, required=False, default={},
                            what="a dict")
        if host_pools is INVALID or pool_tenants is INVALID:
            continue
        for host in shared_by:
            pool = host_pools.get(host)
            members = pool_tenants.get(pool, []) if isinstance(pool, str) else []
            if pool is UNKNOWN or members is UNKNOWN or UNKNOWN in members:
                found.unprovable(composer, "host_pools", "time-slicing/MPS is on for some hosts, and the "
                                 "composer may place another tenant's pods on them")
                continue
            for tenant in members:
                tenants_on[host].setdefault(tenant, f"{composer.label}'s pool '{pool}'")

    for host, sharings in sorted(shared_by.items()):
        tenants = tenants_on[host]
        if len(tenants) > 1:
            listing = "; ".join(f"tenant '{t}' via {w}" for t, w in sorted(tenants.items()))
            found.add(sharings[0], f"time-slicing/MPS on host '{host}' shares its physical GPUs between "
                      f"tenants: {listing}",
                      f"give each tenant its own host for time-slicing/MPS (and its own composer pool), "
                      f"or use MIG on host '{host}'")

    hv_clusters = index_by_name(of_type(resources, HYPERVISOR_CLUSTER), found)
    vgpu_tenants: dict[str, dict[str, ResourceRecord]] = defaultdict(dict)
    for rec in of_type(resources, TENANT_CLUSTER):
        mode = read(rec, "gpu_mode", found, kind=str, what="passthrough, vgpu or none")
        if mode != "vgpu":
            continue
        tenant = read(rec, "tenant", found, kind=str)
        hv = read(rec, "hypervisor_cluster", found, kind=str)
        if tenant is INVALID or hv is INVALID or hv not in hv_clusters:
            continue  # an undeclared hypervisor cluster is reported by tenant-host-dpu-zero-trust
        members = read_str_list(hv_clusters[hv], "hosts", found, what="a list of host names")
        if members is INVALID:
            continue
        for host in members:
            vgpu_tenants[host].setdefault(tenant, rec)
    for host, by_tenant in sorted(vgpu_tenants.items()):
        if len(by_tenant) > 1 and host not in mig_hosts:
            listing = ", ".join(f"{r.label} (tenant '{t}')" for t, r in sorted(by_tenant.items()))
            subject = sorted(by_tenant.items())[-1][1]
            found.add(subject, f"time-sliced vGPU on host '{host}' shares its physical GPUs between tenants: "
                      f"{listing}",
                      f"back vGPU with MIG on host '{host}' (a mig GpuSharing), or keep one tenant's vGPU "
                      "clusters per hypervisor cluster")


@rule("tenant-gpu-quota", "A tenant's GPUs stay within its gpu_quota and allowed_models.")
def tenant_gpu_quota(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``tenant-gpu-quota``: per tenant, GPUs composed for it (sum of GpuComposition ``count``,
    else the number of ``device_names``) stay within ``gpu_quota`` and every composition names a
    model in ``allowed_models``; so do its TenantClusters' ``gpu_count``/``gpu_model`` when
    ``gpu_mode`` is passthrough or vgpu."""
    tenants: dict[str, tuple[ResourceRecord, Any, Any]] = {}
    for rec in of_type(resources, TENANT):
        name = domain_name(rec, found)
        quota = read_int(rec, "gpu_quota", found, lo=0)
        models = read_str_list(rec, "allowed_models", found, what="a list of GPU product names")
        if name is not INVALID:
            tenants[name] = (rec, quota, models)

    usage: dict[str, dict[str, list[tuple[ResourceRecord, int]]]] = defaultdict(lambda: defaultdict(list))
    sources = (
        (GPU_COMPOSITION, "composed", "count", "model"),
        (TENANT_CLUSTER, "cluster", "gpu_count", "gpu_model"),
    )
    for token, what, count_key, model_key in sources:
        for rec in of_type(resources, token):
            tenant = read(rec, "tenant", found, kind=str, required=token == TENANT_CLUSTER)
            if tenant in (INVALID, None):
                continue
            if token == TENANT_CLUSTER:
                mode = read(rec, "gpu_mode", found, kind=str, what="passthrough, vgpu or none")
                if mode is INVALID or mode not in VM_GPU_MODES:
                    continue
            count = _gpu_count(rec, count_key, found)
            model = read(rec, model_key, found, kind=str, required=False, what="a GPU product name")
            if tenant not in tenants:
                found.add(rec, f"uses GPUs for tenant '{tenant}', which is not a declared Tenant, so its "
                          "quota and allowed models cannot be checked", f"declare Tenant '{tenant}'")
                continue
            _, _, allowed = tenants[tenant]
            if model is None:
                found.add(rec, f"takes GPUs of any model for tenant '{tenant}'",
                          f"set {model_key} to one of tenant '{tenant}''s allowed_models")
            elif model is not INVALID and allowed is not INVALID and model not in allowed:
                found.add(rec, f"uses GPU model '{model}', not in tenant '{tenant}''s allowed_models "
                          f"{sorted(allowed)}",
                          f"use one of {sorted(allowed)} or extend the tenant's allowed_models")
            if count is not INVALID:
                usage[tenant][what].append((rec, count))

    for tenant, by_what in sorted(usage.items()):
        trec, quota, _ = tenants[tenant]
        if quota is INVALID:
            continue
        for what, entries in by_what.items():
            total = sum(c for _, c in entries)
            if total > quota:
                listing = ", ".join(f"{r.label}: {c}" for r, c in entries)
                noun = "composed GPUs" if what == "composed" else "tenant-cluster GPUs"
                found.add(entries[-1][0], f"tenant '{tenant}' has {total} {noun} ({listing}), over its "
                          f"gpu_quota of {quota}", f"reduce the GPU counts or raise {trec.label}'s gpu_quota")


def _gpu_count(rec: ResourceRecord, key: str, found: Findings) -> Any:
    if rec.props.get(key) is None and isinstance(rec.props.get("device_names"), list):
        devices = read_str_list(rec, "device_names", found)
        return INVALID if devices is INVALID else len(devices)
    return read_int(rec, key, found, lo=0)
