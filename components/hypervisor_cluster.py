"""``composable:infra:HypervisorCluster``: a k0rdent bare-metal cluster with the GPU Operator and KubeVirt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components._base import Mothership, child_opts, contract_props, publish_outputs, token
from components.manifests import K0RDENT_API, HypervisorGpus, common_labels, hypervisor_cluster_spec
from domain.cluster_api import READY_CONDITION
from stack_config.models import CatalogConfig, HypervisorClusterConfig

#: pulumi-kubernetes waits for kcm's Ready condition on a ClusterDeployment carrying this annotation.
WAIT_FOR = {"pulumi.com/waitFor": f"condition={READY_CONDITION}"}


@dataclass(frozen=True)
class HypervisorClusterArgs:
    """Inputs of :class:`HypervisorCluster`.

    Attributes:
        config: the cluster's config.
        mothership: where the ClusterDeployment goes.
        catalog: ServiceTemplate names/versions.
        gpus: the GPUs and GPU settings its GPU Operator and KubeVirt values are built from
            (products, device-plugin configs, MIG strategy, vGPU types).
        kernel: ``(kernel_args, blacklisted_modules)`` of its workers' bootstrap data
            (:func:`components.estate.cluster_kernel_settings`).
        depends_on: resources to wait for (its Hosts, the ServiceTemplates).
        tenant_clusters: the TenantClusters (``tenant/name``) of the whole estate whose workers run
            on it (:func:`components.estate.tenant_clusters_on`), in a split stack too.
    """

    config: HypervisorClusterConfig
    mothership: Mothership
    catalog: CatalogConfig
    gpus: HypervisorGpus = field(default_factory=HypervisorGpus)
    kernel: tuple[Sequence[str], Sequence[str]] = ((), ())
    depends_on: Sequence[pulumi.Resource] = ()
    tenant_clusters: Sequence[str] = ()


class HypervisorCluster(pulumi.ComponentResource):
    """A k0rdent child cluster on bare-metal hosts running the GPU Operator (and KubeVirt).

    Child ``<name>``: ClusterDeployment (``spec.template`` e.g. ``capm3-hosted-cp``,
    ``spec.credential``, ``spec.config`` selecting its BareMetalHosts by label, labelling workers
    ``nvidia.com/gpu.workload.config=<mode>`` and carrying its hosts' kernel arguments and module
    blacklist into their bootstrap data, ``spec.serviceSpec.services``: ``gpu-operator`` with
    ``sandboxWorkloads.enabled`` for VM modes, ``kubevirt`` when enabled).

    Attribute ``deployment``: that ClusterDeployment (the cluster's kubeconfig Secret is read after
    it, :func:`components.cluster_access.child_provider`).

    A cluster reached through its kubeconfig Secret (no ``kubeconfig`` of an adopted cluster) is
    waited for: the ClusterDeployment carries the annotation :data:`WAIT_FOR` =
    ``condition=Ready``, so pulumi-kubernetes ends its create or update only once kcm reports the
    cluster Ready, and the Secret read that follows finds the kubeconfig. pulumi-kubernetes
    ``provider/pkg/metadata/overrides.go`` ``ReadyCondition``: ``pulumi.com/waitFor`` holds one
    expression (or a JSON array of them, all must hold); ``condition=<type>``
    (``provider/pkg/await/condition/custom.go`` ``NewCustom``, ``kubectl wait --for=condition``
    syntax, status ``True`` unless ``=<status>`` follows) waits for
    ``status.conditions[type=<type>].status == "True"``; a condition whose ``observedGeneration`` is
    below ``metadata.generation`` does not count (``provider/pkg/await/condition/kubectl.go``
    ``checkCondition``, vendored from kubectl). It waits until the resource's timeout
    (``customTimeouts``, else ``pulumi.com/timeoutSeconds``), then the create fails naming it.

    Contract properties: ``name``, ``hosts``, ``gpu_workload_mode``, ``kubevirt``,
    ``tenant_clusters``.
    """

    name: pulumi.Output[str]
    namespace: pulumi.Output[str]
    hosts: pulumi.Output[list[str]]
    gpu_workload_mode: pulumi.Output[str]
    kubevirt: pulumi.Output[bool]
    tenant_clusters: pulumi.Output[list[str]]
    services: pulumi.Output[list[str]]
    deployment: k8s.apiextensions.CustomResource

    def __init__(
        self, name: str, args: HypervisorClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        c = args.config
        props = contract_props(
            "HypervisorCluster", {"name": name, "tenant_clusters": list(args.tenant_clusters)}, config=c
        )
        super().__init__(token("HypervisorCluster"), name, props, opts)
        ms = args.mothership
        kernel_args, blacklisted_modules = args.kernel
        spec = hypervisor_cluster_spec(
            c, catalog=args.catalog, gpus=args.gpus, kernel_args=kernel_args,
            blacklisted_modules=blacklisted_modules,
        )
        self.deployment = k8s.apiextensions.CustomResource(
            name,
            api_version=K0RDENT_API,
            kind="ClusterDeployment",
            metadata={
                "name": name,
                "namespace": ms.namespace,
                "labels": common_labels(
                    cluster=name, gpu_workload=c.gpu_workload_mode, object="cluster-deployment"
                ),
                **({"annotations": dict(WAIT_FOR)} if c.kubeconfig is None else {}),
            },
            spec=spec,
            opts=child_opts(self, provider=ms.provider, depends_on=[ms.namespace_resource, *args.depends_on]),
        )
        services = [s["name"] for s in spec["serviceSpec"]["services"]]
        publish_outputs(self, {**props, "namespace": ms.namespace, "services": services})
