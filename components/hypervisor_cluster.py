"""``composable:infra:HypervisorCluster``: a k0rdent bare-metal cluster with the GPU Operator and KubeVirt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components._base import Mothership, child_opts, contract_props, publish_outputs, token
from components.manifests import K0RDENT_API, common_labels, hypervisor_cluster_spec
from stack_config.gpus import BUILTIN_GPU_PRODUCTS, GpuProduct
from stack_config.models import CatalogConfig, HypervisorClusterConfig


@dataclass(frozen=True)
class HypervisorClusterArgs:
    """Inputs of :class:`HypervisorCluster`.

    Attributes:
        config: the cluster's config.
        mothership: where the ClusterDeployment goes.
        catalog: ServiceTemplate names/versions.
        gpu_models: GPU products on its hosts (KubeVirt permitted host devices for passthrough).
        device_plugin_configs: named GPU Operator device-plugin configs (name -> YAML) for the
            sharing settings on its hosts.
        device_plugin_default: the device-plugin config every host uses (``devicePlugin.config.default``),
            or None.
        mig_strategy: GPU Operator MIG strategy when any of its hosts uses MIG, else None.
        depends_on: resources to wait for (its Hosts, the ServiceTemplates).
        gpu_catalogue: GPU products by GFD name (``EstateConfig.gpu_catalogue()``).
        vgpu_types: vGPU types its tenant clusters use (``vm-vgpu``: KubeVirt permitted mediated
            devices, vGPU Device Manager default config).
    """

    config: HypervisorClusterConfig
    mothership: Mothership
    catalog: CatalogConfig
    gpu_models: Sequence[str] = ()
    device_plugin_configs: Mapping[str, str] = field(default_factory=dict)
    device_plugin_default: str | None = None
    mig_strategy: str | None = None
    depends_on: Sequence[pulumi.Resource] = ()
    gpu_catalogue: Mapping[str, GpuProduct] = field(default_factory=lambda: dict(BUILTIN_GPU_PRODUCTS))
    vgpu_types: Sequence[str] = ()


class HypervisorCluster(pulumi.ComponentResource):
    """A k0rdent child cluster on bare-metal hosts running the GPU Operator (and KubeVirt).

    Child ``<name>``: ClusterDeployment (``spec.template`` e.g. ``capm3-hosted-cp``,
    ``spec.credential``, ``spec.config`` selecting its BareMetalHosts by label and labelling workers
    ``nvidia.com/gpu.workload.config=<mode>``, ``spec.serviceSpec.services``: ``gpu-operator`` with
    ``sandboxWorkloads.enabled`` for VM modes, ``kubevirt`` when enabled).

    Contract properties: ``name``, ``hosts``, ``gpu_workload_mode``, ``kubevirt``.
    """

    name: pulumi.Output[str]
    namespace: pulumi.Output[str]
    hosts: pulumi.Output[list[str]]
    gpu_workload_mode: pulumi.Output[str]
    kubevirt: pulumi.Output[bool]
    services: pulumi.Output[list[str]]

    def __init__(
        self, name: str, args: HypervisorClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        c = args.config
        props = contract_props("HypervisorCluster", {"name": name}, config=c)
        super().__init__(token("HypervisorCluster"), name, props, opts)
        ms = args.mothership
        spec = hypervisor_cluster_spec(
            c,
            catalog=args.catalog,
            gpu_models=args.gpu_models,
            device_plugin_configs=args.device_plugin_configs,
            device_plugin_default=args.device_plugin_default,
            mig_strategy=args.mig_strategy,
            catalogue=args.gpu_catalogue,
            vgpu_types=args.vgpu_types,
        )
        k8s.apiextensions.CustomResource(
            name,
            api_version=K0RDENT_API,
            kind="ClusterDeployment",
            metadata={
                "name": name,
                "namespace": ms.namespace,
                "labels": common_labels(cluster=name, gpu_workload=c.gpu_workload_mode),
            },
            spec=spec,
            opts=child_opts(self, provider=ms.provider, depends_on=[ms.namespace_resource, *args.depends_on]),
        )
        services = [s["name"] for s in spec["serviceSpec"]["services"]]
        publish_outputs(self, {**props, "namespace": ms.namespace, "services": services})
