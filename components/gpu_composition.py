"""``composable:infra:GpuComposition``: GPUs statically composed onto a host through the Director."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components._base import contract_props, secret_login, token
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
        props = {
            "host": c.host,
            "tenant": c.tenant,
            "count": c.planned_count,
            "model": c.model,
            "device_names": list(c.device_names),
            "pool": c.pool,
        }
        super().__init__(token("GpuComposition"), name, contract_props("GpuComposition", props), opts)
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
        self.host = pulumi.Output.from_input(c.host)
        self.pool = pulumi.Output.from_input(c.pool)
        self.tenant = pulumi.Output.from_input(c.tenant)
        self.device_names = attach.device_names
        self.models = attach.models
        self.fabric_ids = attach.fabric_ids
        self.machine_id = attach.machine_id
        self.register_outputs(
            {
                "host": self.host,
                "pool": self.pool,
                "tenant": self.tenant,
                "device_names": self.device_names,
                "models": self.models,
                "fabric_ids": self.fabric_ids,
                "machine_id": self.machine_id,
            }
        )
