"""Tenant networks and tenant clusters: segment IDs, address ranges, attachments, control planes.

Facts: VXLAN network identifiers are 24-bit (RFC 7348 section 5: 1..16777215 usable here);
802.1Q VLAN IDs are 1..4094 (0 and 4095 reserved). A hosted control plane is one whose CAPI
control-plane object runs it as pods in the management cluster: k0smotron's
``K0smotronControlPlane`` (CRD ``controlplane.cluster.x-k8s.io_k0smotroncontrolplanes.yaml``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from domain.contract import TENANT_CLUSTER, TENANT_NETWORK

from .model import Findings, ResourceRecord, rule
from .reading import INVALID, of_type, read, read_cidr, read_int, read_str_list

VXLAN_MAX = 16_777_215
VLAN_MAX = 4094


@rule(
    "tenant-network-uniqueness",
    "Tenant networks have unique VXLAN IDs and VLAN IDs and non-overlapping CIDRs.",
)
def tenant_network_uniqueness(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``tenant-network-uniqueness``: no two tenant networks share a VXLAN ID or a VLAN ID, and
    no two tenant networks' CIDRs overlap.

    Every pair is checked, whether or not the tenants differ (two networks with one VXLAN ID
    are one L2 segment); messages say when the pair crosses tenants. ``vlan_id`` may be absent
    (untagged network); ``vxlan_id`` and ``cidr`` are required.
    """
    nets: list[tuple[ResourceRecord, Any, Any, Any, Any]] = []
    for rec in of_type(resources, TENANT_NETWORK):
        tenant = read(rec, "tenant", found, kind=str)
        vxlan = read_int(rec, "vxlan_id", found, lo=1, hi=VXLAN_MAX)
        vlan = read_int(rec, "vlan_id", found, lo=1, hi=VLAN_MAX, required=False)
        cidr = read_cidr(rec, "cidr", found)
        nets.append((rec, tenant, vxlan, vlan, cidr))

    for (a, ta, vxa, vla, ca), (b, tb, vxb, vlb, cb) in combinations(nets, 2):
        between = _between(a, ta, b, tb)
        if vxa is not INVALID and vxa == vxb:
            found.add(b, f"VXLAN ID {vxb} is also used by {a.label} {between}",
                      f"give {b.label} a VXLAN ID no other tenant network uses")
        if vla not in (INVALID, None) and vla == vlb:
            found.add(b, f"VLAN ID {vlb} is also used by {a.label} {between}",
                      f"give {b.label} a VLAN ID no other tenant network uses")
        if ca is not INVALID and cb is not INVALID and ca.version == cb.version and ca.overlaps(cb):
            found.add(b, f"CIDR {cb} overlaps CIDR {ca} of {a.label} {between}",
                      f"give {b.label} an address range disjoint from every other tenant network")


def _between(a: ResourceRecord, ta: Any, b: ResourceRecord, tb: Any) -> str:
    if isinstance(ta, str) and isinstance(tb, str):
        if ta != tb:
            return f"(tenant '{tb}' vs tenant '{ta}': cross-tenant)"
        return f"(both of tenant '{ta}')"
    return "(tenant unknown)"


@rule(
    "tenant-cluster-own-networks",
    "A tenant cluster attaches only to its own tenant's networks and their NADs.",
)
def tenant_cluster_own_networks(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``tenant-cluster-own-networks``: a TenantCluster attaches only to its own tenant's networks,
    and its VMs' interfaces reference NetworkAttachmentDefinitions that exist and are its tenant's.

    - every entry ``<tenant>/<network>`` of ``networks`` names a TenantNetwork declared in the
      stack whose ``tenant`` is the cluster's own tenant;
    - every entry of ``network_attachments`` (the Multus network names ``<namespace>/<nad>`` the
      worker VMs use) is the ``nad`` of a TenantNetwork of the cluster's own tenant (a NAD of
      another tenant, or one the stack does not create, fails).
    """
    declared: dict[tuple[str, str], ResourceRecord] = {}
    nads: dict[str, str] = {}  # NAD reference -> owning tenant
    for rec in of_type(resources, TENANT_NETWORK):
        tenant, name = rec.props.get("tenant"), rec.props.get("name", rec.name)
        if isinstance(tenant, str) and isinstance(name, str):
            declared.setdefault((tenant, name), rec)
        nad = rec.props.get("nad")
        if isinstance(tenant, str) and isinstance(nad, str):
            nads.setdefault(nad, tenant)
        # Unknown tenant/name/nad: a reference to it fails below (cannot be proven).

    for rec in of_type(resources, TENANT_CLUSTER):
        tenant = read(rec, "tenant", found, kind=str)
        networks = read_str_list(rec, "networks", found, what="a list of '<tenant>/<network>' names")
        attachments = read_str_list(
            rec, "network_attachments", found, what="a list of '<namespace>/<nad>' Multus network names"
        )
        if tenant is INVALID:
            continue
        for ref in networks if networks is not INVALID else []:
            owner, sep, net = ref.partition("/")
            if not sep or not owner or not net:
                found.add(rec, f"network reference {ref!r} is not of the form '<tenant>/<network>'",
                          f"write it as '{tenant}/<network>'")
                continue
            if owner != tenant:
                found.add(rec, f"tenant '{tenant}' cluster attaches to network '{ref}' of tenant '{owner}'",
                          f"attach {rec.label} only to networks of tenant '{tenant}'")
                continue
            target = declared.get((owner, net))
            if target is None:
                found.add(rec, f"network '{ref}' is not a TenantNetwork declared in this stack, so its "
                          "ownership cannot be proven",
                          f"declare TenantNetwork '{net}' for tenant '{tenant}' or remove the reference")
        for ref in attachments if attachments is not INVALID else []:
            owner = nads.get(ref)
            if owner is None:
                found.add(rec, f"VM interface references NetworkAttachmentDefinition '{ref}', which no "
                          "TenantNetwork of this stack creates",
                          f"attach {rec.label} only to the NADs of tenant '{tenant}''s TenantNetworks")
            elif owner != tenant:
                found.add(rec, f"VM interface of tenant '{tenant}' references NetworkAttachmentDefinition "
                          f"'{ref}' of tenant '{owner}'",
                          f"attach {rec.label} only to the NADs of tenant '{tenant}''s TenantNetworks")


class HostedControlPlaneConfig(BaseModel):
    """Policy config of ``tenant-cluster-hosted-control-plane``."""

    model_config = ConfigDict(extra="forbid")

    hosted_control_plane_kinds: list[str] = Field(
        default=["K0smotronControlPlane"],
        description="Cluster API control-plane kinds that run the control plane as pods in the management "
        "cluster (hosted); a TenantCluster's ClusterTemplate must declare one of them as its control_plane "
        "(k0smotron: K0smotronControlPlane; K0sControlPlane and KubeadmControlPlane run on machines).",
    )


@rule(
    "tenant-cluster-hosted-control-plane",
    "Tenant clusters use a hosted-control-plane template (no control plane on tenant workers).",
    config_model=HostedControlPlaneConfig,
)
def tenant_cluster_hosted_control_plane(
    resources: Sequence[ResourceRecord], config: HostedControlPlaneConfig | None, found: Findings
) -> None:
    """``tenant-cluster-hosted-control-plane``: TenantClusters set ``hosted_control_plane: true`` and
    their ClusterTemplate declares a hosted control-plane kind (``control_plane``), so no control plane
    runs on tenant workers. The template's name is not evidence: a template called ``*-hosted-cp``
    whose chart renders ``K0sControlPlane`` fails."""
    cfg = config or HostedControlPlaneConfig()
    for rec in of_type(resources, TENANT_CLUSTER):
        hosted = read(rec, "hosted_control_plane", found, kind=bool, what="true or false")
        kind = read(rec, "control_plane", found, kind=str, what="a Cluster API control-plane kind")
        template = rec.props.get("template", "?")
        if hosted is False:
            found.add(rec, "hosted_control_plane is false: the control plane would run on tenant workers",
                      "use a ClusterTemplate whose control plane is hosted (control_plane "
                      f"{' or '.join(cfg.hosted_control_plane_kinds)})")
        if kind is not INVALID and kind not in cfg.hosted_control_plane_kinds:
            found.add(rec, f"template '{template}' declares control plane '{kind}', which is not a hosted "
                      f"control plane ({', '.join(cfg.hosted_control_plane_kinds)})",
                      "use a ClusterTemplate whose chart renders a hosted control plane such as "
                      "K0smotronControlPlane")
