"""The component contract: the properties each ``composable:infra:*`` component passes to Pulumi.

Every component passes its domain facts as component properties (the ``props`` of
``pulumi.ComponentResource.__init__``) so that the policy pack (``policies/``) can check them during
``pulumi preview`` without reading Kubernetes objects, and the preview report (``ops/preview_markdown``)
can summarise them. One :class:`typing.TypedDict` per type token below declares the property names
and the types their values resolve to (during preview a value may be unknown; rules then treat it as
"cannot prove compliance"). Keys marked ``NotRequired`` are present only when the stack config asks for
them (the ``prep`` section: SSH preparation of hosts and DPUs).

Used by: :func:`components._base.contract_props` (each component checks its props' keys and its
known values' types against :data:`CONTRACT`), the rules in ``policies/rules/`` (the token constants),
``ops/preview_markdown.py`` (:data:`TOKEN_PREFIX`), and ``tests/components/test_estate.py`` (the
table in docs/architecture.md "Component contract" and the props of every registered component are
checked against it).
"""

from typing import Any, Final, Literal, NotRequired, TypedDict

#: Type-token prefix of every component: ``composable:infra:<Kind>``.
TOKEN_PREFIX: Final = "composable:infra:"

TENANT: Final = TOKEN_PREFIX + "Tenant"
HOST: Final = TOKEN_PREFIX + "Host"
DPU: Final = TOKEN_PREFIX + "Dpu"
TENANT_NETWORK: Final = TOKEN_PREFIX + "TenantNetwork"
HYPERVISOR_CLUSTER: Final = TOKEN_PREFIX + "HypervisorCluster"
DPU_CLUSTER: Final = TOKEN_PREFIX + "DpuCluster"
TENANT_CLUSTER: Final = TOKEN_PREFIX + "TenantCluster"
GPU_COMPOSITION: Final = TOKEN_PREFIX + "GpuComposition"
GPU_SHARING: Final = TOKEN_PREFIX + "GpuSharing"
COMPOSER: Final = TOKEN_PREFIX + "Composer"
ESTATE: Final = TOKEN_PREFIX + "Estate"

HostRole = Literal["hypervisor", "baremetal-worker", "dpu-cluster-host"]
HostGpuMode = Literal["passthrough", "vgpu", "container", "none"]


class TenantProps(TypedDict):
    """``composable:infra:Tenant``: ``gpu_quota`` in GPUs; ``allowed_models`` are GFD product names;
    ``quota_clusters`` the clusters (hypervisor cluster names, or ``mothership``) whose API server
    holds its ``gpu_quota`` ResourceQuota."""

    name: str
    gpu_quota: int
    allowed_models: list[str]
    quota_clusters: list[str]


class HostProps(TypedDict):
    """``composable:infra:Host``: ``cluster`` and ``dpu`` are names or None; ``allow_reboot`` only with
    SSH preparation (the program may reboot the host to activate kernel args and the blacklist)."""

    name: str
    role: HostRole
    bmc_address: str
    bmc_verify_tls: bool
    kernel_args: list[str]
    blacklisted_modules: list[str]
    cluster: str | None
    tenant_workloads: bool
    dpu: str | None
    gpu_mode: HostGpuMode
    allow_reboot: NotRequired[bool]


class DpuProps(TypedDict):
    """``composable:infra:Dpu``: ``mlxconfig`` maps parameter names to values (see
    :mod:`domain.mlxconfig`); ``allow_firmware_reset`` only with SSH preparation (the program may run
    ``mlxfwreset`` to activate mlxconfig values)."""

    name: str
    host: str
    bmc_address: str
    bmc_verify_tls: bool
    mode: str
    host_privilege: str
    host_rshim: str
    mlxconfig: dict[str, Any]
    allow_firmware_reset: NotRequired[bool]


class TenantNetworkProps(TypedDict):
    """``composable:infra:TenantNetwork``: ``nad`` is ``<namespace>/<network>``, the
    NetworkAttachmentDefinition it creates, in each cluster of ``clusters`` (hypervisor cluster
    names, or ``mothership``)."""

    tenant: str
    name: str
    cidr: str
    vxlan_id: int
    vlan_id: int
    nad: str
    clusters: list[str]


class HypervisorClusterProps(TypedDict):
    """``composable:infra:HypervisorCluster``: ``tenant_clusters`` are the TenantClusters
    (``tenant/name``) of the whole estate whose VM workers run on it, whichever stack declares them,
    so a stack holding the cluster but not those tenants still knows its hosts serve tenants."""

    name: str
    hosts: list[str]
    gpu_workload_mode: Literal["vm-passthrough", "vm-vgpu", "container"]
    kubevirt: bool
    tenant_clusters: list[str]


class DpuClusterProps(TypedDict):
    """``composable:infra:DpuCluster``."""

    name: str
    hosts: list[str]
    template: str


class TenantClusterProps(TypedDict):
    """``composable:infra:TenantCluster``: ``hosted_control_plane`` follows from the template's declared
    control-plane kind (``control_plane``, e.g. ``K0smotronControlPlane``); ``networks`` are
    ``tenant/network``; ``network_attachments`` the ``<namespace>/<nad>`` its VMs reference;
    ``hypervisor_cluster_in_stack`` is False when another stack of the split declares its
    hypervisor cluster (that stack's policy run judges the hosts, through ``tenant_clusters``)."""

    tenant: str
    name: str
    template: str
    hosted_control_plane: bool
    control_plane: str
    networks: list[str]
    network_attachments: list[str]
    hypervisor_cluster: str
    hypervisor_cluster_in_stack: bool
    gpu_mode: Literal["passthrough", "vgpu", "none"]
    gpu_model: str | None
    gpu_count: int
    cni: str


class GpuCompositionProps(TypedDict):
    """``composable:infra:GpuComposition``: ``device_names`` are the planned Director device names
    (empty = any); ``tenant`` may be None."""

    host: str
    tenant: str | None
    count: int
    model: str
    device_names: list[str]
    pool: str


class GpuSharingProps(TypedDict):
    """``composable:infra:GpuSharing``: ``tenants`` are those whose pods may land on these GPUs."""

    name: str
    hosts: list[str]
    strategy: Literal["time-slicing", "mps", "mig"]
    replicas: int | None
    mig_profile: str | None
    tenants: list[str]


class ComposerProps(TypedDict):
    """``composable:infra:Composer``: ``excluded_devices`` are GPUs composed statically by the program;
    ``rbac_rules`` are PolicyRule dicts; ``host_pools`` maps host -> composer pool; ``pool_tenants`` maps
    composer pool -> tenants."""

    pool: str
    idle_timeout_seconds: int
    target_cluster: str
    cluster_admin: bool
    excluded_devices: list[str]
    rbac_rules: list[dict[str, Any]]
    host_pools: dict[str, str]
    pool_tenants: dict[str, list[str]]


class EstateProps(TypedDict):
    """``composable:infra:Estate``."""

    stack: str
    environment: Literal["lab", "staging", "production"]


#: Type token -> the TypedDict of its properties.
CONTRACT: Final[dict[str, type]] = {
    TENANT: TenantProps,
    HOST: HostProps,
    DPU: DpuProps,
    TENANT_NETWORK: TenantNetworkProps,
    HYPERVISOR_CLUSTER: HypervisorClusterProps,
    DPU_CLUSTER: DpuClusterProps,
    TENANT_CLUSTER: TenantClusterProps,
    GPU_COMPOSITION: GpuCompositionProps,
    GPU_SHARING: GpuSharingProps,
    COMPOSER: ComposerProps,
    ESTATE: EstateProps,
}


def required_keys(token: str) -> frozenset[str]:
    """Property names every ``token`` component passes. Raises KeyError for an unknown token."""
    return frozenset(CONTRACT[token].__required_keys__)  # type: ignore[attr-defined]


def optional_keys(token: str) -> frozenset[str]:
    """Property names a ``token`` component passes only when configured (``NotRequired``)."""
    return frozenset(CONTRACT[token].__optional_keys__)  # type: ignore[attr-defined]


def missing_and_unexpected(token: str, keys: set[str] | frozenset[str]) -> tuple[set[str], set[str]]:
    """``(required keys absent from keys, keys the contract does not declare)`` for ``token``."""
    return set(required_keys(token) - keys), set(keys - required_keys(token) - optional_keys(token))
