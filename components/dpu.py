"""``composable:infra:Dpu``: a BlueField-3 DPU's zero-trust posture and its DPF flavor."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components._base import Mothership, child_opts, secret, token
from components.manifests import common_labels, dpu_flavor_spec
from dynamic_providers.redfish.provider import DpuPosture
from stack_config.models import DpuConfig


@dataclass(frozen=True)
class DpuArgs:
    """Inputs of :class:`Dpu`.

    Attributes:
        config: the DPU's config (BMC, mode, privilege, rshim, mlxconfig).
        host: name of the host carrying the DPU.
        mothership: where the DPUFlavor goes.
        ca_bundle: resolved path of the BMC's CA bundle, or None.
    """

    config: DpuConfig
    host: str
    mothership: Mothership
    ca_bundle: str | None = None


class Dpu(pulumi.ComponentResource):
    """A BlueField-3 DPU in DPU mode with zero-trust posture.

    Children:

    - ``<name>-posture``: :class:`dynamic_providers.redfish.provider.DpuPosture` (Redfish on the DPU
      BMC: ``Mode.Set``, ``HostPrivilegeLevel`` BIOS attribute, ``HostRshim.Set``); BMC credentials
      are Pulumi secrets.
    - ``<name>-flavor``: DPF ``DPUFlavor`` whose ``nvconfig[].parameters`` carry the mlxconfig
      settings (``VIRTIO_NET_EMULATION_ENABLE=1`` ...). Its spec is immutable (CRD rule
      ``self == oldSelf``), so a change replaces it.

    Contract properties: ``name``, ``host``, ``bmc_address``, ``bmc_verify_tls``, ``mode``,
    ``host_privilege``, ``host_rshim``, ``mlxconfig``.
    """

    name: pulumi.Output[str]
    host: pulumi.Output[str]
    mode: pulumi.Output[str]
    host_privilege_level: pulumi.Output[str]
    host_rshim: pulumi.Output[str]
    reset_pending: pulumi.Output[bool]
    flavor: pulumi.Output[str]
    dpu_name: str
    """The DPU's name (plain, for components that reference it)."""
    flavor_name: str
    """Name of its DPUFlavor object (plain, for DPUSets)."""

    def __init__(self, name: str, args: DpuArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.config
        props = {
            "name": name,
            "host": args.host,
            "bmc_address": c.bmc.endpoint,
            "bmc_verify_tls": c.bmc.verify_tls,
            "mode": c.mode,
            "host_privilege": c.host_privilege,
            "host_rshim": c.host_rshim,
            "mlxconfig": dict(c.mlxconfig),
        }
        super().__init__(token("Dpu"), name, props, opts)

        posture = DpuPosture(
            f"{name}-posture",
            bmc_endpoint=c.bmc.endpoint,
            username=secret(c.bmc.username),
            password=secret(c.bmc.password),
            verify_tls=c.bmc.verify_tls,
            ca_bundle=args.ca_bundle,
            mode=c.mode,
            host_privilege=c.host_privilege,
            host_rshim=c.host_rshim,
            apply_reset=c.apply_reset,
            opts=pulumi.ResourceOptions(parent=self),
        )
        ms = args.mothership
        flavor_name = f"{name}-flavor"
        self.dpu_name, self.flavor_name = name, flavor_name
        k8s.apiextensions.CustomResource(
            flavor_name,
            api_version="provisioning.dpu.nvidia.com/v1alpha1",
            kind="DPUFlavor",
            metadata={
                "name": flavor_name,
                "namespace": ms.namespace,
                "labels": common_labels(host=args.host, dpu=name),
            },
            spec=dpu_flavor_spec(c.mlxconfig),
            opts=child_opts(
                self,
                provider=ms.provider,
                depends_on=[ms.namespace_resource],
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )

        self.name = pulumi.Output.from_input(name)
        self.host = pulumi.Output.from_input(args.host)
        self.mode = posture.mode
        self.host_privilege_level = posture.host_privilege_level
        self.host_rshim = posture.host_rshim
        self.reset_pending = posture.reset_pending
        self.flavor = pulumi.Output.from_input(flavor_name)
        self.register_outputs(
            {
                "name": self.name,
                "host": self.host,
                "mode": self.mode,
                "host_privilege_level": self.host_privilege_level,
                "host_rshim": self.host_rshim,
                "reset_pending": self.reset_pending,
                "flavor": self.flavor,
            }
        )
