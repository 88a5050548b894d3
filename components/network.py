"""``composable:infra:TenantNetwork``: one isolated tenant network."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, token
from components.manifests import common_labels, tenant_network_data
from stack_config.models import TenantNetworkConfig


@dataclass(frozen=True)
class TenantNetworkArgs:
    """Inputs of :class:`TenantNetwork`.

    Attributes:
        tenant: tenant name.
        namespace: the tenant's namespace on the mothership.
        config: the network (name, CIDR, VXLAN ID, VLAN ID, gateway).
        provider: mothership provider.
        namespace_resource: the tenant Namespace (dependency), or None.
    """

    tenant: str
    namespace: str
    config: TenantNetworkConfig
    provider: k8s.Provider
    namespace_resource: pulumi.Resource | None = None


class TenantNetwork(pulumi.ComponentResource):
    """A tenant network: name, IPAM CIDR, VXLAN ID and VLAN ID.

    Representation: k0rdent's networking object (seed article 2: "a network object with the tenant
    network name, IPAM range and VXLAN ID") has no published CRD, and DPF's ``DPUService`` describes
    a Helm chart rather than a network, so the network is a ConfigMap ``<tenant>-<network>`` in the
    tenant's namespace, labelled ``composable-gpu.io/tenant`` and ``composable-gpu.io/network``, with
    ``data`` ``{tenant, name, cidr, vxlanId, vlanId[, gateway]}``. It is the record a network operator
    (OVS flows on the DPUs) and the tenant clusters' Multus attachments (``<namespace>/<network>``)
    are derived from, readable with plain ``kubectl``.

    Contract properties: ``tenant``, ``name``, ``cidr``, ``vxlan_id``, ``vlan_id``.
    """

    tenant: pulumi.Output[str]
    name: pulumi.Output[str]
    cidr: pulumi.Output[str]
    vxlan_id: pulumi.Output[int]
    vlan_id: pulumi.Output[int]
    config_map: pulumi.Output[str]

    def __init__(
        self, name: str, args: TenantNetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        c = args.config
        props = {
            "tenant": args.tenant,
            "name": c.name,
            "cidr": c.cidr,
            "vxlan_id": c.vxlan_id,
            "vlan_id": c.vlan_id,
        }
        super().__init__(token("TenantNetwork"), name, props, opts)
        cm_name = f"{args.tenant}-{c.name}"
        k8s.core.v1.ConfigMap(
            f"{name}-network",
            metadata={
                "name": cm_name,
                "namespace": args.namespace,
                "labels": common_labels(tenant=args.tenant, network=c.name),
            },
            data=tenant_network_data(args.tenant, c),
            opts=child_opts(self, provider=args.provider, depends_on=[args.namespace_resource]),
        )
        self.tenant = pulumi.Output.from_input(args.tenant)
        self.name = pulumi.Output.from_input(c.name)
        self.cidr = pulumi.Output.from_input(c.cidr)
        self.vxlan_id = pulumi.Output.from_input(c.vxlan_id)
        self.vlan_id = pulumi.Output.from_input(c.vlan_id)
        self.config_map = pulumi.Output.from_input(cm_name)
        self.register_outputs(
            {
                "tenant": self.tenant,
                "name": self.name,
                "cidr": self.cidr,
                "vxlan_id": self.vxlan_id,
                "vlan_id": self.vlan_id,
                "config_map": self.config_map,
            }
        )
