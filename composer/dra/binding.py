"""Allocation -> compose -> binding conditions: what the driver does for each allocated claim.

Pure. For each ResourceClaim allocated with a device of the driver's pool and a node
(:class:`composer.dra.claims.ClaimView`), :func:`plan_binding` says:

- compose: the GPU is free and healthy, the node is a Director machine, no compose of it runs,
  no failure is held for it: compose exactly that GPU onto that node (a
  :class:`composer.model.models.Placement` the composer's node jobs run, as for a pod);
- binding conditions: once the Director shows the GPU attached to the node, ``Attached`` True;
  once the node also sees every GPU attached to it (its GFD ``nvidia.com/gpu.count`` label, else
  its ``nvidia.com/gpu`` allocatable, at least the number attached: the same fact the
  device-plugin mode waits for, :attr:`composer.model.nodestate.NodeView.advertised_gpus`),
  ``VisibleOnNode`` True, and it stays True while the GPU stays attached there; the
  scheduler's PreBind then binds the pod (docs/dra.md);
- failure condition ``AttachFailed`` True with a reason, when the compose failed (held in
  ``failures``), the GPU is attached to another machine, is unhealthy, is unknown to the Director,
  or the node is no Director machine; the scheduler then clears the allocation and schedules
  the pod again, and the failed GPU is published with the taint
  :data:`composer.dra.slices.TAINT_KEY` (``tainted``) until :func:`healed` drops the failure.

``claimed``: node -> the GPUs allocated claims hold on it (attached or to be composed): a node
with claimed GPUs is busy for the idle reclaim. A GPU composed for a claim whose allocation was
cleared is on no claim any more, so it is idle and reclaimed like any idle composer GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from composer.dra.claims import ClaimView, Condition
from composer.dra.slices import ATTACH_FAILED, ATTACHED, VISIBLE_ON_NODE, device_name
from composer.model.fabric import FabricGpu, FabricView
from composer.model.models import Placement


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed compose of one GPU, held so no claim gets it until it is healed.

    Attributes:
        reason: the condition reason (CamelCase, ``ComposeFailed``).
        message: what failed (the Director's error).
        since: when it failed (seconds since the epoch).
    """

    reason: str
    message: str
    since: float


@dataclass(frozen=True, slots=True)
class BindingPlan:
    """What to do for the allocated claims of one round.

    Attributes:
        composes: node -> placements to compose there (placement ``uid``/``key``: the claim's
            UID and ``namespace/name``; ``devices``: the one Director GPU).
        conditions: (claim namespace, claim name) -> DRA device name -> conditions to set.
        claimed: node -> Director GPU names allocated claims hold on it.
        tainted: Director GPU name -> taint value (the failure reason) for the slices.
    """

    composes: Mapping[str, tuple[Placement, ...]] = field(default_factory=dict)
    conditions: Mapping[tuple[str, str], Mapping[str, tuple[Condition, ...]]] = field(default_factory=dict)
    claimed: Mapping[str, frozenset[str]] = field(default_factory=dict)
    tainted: Mapping[str, str] = field(default_factory=dict)


def healed(
    failures: Mapping[str, Failure], view: FabricView, *, now: float, hold_seconds: float
) -> dict[str, Failure]:
    """The failures still held: a failure is dropped once ``hold_seconds`` passed since it and
    the Director shows the GPU healthy and on no machine (free to publish untainted), or when the
    Director no longer shows the GPU at all."""
    gpus = {g.name: g for g in view.gpus}
    out = {}
    for name, f in failures.items():
        g = gpus.get(name)
        if g is None or (g.healthy and g.machine is None and now - f.since >= hold_seconds):
            continue
        out[name] = f
    return out


def _was_visible(claim: ClaimView, device: str) -> bool:
    """``VisibleOnNode`` is already True on the claim's device: it stays True while the GPU stays
    attached to the node. The node saw every GPU attached to it then; a GPU composed onto the same
    node later (for another claim) raises the attached count before the node's count follows, and
    that must not withdraw a condition the scheduler's PreBind poll may be about to read."""
    return any(c.type == VISIBLE_ON_NODE and c.status == "True" for c in claim.conditions.get(device, ()))


def _holds_attached(claim: ClaimView) -> bool:
    """``Attached`` is True on one of the claim's devices: of two claims allocated the same GPU
    (from two pools, while it moved between them), the one it was composed for keeps it."""
    conds = (c for cs in claim.conditions.values() for c in cs)
    return any(c.type == ATTACHED and c.status == "True" for c in conds)


def _failed(reason: str, message: str, generation: int) -> tuple[Condition, ...]:
    return (Condition(ATTACH_FAILED, "True", reason, message, generation),)


def _attached(gpu: FabricGpu, node: str, visible: bool, generation: int) -> tuple[Condition, ...]:
    if visible:
        why = f"{node} sees the GPUs attached to it"
        seen = Condition(VISIBLE_ON_NODE, "True", "VisibleOnNode", why, generation)
    else:
        why = f"{node} does not see all GPUs attached to it yet"
        seen = Condition(VISIBLE_ON_NODE, "False", "WaitingForNode", why, generation)
    what = f"{gpu.name} ({gpu.model}) is attached to {node}"
    return Condition(ATTACHED, "True", "Composed", what, generation), seen


def plan_binding(
    claims: Iterable[ClaimView],
    view: FabricView,
    *,
    visible: Mapping[str, int],
    failures: Mapping[str, Failure],
    in_flight: frozenset[str] = frozenset(),
) -> BindingPlan:
    """The compositions, device conditions, busy GPUs and taints for ``claims``.

    Args:
        claims: every ResourceClaim read (unallocated ones and other drivers' are skipped).
        view: one read of the Director.
        visible: node name -> physical GPUs the node sees
            (:attr:`composer.model.nodestate.NodeView.advertised_gpus`); a missing node sees none.
        failures: Director GPU name -> its held failure (:func:`healed` first).
        in_flight: Director GPU names a running node job composes now (not composed again).

    Returns:
        The :class:`BindingPlan`; claims are visited in (namespace, name) order.
    """
    by_device: dict[str, FabricGpu] = {}
    for g in view.gpus:
        dn = device_name(g.name)
        if dn is not None:
            by_device.setdefault(dn, g)
    composes: dict[str, list[Placement]] = {}
    to_compose: dict[tuple[str, str], list[FabricGpu]] = {}
    keys: dict[str, ClaimView] = {}
    conditions: dict[tuple[str, str], dict[str, tuple[Condition, ...]]] = {}
    claimed: dict[str, set[str]] = {}
    holders: dict[str, str] = {}
    for claim in sorted(claims, key=lambda c: (not _holds_attached(c), c.namespace, c.name)):
        node = claim.node
        if node is None or not claim.devices:
            continue
        gen = claim.generation
        for device in claim.devices:
            gpu = by_device.get(device)
            want: tuple[Condition, ...] | None
            if gpu is None:
                want = _failed("UnknownDevice", f"the Director shows no GPU published as {device}", gen)
            elif holders.setdefault(gpu.name, claim.uid) != claim.uid:
                want = _failed("AllocatedTwice", f"{gpu.name} is allocated to another claim too", gen)
            elif gpu.machine == node:
                claimed.setdefault(node, set()).add(gpu.name)
                seen = visible.get(node, 0) >= len(view.attached(node)) or _was_visible(claim, device)
                want = _attached(gpu, node, seen, gen)
            elif gpu.name in failures:
                f = failures[gpu.name]
                want = _failed(f.reason, f.message, gen)
            elif gpu.machine is not None:
                want = _failed("AttachedElsewhere", f"{gpu.name} is attached to machine {gpu.machine}", gen)
            elif not gpu.healthy:
                want = _failed("Unhealthy", f"the Director reports {gpu.name} unhealthy", gen)
            elif node not in view.machines:
                want = _failed("NodeNotOnFabric", f"{node} is no machine of the Director", gen)
            else:
                claimed.setdefault(node, set()).add(gpu.name)
                want = None  # the conditions follow the compose
                if gpu.name not in in_flight:
                    to_compose.setdefault((node, claim.uid), []).append(gpu)
                    keys[claim.uid] = claim
            if want is not None:
                conditions.setdefault((claim.namespace, claim.name), {})[device] = want
    for (node, uid), gpus in to_compose.items():
        switches = tuple(dict.fromkeys(g.switch for g in gpus if g.switch))
        models = "/".join(sorted({g.model for g in gpus}))
        composes.setdefault(node, []).append(
            Placement(keys[uid].key, uid, node, models, tuple(g.name for g in gpus), 0, switches)
        )
    return BindingPlan(
        composes={n: tuple(p) for n, p in composes.items()},
        conditions=conditions,
        claimed={n: frozenset(s) for n, s in claimed.items()},
        tainted={name: f.reason for name, f in failures.items()},
    )
