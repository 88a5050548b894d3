"""``composable:infra:GpuComposition``: GPUs statically composed onto a host through the Director."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components._base import contract_props, publish_outputs, secret_login, token
from dynamic_providers.director.provider import GpuComposition as DirectorGpuComposition
from stack_config.models import DirectorConfig, GpuCompositionConfig, GpuPoolConfig


@dataclass(frozen=True)
class GpuCompositionArgs:
    """Inputs of :class:`GpuComposition`.

    Attributes:
        config: the composition (host, pool, count or device names, model, tenant).
        director: Director endpoint and credentials (secrets).
        pool: the pool's config (its Director group).
    """

    config: GpuCompositionConfig
    director: DirectorConfig
    pool: GpuPoolConfig


class GpuComposition(pulumi.ComponentResource):
    """Static GPU attachment: GPUs from a pool hot-plugged into a host (Director machine = host name).

    Child ``<name>-attach``: :class:`dynamic_providers.director.provider.GpuComposition` (Director
    ``fabric/edit`` -> ``relate/gpu`` -> ``fabric/reprogram``), Director credentials as Pulumi
    secrets. The attached device names are excluded from the composer's dynamic pool.

    Contract properties: ``host``, ``tenant``, ``count``, ``model``, ``device_names`` (planned; empty
    means any free GPUs), ``pool``.
    """

    host: pulumi.Output[str]
    pool: pulumi.Output[str]
    tenant: pulumi.Output[str | None]
    device_names: pulumi.Output[list[str]]
    models: pulumi.Output[list[str]]
    fabric_ids: pulumi.Output[list]
    machine_id: pulumi.Output

    def __init__(
        self, name: str, args: GpuCompositionArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        c = args.config
        props = contract_props("GpuComposition", {"count": c.planned_count}, config=c)
        super().__init__(token("GpuComposition"), name, props, opts)
        attach = DirectorGpuComposition(
            f"{name}-attach",
            endpoint=args.director.endpoint,
            **secret_login(args.director),
            machine=c.host,
            count=None if c.device_names else c.count,
            device_names=list(c.device_names) or None,
            model=c.model,
            group=args.pool.director_group,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # device_names: those the Director attached (the planned ones are the property's).
        publish_outputs(
            self,
            {
                **props,
                "device_names": attach.device_names,
                "models": attach.models,
                "fabric_ids": attach.fabric_ids,
                "machine_id": attach.machine_id,
            },
        )
