"""The estate as stacks by failure domain and owner, computed from its one definition (pure).

One inventory folder (:mod:`stack_config.inventory`) is split into stacks, each named by its role:

- ``platform``: the mothership's infrastructure namespace, the ClusterTemplates and ServiceTemplates
  with their HelmRepositories, and the composer (its Director account and pools) when its target
  cluster is the mothership;
- ``hosts:<group>``: one per inventory file holding ``hosts`` (``hosts/rack-a.yaml`` is group
  ``rack-a``, a top-level ``hosts.yaml`` group ``hosts``): its BareMetalHosts with their DPUs'
  posture and host preparation, the static GPU compositions on its hosts, the hypervisor clusters
  and the DPU cluster whose hosts are all in the group, and the composer when its target cluster is
  one of those hypervisor clusters;
- ``tenant:<name>``: one per tenant: its namespaces, networks and child clusters.

A stack reads the outputs of the stacks it depends on (through a ``pulumi.StackReference``):
every host group reads ``platform``; a tenant reads ``platform`` and every host group holding a
cluster where its work runs (:meth:`EstateConfig.tenant_workload_clusters`) or a host its GPU
sharing names. The role :data:`MONOLITH` is the whole estate in one stack, as the dev stack
(``Pulumi.dev.yaml``, no role set) deploys it: the small case of the same definition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from typing import Any

from stack_config.errors import ConfigProblem, EstateConfigError
from stack_config.inventory import InventoryFile
from stack_config.models import MOTHERSHIP, EstateConfig, TenantConfig

#: The role of a stack that holds the whole estate (the dev stack's).
MONOLITH = "estate"
#: The role of the platform stack.
PLATFORM = "platform"
#: Prefixes of the host-group and tenant roles (``hosts:rack-a``, ``tenant:alpha``).
HOSTS_PREFIX = "hosts:"
TENANT_PREFIX = "tenant:"


@dataclass(frozen=True)
class StackSlice:
    """What one stack of the split declares.

    Attributes:
        role: ``platform``, ``hosts:<group>`` or ``tenant:<name>``.
        hosts: host names (host groups only), in inventory order.
        hypervisor_clusters: hypervisor cluster names, in inventory order.
        dpu_cluster: True when the DPU cluster is this stack's.
        compositions: indexes into ``gpu_compositions`` of the static compositions it declares.
        composers: target clusters of the composers (Director account, pools, chart) this stack
            declares, in config order (:meth:`stack_config.models.EstateConfig.all_composers`).
        tenants: tenant names (tenant stacks only: its own).
        reads: the roles whose outputs it reads, sorted (the edges of the dependency graph).
        deployment_reads: hypervisor clusters of other stacks that this one reaches through their
            kubeconfig Secret: it reads their ClusterDeployment's ID from the owning stack's output
            ``cluster_deployments`` (an adopted cluster, with its own kubeconfig, needs none).
    """

    role: str
    hosts: tuple[str, ...] = ()
    hypervisor_clusters: tuple[str, ...] = ()
    dpu_cluster: bool = False
    compositions: tuple[int, ...] = ()
    composers: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    deployment_reads: tuple[str, ...] = ()

    @property
    def composer(self) -> bool:
        """True when this stack declares a composer."""
        return bool(self.composers)


@dataclass(frozen=True)
class Fleet:
    """The stacks of one estate and the dependency graph between them.

    Attributes:
        slices: role -> its slice, platform first, then host groups, then tenants (inventory order).
        file_roles: inventory file name (as :class:`InventoryFile` names it) -> the roles owning a
            part of it, sorted.
    """

    slices: Mapping[str, StackSlice]
    file_roles: Mapping[str, tuple[str, ...]]

    def dependents(self, roles: Iterable[str]) -> set[str]:
        """``roles`` and every role that reads one of them, transitively."""
        found = set(roles)
        changed = True
        while changed:
            changed = False
            for s in self.slices.values():
                if s.role not in found and found.intersection(s.reads):
                    found.add(s.role)
                    changed = True
        return found

    def read_by(self, roles: Iterable[str]) -> set[str]:
        """``roles`` and every role one of them reads, transitively (the stacks that must exist for
        their StackReferences to resolve)."""
        found: set[str] = set()
        todo = list(roles)
        while todo:
            role = todo.pop()
            if role not in found:
                found.add(role)
                todo += self.slices[role].reads
        return found

    def order(self, roles: Iterable[str]) -> list[str]:
        """``roles`` in dependency order (a stack after those it reads), ties in :attr:`slices` order."""
        wanted = set(roles)
        rank = {r: i for i, r in enumerate(self.slices)}
        ts: TopologicalSorter[str] = TopologicalSorter()
        for r in sorted(wanted, key=rank.__getitem__):
            ts.add(r, *(d for d in self.slices[r].reads if d in wanted))
        ts.prepare()
        out: list[str] = []
        while ts.is_active():
            ready = sorted(ts.get_ready(), key=rank.__getitem__)
            out += ready
            ts.done(*ready)
        return out

    def roles_of_files(self, names: Iterable[str]) -> set[str]:
        """The roles owning a part of the inventory files ``names`` (unknown names own none)."""
        return {r for n in names for r in self.file_roles.get(n, ())}


def host_group(file_name: str, folder: str) -> str:
    """The group of the host file ``file_name`` in inventory ``folder``: its path inside the folder
    without ``.yaml``, a leading ``hosts/`` dropped and ``/`` written ``-`` (``hosts/rack-a.yaml`` ->
    ``rack-a``, ``hosts.yaml`` -> ``hosts``)."""
    prefix = folder.rstrip("/") + "/"
    inner = file_name.removeprefix(prefix).removesuffix(".yaml")
    if inner.startswith("hosts/"):
        inner = inner[len("hosts/"):]
    return inner.replace("/", "-")


def _items(data: Any, key: str) -> list[Any]:
    """The list under ``key`` of a file's mapping (empty when absent or not a list)."""
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, list) else []


def _names(data: Any, key: str) -> list[str]:
    """The ``name`` of each item of the list under ``key`` that has one (a string)."""
    names = (item.get("name") if isinstance(item, Mapping) else None for item in _items(data, key))
    return [n for n in names if isinstance(n, str)]


def split_estate(files: Sequence[InventoryFile], estate: EstateConfig, *, folder: str) -> Fleet:
    """The stacks of the estate read from ``files`` (validated as ``estate``).

    Args:
        files: the inventory folder's files (:func:`stack_config.inventory.read_inventory`).
        estate: the same files joined and validated (:func:`stack_config.inventory.load_inventory`).
        folder: the folder as the files' names start (``environments/dev``).

    Raises:
        EstateConfigError: a hypervisor cluster, the DPU cluster or a composer pool's hosts span host
            groups (each must be one group's, so one stack declares it), or a cycle between stacks;
            each problem names the key and the groups.
    """
    group_of: dict[str, str] = {}
    host_file: dict[str, str] = {}
    groups: list[str] = []
    for f in files:
        names = _names(f.data, "hosts")
        if names:
            g = host_group(f.name, folder)
            groups.append(g)
            for n in names:
                group_of[n] = HOSTS_PREFIX + g
                host_file[n] = f.name
    problems: list[ConfigProblem] = []

    def owner(hosts: Sequence[str], what: str) -> str:
        found = sorted({group_of[h] for h in hosts if h in group_of})
        if len(found) > 1:
            problems.append(ConfigProblem(what, (
                f"its hosts are in host groups {', '.join(found)}; a stack of the split declares it only "
                "when all its hosts are in one group's file")))
        return found[0] if found else PLATFORM

    cluster_role = {c.name: owner(c.hosts, f"hypervisor_clusters[{i}]")
                    for i, c in enumerate(estate.hypervisor_clusters)}
    cluster_role[MOTHERSHIP] = PLATFORM
    dpu_role = owner(estate.dpu_cluster_hosts(), "dpu_cluster") if estate.dpu_cluster else None
    composer_roles = {c.target_cluster: cluster_role.get(c.target_cluster, PLATFORM)
                      for c in estate.all_composers()}
    for key, c in estate.composer_entries():
        composer_role = composer_roles[c.target_cluster]
        for i, p in enumerate(c.pools):
            served = {group_of.get(h, PLATFORM) for h in estate.composer_pool_hosts(p)} - {composer_role}
            if served - {PLATFORM}:
                problems.append(ConfigProblem(f"{key}.pools[{i}]", (
                    f"serves hosts of {', '.join(sorted(served))}, "
                    f"not of the composer's stack {composer_role}")))
    comp_role = [group_of.get(g.host, PLATFORM) for g in estate.gpu_compositions]

    slices: dict[str, StackSlice] = {}
    for role in [PLATFORM, *(HOSTS_PREFIX + g for g in groups)]:
        slices[role] = StackSlice(
            role=role,
            hosts=tuple(h.name for h in estate.hosts if group_of.get(h.name) == role),
            hypervisor_clusters=tuple(
                c.name for c in estate.hypervisor_clusters if cluster_role[c.name] == role
            ),
            dpu_cluster=dpu_role == role,
            compositions=tuple(i for i, r in enumerate(comp_role) if r == role),
            composers=tuple(t for t, r in composer_roles.items() if r == role),
            reads=() if role == PLATFORM else (PLATFORM,),
        )
    for t in estate.tenants:
        reads = {PLATFORM, *(cluster_role.get(c, PLATFORM) for c in estate.tenant_workload_clusters(t))}
        if t.gpu_sharing is not None:
            reads.update(group_of.get(h, PLATFORM) for h in t.gpu_sharing.hosts)
        role = TENANT_PREFIX + t.name
        slices[role] = StackSlice(
            role=role, tenants=(t.name,), reads=tuple(sorted(reads)),
            deployment_reads=_through_secret(estate, t),
        )
    try:
        TopologicalSorter({s.role: s.reads for s in slices.values()}).prepare()
    except CycleError as exc:  # not reachable with the rules above; kept as the graph's invariant
        problems.append(ConfigProblem("", f"the stacks read each other in a cycle: {exc.args[1]}"))
    if problems:
        raise EstateConfigError(problems, key=f"composable-gpu:inventory {folder}")
    roles = _file_roles(files, group_of, cluster_role, dpu_role, composer_roles)
    return Fleet(slices=slices, file_roles=roles)


def _through_secret(estate: EstateConfig, tenant: TenantConfig) -> tuple[str, ...]:
    """The clusters where ``tenant``'s work runs that the program reaches through their kubeconfig
    Secret: neither the mothership, nor adopted (``kubeconfig``), nor the composer's target with the
    composer's own kubeconfig (:func:`components.cluster_access.cluster_targets` takes those from
    files)."""
    own = {c.target_cluster for c in estate.all_composers() if c.kubeconfig}
    out = []
    for c in estate.tenant_workload_clusters(tenant):
        hv = estate.hypervisor_cluster(c)
        if c != MOTHERSHIP and c not in own and hv is not None and hv.kubeconfig is None:
            out.append(c)
    return tuple(out)


def _file_roles(
    files: Sequence[InventoryFile],
    group_of: Mapping[str, str],
    cluster_role: Mapping[str, str],
    dpu_role: str | None,
    composer_roles: Mapping[str, str],
) -> dict[str, tuple[str, ...]]:
    """Inventory file name -> the roles owning a part of it: a host's group, a tenant's stack, a
    hypervisor cluster's, a composition's host's group, the DPU cluster's and the composer's stack;
    every other top-level key (environment, mothership, fabric, catalog, gpu_products) is the
    platform's."""
    owned_keys = {"hosts", "tenants", "hypervisor_clusters", "gpu_compositions", "dpu_cluster", "composer",
                  "composers"}
    out: dict[str, tuple[str, ...]] = {}
    for f in files:
        roles: set[str] = set()
        data = f.data if isinstance(f.data, Mapping) else {}
        roles.update(group_of[n] for n in _names(data, "hosts") if n in group_of)
        roles.update(TENANT_PREFIX + n for n in _names(data, "tenants"))
        roles.update(cluster_role[n] for n in _names(data, "hypervisor_clusters") if n in cluster_role)
        for g in _items(data, "gpu_compositions"):
            host = g.get("host") if isinstance(g, Mapping) else None
            roles.add(group_of.get(host, PLATFORM) if isinstance(host, str) else PLATFORM)
        if "dpu_cluster" in data and dpu_role is not None:
            roles.add(dpu_role)
        one = [data["composer"]] if isinstance(data.get("composer"), Mapping) else []
        for entry in [*one, *_items(data, "composers")]:
            target = entry.get("target_cluster") if isinstance(entry, Mapping) else None
            if isinstance(target, str) and target in composer_roles:
                roles.add(composer_roles[target])
        if any(k not in owned_keys for k in data):
            roles.add(PLATFORM)
        out[f.name] = tuple(sorted(roles))
    return out


def stack_name(base: str, role: str) -> str:
    """The Pulumi stack of ``role`` in the fleet ``base`` (``dev`` + ``hosts:rack-a`` ->
    ``dev-hosts-rack-a``); :data:`MONOLITH` is ``base`` itself. Stack names take letters, digits,
    ``-``, ``_`` and ``.``; roles are built from DNS labels and ``:``, so this is one-to-one."""
    return base if role == MONOLITH else f"{base}-{role.replace(':', '-')}"


def fleet_base(stack: str, role: str) -> str:
    """The fleet name of stack ``stack`` holding ``role`` (``dev-tenant-alpha`` -> ``dev``), the
    inverse of :func:`stack_name`.

    Raises:
        EstateConfigError: the stack is not named ``<fleet>-<role>`` (its references would name no
            stack of its fleet).
    """
    suffix = "-" + role.replace(":", "-")
    if role == MONOLITH:
        return stack
    if not stack.endswith(suffix) or len(stack) == len(suffix):
        raise EstateConfigError([ConfigProblem(
            "composable-gpu:role", f"stack {stack!r} holds {role!r}: name it <fleet>{suffix}, the name its "
            "fleet's stacks reference it by")])
    return stack[: -len(suffix)]


def parse_role(value: Any, fleet: Fleet | None = None) -> str:
    """A stack's ``composable-gpu:role`` value checked: None is :data:`MONOLITH`.

    Raises:
        EstateConfigError: not a string of the forms ``platform``, ``hosts:<group>``,
            ``tenant:<name>`` or ``estate``, or (with ``fleet``) a role that is not one of its stacks;
            the message lists the fleet's roles.
    """
    role = MONOLITH if value is None else value
    known = [MONOLITH, *(fleet.slices if fleet else ())]
    ok = isinstance(role, str) and (
        role in (MONOLITH, PLATFORM) or role.startswith((HOSTS_PREFIX, TENANT_PREFIX))
    ) and (fleet is None or role in known)
    if not ok:
        raise EstateConfigError([ConfigProblem(
            "composable-gpu:role", f"{role!r} is not a stack of this estate; one of: {', '.join(known)}")])
    return str(role)
