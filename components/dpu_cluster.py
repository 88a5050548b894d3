"""``composable:infra:DpuCluster``: the DPU cluster (hosted control plane, DPU ARM workers) and DPF."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components._base import Mothership, child_opts, contract_props, publish_outputs, token
from components.manifests import (
    DPF_PROVISIONING_API,
    DPF_SERVICE_API,
    K0RDENT_API,
    bfb_spec,
    common_labels,
    dpu_cluster_deployment_spec,
    dpu_cluster_spec,
    dpu_service_spec,
    dpu_set_spec,
)
from domain.cluster_api import kubeconfig_secret_name
from domain.placement import OBJECT_LABEL
from stack_config.models import DpuClusterConfig


def _meta(name: str, namespace: str, labels: dict[str, str], obj: str) -> dict[str, Any]:
    """Metadata of a DPU-cluster object: ``labels`` plus :data:`domain.placement.OBJECT_LABEL` ``obj``."""
    return {"name": name, "namespace": namespace, "labels": {**labels, OBJECT_LABEL: obj}}


@dataclass(frozen=True)
class DpuMember:
    """One DPU of the DPU cluster: its name, its host and the name of its DPUFlavor."""

    dpu: str
    host: str
    flavor: str


@dataclass(frozen=True)
class DpuClusterArgs:
    """Inputs of :class:`DpuCluster`.

    Attributes:
        config: the DPU cluster's config.
        members: the DPUs that join (one DPUSet each).
        mothership: where the objects go.
        depends_on: resources to wait for (the Dpu components whose flavors are referenced).
    """

    config: DpuClusterConfig
    members: Sequence[DpuMember]
    mothership: Mothership
    depends_on: Sequence[pulumi.Resource] = ()


class DpuCluster(pulumi.ComponentResource):
    """The DPU cluster: hosted control plane on the mothership, k0s workers on the DPUs' ARM cores.

    Children:

    - ``<name>``: ClusterDeployment (template ``dpu-hosted-cp``: hosted control plane; the DPUs
      join it as workers through DPF).
    - ``<name>-dpucluster``: DPF DPUCluster of type ``static`` pointing at the cluster's kubeconfig
      Secret ``<name>-kubeconfig``.
    - ``<name>-bfb``: the BlueField bundle (BFB) DPUs are provisioned with.
    - ``<dpu>-dpuset``: a DPUSet per DPU, selecting its host node and its DPUFlavor.
    - ``<name>-<service>``: a DPUService per DPF service (e.g. ``doca-hbn``).

    Contract properties: ``name``, ``hosts``, ``template``.
    """

    name: pulumi.Output[str]
    hosts: pulumi.Output[list[str]]
    dpus: pulumi.Output[list[str]]
    services: pulumi.Output[list[str]]
    kubeconfig_secret: pulumi.Output[str]

    def __init__(self, name: str, args: DpuClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.config
        hosts = [m.host for m in args.members]
        props = contract_props("DpuCluster", {"name": name, "hosts": hosts}, config=c)
        super().__init__(token("DpuCluster"), name, props, opts)
        ms = args.mothership

        def k8s_opts(*deps: pulumi.Resource | None, **kw: object) -> pulumi.ResourceOptions:
            return child_opts(self, provider=ms.provider, depends_on=[ms.namespace_resource, *deps], **kw)

        labels = common_labels(dpu_cluster=name)
        deployment = k8s.apiextensions.CustomResource(
            name,
            api_version=K0RDENT_API,
            kind="ClusterDeployment",
            metadata=_meta(name, ms.namespace, labels, "cluster-deployment"),
            spec=dpu_cluster_deployment_spec(
                name=name,
                template=c.template,
                credential=c.credential,
                control_plane_replicas=c.control_plane_replicas,
                k0s_version=c.k0s_version,
            ),
            opts=k8s_opts(),
        )
        kubeconfig = kubeconfig_secret_name(name)
        dpu_cluster = k8s.apiextensions.CustomResource(
            f"{name}-dpucluster",
            api_version=DPF_PROVISIONING_API,
            kind="DPUCluster",
            metadata=_meta(name, ms.namespace, labels, "dpu-cluster"),
            spec=dpu_cluster_spec(
                version=c.kubernetes_version, kubeconfig_secret=kubeconfig, max_nodes=len(args.members)
            ),
            opts=k8s_opts(deployment, replace_on_changes=["spec.kubeconfig"], delete_before_replace=True),
        )
        bfb_name = f"{name}-bfb"
        bfb = k8s.apiextensions.CustomResource(
            bfb_name,
            api_version=DPF_PROVISIONING_API,
            kind="BFB",
            metadata=_meta(bfb_name, ms.namespace, labels, "bfb"),
            spec=bfb_spec(c.bfb_url),
            opts=k8s_opts(replace_on_changes=["spec"], delete_before_replace=True),
        )
        for m in args.members:
            k8s.apiextensions.CustomResource(
                f"{m.dpu}-dpuset",
                api_version=DPF_PROVISIONING_API,
                kind="DPUSet",
                metadata=_meta(
                    m.dpu, ms.namespace, {**labels, **common_labels(host=m.host, dpu=m.dpu)}, "dpu-set"
                ),
                spec=dpu_set_spec(host=m.host, flavor=m.flavor, bfb=bfb_name, cluster=name),
                opts=k8s_opts(bfb, dpu_cluster, *args.depends_on),
            )
        for s in c.services:
            k8s.apiextensions.CustomResource(
                f"{name}-{s.name}",
                api_version=DPF_SERVICE_API,
                kind="DPUService",
                metadata=_meta(s.name, ms.namespace, labels, "dpu-service"),
                spec=dpu_service_spec(s),
                opts=k8s_opts(dpu_cluster),
            )
        publish_outputs(
            self,
            {
                **props,
                "dpus": [m.dpu for m in args.members],
                "services": [s.name for s in c.services],
                "kubeconfig_secret": kubeconfig,
            },
        )
