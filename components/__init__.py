"""Pulumi ComponentResources that model the estate (hosts, DPUs, networks, clusters, GPUs).

One module per component; every component has the type token ``composable:infra:<Kind>``,
typed args (a frozen dataclass ``<Kind>Args``), ``parent=self`` on its children, child names
derived from its own name, its contract properties (docs/architecture.md) as component
properties (:func:`components._base.contract_props`), and the outputs its class annotates, set and
registered by :func:`components._base.publish_outputs`. Pure manifest builders live in
:mod:`components.manifests`; :func:`stack_config.summary.render_summary` turns the stack output
``estate`` into a readable report.
"""

from components.composer import Composer, ComposerArgs
from components.dpu import Dpu, DpuArgs
from components.dpu_cluster import DpuCluster, DpuClusterArgs, DpuMember
from components.estate import Estate, EstateArgs
from components.gpu_composition import GpuComposition, GpuCompositionArgs
from components.gpu_sharing import GpuSharing, GpuSharingArgs
from components.host import Host, HostArgs
from components.hypervisor_cluster import HypervisorCluster, HypervisorClusterArgs
from components.network import TenantNetwork, TenantNetworkArgs
from components.tenant import Tenant, TenantArgs
from components.tenant_cluster import TenantCluster, TenantClusterArgs

__all__ = [
    "Composer",
    "ComposerArgs",
    "Dpu",
    "DpuArgs",
    "DpuCluster",
    "DpuClusterArgs",
    "DpuMember",
    "Estate",
    "EstateArgs",
    "GpuComposition",
    "GpuCompositionArgs",
    "GpuSharing",
    "GpuSharingArgs",
    "Host",
    "HostArgs",
    "HypervisorCluster",
    "HypervisorClusterArgs",
    "Tenant",
    "TenantArgs",
    "TenantCluster",
    "TenantClusterArgs",
    "TenantNetwork",
    "TenantNetworkArgs",
]
