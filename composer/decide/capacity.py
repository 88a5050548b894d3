"""What a pool could ever give one pod, checked before planning. No I/O.

A request is refused here, with a cause that waiting does not change, when

- ``ModelNotInPool``: it names GPU models (``nvidia.com/gpu.product``) and its pool has none of
  them, free or attached to the pool's Nodes;
- ``TooManyGpus``: it needs more GPUs on one host than a host of its pool can take (the GPU slot
  limit, ``maxGpusPerNode`` / node label ``composer.liqid.io/max-gpus``), or than its pool has of
  one model, free and attached together.

The messages name what the pool has: each model with its free count, and the most one host can
take. Everything else (not free *now*, no host fits *now*) is the planner's
(:mod:`composer.decide.planner`). The counts come from the Director's whole read, also the GPUs of
Nodes whose job is running (:attr:`composer.model.fabric.FabricView.whole`), so a compose under way
does not change the verdict.

A pool's GPUs: the free GPUs it may take (healthy, not excluded, no owner tag other than the
composer's; reserved to the pool by ``device_pools`` or shared) and every healthy GPU attached to
a Node of the pool (static ones included: their spare units serve the pool's pods).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from composer.decide.round_types import Policy
from composer.model import annotations as ann
from composer.model.fabric import FabricView
from composer.model.models import GpuRequest, Reason
from composer.model.nodestate import NodeView, max_gpus_of


@dataclass(frozen=True)
class PoolCapacity:
    """GPU counts per pool and model, and each pool's host slot limit.

    Attributes:
        free: (pool, model) -> free GPUs reserved to that pool (pool None: shared by all).
        attached: (pool, model) -> GPUs attached to the Nodes of the pool.
        host_limit: pool -> the most GPUs one of its hosts takes (None: a host has no limit).
    """

    free: Mapping[tuple[str | None, str], int]
    attached: Mapping[tuple[str, str], int]
    host_limit: Mapping[str, int | None]

    @classmethod
    def of(cls, fabric: FabricView, nodes: Iterable[NodeView], policy: Policy) -> PoolCapacity:
        """Count ``fabric`` (its whole read) for ``nodes`` (every composable Node, those with a
        job running included), under ``policy`` (excluded devices, device pools, owner tag)."""
        pools: dict[str, str] = {}
        limits: dict[str, int | None] = {}
        for n in nodes:
            pool = pools[n.name] = n.labels.get(ann.POOL_LABEL, policy.default_pool)
            limit = max_gpus_of(n, policy.max_gpus_per_node)
            if pool not in limits:
                limits[pool] = limit
            elif limits[pool] is not None:
                limits[pool] = None if limit is None else max(limit, limits[pool] or 0)
        free: dict[tuple[str | None, str], int] = {}
        attached: dict[tuple[str, str], int] = {}
        for g in fabric.whole.gpus:
            if not g.healthy:
                continue
            if g.machine is None:
                if g.name in policy.excluded or (g.owner_tag and g.owner_tag != policy.owner_tag):
                    continue
                k = (policy.device_pools.get(g.name), g.model)
                free[k] = free.get(k, 0) + 1
            elif g.machine in pools:
                a = (pools[g.machine], g.model)
                attached[a] = attached.get(a, 0) + 1
        return cls(free, attached, limits)

    def _free(self, pool: str, model: str) -> int:
        return self.free.get((pool, model), 0) + self.free.get((None, model), 0)

    def _has(self, pool: str, model: str) -> int:
        return self._free(pool, model) + self.attached.get((pool, model), 0)

    def models(self, pool: str) -> list[str]:
        """The models ``pool`` has (free for it or attached to its Nodes), sorted."""
        found = {m for (p, m) in self.free if p is None or p == pool}
        found |= {m for (p, m) in self.attached if p == pool}
        return sorted(m for m in found if self._has(pool, m))

    def refusal(self, r: GpuRequest) -> tuple[Reason, str] | None:
        """Why ``r`` can never be served from its pool as it stands, or None (see the module
        docstring). A pool with no GPU at all refuses nothing here: GPUs may be added or
        repaired, and the planner reports ``NoFreeGpus`` meanwhile."""
        have = self.models(r.pool)
        if not have:
            return None
        inventory = ", ".join(f"{m}: {self._free(r.pool, m)} free" for m in have)
        wanted = sorted(r.models) if r.models is not None else have
        if not any(self._has(r.pool, m) for m in wanted):
            return Reason.NO_SUCH_MODEL, f"asks for {'/'.join(wanted)}; pool {r.pool!r} has {inventory}"
        best = max(self._has(r.pool, m) for m in wanted)
        limit = self.host_limit.get(r.pool)
        most = best if limit is None else min(best, limit)
        if r.gpus <= most:
            return None
        free = sum(self._free(r.pool, m) for m in wanted if self._has(r.pool, m))
        slots = (
            f"GPU slot limit {limit}: maxGpusPerNode / node label {ann.MAX_GPUS_LABEL}"
            if limit is not None
            else "no GPU slot limit is set"
        )
        why = slots if limit is not None and limit <= best else f"the pool's GPUs of one model; {slots}"
        return Reason.TOO_MANY_GPUS, (
            f"asks for {r.gpus} GPU(s) ({r.units} {r.resource}) on one host; pool {r.pool!r} has "
            f"{free} free ({inventory}) and the most one host can take is {most} ({why})"
        )
