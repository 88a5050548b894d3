"""``composable:infra:TenantCluster``: a tenant child cluster from the ``kubevirt-hosted-cp`` template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, contract_props, publish_outputs, token
from components.manifests import K0RDENT_API, common_labels, tenant_cluster_spec
from stack_config.gpus import BUILTIN_GPU_PRODUCTS, GpuProduct
from stack_config.models import CatalogConfig, TenantClusterConfig, TenantNetworkConfig


@dataclass(frozen=True)
class TenantClusterArgs:
    """Inputs of :class:`TenantCluster`.

    Attributes:
        tenant: tenant name.
        namespace: the tenant's namespace (the ClusterDeployment lives there).
        config: the cluster's config.
        networks: the tenant networks its workers attach to.
        catalog: ServiceTemplate names/versions.
        provider: mothership provider.
        depends_on: resources to wait for (tenant Namespace, networks, the hypervisor cluster).
        gpu_catalogue: GPU products by GFD name (``EstateConfig.gpu_catalogue()``).
        hypervisor_cluster_in_stack: False when another stack of the split declares its
            hypervisor cluster.
    """

    tenant: str
    namespace: str
    config: TenantClusterConfig
    networks: Sequence[TenantNetworkConfig]
    catalog: CatalogConfig
    provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource | None] = ()
    gpu_catalogue: Mapping[str, GpuProduct] = field(default_factory=lambda: dict(BUILTIN_GPU_PRODUCTS))
    hypervisor_cluster_in_stack: bool = True


class TenantCluster(pulumi.ComponentResource):
    """A tenant child cluster: k0smotron hosted control plane, KubeVirt VM workers on the tenant's
    networks, GPUs by passthrough or vGPU.

    Child ``<name>``: ClusterDeployment from the ``kubevirt-hosted-cp`` template in the tenant's
    namespace (see :func:`components.manifests.tenant_cluster_spec` for the values).

    ``hosted_control_plane`` and ``control_plane`` come from the ClusterTemplate's declaration
    (``catalog.cluster_templates``: the CAPI control-plane kind its chart renders), not its name.

    Contract properties: ``tenant``, ``name``, ``template``, ``hosted_control_plane``,
    ``control_plane`` (CAPI control-plane kind of the template), ``networks``
    (``tenant/network``), ``network_attachments`` (the Multus network names its VMs' interfaces
    reference, ``<namespace>/<nad>``, read from the ClusterDeployment values), ``hypervisor_cluster``,
    ``hypervisor_cluster_in_stack`` (False when another stack of the split declares it),
    ``gpu_mode``, ``gpu_model``, ``gpu_count`` (GPUs in all), ``cni``.
    """

    tenant: pulumi.Output[str]
    name: pulumi.Output[str]
    namespace: pulumi.Output[str]
    hypervisor_cluster: pulumi.Output[str]
    hypervisor_cluster_in_stack: pulumi.Output[bool]
    workers: pulumi.Output[int]
    networks: pulumi.Output[list[str]]
    network_attachments: pulumi.Output[list[str]]
    gpu_mode: pulumi.Output[str]
    gpu_model: pulumi.Output[str | None]
    gpu_count: pulumi.Output[int]
    cni: pulumi.Output[str]

    def __init__(
        self, name: str, args: TenantClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        c = args.config
        template = args.catalog.cluster_template(c.template)
        networks = [f"{args.tenant}/{n.name}" for n in args.networks]
        spec = tenant_cluster_spec(
            c,
            tenant=args.tenant,
            namespace=args.namespace,
            networks=args.networks,
            catalog=args.catalog,
            catalogue=args.gpu_catalogue,
        )
        vm_networks = spec["config"]["worker"]["networks"]
        attachments = [n["multus"]["networkName"] for n in vm_networks if "multus" in n]
        own = {
            "tenant": args.tenant,
            "hosted_control_plane": template.hosted_control_plane if template else False,
            "control_plane": template.control_plane if template else None,
            "networks": networks,
            "network_attachments": attachments,
            "gpu_count": c.gpu_total,
            "hypervisor_cluster_in_stack": args.hypervisor_cluster_in_stack,
        }
        props = contract_props("TenantCluster", own, config=c)
        super().__init__(token("TenantCluster"), name, props, opts)
        k8s.apiextensions.CustomResource(
            name,
            api_version=K0RDENT_API,
            kind="ClusterDeployment",
            metadata={
                "name": c.name,
                "namespace": args.namespace,
                "labels": common_labels(
                    tenant=args.tenant, hypervisor_cluster=c.hypervisor_cluster, object="cluster-deployment"
                ),
            },
            spec=spec,
            opts=child_opts(self, provider=args.provider, depends_on=args.depends_on),
        )
        publish_outputs(self, {**props, "namespace": args.namespace, "workers": c.workers})
