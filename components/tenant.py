"""``composable:infra:Tenant``: a tenant's namespace, quota, networks, clusters and GPU sharing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, contract_props, output_row, output_rows, publish_outputs, token
from components.cluster_access import ClusterTarget, TenantTarget, distinct_targets
from components.gpu_sharing import GpuSharing, GpuSharingArgs
from components.manifests import common_labels
from components.network import TenantNetwork, TenantNetworkArgs
from components.service_template import TemplateConfig, k0rdent_templates
from components.tenant_cluster import TenantCluster, TenantClusterArgs
from domain.labels import POOL_LABEL
from domain.placement import OBJECT_LABEL
from stack_config.gpus import BUILTIN_GPU_PRODUCTS, GpuProduct
from stack_config.models import MOTHERSHIP, CatalogConfig, TenantConfig

#: Namespace label the composer reads to put a namespace's pods into a pool (domain.labels).
COMPOSER_POOL_LABEL = POOL_LABEL


def sharing_name(tenant: str) -> str:
    """Name of a tenant's GPU sharing config: ``<tenant>-gpu-sharing``."""
    return f"{tenant}-gpu-sharing"


def _targets_of(placed: Mapping[str, TenantTarget], clusters: Sequence[str]) -> list[TenantTarget]:
    """The targets of ``clusters`` (names of ``placed``), one per API server, each listing the named
    clusters it serves, in order.

    Raises:
        KeyError: a cluster outside the tenant's workload clusters (a programming error).
    """
    out: dict[int, TenantTarget] = {}
    for n in clusters:
        t = placed[n]
        key = id(t.target.provider)
        prev = out.get(key)
        out[key] = TenantTarget(t.target, [*(prev.clusters if prev else []), n], t.namespace_resource)
    return list(out.values())


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
        provider: mothership provider (the tenant's mothership namespace, templates, clusters).
        workload: the clusters where the tenant's work runs
            (:meth:`stack_config.models.EstateConfig.tenant_workload_clusters`), each with its
            provider; default: the mothership alone (``mothership``).
        network_clusters: network name -> the clusters of ``workload`` that get its
            NetworkAttachmentDefinition (:meth:`~stack_config.models.EstateConfig.network_clusters`);
            default: ``mothership`` for each network a cluster of the tenant attaches.
        sharing_clusters: the clusters of ``workload`` that get the GPU sharing ConfigMap
            (:meth:`~stack_config.models.EstateConfig.sharing_clusters`); default: ``mothership``
            when the tenant has GPU sharing.
        catalog: ServiceTemplate names/versions (for its clusters).
        hypervisor_clusters: hypervisor-cluster components by name (its clusters depend on them).
        own_hypervisor_clusters: the hypervisor clusters this stack declares; None: all of them
            (a stack of the whole estate). A tenant cluster on another one says so in its
            ``hypervisor_cluster_in_stack``.
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
    workload: Sequence[ClusterTarget] | None = None
    network_clusters: Mapping[str, Sequence[str]] | None = None
    sharing_clusters: Sequence[str] | None = None
    hypervisor_clusters: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    own_hypervisor_clusters: frozenset[str] | None = None
    composer_pool: str | None = None
    infra_namespace: str | None = None
    gpu_catalogue: Mapping[str, GpuProduct] = field(default_factory=lambda: dict(BUILTIN_GPU_PRODUCTS))


class Tenant(pulumi.ComponentResource):
    """A tenant.

    Children:

    - ``<name>-namespace``: on the mothership, Namespace ``tenant-<name>`` (labelled with the tenant,
      and with ``composer.liqid.io/pool=<pool>`` when it is in a composer pool): its
      ClusterDeployments and templates.
    - ``<name>-namespace-<cluster>``: the same Namespace in each cluster where its work runs
      (``workload``), except one whose API server is the mothership's (it has it already).
    - ``<name>-gpu-quota-<cluster>``: in each of those clusters, ResourceQuota ``gpu-quota``,
      ``requests.nvidia.com/gpu: <gpu_quota>``.
    - ``<name>-<network>``: a :class:`~components.network.TenantNetwork` per network (its NAD in the
      clusters of ``network_clusters``).
    - ``<name>-<cluster>``: a :class:`~components.tenant_cluster.TenantCluster` per child cluster.
    - ``<name>-gpu-operator`` / ``<name>-cilium``: ServiceTemplates in its namespace, when its
      clusters use GPUs / Cilium (k0rdent resolves templates in the ClusterDeployment's namespace;
      the KubeVirt Credential is platform-provided).
    - ``<name>-template-<template>``: the ClusterTemplates its clusters use (declared in
      ``catalog.cluster_templates``: pinned chart, CAPI providers, control-plane kind).
    - ``<name>-gpu-sharing``: a :class:`~components.gpu_sharing.GpuSharing` when configured.

    One API server reached as several clusters (an adopted cluster that is the mothership, a
    composer targeting the mothership) gets each object once, named after the first of them.

    Contract properties: ``name``, ``gpu_quota``, ``allowed_models``, ``quota_clusters`` (the
    clusters its ResourceQuota is in).
    """

    name: pulumi.Output[str]
    namespace: pulumi.Output[str]
    gpu_quota: pulumi.Output[int]
    quota_clusters: pulumi.Output[list[str]]
    allowed_models: pulumi.Output[list[str]]
    networks: pulumi.Output[list[dict]]
    clusters: pulumi.Output[list[dict]]
    gpu_sharing: pulumi.Output[dict | None]

    def __init__(self, name: str, args: TenantArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.config
        workload = (
            list(args.workload)
            if args.workload is not None
            else [ClusterTarget(MOTHERSHIP, args.provider, is_mothership=True)]
        )
        props = contract_props(
            "Tenant", {"name": name, "quota_clusters": [t.name for t in workload]}, config=c
        )
        super().__init__(token("Tenant"), name, props, opts)
        ns_name = c.namespace_name
        ns_labels = common_labels(tenant=name)
        if args.composer_pool is not None:
            ns_labels[COMPOSER_POOL_LABEL] = args.composer_pool
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": ns_name, "labels": {**ns_labels, OBJECT_LABEL: "tenant-namespace"}},
            opts=child_opts(self, provider=args.provider),
        )
        placed: dict[str, TenantTarget] = {}
        for target, names in distinct_targets(workload):
            ns_resource: pulumi.Resource = namespace
            if not target.is_mothership:
                ns_resource = k8s.core.v1.Namespace(
                    f"{name}-namespace-{target.name}",
                    metadata={
                        "name": ns_name,
                        "labels": {**ns_labels, OBJECT_LABEL: "tenant-workload-namespace"},
                    },
                    opts=child_opts(self, provider=target.provider),
                )
            k8s.core.v1.ResourceQuota(
                f"{name}-gpu-quota-{target.name}",
                metadata={
                    "name": "gpu-quota",
                    "namespace": ns_name,
                    "labels": common_labels(tenant=name, object="gpu-quota"),
                },
                spec={"hard": {"requests.nvidia.com/gpu": str(c.gpu_quota)}},
                opts=child_opts(self, provider=target.provider, depends_on=[ns_resource]),
            )
            placed.update({n: TenantTarget(target, names, ns_resource) for n in names})
        network_clusters = args.network_clusters
        if network_clusters is None:
            attached = {n for cl in c.clusters for n in (cl.networks or [x.name for x in c.networks])}
            network_clusters = {n.name: [MOTHERSHIP] if n.name in attached else [] for n in c.networks}
        sharing_clusters = args.sharing_clusters
        if sharing_clusters is None:
            sharing_clusters = [MOTHERSHIP] if c.gpu_sharing is not None else []
        networks = [
            TenantNetwork(
                f"{name}-{n.name}",
                TenantNetworkArgs(
                    tenant=name,
                    namespace=ns_name,
                    config=n,
                    provider=args.provider,
                    nad_targets=_targets_of(placed, network_clusters.get(n.name, [])),
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
                        hypervisor_cluster_in_stack=(
                            args.own_hypervisor_clusters is None
                            or cl.hypervisor_cluster in args.own_hypervisor_clusters
                        ),
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
                    targets=_targets_of(placed, sharing_clusters),
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
