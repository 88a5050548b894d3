"""``composable:infra:TenantNetwork``: one isolated tenant network."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, contract_props, publish_outputs, token
from components.cluster_access import TenantTarget
from components.manifests import (
    NAD_API,
    common_labels,
    network_attachment_ref,
    tenant_network_cni_config,
    vxlan_segment_data,
)
from domain.placement import OBJECT_LABEL
from stack_config.models import TenantNetworkConfig


@dataclass(frozen=True)
class TenantNetworkArgs:
    """Inputs of :class:`TenantNetwork`.

    Attributes:
        tenant: tenant name.
        namespace: the tenant's namespace, where its VMs run (the NetworkAttachmentDefinition goes there).
        config: the network (name, CIDR, VXLAN ID, VLAN ID, gateway, host bridge).
        provider: the mothership's provider (the VXLAN segment record).
        nad_targets: the clusters running VMs of the tenant attached to this network
            (:meth:`stack_config.models.EstateConfig.network_clusters`), one per API server.
        namespace_resource: the tenant's Namespace on the mothership (dependency), or None.
        segment_namespace: namespace of the VXLAN segment record (the infrastructure namespace beside
            the DPF objects); default: ``namespace``.
    """

    tenant: str
    namespace: str
    config: TenantNetworkConfig
    provider: k8s.Provider
    nad_targets: Sequence[TenantTarget] = ()
    namespace_resource: pulumi.Resource | None = None
    segment_namespace: str | None = None


class TenantNetwork(pulumi.ComponentResource):
    """A tenant network: name, IPAM CIDR, VXLAN ID and VLAN ID, as objects controllers act on.

    Children:

    - ``<name>-nad-<cluster>``: Multus ``NetworkAttachmentDefinition`` ``<network>`` in the tenant's
      namespace of each cluster running VMs attached to it (``k8s.cni.cncf.io/v1``; none when no VM
      attaches it), through that cluster's provider; CNI config from
      :func:`components.manifests.tenant_network_cni_config`: the ``bridge`` plugin tags the VM port
      with the VLAN, ``whereabouts`` allocates from the CIDR (with the gateway). The tenant cluster's
      worker VMs reference it as ``<namespace>/<network>``; Multus (on the hypervisor nodes) reads it
      when KubeVirt starts a VM's pod.
    - ``<name>-segment``: on the mothership, ConfigMap ``vxlan-<tenant>-<network>`` in the
      infrastructure namespace, labelled ``composable-gpu.io/segment=vxlan``, data
      :func:`components.manifests.vxlan_segment_data` (VLAN -> VXLAN VNI): the record from which the
      DPUs' OVS flows are programmed (no published CRD fits; see that function).

    Contract properties: ``tenant``, ``name``, ``cidr``, ``vxlan_id``, ``vlan_id``, ``nad``
    (``<namespace>/<network>``, the Multus network name VMs use), ``clusters`` (the clusters its NAD
    is created in).
    """

    tenant: pulumi.Output[str]
    name: pulumi.Output[str]
    cidr: pulumi.Output[str]
    vxlan_id: pulumi.Output[int]
    vlan_id: pulumi.Output[int]
    nad: pulumi.Output[str]
    clusters: pulumi.Output[list[str]]
    segment: pulumi.Output[str]

    def __init__(
        self, name: str, args: TenantNetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        c = args.config
        nad_ref = network_attachment_ref(args.namespace, c.name)
        clusters = [n for t in args.nad_targets for n in t.clusters]
        props = contract_props(
            "TenantNetwork", {"tenant": args.tenant, "nad": nad_ref, "clusters": clusters}, config=c
        )
        super().__init__(token("TenantNetwork"), name, props, opts)
        labels = common_labels(tenant=args.tenant, network=c.name)
        cni_config = json.dumps(tenant_network_cni_config(args.tenant, c), sort_keys=True)
        for t in args.nad_targets:
            k8s.apiextensions.CustomResource(
                f"{name}-nad-{t.target.name}",
                api_version=NAD_API,
                kind="NetworkAttachmentDefinition",
                metadata={
                    "name": c.name,
                    "namespace": args.namespace,
                    "labels": {**labels, OBJECT_LABEL: "network-attachment"},
                },
                spec={"config": cni_config},
                opts=child_opts(self, provider=t.target.provider, depends_on=[t.namespace_resource]),
            )
        segment_name = f"vxlan-{args.tenant}-{c.name}"
        k8s.core.v1.ConfigMap(
            f"{name}-segment",
            metadata={
                "name": segment_name,
                "namespace": args.segment_namespace or args.namespace,
                "labels": {**labels, "composable-gpu.io/segment": "vxlan", OBJECT_LABEL: "vxlan-segment"},
            },
            data=vxlan_segment_data(args.tenant, c),
            opts=child_opts(self, provider=args.provider, depends_on=[args.namespace_resource]),
        )
        publish_outputs(self, {**props, "segment": segment_name})
