"""``composable:infra:GpuSharing``: time-slicing, MPS or MIG for the GPU Operator device plugin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, contract_props, publish_outputs, token
from components.cluster_access import TenantTarget
from components.manifests import common_labels, device_plugin_config, host_node_labels, to_yaml
from stack_config.models import GpuSharingConfig


@dataclass(frozen=True)
class GpuSharingArgs:
    """Inputs of :class:`GpuSharing`.

    Attributes:
        config: strategy, hosts, replicas / MIG config.
        tenants: tenants whose pods may land on these GPUs.
        namespace: namespace of the ConfigMap (the tenant's namespace).
        targets: the hypervisor clusters of the sharing hosts (one per API server), each with the
            tenant's Namespace there (dependency).
    """

    config: GpuSharingConfig
    tenants: Sequence[str]
    namespace: str
    targets: Sequence[TenantTarget] = ()


class GpuSharing(pulumi.ComponentResource):
    """A named GPU Operator device-plugin config and the node labels that select it.

    Children ``<name>-config-<cluster>``: in the tenant's namespace of each hypervisor cluster of the
    sharing hosts, ConfigMap ``<name>`` whose data key ``<name>`` holds the device-plugin config file
    (``version: v1``; ``sharing.timeSlicing`` / ``sharing.mps`` with ``resources: [{name:
    nvidia.com/gpu, replicas: N}]``, or ``flags.migStrategy`` for MIG) - the format the GPU
    Operator's ``devicePlugin.config`` ConfigMap uses. It is the tenant's record in the cluster where
    its shared GPUs are: the device plugin reads one ConfigMap only, ``device-plugin-config`` in the
    GPU Operator's namespace, which the GPU Operator chart creates from the same configs delivered
    inline in the cluster's GPU Operator service values; the hosts get the labels
    ``nvidia.com/device-plugin.config=<name>`` (and ``nvidia.com/mig.config=<profile>`` for MIG).

    Contract properties: ``name``, ``hosts``, ``strategy``, ``replicas``, ``mig_profile``, ``tenants``.
    """

    name: pulumi.Output[str]
    strategy: pulumi.Output[str]
    hosts: pulumi.Output[list[str]]
    replicas: pulumi.Output[int | None]
    mig_profile: pulumi.Output[str | None]
    config_map: pulumi.Output[str]
    node_labels: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: GpuSharingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.config
        props = contract_props(
            "GpuSharing", {"name": name, "mig_profile": c.mig_config, "tenants": list(args.tenants)}, config=c
        )
        super().__init__(token("GpuSharing"), name, props, opts)
        data = {name: to_yaml(device_plugin_config(c))}
        labels = common_labels(
            gpu_sharing=c.strategy, tenant=args.tenants[0] if len(args.tenants) == 1 else None,
            object="gpu-sharing",
        )
        for t in args.targets:
            k8s.core.v1.ConfigMap(
                f"{name}-config-{t.target.name}",
                metadata={"name": name, "namespace": args.namespace, "labels": labels},
                data=data,
                opts=child_opts(self, provider=t.target.provider, depends_on=[t.namespace_resource]),
            )
        node_labels = host_node_labels(gpu_workload_mode=None, sharing=[(name, c)])
        publish_outputs(self, {**props, "config_map": name, "node_labels": node_labels})
