"""``composable:infra:GpuSharing``: time-slicing, MPS or MIG for the GPU Operator device plugin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, contract_props, publish_outputs, token
from components.manifests import common_labels, device_plugin_config, host_node_labels, to_yaml
from stack_config.models import GpuSharingConfig


@dataclass(frozen=True)
class GpuSharingArgs:
    """Inputs of :class:`GpuSharing`.

    Attributes:
        config: strategy, hosts, replicas / MIG config.
        tenants: tenants whose pods may land on these GPUs.
        namespace: namespace of the ConfigMap (the tenant's namespace).
        provider: mothership provider.
        depends_on: resources to wait for (the Namespace).
    """

    config: GpuSharingConfig
    tenants: Sequence[str]
    namespace: str
    provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource | None] = ()


class GpuSharing(pulumi.ComponentResource):
    """A named GPU Operator device-plugin config and the node labels that select it.

    Child ``<name>-config``: ConfigMap ``<name>`` whose data key ``<name>`` holds the device-plugin
    config file (``version: v1``; ``sharing.timeSlicing`` / ``sharing.mps`` with ``resources:
    [{name: nvidia.com/gpu, replicas: N}]``, or ``flags.migStrategy`` for MIG) - the format the GPU
    Operator's ``devicePlugin.config`` ConfigMap uses. The same config is delivered inline to the
    hosts' cluster through its GPU Operator service values, and the hosts get the labels
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
        k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata={
                "name": name,
                "namespace": args.namespace,
                "labels": common_labels(
                    gpu_sharing=c.strategy, tenant=args.tenants[0] if len(args.tenants) == 1 else None
                ),
            },
            data={name: to_yaml(device_plugin_config(c))},
            opts=child_opts(self, provider=args.provider, depends_on=args.depends_on),
        )
        node_labels = host_node_labels(gpu_workload_mode=None, sharing=[(name, c)])
        publish_outputs(self, {**props, "config_map": name, "node_labels": node_labels})
