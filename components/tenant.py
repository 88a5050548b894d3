"""``composable:infra:Tenant``: a tenant's namespace, quota, networks, clusters and GPU sharing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, contract_props, output_row, output_rows, publish_outputs, token
from components.gpu_sharing import GpuSharing, GpuSharingArgs
from components.manifests import common_labels
from components.network import TenantNetwork, TenantNetworkArgs
from components.service_template import TemplateConfig, k0rdent_templates
from components.tenant_cluster import TenantCluster, TenantClusterArgs
from domain.labels import POOL_LABEL
from stack_config.gpus import BUILTIN_GPU_PRODUCTS, GpuProduct
from stack_config.models import CatalogConfig, TenantConfig

#: Namespace label the composer reads to put a namespace's pods into a pool (domain.labels).
COMPOSER_POOL_LABEL = POOL_LABEL


def sharing_name(tenant: str) -> str:
    """Name of a tenant's GPU sharing config: ``<tenant>-gpu-sharing``."""
    return f"{tenant}-gpu-sharing"


#: Fields of the tenant's output rows: each is the output attribute of the same name.
_NETWORK_ROW = ("name", "cidr", "vxlan_id", "vlan_id")
_CLUSTER_ROW = (
    "name", "hypervisor_cluster", "workers", "networks", "gpu_mode", "gpu_model", "gpu_count", "cni"
)
_GPU_SHARING_ROW = ("name", "strategy", "hosts", "replicas", "mig_profile")


@dataclass(frozen=True)
class TenantArgs:
    """Inputs of :class:`Tenant`.

    Attributes:
        config: the tenant's config.
        provider: mothership provider.
        catalog: ServiceTemplate names/versions (for its clusters).
        hypervisor_clusters: hypervisor-cluster components by name (its clusters depend on them).
        composer_pool: the composer pool the tenant's pods belong to (``composer.pools``), or None;
            the namespace is labelled with it (for people and tools; the composer reads the
            membership from its own configuration).
        gpu_catalogue: GPU products by GFD name (``EstateConfig.gpu_catalogue()``).
        infra_namespace: the infrastructure namespace (its networks' VXLAN segment records go there);
            default: the tenant's namespace.
    """

    config: TenantConfig
    provider: k8s.Provider
    catalog: CatalogConfig
    hypervisor_clusters: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    composer_pool: str | None = None
    infra_namespace: str | None = None
    gpu_catalogue: Mapping[str, GpuProduct] = field(default_factory=lambda: dict(BUILTIN_GPU_PRODUCTS))


class Tenant(pulumi.ComponentResource):
    """A tenant.

    Children:

    - ``<name>-namespace``: Namespace ``tenant-<name>`` (labelled with the tenant, and with
      ``composer.liqid.io/pool=<pool>`` when it is in a composer pool).
    - ``<name>-gpu-quota``: ResourceQuota ``requests.nvidia.com/gpu: <gpu_quota>``.
    - ``<name>-<network>``: a :class:`~components.network.TenantNetwork` per network.
    - ``<name>-<cluster>``: a :class:`~components.tenant_cluster.TenantCluster` per child cluster.
    - ``<name>-gpu-operator`` / ``<name>-cilium``: ServiceTemplates in its namespace, when its
      clusters use GPUs / Cilium (k0rdent resolves templates in the ClusterDeployment's namespace;
      the KubeVirt Credential is platform-provided).
    - ``<name>-template-<template>``: the ClusterTemplates its clusters use (declared in
      ``catalog.cluster_templates``: pinned chart, CAPI providers, control-plane kind).
    - ``<name>-gpu-sharing``: a :class:`~components.gpu_sharing.GpuSharing` when configured.

    Contract properties: ``name``, ``gpu_quota``, ``allowed_models``.
    """

    name: pulumi.Output[str]
    namespace: pulumi.Output[str]
    gpu_quota: pulumi.Output[int]
    allowed_models: pulumi.Output[list[str]]
    networks: pulumi.Output[list[dict]]
    clusters: pulumi.Output[list[dict]]
    gpu_sharing: pulumi.Output[dict | None]

    def __init__(self, name: str, args: TenantArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.config
        props = contract_props("Tenant", {"name": name}, config=c)
        super().__init__(token("Tenant"), name, props, opts)
        ns_name = c.namespace_name
        ns_labels = common_labels(tenant=name)
        if args.composer_pool is not None:
            ns_labels[COMPOSER_POOL_LABEL] = args.composer_pool
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": ns_name, "labels": ns_labels},
            opts=child_opts(self, provider=args.provider),
        )
        k8s.core.v1.ResourceQuota(
            f"{name}-gpu-quota",
            metadata={"name": "gpu-quota", "namespace": ns_name, "labels": common_labels(tenant=name)},
            spec={"hard": {"requests.nvidia.com/gpu": str(c.gpu_quota)}},
            opts=child_opts(self, provider=args.provider, depends_on=[namespace]),
        )
        networks = [
            TenantNetwork(
                f"{name}-{n.name}",
                TenantNetworkArgs(
                    tenant=name,
                    namespace=ns_name,
                    config=n,
                    provider=args.provider,
                    namespace_resource=namespace,
                    segment_namespace=args.infra_namespace,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for n in c.networks
        ]
        wanted: list[tuple[str, TemplateConfig]] = []
        if any(cl.gpu_mode != "none" for cl in c.clusters):
            wanted.append((f"{name}-gpu-operator", args.catalog.gpu_operator))
        if any(cl.cni == "cilium" for cl in c.clusters):
            wanted.append((f"{name}-cilium", args.catalog.cilium))
        for t_name in sorted({cl.template for cl in c.clusters}):
            declared = args.catalog.cluster_template(t_name)
            if declared is None:
                continue  # reported by stack_config.rules.cluster_templates_declared
            wanted.append((f"{name}-template-{t_name}", declared))
        templates = k0rdent_templates(
            wanted, catalog=args.catalog, prefix=name, namespace=ns_name, provider=args.provider,
            parent=self, depends_on=[namespace],
        )
        by_name = {n.name: n for n in c.networks}
        clusters = []
        for cl in c.clusters:
            attached = [by_name[n] for n in (cl.networks if cl.networks is not None else list(by_name))]
            clusters.append(
                TenantCluster(
                    f"{name}-{cl.name}",
                    TenantClusterArgs(
                        tenant=name,
                        namespace=ns_name,
                        config=cl,
                        networks=attached,
                        catalog=args.catalog,
                        gpu_catalogue=args.gpu_catalogue,
                        provider=args.provider,
                        depends_on=[
                            namespace,
                            *networks,
                            *templates,
                            args.hypervisor_clusters.get(cl.hypervisor_cluster),
                        ],
                    ),
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
        sharing = None
        if c.gpu_sharing is not None:
            sharing = GpuSharing(
                sharing_name(name),
                GpuSharingArgs(
                    config=c.gpu_sharing,
                    tenants=[name],
                    namespace=ns_name,
                    provider=args.provider,
                    depends_on=[namespace],
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )

        publish_outputs(
            self,
            {
                **props,
                "namespace": ns_name,
                "networks": output_rows(networks, _NETWORK_ROW),
                "clusters": output_rows(clusters, _CLUSTER_ROW),
                "gpu_sharing": None if sharing is None else output_row(sharing, _GPU_SHARING_ROW),
            },
        )
