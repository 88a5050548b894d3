"""``composable:infra:Estate``: the whole estate of a stack, built from the typed config."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components._base import (
    Mothership,
    child_opts,
    contract_props,
    output_row,
    output_rows,
    publish_outputs,
    token,
)
from components.cluster_access import Clusters, cluster_targets
from components.composer import Composer, ComposerArgs, composer_pools, composer_serves, composer_sharing
from components.dpu import Dpu
from components.dpu_cluster import DpuCluster, DpuClusterArgs, DpuMember
from components.gpu_composition import GpuComposition, GpuCompositionArgs
from components.host import Host, HostArgs
from components.hypervisor_cluster import HypervisorCluster, HypervisorClusterArgs
from components.manifests import (
    HOST_GPU_MODE,
    K0RDENT_API,
    HypervisorGpus,
    common_labels,
    device_plugin_config,
    host_node_labels,
    to_yaml,
)
from components.moved import moved_from_root
from components.service_template import TemplateConfig, k0rdent_templates
from components.tenant import Tenant, TenantArgs, sharing_name
from stack_config.fleet import PLATFORM, StackSlice
from stack_config.loader import resolve_path
from stack_config.models import MOTHERSHIP, EstateConfig, GpuSharingConfig, HypervisorClusterConfig


@dataclass(frozen=True)
class EstateArgs:
    """Inputs of :class:`Estate`.

    Attributes:
        config: the validated estate config.
        stack: Pulumi stack name (a contract property).
        project_root: directory of ``Pulumi.yaml``; relative paths in the config resolve against it.
        part: the slice of the estate this stack declares (:func:`stack_config.fleet.split_estate`),
            None for the whole estate. ``config`` stays the whole estate: what a slice builds from it
            (labels, GPU settings, the tenants' clusters) is the same as in the whole estate.
        deployment_ids: hypervisor cluster -> the ID (``<namespace>/<name>``) of its
            ClusterDeployment, another stack's output, for the clusters a tenant slice reaches
            through their kubeconfig Secret (read here as ``<name>-deployment-<cluster>``).
    """

    config: EstateConfig
    stack: str
    project_root: Path
    part: StackSlice | None = None
    deployment_ids: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)


def composition_names(config: EstateConfig) -> list[str]:
    """Component names of the static compositions: ``<host>-gpus``, numbered when a host has several."""
    per_host: dict[str, int] = defaultdict(int)
    for g in config.gpu_compositions:
        per_host[g.host] += 1
    seen: dict[str, int] = defaultdict(int)
    names = []
    for g in config.gpu_compositions:
        seen[g.host] += 1
        names.append(f"{g.host}-gpus" if per_host[g.host] == 1 else f"{g.host}-gpus-{seen[g.host]}")
    return names


def host_sharing(config: EstateConfig, host: str) -> list[tuple[str, GpuSharingConfig]]:
    """The ``(config name, sharing)`` settings that list ``host``."""
    return [
        (sharing_name(t.name), t.gpu_sharing)
        for t in config.tenants
        if t.gpu_sharing is not None and host in t.gpu_sharing.hosts
    ]


def device_plugin_default(config: EstateConfig, cluster: str) -> str | None:
    """The device-plugin config every host of hypervisor cluster ``cluster`` uses, or None when its
    hosts differ (or some use none). Set as the GPU Operator's ``devicePlugin.config.default``, it
    reaches every node of the cluster without a node label."""
    hv = config.hypervisor_cluster(cluster)
    if hv is None:
        return None
    names = {next((n for n, _ in host_sharing(config, h)), None) for h in hv.hosts}
    return names.pop() if len(names) == 1 else None


def cluster_gpu_models(config: EstateConfig, cluster: str) -> list[str]:
    """GPU products that may sit in a hypervisor cluster's hosts: models composed onto them
    statically (all pool models when a composition names none), the pool models of every composer
    that composes onto them (:func:`composer_serves`), and models its tenant clusters ask for."""
    hv = config.hypervisor_cluster(cluster)
    if hv is None:
        return []
    models: set[str] = set()
    for g in config.gpu_compositions:
        if g.host in hv.hosts:
            pool = config.pool(g.pool)
            models.update([g.model] if g.model else (pool.models if pool else []))
    for c in config.all_composers():
        pool = config.pool(c.pool)
        if pool is not None and composer_serves(c, hv):
            models.update(pool.models)
    for t in config.tenants:
        models.update(c.gpu_model for c in t.clusters if c.hypervisor_cluster == cluster and c.gpu_model)
    return sorted(models)


def hypervisor_gpus(config: EstateConfig, cluster: HypervisorClusterConfig) -> HypervisorGpus:
    """What hypervisor cluster ``cluster``'s GPU Operator and KubeVirt values are built from: the GPU
    products that may sit in its hosts (:func:`cluster_gpu_models`), the device-plugin configs of
    the sharing settings on its hosts (name -> YAML) and the one they all use
    (:func:`device_plugin_default`), the MIG strategy of the first MIG setting on them, the GPU
    catalogue, and the vGPU types of its tenant clusters. Pure."""
    sharing = [s for h in cluster.hosts for s in host_sharing(config, h)]
    return HypervisorGpus(
        models=cluster_gpu_models(config, cluster.name),
        device_plugin_configs={n: to_yaml(device_plugin_config(s)) for n, s in sharing},
        device_plugin_default=device_plugin_default(config, cluster.name),
        mig_strategy=next((s.mig_strategy for _, s in sharing if s.strategy == "mig"), None),
        catalogue=config.gpu_catalogue(),
        vgpu_types=config.vgpu_types_on(cluster.name),
    )


def tenant_clusters_on(cfg: EstateConfig, hypervisor_cluster: str) -> list[str]:
    """The TenantClusters of the whole estate (``tenant/name``, config order) whose VM workers run
    on ``hypervisor_cluster``: its component's ``tenant_clusters``, so the policy pack knows that its
    hosts serve tenants in a stack that declares the cluster but not those tenants."""
    return [f"{t.name}/{cl.name}" for t in cfg.tenants for cl in t.clusters
            if cl.hypervisor_cluster == hypervisor_cluster]


def cluster_kernel_settings(
    config: EstateConfig, cluster: HypervisorClusterConfig
) -> tuple[list[str], list[str]]:
    """``(kernel_args, blacklisted_modules)`` of a hypervisor cluster's workers: its hosts' settings,
    each value once, in the order of its hosts and their lists. The cluster's workers share one
    bootstrap config (the ``capm3-hosted-cp`` chart's K0sWorkerConfigTemplate), so a host gets what
    any host of its cluster asks for. Pure."""
    args: dict[str, None] = {}
    modules: dict[str, None] = {}
    for host_name in cluster.hosts:
        host = config.host(host_name)
        if host is None:
            continue  # reported by stack_config.rules
        args.update(dict.fromkeys(host.kernel_args))
        modules.update(dict.fromkeys(host.blacklisted_modules))
    return list(args), list(modules)


def excluded_devices(config: EstateConfig, compositions: list[GpuComposition]) -> pulumi.Input[list[str]]:
    """The composer's exclusion list: every statically composed device.

    When every composition names its devices in config, the list is plain data, known at preview
    (so the policy pack can prove static GPUs stay outside the composer's pool); otherwise it is the
    compositions' ``device_names`` outputs, known only after they are created.
    """
    if all(g.device_names for g in config.gpu_compositions):
        return sorted({d for g in config.gpu_compositions for d in g.device_names})
    return pulumi.Output.all(*[c.device_names for c in compositions]).apply(
        lambda lists: sorted({d for names in lists for d in (names or [])})
    )


#: Fields of the report's rows: each is the output attribute of the same name.
_TENANT_ROW = ("name", "namespace", "gpu_quota", "allowed_models", "networks", "clusters", "gpu_sharing")
_HYPERVISOR_CLUSTER_ROW = ("name", "hosts", "gpu_workload_mode", "kubevirt", "services")
_GPU_ROW = ("host", "pool", "tenant", "device_names", "models")
_DPU_CLUSTER_ROW = ("name", "hosts", "dpus", "services")
_COMPOSER_ROW = ("namespace", "pool", "target_cluster", "idle_timeout_seconds", "excluded_devices")


_HOST_ROW = ("name", "role", "bmc_address", "cluster", "gpu_mode")
_DPU_ROW = ("name", "host", "mode", "host_privilege_level", "host_rshim", "reset_pending", "flavor")


def _host_report(h: Host) -> pulumi.Output[dict[str, Any]]:
    """A host's report row; ``reboot_pending`` only when it is prepared over SSH."""
    extra: dict[str, Any] = {"dpu": h.dpu_name}
    if h.kernel_prep is not None:
        extra["reboot_pending"] = h.reboot_pending
    return output_row(h, _HOST_ROW, extra)


def _dpu_report(d: Dpu) -> pulumi.Output[dict[str, Any]]:
    """A DPU's report row; ``firmware_reset_pending`` only when its mlxconfig is set over SSH."""
    extra = {} if d.mlxconfig_prep is None else {"firmware_reset_pending": d.firmware_reset_pending}
    return output_row(d, _DPU_ROW, extra)


class Estate(pulumi.ComponentResource):
    """The estate: every host, DPU, cluster, tenant, static GPU composition and the composer.

    Children:

    - ``<name>-mothership``: the explicit pulumi-kubernetes provider of the mothership (kubeconfig
      from config, resolved against the project root).
    - ``<name>-cluster-<cluster>``: the provider of each hypervisor cluster
      (:func:`components.cluster_access.cluster_targets`: from its ``<cluster>-kubeconfig`` Secret,
      read as ``<name>-cluster-<cluster>-kubeconfig``, or its adopted kubeconfig; none when that is
      the mothership's), or ``<name>-composer-target`` for the composer's target cluster when
      ``composer.kubeconfig`` is set. Each Kubernetes object goes through the provider of the
      cluster :data:`domain.placement.PLACEMENTS` names for it (attribute ``clusters``).
    - ``<name>-namespace``: the infrastructure namespace.
    - ``<name>-gpu-operator`` / ``<name>-kubevirt``: ServiceTemplates used by the hypervisor clusters.
    - ``<name>-template-<template>``: ClusterTemplates of the hypervisor clusters and the DPU cluster
      (``catalog.cluster_templates``), in the infrastructure namespace.
    - ``<name>-repo-<repository>``: the Flux HelmRepositories those templates' charts come from
      (``catalog.repositories``; with ``<name>-repo-<repository>-credentials``, the Secret of a
      repository that has credentials); kcm's own ``kcm-templates`` is kcm's to create.
    - :class:`~components.host.Host` per host (each with its :class:`~components.dpu.Dpu`),
      :class:`~components.dpu_cluster.DpuCluster`, :class:`~components.hypervisor_cluster.HypervisorCluster`
      per cluster, :class:`~components.tenant.Tenant` per tenant,
      :class:`~components.gpu_composition.GpuComposition` per static composition,
      :class:`~components.composer.Composer` per composer (attribute ``composers``; ``composer`` is
      the only one, or None when there are several).

    In a split stack (``args.part`` set) every child also answers to its URN as a child of the root
    stack (:func:`components.moved.moved_from_root`), where ``pulumi state move`` puts the resources
    ``python -m ops.estate migrate`` moves out of the monolithic stack.

    Output ``report`` (also the stack output ``estate``) is what :func:`stack_config.summary.render_summary`
    prints; hosts and DPUs prepared over SSH (config ``prep``) also report ``reboot_pending`` /
    ``firmware_reset_pending``. Contract properties: ``stack``, ``environment``.
    """

    report: pulumi.Output[dict[str, Any]]
    hosts: dict[str, Host]
    tenants: dict[str, Tenant]
    hypervisor_clusters: dict[str, HypervisorCluster]
    compositions: list[GpuComposition]
    clusters: Clusters
    dpu_cluster: DpuCluster | None
    composer: Composer | None

    def __init__(self, name: str, args: EstateArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        cfg = args.config
        props = contract_props("Estate", {"stack": args.stack}, config=cfg)
        if args.part is not None:  # a split stack: keep what pulumi state move brought from the monolith
            moved = pulumi.ResourceOptions(transformations=[moved_from_root(self)])
            opts = pulumi.ResourceOptions.merge(opts, moved)
        super().__init__(token("Estate"), name, props, opts)
        root = args.project_root
        ms_cfg = cfg.mothership
        part = args.part
        platform = part is None or part.role == PLATFORM
        provider = k8s.Provider(
            f"{name}-mothership",
            kubeconfig=str(resolve_path(ms_cfg.kubeconfig, root)),
            context=ms_cfg.context,
            opts=pulumi.ResourceOptions(parent=self),
        )
        namespace = None
        if platform:
            namespace = k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata={
                    "name": ms_cfg.namespace,
                    "labels": common_labels(component="infrastructure", object="infra-namespace"),
                },
                opts=child_opts(self, provider=provider),
            )
        mothership = Mothership(provider=provider, namespace=ms_cfg.namespace, namespace_resource=namespace)
        gpu_catalogue = cfg.gpu_catalogue()
        wanted: list[tuple[str, TemplateConfig]] = [(f"{name}-gpu-operator", cfg.catalog.gpu_operator)]
        if any(c.kubevirt for c in cfg.hypervisor_clusters):
            wanted.append((f"{name}-kubevirt", cfg.catalog.kubevirt))

        # ClusterTemplates of the infrastructure clusters (hypervisor clusters, DPU cluster).
        infra_templates = sorted(
            {c.template for c in cfg.hypervisor_clusters}
            | ({cfg.dpu_cluster.template} if cfg.dpu_cluster is not None else set())
        )
        for t_name in infra_templates:
            declared = cfg.catalog.cluster_template(t_name)
            assert declared is not None  # guaranteed by stack_config.rules
            wanted.append((f"{name}-template-{t_name}", declared))
        templates = []
        if platform:
            templates = k0rdent_templates(
                wanted, catalog=cfg.catalog, prefix=name, namespace=ms_cfg.namespace, provider=provider,
                parent=self, depends_on=[namespace] if namespace else [],
            )

        # Hosts (and their DPUs).
        self.hosts = {}
        for h in cfg.hosts:
            if part is not None and h.name not in part.hosts:
                continue
            cluster = cfg.cluster_of_host(h.name)
            mode = cluster.gpu_workload_mode if cluster else None
            ca = h.dpu.bmc.ca_bundle if h.dpu is not None else None
            self.hosts[h.name] = Host(
                h.name,
                HostArgs(
                    config=h,
                    mothership=mothership,
                    cluster=cluster.name if cluster else None,
                    gpu_mode=HOST_GPU_MODE[mode] if mode else "none",
                    node_labels=host_node_labels(gpu_workload_mode=mode, sharing=host_sharing(cfg, h.name)),
                    label_nodes=ms_cfg.label_nodes,
                    dpu_ca_bundle=str(resolve_path(ca, root)) if ca else None,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )

        # The DPU cluster.
        self.dpu_cluster = None
        if cfg.dpu_cluster is not None and (part is None or part.dpu_cluster):
            members, dpus = [], []
            for host_name in cfg.dpu_cluster_hosts():
                dpu = self.hosts[host_name].dpu
                if dpu is None:
                    continue  # reported by stack_config.rules
                members.append(DpuMember(dpu=dpu.dpu_name, host=host_name, flavor=dpu.flavor_name))
                dpus.append(dpu)
            self.dpu_cluster = DpuCluster(
                cfg.dpu_cluster.name,
                DpuClusterArgs(
                    config=cfg.dpu_cluster,
                    members=members,
                    mothership=mothership,
                    depends_on=[*dpus, *templates],
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )

        # Hypervisor clusters.
        self.hypervisor_clusters = {}
        for c in cfg.hypervisor_clusters:
            if part is not None and c.name not in part.hypervisor_clusters:
                continue
            self.hypervisor_clusters[c.name] = HypervisorCluster(
                c.name,
                HypervisorClusterArgs(
                    config=c,
                    mothership=mothership,
                    catalog=cfg.catalog,
                    gpus=hypervisor_gpus(cfg, c),
                    kernel=cluster_kernel_settings(cfg, c),
                    tenant_clusters=tenant_clusters_on(cfg, c.name),
                    depends_on=[
                        *templates, *(r for h in c.hosts for r in self.hosts[h].cluster_prerequisites)
                    ],
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )

        # A provider per cluster (docs/architecture.md "Where each object lives"): the slice's own
        # clusters and those its tenants' work runs on, whose ClusterDeployments other stacks hold.
        deployments = {n: hc.deployment for n, hc in self.hypervisor_clusters.items()}
        for cluster, deployment_id in args.deployment_ids.items():
            deployments[cluster] = k8s.apiextensions.CustomResource.get(
                f"{name}-deployment-{cluster}", api_version=K0RDENT_API, kind="ClusterDeployment",
                id=deployment_id, opts=pulumi.ResourceOptions(parent=self, provider=provider),
            )
        tenants = [t for t in cfg.tenants if part is None or t.name in part.tenants]
        reached = {*self.hypervisor_clusters, *(c for t in tenants for c in cfg.tenant_workload_clusters(t))}
        targets_cfg = cfg if part is None else cfg.model_copy(
            update={"hypervisor_clusters": [c for c in cfg.hypervisor_clusters if c.name in reached]}
        )
        self.clusters = Clusters(
            mothership,
            cluster_targets(
                name, targets_cfg, root=root, mothership=mothership, deployments=deployments, parent=self
            ),
        )
        for host_name, host in self.hosts.items():
            hv = cfg.cluster_of_host(host_name)
            if hv is not None:
                host.label_node(self.clusters.provider_for("node-labels", hv.name))

        # Tenants.
        self.tenants = {
            t.name: Tenant(
                t.name,
                TenantArgs(
                    config=t,
                    provider=provider,
                    catalog=cfg.catalog,
                    workload=[self.clusters.target(c) for c in cfg.tenant_workload_clusters(t)],
                    network_clusters={n.name: cfg.network_clusters(t, n.name) for n in t.networks},
                    sharing_clusters=cfg.sharing_clusters(t),
                    hypervisor_clusters={**deployments, **self.hypervisor_clusters},
                    own_hypervisor_clusters=None if part is None else frozenset(part.hypervisor_clusters),
                    composer_pool=cfg.composer_tenant_pool(t.name),
                    gpu_catalogue=gpu_catalogue,
                    infra_namespace=ms_cfg.namespace,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for t in tenants
        }

        # Static GPU compositions.
        self.compositions = []
        named = zip(composition_names(cfg), cfg.gpu_compositions, strict=True)
        for index, (comp_name, g) in enumerate(named):
            if part is not None and index not in part.compositions:
                continue
            pool = cfg.pool(g.pool)
            assert pool is not None  # guaranteed by stack_config.rules
            self.compositions.append(
                GpuComposition(
                    comp_name,
                    GpuCompositionArgs(config=g, director=cfg.fabric.director, pool=pool),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[self.hosts[g.host]]),
                )
            )

        # The composers: one per GPU cluster (stack_config.rules.composers_apart keeps them apart).
        self.composers: list[Composer] = []
        for cc in cfg.all_composers():
            if part is not None and cc.target_cluster not in part.composers:
                continue
            target_provider = self.clusters.provider_for("composer-release", cc.target_cluster)
            hosted = cc.runs_on == MOTHERSHIP and cc.target_cluster != MOTHERSHIP
            excluded = excluded_devices(cfg, self.compositions)
            pool = cfg.pool(cc.pool)
            assert pool is not None  # guaranteed by stack_config.rules
            depends = [*self.compositions]
            if cc.target_cluster != MOTHERSHIP:
                depends.append(self.hypervisor_clusters[cc.target_cluster])
            self.composers.append(Composer(
                cc.release_name,
                ComposerArgs(
                    config=cc,
                    director=cfg.fabric.director,
                    pool=pool,
                    chart_path=resolve_path(cc.chart_path, root),
                    provider=target_provider,
                    excluded_devices=excluded,
                    tenant_pools=composer_pools(cfg, cc),
                    sharing=composer_sharing(cfg, cc),
                    depends_on=depends,
                    runner_provider=self.clusters.mothership.provider if hosted else None,
                    target_kubeconfig=(self.clusters.target(cc.target_cluster).kubeconfig_text()
                                       if hosted else None),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            ))
        self.composer = self.composers[0] if len(self.composers) == 1 else None

        publish_outputs(self, {"report": self._report(args.stack, cfg)})

    def _report(self, stack: str, cfg: EstateConfig) -> pulumi.Output[dict[str, Any]]:
        hosts = [_host_report(h) for h in self.hosts.values()]
        dpus = [_dpu_report(d) for d in (h.dpu for h in self.hosts.values()) if d is not None]
        tenants = output_rows(self.tenants.values(), _TENANT_ROW)
        clusters = output_rows(self.hypervisor_clusters.values(), _HYPERVISOR_CLUSTER_ROW)
        gpus = output_rows(self.compositions, _GPU_ROW)
        dpu_cluster: Any = None
        if self.dpu_cluster is not None:
            dpu_cluster = output_row(self.dpu_cluster, _DPU_CLUSTER_ROW)
        composer: Any = None
        if self.composer is not None:
            composer = output_row(self.composer, _COMPOSER_ROW)
        composers = output_rows(self.composers, _COMPOSER_ROW)
        return pulumi.Output.all(
            stack=stack,
            environment=cfg.environment,
            hosts=pulumi.Output.all(*hosts),
            dpus=pulumi.Output.all(*dpus),
            hypervisor_clusters=clusters,
            dpu_cluster=dpu_cluster,
            tenants=tenants,
            gpus=gpus,
            composer=composer,
            composers=composers,
        )
