"""Cross-field rules of the estate config: pure functions from a parsed config to problems.

Each rule is a generator ``rule(estate) -> Iterator[ConfigProblem]`` with one job, named
after what it checks; :data:`RULES` lists them in the order they run and
:func:`check_rules` runs them all. Field-level bounds (VLAN 1..4094, VXLAN 1..16777215, CIDR
syntax, DNS names, ...) are enforced by the models in :mod:`stack_config.models`.
"""

from __future__ import annotations

import difflib
import ipaddress
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import ValidationError

from domain import mlxconfig as mlxconfig_rules
from domain.composer_mode import DRA_MIN_KUBERNETES, kubernetes_minor
from domain.gpu_sharing import SharingError
from dynamic_providers.ssh.models import HostKernelPrepSpec
from stack_config.errors import ConfigProblem
from stack_config.gpus import BUILTIN_GPU_PRODUCTS, unknown_product_message
from stack_config.models import MOTHERSHIP, ComposerConfig, EstateConfig, TenantNetworkConfig

Rule = Callable[[EstateConfig], Iterator[ConfigProblem]]

#: Namespaces a tenant may not take.
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
#: Hypervisor-cluster workload mode required by each tenant GPU mode.
_MODE_FOR_TENANT_GPU = {"passthrough": "vm-passthrough", "vgpu": "vm-vgpu"}


def _duplicates(items: Iterable[tuple[str, str]], what: str) -> Iterator[ConfigProblem]:
    """Yield a problem for each (path, value) whose value was already seen."""
    seen: dict[str, str] = {}
    for path, value in items:
        if value in seen:
            yield ConfigProblem(path, f"duplicate {what} {value!r} (first at {seen[value]})")
        else:
            seen[value] = path


def _items(path: str, parents: Iterable[Any], field: str) -> Iterator[tuple[str, Any]]:
    """``("<path>[i].<field>[j]", item)`` for each item of each parent's list ``field``, in order
    (``_items("tenants", estate.tenants, "networks")``: every tenant network with its config path)."""
    for i, parent in enumerate(parents):
        for j, item in enumerate(getattr(parent, field)):
            yield f"{path}[{i}].{field}[{j}]", item


# --------------------------------------------------------------------------- uniqueness


def unique_host_names(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Host names are unique (they are node and Director machine names)."""
    yield from _duplicates(((f"hosts[{i}].name", h.name) for i, h in enumerate(estate.hosts)), "host name")


def unique_boot_macs(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Boot MAC addresses are unique."""
    yield from _duplicates(
        ((f"hosts[{i}].boot_mac", h.boot_mac) for i, h in enumerate(estate.hosts)), "boot MAC"
    )


def unique_bmc_endpoints(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """No two BMCs (host or DPU) share an endpoint (host BMCs: endpoint plus system id)."""
    items: list[tuple[str, str]] = []
    for i, h in enumerate(estate.hosts):
        items.append((f"hosts[{i}].bmc.endpoint", f"{h.bmc.endpoint}/redfish/v1/Systems/{h.bmc.system_id}"))
        if h.dpu is not None:
            items.append(
                (f"hosts[{i}].dpu.bmc.endpoint", f"{h.dpu.bmc.endpoint}/redfish/v1/Systems/Bluefield")
            )
    yield from _duplicates(items, "BMC endpoint")


def unique_dpu_names(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """DPU names are unique."""
    yield from _duplicates(
        ((f"hosts[{i}].dpu.name", h.dpu_name) for i, h in enumerate(estate.hosts) if h.dpu_name), "DPU name"
    )


def unique_pool_names(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """GPU pool names are unique."""
    yield from _duplicates(
        ((f"fabric.pools[{i}].name", p.name) for i, p in enumerate(estate.fabric.pools)), "pool name"
    )


def unique_tenant_names(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Tenant names are unique."""
    yield from _duplicates(
        ((f"tenants[{i}].name", t.name) for i, t in enumerate(estate.tenants)), "tenant name"
    )


def tenant_namespaces_valid(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Tenant namespaces are unique, at most 63 characters, and not system or program namespaces."""
    taken = set(RESERVED_NAMESPACES) | {estate.mothership.namespace}
    taken.update(c.namespace for c in estate.all_composers())
    seen: dict[str, str] = {}
    for i, t in enumerate(estate.tenants):
        ns, path = t.namespace_name, f"tenants[{i}].namespace"
        if len(ns) > 63:
            yield ConfigProblem(
                path, f"namespace {ns!r} is longer than 63 characters; set a shorter namespace"
            )
        elif ns in taken:
            yield ConfigProblem(path, f"namespace {ns!r} is reserved")
        elif ns in seen:
            yield ConfigProblem(path, f"duplicate namespace {ns!r} (first at {seen[ns]})")
        seen.setdefault(ns, path)


def unique_network_names(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Network names are unique within a tenant."""
    for i, t in enumerate(estate.tenants):
        yield from _duplicates(
            ((f"tenants[{i}].networks[{j}].name", n.name) for j, n in enumerate(t.networks)), "network name"
        )


def _tenant_networks(estate: EstateConfig) -> Iterator[tuple[str, TenantNetworkConfig]]:
    """``("tenants[i].networks[j]", network)`` for every tenant network, in config order."""
    return _items("tenants", estate.tenants, "networks")


def _unique_network_ids(
    estate: EstateConfig, field: Literal["vxlan_id", "vlan_id"], what: str
) -> Iterator[ConfigProblem]:
    """A problem for each tenant network whose ``field`` repeats an earlier network's."""
    yield from _duplicates(
        ((f"{path}.{field}", str(getattr(n, field))) for path, n in _tenant_networks(estate)), what
    )


def unique_vxlan_ids(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """VXLAN IDs are unique across all tenants (a shared VNI joins two tenants' segments)."""
    yield from _unique_network_ids(estate, "vxlan_id", "VXLAN ID")


def unique_vlan_ids(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """VLAN IDs are unique across all tenant networks."""
    yield from _unique_network_ids(estate, "vlan_id", "VLAN ID")


def cidrs_do_not_overlap(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """No two tenant networks have overlapping CIDRs."""
    seen: list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
    for base, n in _tenant_networks(estate):
        net = ipaddress.ip_network(n.cidr)
        path = f"{base}.cidr"
        clash = next((p for p, other in seen if other.version == net.version and other.overlaps(net)), None)
        if clash:
            yield ConfigProblem(path, f"{n.cidr} overlaps the network at {clash}")
        seen.append((path, net))


def gateway_inside_cidr(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A network's gateway is a host address inside its CIDR."""
    for base, n in _tenant_networks(estate):
        if n.gateway is None:
            continue
        path = f"{base}.gateway"
        try:
            addr = ipaddress.ip_address(n.gateway)
        except ValueError:
            yield ConfigProblem(path, f"{n.gateway!r} is not an IP address")
            continue
        if addr not in ipaddress.ip_network(n.cidr):
            yield ConfigProblem(path, f"{n.gateway} is outside {n.cidr}")


def unique_cluster_names(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Hypervisor-cluster and DPU-cluster names are unique and not ``mothership``; tenant cluster
    names are unique within their tenant."""
    items = [(f"hypervisor_clusters[{i}].name", c.name) for i, c in enumerate(estate.hypervisor_clusters)]
    if estate.dpu_cluster is not None:
        items.append(("dpu_cluster.name", estate.dpu_cluster.name))
    for path, name in items:
        if name == MOTHERSHIP:
            yield ConfigProblem(path, f"{MOTHERSHIP!r} is reserved for the management cluster")
    yield from _duplicates(items, "cluster name")
    for i, t in enumerate(estate.tenants):
        yield from _duplicates(
            ((f"tenants[{i}].clusters[{j}].name", c.name) for j, c in enumerate(t.clusters)), "cluster name"
        )


# --------------------------------------------------------------------------- hosts and clusters


def cluster_hosts_exist(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Every host a hypervisor cluster lists is defined in ``hosts``."""
    for i, c in enumerate(estate.hypervisor_clusters):
        for j, h in enumerate(c.hosts):
            if estate.host(h) is None:
                yield ConfigProblem(
                    f"hypervisor_clusters[{i}].hosts[{j}]", f"host {h!r} is not defined in hosts"
                )


def host_in_at_most_one_cluster(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A host belongs to at most one hypervisor cluster (and appears once in it)."""
    members = _items("hypervisor_clusters", estate.hypervisor_clusters, "hosts")
    yield from _duplicates(members, "cluster member")


def host_role_fits_cluster(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """``vm-*`` clusters contain only ``hypervisor`` hosts; ``container`` clusters only
    ``baremetal-worker`` hosts; ``dpu-cluster-host`` hosts are in no hypervisor cluster."""
    for i, c in enumerate(estate.hypervisor_clusters):
        want = "baremetal-worker" if c.gpu_workload_mode == "container" else "hypervisor"
        for j, name in enumerate(c.hosts):
            host = estate.host(name)
            if host is not None and host.role != want:
                yield ConfigProblem(
                    f"hypervisor_clusters[{i}].hosts[{j}]",
                    f"host {name!r} has role {host.role!r}; a {c.gpu_workload_mode} cluster "
                    f"needs role {want!r}",
                )


def vm_mode_needs_kubevirt(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """``vm-passthrough`` and ``vm-vgpu`` clusters install KubeVirt."""
    for i, c in enumerate(estate.hypervisor_clusters):
        if c.gpu_workload_mode != "container" and not c.kubevirt:
            yield ConfigProblem(
                f"hypervisor_clusters[{i}].kubevirt",
                f"must be true: GPU workload mode {c.gpu_workload_mode} runs GPUs in KubeVirt VMs",
            )


def dpu_cluster_hosts_have_dpus(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """The DPU cluster's hosts exist and have DPUs, and the cluster has at least one DPU."""
    if estate.dpu_cluster is None:
        return
    for j, name in enumerate(estate.dpu_cluster.hosts or []):
        host = estate.host(name)
        if host is None:
            yield ConfigProblem(f"dpu_cluster.hosts[{j}]", f"host {name!r} is not defined in hosts")
        elif host.dpu is None:
            yield ConfigProblem(f"dpu_cluster.hosts[{j}]", f"host {name!r} has no dpu")
    if not estate.dpu_cluster_hosts():
        yield ConfigProblem("dpu_cluster", "no host with a DPU: the DPU cluster would have no workers")


def dpu_cluster_host_role_needs_dpu(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A ``dpu-cluster-host`` host has a DPU and is not a hypervisor-cluster member."""
    for i, h in enumerate(estate.hosts):
        if h.role != "dpu-cluster-host":
            continue
        if h.dpu is None:
            yield ConfigProblem(f"hosts[{i}].dpu", f"host {h.name!r} has role dpu-cluster-host but no dpu")
        cluster = estate.cluster_of_host(h.name)
        if cluster is not None:
            yield ConfigProblem(
                f"hosts[{i}].role",
                f"host {h.name!r} is a dpu-cluster-host but is in hypervisor cluster {cluster.name!r}",
            )


# --------------------------------------------------------------------------- SSH preparation


def dpu_mlxconfig_valid(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A DPU's ``mlxconfig`` values are within the documented BlueField-3 ranges, and with ``prep`` (set
    over SSH) every name is a parameter the program manages and at least one is set.

    Names and bounds come from :mod:`domain.mlxconfig` (the same checks the
    ``DpuMlxconfig`` provider runs), so a bad parameter fails before any resource is registered.
    Without ``prep`` other parameter names pass through to the DPF DPUFlavor, except near-misses of
    the managed names (typos that would drop the intended setting), and an emulation whose
    ``*_NUM_*`` is set must also be enabled (the flavor is the DPU's whole intended setting).
    """
    for i, h in enumerate(estate.hosts):
        d = h.dpu
        if d is None:
            continue
        base = f"hosts[{i}].dpu.mlxconfig"
        params: dict[str, object] = dict(d.mlxconfig)
        if d.prep is None:
            # Other parameters pass through to the DPUFlavor, but a near-miss of a managed name is
            # almost surely a typo that would silently drop the intended setting.
            for name in params:
                if name in mlxconfig_rules.PARAMETERS:
                    continue
                close = difflib.get_close_matches(name.upper(), mlxconfig_rules.PARAMETERS, n=1, cutoff=0.85)
                if close:
                    yield ConfigProblem(f"{base}.{name}",
                                        f"unknown mlxconfig parameter; did you mean {close[0]}?")
            params = {k: v for k, v in params.items() if k in mlxconfig_rules.PARAMETERS}
            for family in ("VIRTIO_NET_EMULATION", "PCI_SWITCH_EMULATION"):
                counts = [k for k in params
                          if k.startswith(f"{family}_NUM_") and str(params[k]) not in ("0", "0.0")]
                enable = str(params.get(f"{family}_ENABLE", "")).strip().lower()
                if counts and enable not in ("1", "1.0", "true"):
                    yield ConfigProblem(
                        f"{base}.{family}_ENABLE",
                        f"must be 1 when {', '.join(sorted(counts))} is set (the emulation is off otherwise)",
                    )
            if not params:
                continue
        for v in mlxconfig_rules.violations(params):
            if v.parameter in params:
                yield ConfigProblem(f"{base}.{v.parameter}", v.reason.removeprefix(f"{v.parameter}: "))
            else:  # a cross-parameter rule, or no parameter at all
                yield ConfigProblem(base, v.reason.removeprefix("parameters: "))


def ssh_prep_kernel_settings_supported(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A host prepared over SSH has kernel args of the form ``name`` or ``name=value`` (no quotes) and
    plain module names: what ``HostKernelPrep`` can write to GRUB and modprobe.d
    (:class:`dynamic_providers.ssh.models.HostKernelPrepSpec`)."""
    for i, h in enumerate(estate.hosts):
        if h.prep is None:
            continue
        for field, values, what in (
            ("kernel_args", h.kernel_args, "a kernel argument (name or name=value)"),
            ("blacklisted_modules", h.blacklisted_modules, "a module name"),
        ):
            for j, item in enumerate(values):
                try:
                    HostKernelPrepSpec.model_validate({field: [item]})
                except ValidationError:
                    yield ConfigProblem(
                        f"hosts[{i}].{field}[{j}]",
                        f"{item!r} is not {what} that can be applied over SSH (prep is set)",
                    )


def unique_ssh_prep_targets(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """No two hosts are prepared through the same SSH server (``host:port``), and no two DPUs through the
    same server and device (they would fight over the same GRUB file or firmware)."""
    hosts = [
        (f"hosts[{i}].prep.host", f"{h.prep.host}:{h.prep.port}")
        for i, h in enumerate(estate.hosts)
        if h.prep is not None
    ]
    yield from _duplicates(hosts, "host prep target")
    dpus = [
        (f"hosts[{i}].dpu.prep.device", f"{h.dpu.prep.host}:{h.dpu.prep.port} {h.dpu.prep.device}")
        for i, h in enumerate(estate.hosts)
        if h.dpu is not None and h.dpu.prep is not None
    ]
    yield from _duplicates(dpus, "DPU prep target")


# --------------------------------------------------------------------------- GPUs


def vgpu_clusters_complete(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A ``vm-vgpu`` hypervisor cluster sets ``vgpu_manager`` (other modes do not), and its tenant
    clusters use one vGPU type: the GPU Operator's vGPU Device Manager applies one config per node
    and a time-sliced GPU carries vGPUs of one type (vGPU user guide, "equal-size mode")."""
    for i, hv in enumerate(estate.hypervisor_clusters):
        if hv.gpu_workload_mode != "vm-vgpu":
            if hv.vgpu_manager is not None:
                yield ConfigProblem(
                    f"hypervisor_clusters[{i}].vgpu_manager",
                    f"set but gpu_workload_mode is {hv.gpu_workload_mode}",
                )
            continue
        if hv.vgpu_manager is None:
            yield ConfigProblem(
                f"hypervisor_clusters[{i}].vgpu_manager",
                "required for vm-vgpu (repository and version of the vGPU Manager image)",
            )
        types = estate.vgpu_types_on(hv.name)
        if len(types) > 1:
            yield ConfigProblem(
                f"hypervisor_clusters[{i}]",
                f"tenant clusters on it use several vGPU types ({', '.join(types)}); use one per "
                "hypervisor cluster",
            )


def cluster_templates_declared(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """ClusterTemplate names in ``catalog.cluster_templates`` are unique, and every ``template`` a
    cluster references is declared there (the program creates it; its control-plane kind decides
    ``hosted_control_plane``)."""
    yield from _duplicates(
        (
            (f"catalog.cluster_templates[{i}].name", t.name)
            for i, t in enumerate(estate.catalog.cluster_templates)
        ),
        "ClusterTemplate",
    )
    declared = sorted(t.name for t in estate.catalog.cluster_templates)
    refs = [
        (f"hypervisor_clusters[{i}].template", c.template) for i, c in enumerate(estate.hypervisor_clusters)
    ]
    if estate.dpu_cluster is not None:
        refs.append(("dpu_cluster.template", estate.dpu_cluster.template))
    refs += [(f"{path}.template", c.template) for path, c in _items("tenants", estate.tenants, "clusters")]
    for path, name in refs:
        if estate.catalog.cluster_template(name) is None:
            yield ConfigProblem(
                path,
                f"ClusterTemplate {name!r} is not declared in catalog.cluster_templates "
                f"(declared: {', '.join(declared) or 'none'})",
            )


def gpu_products_new(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A product declared under ``gpu_products`` is not built in and is declared once (a second
    set of facts for the same name would make the catalogue ambiguous)."""
    seen: dict[str, int] = {}
    for i, p in enumerate(estate.gpu_products):
        path = f"gpu_products[{i}].product"
        if p.product in BUILTIN_GPU_PRODUCTS:
            yield ConfigProblem(path, f"{p.product!r} is built in; remove it from gpu_products")
        elif p.product in seen:
            first = f"gpu_products[{seen[p.product]}]"
            yield ConfigProblem(path, f"duplicate GPU product {p.product!r} (first at {first})")
        else:
            seen[p.product] = i


def pool_models_known(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Pool models are products of the catalogue (built in or declared under ``gpu_products``)."""
    catalogue = estate.gpu_catalogue()
    for i, p in enumerate(estate.fabric.pools):
        for j, m in enumerate(p.models):
            if m not in catalogue:
                yield ConfigProblem(f"fabric.pools[{i}].models[{j}]", unknown_product_message(m, catalogue))


def allowed_models_offered(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Each model a tenant may use is offered by some pool."""
    offered = {m for p in estate.fabric.pools for m in p.models}
    for i, t in enumerate(estate.tenants):
        for j, m in enumerate(t.allowed_models):
            if m not in offered:
                yield ConfigProblem(
                    f"tenants[{i}].allowed_models[{j}]", f"model {m!r} is not offered by any pool"
                )


def tenant_cluster_hypervisor_exists(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A tenant cluster names a defined hypervisor cluster that runs KubeVirt."""
    for i, t in enumerate(estate.tenants):
        for j, c in enumerate(t.clusters):
            path = f"tenants[{i}].clusters[{j}].hypervisor_cluster"
            hv = estate.hypervisor_cluster(c.hypervisor_cluster)
            if hv is None:
                yield ConfigProblem(path, f"hypervisor cluster {c.hypervisor_cluster!r} is not defined")
            elif not hv.kubevirt:
                yield ConfigProblem(path, f"hypervisor cluster {hv.name!r} does not run KubeVirt")


def tenant_cluster_networks_exist(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A tenant cluster attaches only to its own tenant's networks, and to at least one."""
    for i, t in enumerate(estate.tenants):
        names = {n.name for n in t.networks}
        for j, c in enumerate(t.clusters):
            if c.networks is None:
                if not names:
                    yield ConfigProblem(
                        f"tenants[{i}].clusters[{j}]",
                        f"tenant {t.name!r} has no networks to attach the cluster to",
                    )
                continue
            if not c.networks:
                yield ConfigProblem(f"tenants[{i}].clusters[{j}].networks", "must list at least one network")
            for k, n in enumerate(c.networks):
                if n not in names:
                    yield ConfigProblem(
                        f"tenants[{i}].clusters[{j}].networks[{k}]",
                        f"network {n!r} is not a network of tenant {t.name!r}",
                    )


def tenant_cluster_gpu_request_complete(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """GPU mode ``none`` sets no model/count; ``passthrough``/``vgpu`` set a model and a count >= 1."""
    for i, t in enumerate(estate.tenants):
        for j, c in enumerate(t.clusters):
            base = f"tenants[{i}].clusters[{j}]"
            if c.gpu_mode == "none":
                if c.gpu_model is not None or c.gpu_count_per_worker:
                    yield ConfigProblem(
                        f"{base}.gpu_mode", "is none but gpu_model/gpu_count_per_worker are set"
                    )
                continue
            if c.gpu_model is None:
                yield ConfigProblem(f"{base}.gpu_model", f"required for gpu_mode {c.gpu_mode}")
            if c.gpu_count_per_worker < 1:
                yield ConfigProblem(
                    f"{base}.gpu_count_per_worker", f"must be at least 1 for gpu_mode {c.gpu_mode}"
                )


def tenant_cluster_gpu_model_allowed(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A tenant cluster's GPU model is in the tenant's ``allowed_models``."""
    for i, t in enumerate(estate.tenants):
        for j, c in enumerate(t.clusters):
            if c.gpu_mode != "none" and c.gpu_model is not None and c.gpu_model not in t.allowed_models:
                yield ConfigProblem(
                    f"tenants[{i}].clusters[{j}].gpu_model",
                    f"model {c.gpu_model!r} is not in the allowed_models of tenant {t.name!r}",
                )


def tenant_cluster_gpu_mode_matches(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """``passthrough`` needs a ``vm-passthrough`` hypervisor cluster, ``vgpu`` a ``vm-vgpu`` one."""
    for i, t in enumerate(estate.tenants):
        for j, c in enumerate(t.clusters):
            want = _MODE_FOR_TENANT_GPU.get(c.gpu_mode)
            hv = estate.hypervisor_cluster(c.hypervisor_cluster)
            if want and hv is not None and hv.gpu_workload_mode != want:
                yield ConfigProblem(
                    f"tenants[{i}].clusters[{j}].gpu_mode",
                    f"{c.gpu_mode} needs a {want} hypervisor cluster; {hv.name!r} is {hv.gpu_workload_mode}",
                )


def tenant_cluster_vgpu_type_known(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A ``vgpu_type`` is a vGPU type of the chosen model (catalogue), and is set only in ``vgpu``
    mode; a ``vgpu`` cluster whose model has no vGPU types in the catalogue is a problem too."""
    catalogue = estate.gpu_catalogue()
    for i, t in enumerate(estate.tenants):
        for j, c in enumerate(t.clusters):
            product = catalogue.get(c.gpu_model or "")
            if c.vgpu_type is None:
                if c.gpu_mode == "vgpu" and product is not None and not product.vgpu_types:
                    yield ConfigProblem(
                        f"tenants[{i}].clusters[{j}].gpu_model",
                        f"{product.product} has no vGPU types in the catalogue; add them under gpu_products",
                    )
                continue
            path = f"tenants[{i}].clusters[{j}].vgpu_type"
            if c.gpu_mode != "vgpu":
                yield ConfigProblem(path, f"set but gpu_mode is {c.gpu_mode}")
                continue
            product = estate.gpu_catalogue().get(c.gpu_model or "")
            if product is not None and c.vgpu_type not in product.vgpu_types:
                valid = ", ".join(product.vgpu_types) or "none in the catalogue"
                yield ConfigProblem(
                    path, f"{c.vgpu_type!r} is not a vGPU type of {product.product} ({valid})"
                )


def composition_references_exist(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A static composition names a defined host (not a dpu-cluster-host), pool and tenant."""
    for i, g in enumerate(estate.gpu_compositions):
        base = f"gpu_compositions[{i}]"
        host = estate.host(g.host)
        if host is None:
            yield ConfigProblem(f"{base}.host", f"host {g.host!r} is not defined in hosts")
        elif host.role == "dpu-cluster-host":
            yield ConfigProblem(
                f"{base}.host", f"host {g.host!r} is a dpu-cluster-host and runs no GPU workloads"
            )
        if estate.pool(g.pool) is None:
            yield ConfigProblem(f"{base}.pool", f"pool {g.pool!r} is not defined in fabric.pools")
        if g.tenant is not None and estate.tenant(g.tenant) is None:
            yield ConfigProblem(f"{base}.tenant", f"tenant {g.tenant!r} is not defined")


def composition_host_single_pool(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """All static compositions of a host draw from one pool (a Director machine belongs to one group)."""
    first: dict[str, tuple[str, str]] = {}
    for i, g in enumerate(estate.gpu_compositions):
        if g.host not in first:
            first[g.host] = (g.pool, f"gpu_compositions[{i}]")
        elif first[g.host][0] != g.pool:
            pool, where = first[g.host]
            yield ConfigProblem(
                f"gpu_compositions[{i}].pool",
                f"host {g.host!r} already draws from pool {pool!r} ({where}); a machine is in "
                f"one Director group",
            )


def composition_count_consistent(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A composition sets ``count`` or ``device_names`` (when both, the count matches the names)."""
    for i, g in enumerate(estate.gpu_compositions):
        if g.count is None and not g.device_names:
            yield ConfigProblem(f"gpu_compositions[{i}]", "set count or device_names")
        elif g.count is not None and g.device_names and g.count != len(g.device_names):
            yield ConfigProblem(
                f"gpu_compositions[{i}].count",
                f"{g.count} does not match the {len(g.device_names)} device_names",
            )


def composition_model_allowed(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A composition's model is offered by its pool and, for a tenant's GPUs, allowed for the tenant."""
    for i, g in enumerate(estate.gpu_compositions):
        if g.model is None:
            continue
        pool = estate.pool(g.pool)
        if pool is not None and g.model not in pool.models:
            yield ConfigProblem(
                f"gpu_compositions[{i}].model", f"model {g.model!r} is not in pool {pool.name!r}"
            )
        tenant = estate.tenant(g.tenant) if g.tenant else None
        if tenant is not None and g.model not in tenant.allowed_models:
            yield ConfigProblem(
                f"gpu_compositions[{i}].model",
                f"model {g.model!r} is not in the allowed_models of tenant {tenant.name!r}",
            )


def composition_devices_unique(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A device name is statically composed at most once."""
    yield from _duplicates(_items("gpu_compositions", estate.gpu_compositions, "device_names"), "device")


def pool_capacity(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Static compositions from a pool of known ``size`` fit into it."""
    used: dict[str, int] = defaultdict(int)
    for g in estate.gpu_compositions:
        used[g.pool] += g.planned_count
    for i, p in enumerate(estate.fabric.pools):
        if p.size is not None and used[p.name] > p.size:
            yield ConfigProblem(
                f"fabric.pools[{i}].size",
                f"static compositions take {used[p.name]} GPUs but the pool holds {p.size}",
            )


def tenant_gpu_quota(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A tenant's GPUs (its clusters' GPUs plus compositions dedicated to it) fit its ``gpu_quota``."""
    static: dict[str, int] = defaultdict(int)
    for g in estate.gpu_compositions:
        if g.tenant:
            static[g.tenant] += g.planned_count
    for i, t in enumerate(estate.tenants):
        total = sum(c.gpu_total for c in t.clusters) + static[t.name]
        if total > t.gpu_quota:
            yield ConfigProblem(
                f"tenants[{i}].gpu_quota",
                f"tenant {t.name!r} uses {total} GPUs (clusters and compositions) but its "
                f"quota is {t.gpu_quota}",
            )


def passthrough_capacity(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Passthrough GPUs requested by tenant clusters on a ``vm-passthrough`` cluster do not exceed the
    GPUs statically composed onto that cluster's hosts (per model; model-less compositions count for
    any model)."""
    for i, hv in enumerate(estate.hypervisor_clusters):
        if hv.gpu_workload_mode != "vm-passthrough":
            continue
        supply: dict[str | None, int] = defaultdict(int)
        for g in estate.gpu_compositions:
            if g.host in hv.hosts:
                supply[g.model] += g.planned_count
        demand: dict[str, int] = defaultdict(int)
        for t in estate.tenants:
            for c in t.clusters:
                if c.hypervisor_cluster == hv.name and c.gpu_mode == "passthrough" and c.gpu_model:
                    demand[c.gpu_model] += c.gpu_total
        spare_any = supply[None]
        for model, want in sorted(demand.items()):
            have = supply[model]
            short = max(0, want - have)
            if short > spare_any:
                yield ConfigProblem(
                    f"hypervisor_clusters[{i}]",
                    f"tenant clusters need {want} passthrough {model} GPUs but only "
                    f"{have + spare_any} are composed onto its hosts",
                )
            spare_any -= min(short, spare_any)


def gpu_sharing_valid(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """GPU sharing: hosts exist; time-slicing/MPS set ``replicas`` >= 2 and no ``mig_config``; MIG sets
    a ``mig_config`` that every MIG-capable model the tenant may use supports (catalogue
    ``mig_configs``: mig-manager applies one config name to every GPU of the node), whose layout the
    catalogue knows (``mig_layouts``: the composer counts a composed GPU by it), and with the
    ``single`` strategy a layout of one profile (GFD labels a node with several ``-MIG-INVALID``;
    :meth:`domain.gpu_sharing.SharingSpec.offers`)."""
    for i, t in enumerate(estate.tenants):
        s = t.gpu_sharing
        if s is None:
            continue
        base = f"tenants[{i}].gpu_sharing"
        for j, h in enumerate(s.hosts):
            if estate.host(h) is None:
                yield ConfigProblem(f"{base}.hosts[{j}]", f"host {h!r} is not defined in hosts")
        if s.strategy in ("time-slicing", "mps"):
            if s.replicas is None or s.replicas < 2:
                yield ConfigProblem(
                    f"{base}.replicas", f"{s.strategy} needs replicas >= 2 (got {s.replicas})"
                )
            if s.mig_config is not None:
                yield ConfigProblem(f"{base}.mig_config", f"only valid with strategy mig, not {s.strategy}")
            continue
        catalogue = estate.gpu_catalogue()
        products = [catalogue[m] for m in t.allowed_models if m in catalogue]
        mig_models = [p for p in products if p.mig_capable]
        if not mig_models:
            yield ConfigProblem(
                f"{base}.strategy",
                f"mig needs a MIG-capable model in the allowed_models of tenant {t.name!r}",
            )
        if s.mig_config is None:
            yield ConfigProblem(f"{base}.mig_config", "required for strategy mig (e.g. all-1g.5gb)")
        else:
            for p in mig_models:
                if s.mig_config not in p.mig_configs:
                    yield ConfigProblem(
                        f"{base}.mig_config",
                        f"{s.mig_config!r} is not a MIG config of {p.product} "
                        f"(valid: {', '.join(p.mig_configs)})",
                    )
                    continue
                try:
                    s.offers(p.product, catalogue)
                except SharingError as exc:
                    yield ConfigProblem(f"{base}.mig_config", str(exc))
        if s.replicas is not None:
            yield ConfigProblem(f"{base}.replicas", "not used with strategy mig")


def gpu_sharing_hosts_exclusive(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A host is listed by at most one tenant's GPU sharing: a node has one device-plugin config, and
    time-slicing or MPS would share its GPUs between both tenants' pods with no isolation. The
    problem names both tenants."""
    first: dict[str, tuple[str, str]] = {}
    for i, t in enumerate(estate.tenants):
        if t.gpu_sharing is None:
            continue
        for j, h in enumerate(t.gpu_sharing.hosts):
            path = f"tenants[{i}].gpu_sharing.hosts[{j}]"
            if h not in first:
                first[h] = (t.name, path)
                continue
            other, at = first[h]
            yield ConfigProblem(
                path,
                f"duplicate shared-GPU host {h!r} (first at {at}): tenants {other!r} and {t.name!r} would "
                "share its GPUs; give each tenant its own hosts",
            )


def gpu_sharing_host_in_tenant_pool(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A host a tenant time-slices or shares by MPS serves no composer pool of other tenants: the
    composer places the pods of a host's pool on its GPUs, and time-slicing and MPS share every GPU
    of the node between its pods with no isolation. (The composer also refuses such pods itself:
    ``composer.sharing[].namespaces``.)"""
    for c in estate.all_composers():
        host_pools = {h: p for p in reversed(c.pools) for h in estate.composer_pool_hosts(p)}
        for i, t in enumerate(estate.tenants):
            s = t.gpu_sharing
            if s is None or not s.spec().time_shared:
                continue
            for j, h in enumerate(s.hosts):
                pool = host_pools.get(h)
                others = sorted(set(pool.tenant_names) - {t.name}) if pool is not None else []
                if pool is not None and others:
                    yield ConfigProblem(
                        f"tenants[{i}].gpu_sharing.hosts[{j}]",
                        f"host {h!r} time-shares GPUs of tenant {t.name!r} ({s.strategy}) but serves "
                        f"composer pool {pool.name!r} of {', '.join(map(repr, others))} too: the composer "
                        f"would place their pods on them; give it a pool of {t.name!r} alone",
                    )


def gpu_sharing_one_mig_strategy_per_cluster(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """The MIG sharing settings on the hosts of one hypervisor cluster agree on ``mig_strategy``: the
    GPU Operator gives its ClusterPolicy ``mig.strategy`` to every node's device plugin and GFD as
    ``MIG_STRATEGY``, which wins over a node's config file (:mod:`domain.gpu_sharing`)."""
    for cluster in estate.hypervisor_clusters:
        first: tuple[str, str] | None = None
        for i, t in enumerate(estate.tenants):
            s = t.gpu_sharing
            if s is None or s.strategy != "mig" or not set(s.hosts) & set(cluster.hosts):
                continue
            if first is None:
                first = (t.name, s.mig_strategy)
            elif s.mig_strategy != first[1]:
                yield ConfigProblem(
                    f"tenants[{i}].gpu_sharing.mig_strategy",
                    f"MIG strategy {s.mig_strategy!r} of tenant {t.name!r} differs from {first[1]!r} of "
                    f"tenant {first[0]!r} in hypervisor cluster {cluster.name!r}: the GPU Operator sets "
                    "one MIG strategy per cluster (ClusterPolicy mig.strategy)",
                )


def gpu_sharing_hosts_run_pods(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """GPU sharing applies to hosts whose GPUs serve pods: role ``baremetal-worker`` (hypervisor GPUs
    go to VMs whole or as vGPUs)."""
    for i, t in enumerate(estate.tenants):
        if t.gpu_sharing is None:
            continue
        for j, name in enumerate(t.gpu_sharing.hosts):
            host = estate.host(name)
            if host is not None and host.role != "baremetal-worker":
                yield ConfigProblem(
                    f"tenants[{i}].gpu_sharing.hosts[{j}]",
                    f"host {name!r} has role {host.role!r}; GPU sharing needs a baremetal-worker",
                )


def composer_references_exist(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Each composer's pool exists and its target is ``mothership`` or a ``container``-mode cluster."""
    for key, c in estate.composer_entries():
        yield from _composer_references_exist(estate, key, c)


def _composer_references_exist(estate: EstateConfig, key: str, c: ComposerConfig) -> Iterator[ConfigProblem]:
    """:func:`composer_references_exist` for the composer ``c`` at key path ``key``."""
    if estate.pool(c.pool) is None:
        yield ConfigProblem(f"{key}.pool", f"pool {c.pool!r} is not defined in fabric.pools")
    if c.target_cluster == MOTHERSHIP:
        return
    hv = estate.hypervisor_cluster(c.target_cluster)
    if hv is None:
        yield ConfigProblem(
            f"{key}.target_cluster",
            f"cluster {c.target_cluster!r} is not defined (use a hypervisor cluster or {MOTHERSHIP!r})",
        )
    elif hv.gpu_workload_mode != "container":
        yield ConfigProblem(
            f"{key}.target_cluster",
            f"cluster {hv.name!r} runs GPUs in VMs ({hv.gpu_workload_mode}); the composer serves "
            f"GPU pods on container-mode clusters",
        )


def composer_mode_fits_cluster(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A composer in mode ``dra`` targets a cluster on Kubernetes :data:`DRA_MIN_KUBERNETES` or newer,
    where the program knows the version: a hypervisor cluster it creates (``k0s_version``). For the
    mothership and adopted clusters (``kubeconfig``) the version is not in the config: the composer
    checks the API server at start (``docs/dra.md``). Also: ``dra`` runs the composer in its target
    cluster, because the chart's DRA kubelet plugin (a DaemonSet, ``kubeletPlugin``) must run on that
    cluster's nodes, which a release on the mothership cannot place."""
    for key, c in estate.composer_entries():
        if c.mode == "dra" and c.runs_on == MOTHERSHIP and c.target_cluster != MOTHERSHIP:
            yield ConfigProblem(
                f"{key}.runs_on",
                "mode 'dra' needs the composer's chart in its target cluster: its DRA kubelet plugin "
                "(a DaemonSet) must run on that cluster's nodes, which a release on the mothership "
                "cannot place; drop runs_on or use mode 'deviceplugin'",
            )
        if c.mode != "dra" or c.target_cluster == MOTHERSHIP:
            continue
        hv = estate.hypervisor_cluster(c.target_cluster)
        if hv is None or hv.kubeconfig is not None:
            continue
        minor = kubernetes_minor(hv.k0s_version)
        if minor is not None and minor < DRA_MIN_KUBERNETES:
            need = ".".join(map(str, DRA_MIN_KUBERNETES))
            yield ConfigProblem(
                f"{key}.mode",
                f"mode 'dra' needs Kubernetes {need} or newer (DRA binding conditions and extended "
                f"resources on by default); cluster {hv.name!r} runs k0s {hv.k0s_version}: raise its "
                f"k0s_version or use mode 'deviceplugin'",
            )


def adopted_cluster_kubeconfig(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """How each cluster is reached is said once: a hypervisor cluster's ``context`` needs its
    ``kubeconfig``; ``composer.kubeconfig`` names the kubeconfig of a hypervisor cluster (the
    mothership's is ``mothership.kubeconfig``) that has no ``kubeconfig`` of its own."""
    for i, c in enumerate(estate.hypervisor_clusters):
        if c.context is not None and c.kubeconfig is None:
            yield ConfigProblem(
                f"hypervisor_clusters[{i}].context",
                "context without kubeconfig: a context names an entry of an adopted cluster's "
                f"kubeconfig file; set kubeconfig too, or drop context to read Secret "
                f"{c.name}-kubeconfig on the mothership",
            )
    for key, cc in estate.composer_entries():
        yield from _composer_kubeconfig(estate, key, cc)


def _composer_kubeconfig(estate: EstateConfig, key: str, cc: ComposerConfig) -> Iterator[ConfigProblem]:
    """The composer part of :func:`adopted_cluster_kubeconfig` for ``cc`` at key path ``key``; also:
    ``runs_on: mothership`` needs a target cluster other than the mothership."""
    if cc.runs_on == MOTHERSHIP and cc.target_cluster == MOTHERSHIP:
        yield ConfigProblem(
            f"{key}.runs_on",
            "the composer targets the mothership: it runs there anyway; drop runs_on "
            "(runs_on: mothership is for a composer watching a child cluster from the mothership)",
        )
    if cc.kubeconfig is None:
        return
    if cc.target_cluster == MOTHERSHIP:
        yield ConfigProblem(
            f"{key}.kubeconfig",
            "the composer targets the mothership, whose kubeconfig is mothership.kubeconfig: drop it",
        )
        return
    for i, c in enumerate(estate.hypervisor_clusters):
        if c.name == cc.target_cluster and c.kubeconfig is not None:
            yield ConfigProblem(
                f"{key}.kubeconfig",
                f"cluster {c.name!r} has its own kubeconfig (hypervisor_clusters[{i}].kubeconfig): "
                "set one of the two",
            )


def _composer_hosts(estate: EstateConfig, c: ComposerConfig) -> set[str] | None:
    """Hosts the composer ``c`` serves (its target cluster's), or None when it targets the mothership
    (every host may have a Node there) or an undefined cluster (reported by
    :func:`composer_references_exist`)."""
    hv = estate.hypervisor_cluster(c.target_cluster)
    return set(hv.hosts) if hv is not None else None


def composer_pool_references_exist(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A composer pool's name is unique, its tenants are defined (each in one pool), and its hosts and
    hypervisor cluster are defined and in the composer's target cluster (the composer sees no other
    Nodes). Checked per composer."""
    for key, c in estate.composer_entries():
        yield from _composer_pool_references_exist(estate, key, c)


def _composer_pool_references_exist(
    estate: EstateConfig, key: str, c: ComposerConfig
) -> Iterator[ConfigProblem]:
    """:func:`composer_pool_references_exist` for the composer ``c`` at key path ``key``."""
    pools = c.pools
    yield from _duplicates(((f"{key}.pools[{i}].name", p.name) for i, p in enumerate(pools)), "pool name")
    yield from _duplicates(
        (
            (f"{key}.pools[{i}].tenants[{j}]", t)
            for i, p in enumerate(pools)
            for j, t in enumerate(p.tenant_names)
        ),
        "pool tenant",
    )
    served = _composer_hosts(estate, c)
    target = c.target_cluster
    for i, p in enumerate(pools):
        base = f"{key}.pools[{i}]"
        for j, t in enumerate(p.tenant_names):
            if estate.tenant(t) is None:
                where = f"{base}.tenants[{j}]" if p.tenants is not None else f"{base}.name"
                yield ConfigProblem(where, f"tenant {t!r} is not defined in tenants (set tenants)")
        for j, h in enumerate(p.hosts):
            if estate.host(h) is None:
                yield ConfigProblem(f"{base}.hosts[{j}]", f"host {h!r} is not defined in hosts")
            elif served is not None and h not in served:
                yield ConfigProblem(
                    f"{base}.hosts[{j}]",
                    f"host {h!r} is not in the composer's target cluster {target!r}: the composer "
                    "never sees its Node",
                )
        if p.hypervisor_cluster is not None:
            hv = estate.hypervisor_cluster(p.hypervisor_cluster)
            if hv is None:
                yield ConfigProblem(
                    f"{base}.hypervisor_cluster", f"cluster {p.hypervisor_cluster!r} is not defined"
                )
            elif served is not None and hv.name != target:
                yield ConfigProblem(
                    f"{base}.hypervisor_cluster",
                    f"cluster {hv.name!r} is not the composer's target cluster {target!r}",
                )


def _served_hosts(estate: EstateConfig, c: ComposerConfig) -> set[str] | None:
    """The hosts the composer ``c`` may compose onto: its pools' hosts when it has pools, else its
    target hypervisor cluster's hosts; None when that is every host (no pools, target the
    mothership, where any host may have its Node)."""
    if c.pools:
        return {h for p in c.pools for h in estate.composer_pool_hosts(p)}
    return _composer_hosts(estate, c)


def composers_apart(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Composers sharing one Director never meet: ``composer`` or ``composers``, not both; no two
    composers have the same target cluster, owner tag, fabric pool (or Director group), Helm release
    name or host. The owner tag is what a composer takes, reclaims and counts by, the Director group
    what it composes from; the release name names its Pulumi resources; a shared host would carry
    both composers' GPUs and Node labels. Each message names the key and this rule."""
    entries = estate.composer_entries()
    if estate.composer is not None and estate.composers:
        yield ConfigProblem(
            "composers",
            "set composer (one composer) or composers (one per GPU cluster), not both "
            "(rule composers_apart)",
        )
    if len(entries) < 2:
        return
    rule = " (rule composers_apart: two composers sharing a Director must not meet)"
    for field, what in (
        ("target_cluster", "target cluster"),
        ("owner_tag", "owner tag"),
        ("pool", "fabric pool"),
        ("release_name", "release name"),
    ):
        for problem in _duplicates(((f"{k}.{field}", getattr(c, field)) for k, c in entries), what):
            yield ConfigProblem(problem.path, problem.message + rule)
    # Distinct fabric pools may still name one Director group (GpuPoolConfig.group).
    pools = {p.name: p for c in estate.all_composers() if (p := estate.pool(c.pool)) is not None}
    groups = ((f"{k}.pool", pools[c.pool].director_group) for k, c in entries if c.pool in pools)
    distinct = {pools[n].director_group for n in pools}
    if len(distinct) < len(pools):
        for problem in _duplicates(groups, "Director group"):
            yield ConfigProblem(problem.path, problem.message + rule)
    seen: dict[str, str] = {}
    for k, c in entries:
        served = _served_hosts(estate, c)
        if served is None:
            yield ConfigProblem(
                f"{k}.pools",
                f"composer of {c.target_cluster!r} serves every host (no pools, target the mothership); "
                f"with several composers list its hosts in pools{rule}",
            )
            continue
        for h in sorted(served):
            if h in seen:
                yield ConfigProblem(
                    f"{k}.pools", f"host {h!r} is already served by {seen[h]}{rule}"
                )
            else:
                seen[h] = k


def composer_pool_has_hosts(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A composer pool has at least one host (its tenants' pods would never be served)."""
    for key, c in estate.composer_entries():
        for i, p in enumerate(c.pools):
            if estate.composer_pool_hosts(p):
                continue
            yield ConfigProblem(
                f"{key}.pools[{i}].hosts",
                f"pool {p.name!r} has no host, so the pods of {', '.join(map(repr, p.tenant_names))} "
                "would never get GPUs: list hosts or set hypervisor_cluster",
            )


def composer_host_in_one_pool(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A host serves at most one composer pool (a Node carries one pool label), over every composer:
    two composers never share a host."""
    items = []
    for key, c in estate.composer_entries():
        for i, p in enumerate(c.pools):
            listed = set(p.hosts)
            for h in estate.composer_pool_hosts(p):
                where = f"{key}.pools[{i}].hosts" if h in listed else f"{key}.pools[{i}].hypervisor_cluster"
                items.append((where, h))
    seen: dict[str, str] = {}
    for where, h in items:
        if h in seen:
            yield ConfigProblem(
                where, f"host {h!r} is already in another pool ({seen[h]}); a host serves one pool"
            )
        else:
            seen[h] = where


def composer_pool_size(estate: EstateConfig, c: ComposerConfig) -> int | None:
    """GPUs the composer ``c`` can hand out in all: its fabric pool ``size`` minus the GPUs static
    compositions take from that pool (the composer never touches those); None when the size is
    unknown."""
    fabric_pool = estate.pool(c.pool)
    if fabric_pool is None or fabric_pool.size is None:
        return None
    static = sum(g.planned_count for g in estate.gpu_compositions if g.pool == fabric_pool.name)
    return max(0, fabric_pool.size - static)


def composer_pool_quota_fits(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A composer pool's quota (``quota_gpus``, default the sum of its tenants' ``gpu_quota``) is at most
    the pool's size: the GPUs the composer can hand out (:func:`composer_pool_size`)."""
    for key, c in estate.composer_entries():
        size = composer_pool_size(estate, c)
        if size is None:
            continue
        for i, p in enumerate(c.pools):
            if p.quota_gpus is not None:
                quota, where = p.quota_gpus, f"{key}.pools[{i}].quota_gpus"
            else:
                quota = sum(t.gpu_quota for n in p.tenant_names if (t := estate.tenant(n)) is not None)
                where = f"{key}.pools[{i}]"
            if quota > size:
                yield ConfigProblem(
                    where,
                    f"pool {p.name!r} has a quota of {quota} GPUs but the composer can hand out {size} "
                    f"(fabric pool {c.pool!r}: size minus static compositions); lower the quota "
                    "(quota_gpus or the tenants' gpu_quota)",
                )


def static_host_in_tenant_pool(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """A static composition dedicated to a tenant, on a host the composer serves, is on a host of a
    pool of that tenant: the composer lets pods of the host's pool use spare GPUs of the host, so
    on any other host the tenant's static GPUs would serve another tenant's pods. Without
    ``composer.pools`` the composer does not tell tenants apart (one pool) and this rule is off."""
    for c in estate.all_composers():
        yield from _static_host_in_tenant_pool(estate, c)


def _static_host_in_tenant_pool(estate: EstateConfig, c: ComposerConfig) -> Iterator[ConfigProblem]:
    """:func:`static_host_in_tenant_pool` for the composer ``c``."""
    if not c.pools:
        return
    served = _composer_hosts(estate, c)
    host_pools = {h: p.name for p in reversed(c.pools) for h in estate.composer_pool_hosts(p)}
    tenants_of = {p.name: set(p.tenant_names) for p in c.pools}
    for i, g in enumerate(estate.gpu_compositions):
        if g.tenant is None or (served is not None and g.host not in served):
            continue
        pool = host_pools.get(g.host)
        if pool is None:
            yield ConfigProblem(
                f"gpu_compositions[{i}].host",
                f"host {g.host!r} carries GPUs of tenant {g.tenant!r} but serves no composer pool, so the "
                f"composer would give them to pods of any namespace; add it to the pool of {g.tenant!r}",
            )
        elif g.tenant not in tenants_of[pool]:
            yield ConfigProblem(
                f"gpu_compositions[{i}].host",
                f"host {g.host!r} carries GPUs of tenant {g.tenant!r} but serves composer pool {pool!r} "
                f"of {', '.join(map(repr, sorted(tenants_of[pool])))}; move it to the pool of {g.tenant!r}",
            )


def lab_only_settings(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """``mothership.label_nodes`` and ``hosts[].prep.sysroot`` are lab shortcuts, refused outside
    ``environment: lab``."""
    if estate.environment == "lab":
        return
    if estate.mothership.label_nodes:
        yield ConfigProblem(
            "mothership.label_nodes", f"only allowed in environment lab, not {estate.environment}"
        )
    for i, h in enumerate(estate.hosts):
        if h.prep is not None and h.prep.sysroot is not None:
            yield ConfigProblem(
                f"hosts[{i}].prep.sysroot", f"only allowed in environment lab, not {estate.environment}"
            )


def bmc_endpoints_are_https_outside_lab(estate: EstateConfig) -> Iterator[ConfigProblem]:
    """Outside the lab, BMC endpoints use https (credentials travel in every request)."""
    if estate.environment == "lab":
        return
    for i, h in enumerate(estate.hosts):
        if urlsplit(h.bmc.endpoint).scheme != "https":
            yield ConfigProblem(
                f"hosts[{i}].bmc.endpoint", f"{h.bmc.endpoint} must use https in {estate.environment}"
            )
        if h.dpu is not None and urlsplit(h.dpu.bmc.endpoint).scheme != "https":
            yield ConfigProblem(
                f"hosts[{i}].dpu.bmc.endpoint", f"{h.dpu.bmc.endpoint} must use https in {estate.environment}"
            )


RULES: tuple[Rule, ...] = (
    unique_host_names,
    unique_boot_macs,
    unique_bmc_endpoints,
    unique_dpu_names,
    unique_pool_names,
    unique_tenant_names,
    tenant_namespaces_valid,
    unique_network_names,
    unique_vxlan_ids,
    unique_vlan_ids,
    cidrs_do_not_overlap,
    gateway_inside_cidr,
    unique_cluster_names,
    cluster_hosts_exist,
    host_in_at_most_one_cluster,
    host_role_fits_cluster,
    vm_mode_needs_kubevirt,
    dpu_cluster_hosts_have_dpus,
    dpu_cluster_host_role_needs_dpu,
    dpu_mlxconfig_valid,
    ssh_prep_kernel_settings_supported,
    unique_ssh_prep_targets,
    cluster_templates_declared,
    vgpu_clusters_complete,
    gpu_products_new,
    pool_models_known,
    allowed_models_offered,
    tenant_cluster_hypervisor_exists,
    tenant_cluster_networks_exist,
    tenant_cluster_gpu_request_complete,
    tenant_cluster_gpu_model_allowed,
    tenant_cluster_gpu_mode_matches,
    tenant_cluster_vgpu_type_known,
    composition_references_exist,
    composition_host_single_pool,
    composition_count_consistent,
    composition_model_allowed,
    composition_devices_unique,
    pool_capacity,
    tenant_gpu_quota,
    passthrough_capacity,
    gpu_sharing_valid,
    gpu_sharing_hosts_exclusive,
    gpu_sharing_host_in_tenant_pool,
    gpu_sharing_one_mig_strategy_per_cluster,
    gpu_sharing_hosts_run_pods,
    composers_apart,
    composer_references_exist,
    composer_mode_fits_cluster,
    adopted_cluster_kubeconfig,
    composer_pool_references_exist,
    composer_pool_has_hosts,
    composer_host_in_one_pool,
    composer_pool_quota_fits,
    static_host_in_tenant_pool,
    lab_only_settings,
    bmc_endpoints_are_https_outside_lab,
)
"""Every cross-field rule, in the order they run."""


def check_rules(estate: EstateConfig, rules: Iterable[Rule] = RULES) -> list[ConfigProblem]:
    """Run ``rules`` over ``estate`` and return every problem (empty list: the config is consistent)."""
    return [problem for rule in rules for problem in rule(estate)]
