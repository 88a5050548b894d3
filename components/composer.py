"""``composable:infra:Composer``: the GPU composer controller, deployed from ``charts/composer``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, contract_props, publish_outputs, secret_login, token
from components.cluster_access import with_server
from components.manifests import common_labels
from components.tenant import sharing_name
from domain.cluster_api import KUBECONFIG_DATA_KEY
from domain.composer_mode import DRA_DRIVER
from domain.gpu_sharing import PASSTHROUGH, SharingError, passthrough_offer
from domain.placement import OBJECT_LABEL
from dynamic_providers.director.destroy_guard import ComposerGpuGuard
from dynamic_providers.director.endpoint import DirectorEndpoint
from stack_config.models import (
    MOTHERSHIP,
    ComposerConfig,
    DirectorConfig,
    EstateConfig,
    GpuPoolConfig,
    HypervisorClusterConfig,
)

#: Leader-election Lease name (chart default ``leaderElection.leaseName``) of the composer with the
#: default release name ``composer``.
LEASE_NAME = "gpu-composer"


def lease_name(config: ComposerConfig) -> str:
    """The leader-election Lease of the composer ``config`` (its orphan timers are in ConfigMap
    ``<lease>-orphans``): :data:`LEASE_NAME` for the default release name ``composer``, so a
    deployed composer keeps its Lease across an upgrade, else the release name (unique per
    composer, :func:`stack_config.rules.composers_apart`)."""
    return LEASE_NAME if config.release_name == "composer" else config.release_name


def composer_rbac_rules(
    *,
    leader_election: bool = True,
    restart_device_plugin: bool = True,
    nominate_node: str = "auto",
    lease: str = LEASE_NAME,
    dra: bool = False,
) -> list[dict[str, Any]]:
    """The PolicyRules ``charts/composer`` grants (``templates/rbac.yaml``), in its order.

    ClusterRole: pods list/watch/patch (patch: the scheduling gate), pods/status patch (unless
    ``nominate_node`` is ``off``: ``status.nominatedNodeName``), nodes get/list/watch/patch,
    namespaces list/watch, events create/get/patch (a repeated cause raises its Event's count);
    Role in the release namespace: leases create and get/update of its own Lease ``lease``,
    configmaps create and get/patch of ``<lease>-orphans`` (the orphan timers); Role in the
    device-plugin namespace: pods delete (not with ``dra``). With ``dra`` (mode ``dra``) the
    ClusterRole has :func:`dra_rbac_rules` too, pods only list/watch and no pods/status (no gate,
    release or nomination). No secrets, no wildcards, no cluster-admin. A test renders the chart
    with ``helm template`` and compares, so this list cannot drift from what is deployed.
    """
    nominate = [{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]}]
    pod_verbs = ["list", "watch"] if dra else ["list", "watch", "patch"]  # DRA mode gates no pod
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": pod_verbs},
        *(nominate if nominate_node != "off" and not dra else []),
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "patch"]},
    ]
    if dra:
        rules += dra_rbac_rules()
    if leader_election:
        rules += [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [lease],
                "verbs": ["get", "update"],
            },
        ]
    rules += [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [f"{lease}-orphans"],
         "verbs": ["get", "patch"]},
    ]
    if restart_device_plugin and not dra:  # nodes served by DRA run no device plugin
        rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]})
    return rules


def dra_rbac_rules() -> list[dict[str, Any]]:
    """The ClusterRole rules of DRA mode (``dra``, :mod:`domain.composer_mode`), in the chart's order:
    resourceclaims list/watch, resourceclaims/status patch, resourceclaims/driver
    ``arbitrary-node:patch`` on the driver's name (``docs/dra.md``, "Writing device status"),
    resourceslices list/watch/create/patch/delete, deviceclasses get/create/patch."""
    group = ["resource.k8s.io"]
    return [
        {"apiGroups": group, "resources": ["resourceclaims"], "verbs": ["list", "watch"]},
        {"apiGroups": group, "resources": ["resourceclaims/status"], "verbs": ["patch"]},
        {"apiGroups": group, "resources": ["resourceclaims/driver"], "resourceNames": [DRA_DRIVER],
         "verbs": ["arbitrary-node:patch"]},
        {"apiGroups": group, "resources": ["resourceslices"],
         "verbs": ["list", "watch", "create", "patch", "delete"]},
        {"apiGroups": group, "resources": ["deviceclasses"], "verbs": ["get", "create", "patch"]},
    ]


@dataclass(frozen=True)
class TenantPool:
    """A composer pool: the pods of its ``namespaces`` share ``quota_gpus`` composer-managed GPUs on
    its ``hosts`` (Node names); ``tenants`` are the tenants whose namespaces those are;
    ``reclaim_budget`` (``"1"``, ``"50%"``; None: the composer-wide budget) limits how many of its
    hosts give GPUs back at once."""

    name: str
    quota_gpus: int | None
    hosts: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()
    reclaim_budget: str | None = None


def composer_pools(estate: EstateConfig, composer: ComposerConfig | None = None) -> list[TenantPool]:
    """The pools of ``composer`` (default: ``estate.composer``), resolved: hosts (a pool's
    ``hypervisor_cluster`` expanded), its tenants' namespaces, its quota (``quota_gpus``, else the
    sum of its tenants' ``gpu_quota``) and its reclaim budget. Empty without a composer. Pure."""
    out: list[TenantPool] = []
    composer = composer if composer is not None else estate.composer
    for p in composer.pools if composer is not None else []:
        tenants = [t for n in p.tenant_names if (t := estate.tenant(n)) is not None]
        out.append(
            TenantPool(
                name=p.name,
                quota_gpus=p.quota_gpus if p.quota_gpus is not None else sum(t.gpu_quota for t in tenants),
                hosts=tuple(estate.composer_pool_hosts(p)),
                namespaces=tuple(t.namespace_name for t in tenants),
                tenants=tuple(t.name for t in tenants),
                reclaim_budget=p.reclaim_budget,
            )
        )
    return out


def composer_sharing(estate: EstateConfig, composer: ComposerConfig) -> list[dict[str, Any]]:
    """The composer's resource model of the shared hosts it serves (chart value ``composer.sharing``),
    from the same settings and GPU catalogue the hosts' device-plugin configs come from
    (:func:`components.manifests.device_plugin_config`; both derived by :mod:`domain.gpu_sharing`).

    One entry per tenant ``gpu_sharing``, in tenant order: its config ``name``
    (``<tenant>-gpu-sharing``, the hosts' ``nvidia.com/device-plugin.config``), ``strategy``,
    ``hosts`` (those of the composer's target cluster; every host for a composer targeting the
    mothership) and ``offers``: per GPU model of the composer's fabric pool, what one GPU of it
    yields there (:meth:`stack_config.models.GpuSharingConfig.offers`: resource, units, GFD product
    label). A model without a MIG layout of the hosts' config is left out, so the composer never
    composes it there. ``tenant`` names the tenant; with time-slicing and MPS, which share every GPU
    of a node between its pods with no isolation, ``namespaces`` (the tenant's namespace) are the
    only namespaces whose pods the composer places on those hosts. Pure.
    """
    hv = estate.hypervisor_cluster(composer.target_cluster) if composer.target_cluster != MOTHERSHIP else None
    pool = estate.pool(composer.pool)
    models = pool.models if pool is not None else []
    catalogue = estate.gpu_catalogue()
    out: list[dict[str, Any]] = []
    for t in estate.tenants:
        s = t.gpu_sharing
        if s is None:
            continue
        hosts = [h for h in s.hosts if hv is None or h in hv.hosts]
        if not hosts:
            continue
        offers: dict[str, list[dict[str, Any]]] = {}
        for m in models:
            try:
                offers[m] = [o.to_json() for o in s.offers(m, catalogue)]
            except SharingError:
                continue  # mig-parted cannot lay this model out as the hosts' config says
        entry: dict[str, Any] = {"name": sharing_name(t.name), "strategy": s.strategy, "hosts": hosts,
                                 "tenant": t.name}
        if s.strategy != "mig":
            entry["namespaces"] = [t.namespace_name]
        out.append({**entry, "offers": offers})
    return out + _passthrough_entries(estate, composer)


def composer_serves(composer: ComposerConfig, cluster: HypervisorClusterConfig) -> bool:
    """``composer`` composes GPUs onto hosts of ``cluster``: it targets that cluster, or it targets
    the mothership and the cluster runs GPUs in ``vm-passthrough`` VMs (the mothership's composer
    serves those hosts' VM pods; the stack rules let no composer target such a cluster itself).
    Pure."""
    if composer.target_cluster == cluster.name:
        return True
    vm_hosts = cluster.gpu_workload_mode == PASSTHROUGH and bool(cluster.hosts)
    return composer.target_cluster == MOTHERSHIP and vm_hosts


def _passthrough_entries(estate: EstateConfig, composer: ComposerConfig) -> list[dict[str, Any]]:
    """``composer.sharing`` entries of the ``vm-passthrough`` hypervisor clusters, for a composer
    targeting the mothership (which sees every host; the stack rules let no composer target a
    ``vm-passthrough`` cluster itself, ``composer.target_cluster``): one per
    cluster, ``name`` ``<cluster>-vm-passthrough``, ``strategy`` ``vm-passthrough``, its ``hosts``,
    and per GPU model of the composer's pool one offer of the model's catalogue
    ``passthrough_resource`` (:func:`domain.gpu_sharing.passthrough_offer`); a model the catalogue
    does not know is left out, so the composer never composes it there. Pure."""
    pool = estate.pool(composer.pool)
    models = pool.models if pool is not None else []
    catalogue = estate.gpu_catalogue()
    out: list[dict[str, Any]] = []
    for hv in estate.hypervisor_clusters:
        if hv.gpu_workload_mode != PASSTHROUGH or not composer_serves(composer, hv):
            continue
        offers = {m: [passthrough_offer(m, catalogue[m].passthrough_resource).to_json()]
                  for m in models if m in catalogue}
        out.append({"name": f"{hv.name}-{PASSTHROUGH}", "strategy": PASSTHROUGH, "hosts": list(hv.hosts),
                    "offers": offers})
    return out


@dataclass(frozen=True)
class ComposerArgs:
    """Inputs of :class:`Composer`.

    Attributes:
        config: the composer's config.
        director: Director endpoint and credentials (secrets).
        pool: the fabric pool it composes from.
        chart_path: resolved path of the Helm chart directory.
        provider: provider of the target cluster.
        excluded_devices: device names composed statically (the program's GpuCompositions); the
            composer never composes or reclaims them.
        tenant_pools: the composer pools (:func:`composer_pools`): quotas, hosts and namespaces.
        sharing: the shared hosts' resource model (:func:`composer_sharing`).
        depends_on: resources to wait for (the static compositions).
        runner_provider: with ``config.runs_on == "mothership"``: the mothership's provider, where
            the chart, its namespace and Secrets go; ``provider`` is then the target cluster's.
        target_kubeconfig: with ``runner_provider``: the target cluster's kubeconfig (a Pulumi
            secret, :meth:`components.cluster_access.ClusterTarget.kubeconfig_text`), copied into
            Secret ``<name>-target-kubeconfig`` beside the Pods.
    """

    config: ComposerConfig
    director: DirectorConfig
    pool: GpuPoolConfig
    chart_path: Path
    provider: k8s.Provider
    excluded_devices: pulumi.Input[Sequence[str]] = ()
    tenant_pools: Sequence[TenantPool] = ()
    sharing: Sequence[Mapping[str, Any]] = ()
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    runner_provider: k8s.Provider | None = None
    target_kubeconfig: pulumi.Input[str] | None = None


def composer_values(
    *,
    config: ComposerConfig,
    director_url: str,
    director_username: str,
    credentials_secret: str,
    excluded_devices: Sequence[str],
    tenant_pools: Sequence[TenantPool],
    target_kubeconfig_secret: str | None = None,
    sharing: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Helm values for ``charts/composer`` (``values.yaml``/``values.schema.json``); pure, with
    ``excluded_devices`` resolved.

    The Director password is not in the values: the chart reads it from the existing Secret
    ``credentials_secret`` (key ``password``). Each pool carries its quota and its members (Node
    names and namespaces): the composer reads pool membership from these values, so it needs no
    label on the target cluster's Nodes (``docs/composer-pools.md``). ``config.image``,
    ``config.api_server``, ``config.node_selector`` and ``config.tolerations`` set the image, the
    API server address for clusters without kube-proxy, and the Pods' placement when given;
    ``config.director_endpoint`` replaces ``director_url`` as the Pods' Director URL;
    ``config.namespaces`` limits the namespaces served (and gated by the webhook).
    ``config.kubelet_plugin_image`` (mode ``dra`` only) becomes ``kubeletPlugin.image``.

    ``target_kubeconfig_secret`` (a composer that runs on the mothership, ``config.runs_on``): the
    Secret holding the target cluster's kubeconfig (key ``value``), the chart's
    ``targetCluster.kubeconfigSecret``; the webhook is then off (the chart refuses it) and
    ``config.api_server`` is already in that kubeconfig, not in ``kubernetesService``.

    The reclaim guards and orphan cleanup (``docs/composer-reclaim.md``): ``reclaimWindowsUtc``,
    ``ownerTag`` and ``orphanGraceSeconds`` are always written (the stack config's defaults are the
    chart's), so the deployed values are the stack's and ``pulumi preview`` shows a change of them,
    as for the timeouts. The budgets (``reclaimBudget``, ``pools[].reclaimBudget``) are written only
    when set: unset is the chart's "no limit", which is the key's absence (the chart's ``null``), and
    pools without a budget keep the exact shape they had.

    ``sharing`` (:func:`composer_sharing`) becomes ``composer.sharing``, written only when there is
    one: what one composed GPU yields on each shared host, so the composer counts a time-sliced
    replica or a MIG device as what it is, not as a whole GPU (``docs/gpu-sharing.md``).
    """
    placement: dict[str, Any] = {}
    if config.image:
        repository, tag = config.image.rsplit(":", 1)
        placement["image"] = {"repository": repository, "tag": tag}
    if target_kubeconfig_secret is not None:
        placement["targetCluster"] = {"kubeconfigSecret": target_kubeconfig_secret,
                                      "kubeconfigKey": KUBECONFIG_DATA_KEY}
        placement["webhook"] = {"enabled": False}
    elif config.api_server:
        host, port = config.api_server.rsplit(":", 1)
        placement["kubernetesService"] = {"host": host, "port": int(port)}
    if config.mode == "dra" and config.kubelet_plugin_image:
        repository, tag = config.kubelet_plugin_image.rsplit(":", 1)
        placement["kubeletPlugin"] = {"image": {"repository": repository, "tag": tag}}
    if config.node_selector:
        placement["nodeSelector"] = dict(config.node_selector)
    if config.tolerations:
        placement["tolerations"] = [dict(t) for t in config.tolerations]
    served = {"namespaces": list(config.namespaces)} if config.namespaces else {}
    budget = {"reclaimBudget": config.reclaim_budget} if config.reclaim_budget is not None else {}
    return {
        **placement,
        "director": {
            "url": config.director_endpoint or director_url,
            "username": director_username,
            "existingSecret": credentials_secret,
            "passwordKey": "password",
        },
        "composer": {
            "pool": "default",
            "pools": [
                {
                    "name": p.name,
                    "quotaGpus": p.quota_gpus,
                    "hosts": list(p.hosts),
                    "namespaces": list(p.namespaces),
                    **({"reclaimBudget": p.reclaim_budget} if p.reclaim_budget is not None else {}),
                }
                for p in tenant_pools
            ],
            "excludedDevices": sorted(excluded_devices),
            "idleTimeoutSeconds": config.idle_timeout_seconds,
            "advertiseTimeoutSeconds": config.advertise_timeout_seconds,
            **budget,
            "reclaimWindowsUtc": list(config.reclaim_windows_utc),
            "ownerTag": config.owner_tag,
            "orphanGraceSeconds": config.orphan_grace_seconds,
            **served,
            **({"sharing": [dict(e) for e in sharing]} if sharing else {}),
        },
        "devicePlugin": {
            "restart": config.restart_device_plugin,
            "namespace": config.device_plugin_namespace,
        },
        "leaderElection": {"enabled": True, "leaseName": lease_name(config)},
        "dra": {"mode": config.mode},
    }


class Composer(pulumi.ComponentResource):
    """The composer: watches pending GPU pods in the target cluster, composes pool GPUs onto nodes
    through the Director, reclaims them from idle nodes.

    Children (in the target cluster; with ``args.runner_provider``, a composer that runs on the
    mothership, the namespace, Secrets and chart go there, see :class:`ComposerArgs`, plus
    ``<name>-lease-namespace`` in the target cluster and ``<name>-target-kubeconfig`` beside the
    Pods):

    - ``<name>-namespace``: its Namespace.
    - ``<name>-director-account``: a ``DirectorEndpoint`` whose check logs in to the Director
      read-only during preview, so wrong credentials or an unreachable Director stop the preview.
    - ``<name>-director-credentials``: Secret with the Director ``username``/``password`` (Pulumi
      secrets), referenced by the chart instead of putting the password in Helm values; it
      depends on the account check, so it is never replaced with refused credentials.
    - ``<name>``: the local Helm chart (``pulumi_kubernetes.helm.v4.Chart``, rendered by the
      program, so every object appears in preview) with the statically composed devices as its
      exclusion list.
    - ``<name>-gpu-guard``: a ``ComposerGpuGuard`` (depends on the chart, so a destroy deletes it
      first): ``pulumi destroy`` stops with the GPUs and machines named while GPUs of the pool's
      Director group carrying the composer's owner tag are attached, instead of leaving them
      composed with no composer to return them.

    Contract properties: ``pool``, ``idle_timeout_seconds``, ``target_cluster``, ``cluster_admin``
    (False), ``excluded_devices``, ``rbac_rules``, ``host_pools`` (host -> composer pool) and
    ``pool_tenants`` (composer pool -> tenants), read by the policy pack.
    """

    namespace: pulumi.Output[str]
    pool: pulumi.Output[str]
    target_cluster: pulumi.Output[str]
    idle_timeout_seconds: pulumi.Output[int]
    excluded_devices: pulumi.Output[list[str]]

    def __init__(self, name: str, args: ComposerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.config
        excluded = pulumi.Output.from_input(args.excluded_devices).apply(lambda d: sorted(d or []))
        own = {
            "cluster_admin": False,
            "excluded_devices": excluded,
            "rbac_rules": composer_rbac_rules(
                restart_device_plugin=c.restart_device_plugin, lease=lease_name(c), dra=c.mode == "dra"
            ),
            "host_pools": {h: p.name for p in args.tenant_pools for h in p.hosts},
            "pool_tenants": {p.name: list(p.tenants) for p in args.tenant_pools},
        }
        props = contract_props("Composer", own, config=c)
        super().__init__(token("Composer"), name, props, opts)
        labels = common_labels(component="composer")
        hosted = args.runner_provider is not None
        if hosted and args.target_kubeconfig is None:
            raise ValueError(f"composer {name}: runner_provider needs target_kubeconfig")
        runner = args.runner_provider or args.provider
        prefix = "hosted-" if hosted else ""
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": c.namespace, "labels": {**labels, OBJECT_LABEL: f"{prefix}composer-namespace"}},
            opts=child_opts(self, provider=runner),
        )
        chart_needs: list[pulumi.Resource] = [namespace]
        kubeconfig_secret: str | None = None
        if hosted:
            # The Lease and the orphan timers live in the target cluster, in a namespace named
            # like the Pods' (the composer's client is the target's: COMPOSER_NAMESPACE).
            chart_needs.append(k8s.core.v1.Namespace(
                f"{name}-lease-namespace",
                metadata={"name": c.namespace,
                          "labels": {**labels, OBJECT_LABEL: "composer-lease-namespace"}},
                opts=child_opts(self, provider=args.provider),
            ))
            kubeconfig_secret = f"{name}-target-kubeconfig"
            target = pulumi.Output.from_input(args.target_kubeconfig).apply(
                lambda text: with_server(str(text), server=c.api_server)
            )
            chart_needs.append(k8s.core.v1.Secret(
                kubeconfig_secret,
                metadata={"name": kubeconfig_secret, "namespace": c.namespace,
                          "labels": {**labels, OBJECT_LABEL: "composer-target-kubeconfig"}},
                type="Opaque",
                string_data={KUBECONFIG_DATA_KEY: pulumi.Output.secret(target)},
                opts=child_opts(self, provider=runner, depends_on=[namespace]),
            ))
        # Checked by `pulumi preview` (a read-only login): the Secret below is never replaced
        # with credentials the Director refuses, and a wrong endpoint stops the preview.
        account = DirectorEndpoint(
            f"{name}-director-account",
            endpoint=args.director.endpoint,
            **secret_login(args.director),
            opts=child_opts(self),
        )
        secret_name = f"{name}-director-credentials"
        creds = k8s.core.v1.Secret(
            secret_name,
            metadata={
                "name": secret_name,
                "namespace": c.namespace,
                "labels": {**labels, OBJECT_LABEL: f"{prefix}composer-director-credentials"},
            },
            type="Opaque",
            string_data=secret_login(args.director),
            opts=child_opts(self, provider=runner, depends_on=[namespace, account]),
        )
        values = excluded.apply(
            lambda devices: composer_values(
                config=c,
                director_url=args.director.endpoint,
                director_username=args.director.username,
                credentials_secret=secret_name,
                excluded_devices=devices,
                tenant_pools=args.tenant_pools,
                target_kubeconfig_secret=kubeconfig_secret,
                sharing=args.sharing,
            )
        )
        chart = k8s.helm.v4.Chart(
            name,
            chart=str(args.chart_path),
            namespace=c.namespace,
            values=values,
            opts=child_opts(self, provider=runner, depends_on=[*chart_needs, creds, *args.depends_on]),
        )
        # Depends on the chart, so a destroy deletes it first: it stops while the composer (still
        # running then) holds GPUs that nobody would return once it is gone.
        ComposerGpuGuard(
            f"{name}-gpu-guard",
            endpoint=args.director.endpoint,
            **secret_login(args.director),
            owner_tag=c.owner_tag,
            group=args.pool.director_group,
            opts=child_opts(self, depends_on=[chart]),
        )
        publish_outputs(self, {**props, "namespace": c.namespace})
