"""Nodes as the composer sees them (:class:`NodeView`), and the planner's host view of them.

Pure functions over the core/v1 Node JSON (``GET /api/v1/nodes``) plus the Director's truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from composer.model import annotations as ann
from composer.model.models import (
    COUNT_LABEL,
    GPU_RESOURCE,
    MIXED_MODELS,
    HostSharing,
    HostState,
    Taint,
    is_gpu_resource,
)
from composer.model.podspec import PodView, quantity


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the composer needs of one node.

    Attributes:
        name: node name (== Director machine name).
        labels / taints: as on the node.
        unschedulable: ``spec.unschedulable`` (cordoned).
        ready: condition ``Ready=True``.
        cpu_millis / memory_bytes: allocatable CPU (millicores) and memory (bytes).
        gpu_allocatable: GPU resource name -> allocatable units (as advertised by the device plugin).
        record: the composer's own annotations, decoded.
        do_not_reclaim: annotation ``composer.liqid.io/do-not-reclaim: "true"`` is on the node.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    cpu_millis: int = 0
    memory_bytes: int = 0
    gpu_allocatable: Mapping[str, int] = field(default_factory=dict)
    record: ann.NodeRecord = field(default_factory=ann.NodeRecord)
    do_not_reclaim: bool = False
    #: The composer's reclaim taint is on the node (derived from ``taints`` once, as every
    #: round asks it of every node).
    reclaim_tainted: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reclaim_tainted", any(t.key == ann.RECLAIM_TAINT_KEY for t in self.taints))

    @property
    def advertised_gpus(self) -> int:
        """Physical GPUs the node advertises: GFD ``nvidia.com/gpu.count``, else ``nvidia.com/gpu``."""
        try:
            return int(self.labels[COUNT_LABEL])
        except (KeyError, ValueError):
            return self.gpu_allocatable.get(GPU_RESOURCE, 0)


def node_view(node: Mapping[str, Any]) -> NodeView:
    """Parse one core/v1 Node JSON object."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    alloc: Mapping[str, Any] = status.get("allocatable") or status.get("capacity") or {}
    conditions = status.get("conditions") or ()
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return NodeView(
        name=meta.get("name") or "",
        labels=meta.get("labels") or {},
        taints=tuple(
            Taint(t.get("key") or "", t.get("value") or "", t.get("effect") or "")
            for t in spec.get("taints") or ()
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        cpu_millis=int(quantity(str(alloc.get("cpu", "0"))) * 1000),
        memory_bytes=int(quantity(str(alloc.get("memory", "0")))),
        gpu_allocatable={k: int(quantity(str(v))) for k, v in alloc.items() if is_gpu_resource(k)},
        record=ann.decode(meta.get("annotations")),
        do_not_reclaim=str((meta.get("annotations") or {}).get(ann.DO_NOT_RECLAIM, "")).lower() == "true",
    )


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """Requests of the pods bound to (or nominated onto) one node."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    gpu: Mapping[str, int] = field(default_factory=dict)
    #: a non-terminal pod requesting a GPU resource is bound or nominated to the node
    gpu_pods: int = 0


def usage_by_node(pods: Iterable[PodView]) -> dict[str, NodeUsage]:
    """Node name -> requests of its non-terminal pods (nominated GPU pods count as GPU users)."""
    acc: dict[str, list[Any]] = {}
    for p in pods:
        if p.terminal:
            continue
        if p.node_name:
            a = acc.setdefault(p.node_name, [0, 0, {}, 0])
            a[0] += p.cpu_millis
            a[1] += p.memory_bytes
            for r, n in p.gpu.items():
                a[2][r] = a[2].get(r, 0) + n
            if p.gpu:
                a[3] += 1
        elif p.nominated_node and p.gpu:
            a = acc.setdefault(p.nominated_node, [0, 0, {}, 0])
            a[3] += 1
    return {n: NodeUsage(a[0], a[1], a[2], a[3]) for n, a in acc.items()}


def host_model(models: Iterable[str]) -> str | None:
    """The single model of a host's GPUs, None for none, :data:`MIXED_MODELS` for several."""
    distinct = set(models)
    if not distinct:
        return None
    return next(iter(distinct)) if len(distinct) == 1 else MIXED_MODELS


def host_state(
    node: NodeView,
    *,
    record: ann.NodeRecord,
    usage: NodeUsage,
    attached_models: Mapping[str, str],
    pending: Mapping[str, PodView],
    pool: str,
    max_gpus: int | None,
    units_per_gpu: Mapping[str, int],
    group: str | None = None,
    sharing: HostSharing | None = None,
) -> HostState:
    """The planner's view of a composable node.

    Args:
        node: the node.
        record: its composer record after reconciliation with the Director.
        usage: requests of pods bound to it.
        attached_models: device name -> model of every GPU the Director has attached to it.
        pending: pod UID -> pod, for the pods named by ``record.intents`` (their requests are
            reserved on the node until they are bound).
        pool: the host's pool.
        max_gpus: GPU slot limit (None = no limit).
        units_per_gpu: resource name -> units one GPU yields (a host without a sharing setting).
        group: the machine's Director group id (GPUs in a group's pool only go to its machines).
        sharing: the host's sharing setting; its offers for the host's GPU model give the units one
            GPU yields (a model it has no offer for counts one unit per GPU).

    GPUs in ``attached_models`` that are not the composer's (not in ``record.devices``, an intent or
    a reclaim) count as ``static_gpus``: static compositions, or attached by hand.
    """
    cpu = node.cpu_millis - usage.cpu_millis
    mem = node.memory_bytes - usage.memory_bytes
    schedulable = (node.ready and not node.unschedulable and record.reclaim is None
                   and not node.reclaim_tainted)
    if bare(node, record, attached_models):  # most hosts of a large fleet: nothing below applies
        return HostState(name=node.name, pool=pool, cpu_free_millis=cpu, memory_free_bytes=mem,
                         max_gpus=max_gpus, labels=node.labels, taints=node.taints, schedulable=schedulable,
                         group=group, sharing=sharing)
    models = list(attached_models.values())
    spare: dict[str, int] = {r: max(0, n - usage.gpu.get(r, 0)) for r, n in node.gpu_allocatable.items()}
    # GPUs attached but not advertised yet (hot-plugged moments ago) arrive as units of what they
    # yield here: count them once, here, so a GPU composed for a pod that went away before the
    # node advertised it serves the next pod instead of a second compose. A host with a sharing
    # setting yields its offers for its model; a host without one nvidia.com/gpu, one unit per
    # GPU, unless it advertises other resources (there nvidia.com/gpu may be renamed).
    model = host_model([*models, *(it.model for it in record.intents.values())])
    yields = _yields(sharing, model)
    plain = yields is None and set(node.gpu_allocatable) <= {GPU_RESOURCE}
    if yields is None:
        yields = {GPU_RESOURCE: 1} if plain else {}
    for res, per in yields.items():
        coming = max(0, len(attached_models) * per - node.gpu_allocatable.get(res, 0))
        if coming:
            spare[res] = spare.get(res, 0) + coming
    managed = set(record.devices) | set(record.reclaim.devices if record.reclaim else ())
    in_flight = 0
    for uid, it in record.intents.items():
        managed.update(it.devices)
        p = pending.get(uid)
        if p is not None:
            cpu -= p.cpu_millis
            mem -= p.memory_bytes
        fresh = [d for d in it.devices if d not in attached_models]
        in_flight += len(fresh)
        if it.phase == ann.IntentPhase.ADVERTISED or not it.devices:
            spare[it.resource] = spare.get(it.resource, 0) - it.units
        else:  # attached or composing, not advertised yet: its units arrive with its devices
            per = yields.get(it.resource) or (
                1 if it.resource == GPU_RESOURCE else units_per_gpu.get(it.resource, 1)
            )
            arriving = len(fresh) if it.resource in yields else len(it.devices)
            spare[it.resource] = spare.get(it.resource, 0) + arriving * per - it.units
            for res, n in yields.items():  # what the fresh GPUs yield of other resources (MIG mixed)
                if res != it.resource:
                    spare[res] = spare.get(res, 0) + len(fresh) * n
    return HostState(
        name=node.name,
        pool=pool,
        cpu_free_millis=cpu,
        memory_free_bytes=mem,
        model=model,
        attached=len(attached_models) + in_flight,
        max_gpus=max_gpus,
        spare={r: n for r, n in spare.items() if n > 0},
        labels=node.labels,
        taints=node.taints,
        group=group,
        static_gpus=sum(1 for d in attached_models if d not in managed),
        schedulable=schedulable,
        sharing=sharing,
    )


def bare(node: NodeView, record: ann.NodeRecord, attached_models: Mapping[str, str]) -> bool:
    """A node with no GPU of any kind: none attached, none advertised, no composer record of
    devices, intents or a reclaim. :func:`host_state` describes it without the GPU arithmetic
    (``tests/composer/test_decide_fast_paths.py`` checks rounds decide the same without it)."""
    return (not attached_models and not node.gpu_allocatable and not record.devices and not record.intents
            and record.reclaim is None)


def _yields(sharing: HostSharing | None, model: str | None) -> dict[str, int] | None:
    """Resource -> units one GPU of ``model`` yields on a host with ``sharing``; None without a
    sharing setting or a single known model."""
    if sharing is None or model is None or model == MIXED_MODELS:
        return None
    return {o.resource: o.units for o in sharing.offers.get(model, ())} or None


def max_gpus_of(node: NodeView, default: int | None) -> int | None:
    """GPU slot limit from the node label ``composer.liqid.io/max-gpus``, else ``default``."""
    raw = node.labels.get(ann.MAX_GPUS_LABEL)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default
