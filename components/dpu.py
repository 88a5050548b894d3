"""``composable:infra:Dpu``: a BlueField-3 DPU's zero-trust posture and its DPF flavor."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components._base import (
    Mothership,
    child_opts,
    contract_props,
    publish_outputs,
    secret,
    secret_login,
    token,
)
from components.manifests import common_labels, dpu_flavor_spec
from dynamic_providers.redfish.provider import DpuPosture
from dynamic_providers.ssh.provider import DpuMlxconfig, SshConnectionArgs
from stack_config.models import DpuConfig, SshConnectionConfig


def ssh_connection(config: SshConnectionConfig) -> SshConnectionArgs:
    """The ``connection`` input of the ``dynamic_providers.ssh`` resources for an SSH section of the config.

    The private key leaves the config only as a Pulumi secret (the resources wrap the whole connection
    as a secret again, so host, port and user are encrypted in state too).
    """
    return {
        "host": config.host,
        "port": config.port,
        "user": config.user,
        "private_key": secret(config.private_key),
        "host_key": config.host_key,
    }


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
    - ``<name>-mlxconfig`` (only with ``prep`` in the config): :class:`dynamic_providers.ssh.provider.
      DpuMlxconfig`, the same settings set over SSH on ``prep.device`` (query first, set only what
      differs; ``mlxfwreset`` only with ``prep.allow_firmware_reset``). Runs after the posture (which may
      reset the DPU). The SSH private key is a Pulumi secret.

    Contract properties: ``name``, ``host``, ``bmc_address``, ``bmc_verify_tls``, ``mode``,
    ``host_privilege``, ``host_rshim``, ``mlxconfig``; with ``prep`` also ``allow_firmware_reset``.

    Outputs: ``reset_pending`` is the posture's (BIOS settings waiting for a DPU reset);
    ``firmware_reset_pending`` is True while set mlxconfig values wait for ``mlxfwreset`` or a power
    cycle (None without ``prep``).
    """

    name: pulumi.Output[str]
    host: pulumi.Output[str]
    mode: pulumi.Output[str]
    host_privilege_level: pulumi.Output[str]
    host_rshim: pulumi.Output[str]
    reset_pending: pulumi.Output[bool]
    firmware_reset_pending: pulumi.Output[bool | None]
    flavor: pulumi.Output[str]
    mlxconfig_prep: DpuMlxconfig | None
    """The SSH mlxconfig resource, when the config has ``prep``."""
    dpu_name: str
    """The DPU's name (plain, for components that reference it)."""
    flavor_name: str
    """Name of its DPUFlavor object (plain, for DPUSets)."""

    def __init__(self, name: str, args: DpuArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.config
        own = {
            "name": name,
            "host": args.host,
            "bmc_address": c.bmc.endpoint,
            "bmc_verify_tls": c.bmc.verify_tls,
        }
        if c.prep is not None:
            own["allow_firmware_reset"] = c.prep.allow_firmware_reset
        super().__init__(token("Dpu"), name, contract_props("Dpu", own, config=c), opts)

        posture = DpuPosture(
            f"{name}-posture",
            bmc_endpoint=c.bmc.endpoint,
            **secret_login(c.bmc),
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
                "labels": common_labels(host=args.host, dpu=name, object="dpu-flavor"),
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

        self.mlxconfig_prep = None
        if c.prep is not None:
            self.mlxconfig_prep = DpuMlxconfig(
                f"{name}-mlxconfig",
                connection=ssh_connection(c.prep),
                device=c.prep.device,
                parameters=dict(c.mlxconfig),
                allow_firmware_reset=c.prep.allow_firmware_reset,
                use_sudo=c.prep.use_sudo,
                opts=child_opts(self, depends_on=[posture]),
            )

        prep = self.mlxconfig_prep
        publish_outputs(
            self,
            {
                "name": name,
                "host": args.host,
                "mode": posture.mode,
                "host_privilege_level": posture.host_privilege_level,
                "host_rshim": posture.host_rshim,
                "reset_pending": posture.reset_pending,
                "firmware_reset_pending": None if prep is None else prep.reset_pending,
                "flavor": flavor_name,
            },
        )
