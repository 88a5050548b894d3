"""Pure composition planning: from an inventory of :class:`Gpu` and a request, what to attach and detach.

No I/O here; the provider and the composer call these with data read by the client, and tests
call them with plain lists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import (
    CompositionError,
    DirectorConflictError,
    DirectorNotFoundError,
    InsufficientGpusError,
    UnknownModelError,
    name_list,
)
from .models import Gpu

__all__ = [
    "FREE_POOL_MARK",
    "CompositionPlan",
    "natural_key",
    "owned_gpus",
    "owner_tags",
    "plan_composition",
    "tag_for",
    "taken_from_free_pool",
]

#: Appended to a composition's owner tag on a GPU it takes from the system free pool. The tag
#: is written before the pool move and the attach, so an interrupted run's successor (which
#: adopts the GPU by its tag) knows to give it back to the free pool, as the interrupted run
#: would have.
FREE_POOL_MARK = "+free-pool"


def tag_for(owner: str, *, from_free_pool: bool) -> str:
    """The owner tag to write on a GPU of composition ``owner``."""
    return f"{owner}{FREE_POOL_MARK}" if from_free_pool else owner


def owner_tags(owner: str) -> frozenset[str]:
    """Both tags composition ``owner`` writes (with and without ``FREE_POOL_MARK``)."""
    return frozenset({owner, f"{owner}{FREE_POOL_MARK}"})


def taken_from_free_pool(tag: str | None) -> bool:
    """True for a tag written on a GPU its composition took from the system free pool."""
    return bool(tag) and tag.endswith(FREE_POOL_MARK)  # type: ignore[union-attr]


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key that orders ``gpu2`` before ``gpu10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _sorted(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(names), key=natural_key))


@dataclass(frozen=True)
class CompositionPlan:
    """What to change so a machine holds the requested GPUs.

    Attributes:
        keep: GPUs the composition holds and keeps.
        attach: GPUs to attach (free now; system pool or the machine's group pool).
        detach: GPUs the composition holds and gives back.
    """

    keep: tuple[str, ...]
    attach: tuple[str, ...]
    detach: tuple[str, ...]

    @property
    def target(self) -> tuple[str, ...]:
        """The GPUs the machine holds for this composition once the plan is applied."""
        return _sorted((*self.keep, *self.attach))

    @property
    def changes(self) -> bool:
        """True when anything is to be attached or detached."""
        return bool(self.attach or self.detach)


def owned_gpus(
    gpus: Iterable[Gpu], *, machine_id: int, owner_tag: str | None, names: Iterable[str] = ()
) -> list[Gpu]:
    """GPUs attached to ``machine_id`` that belong to one composition.

    A GPU belongs to it when its ``owner_tag`` is one of ``owner_tags(owner_tag)`` (written
    before attaching, so a retry after a crash finds it), or when its name is in ``names``
    (recorded in state, or explicitly requested).
    """
    wanted = set(names)
    tags = owner_tags(owner_tag) if owner_tag is not None else frozenset()
    return sorted(
        (
            g
            for g in gpus
            if g.machine_id == machine_id
            and (g.owner_tag in tags or g.name in wanted)
        ),
        key=lambda g: natural_key(g.name),
    )


def plan_composition(
    gpus: Sequence[Gpu],
    *,
    machine_id: int,
    group_id: int,
    count: int | None,
    device_names: Sequence[str] = (),
    model: str | None = None,
    current: Iterable[str] = (),
    excluded: Iterable[str] = (),
) -> CompositionPlan:
    """Plan attach/detach so ``machine_id`` holds the requested GPUs, changing only the difference.

    Args:
        gpus: the whole GPU inventory (``DirectorClient.gpus()``).
        machine_id / group_id: the target machine and its group (whose pool may be used).
        count: how many GPUs; ``None`` means ``len(device_names)``.
        device_names: explicit GPUs wanted; empty means any free GPU of ``model``.
        model: GFD product name filter (``Tesla-T4``), or ``None`` for any model.
        current: GPUs this composition holds now (see :func:`owned_gpus`).
        excluded: GPUs never to pick (e.g. reserved for the composer).

    Returns:
        A :class:`CompositionPlan`. ``keep`` prefers GPUs already held; new GPUs come from the
        group's pool first, then the system pool, in natural name order (deterministic).

    Raises:
        ValueError: neither ``count`` nor ``device_names``, a negative count, or a count
            different from ``len(device_names)``.
        DirectorNotFoundError: a requested device name does not exist.
        UnknownModelError: no GPU of ``model`` exists on the fabric.
        DirectorConflictError: a requested device is held by another machine or sits in
            another group's pool.
        CompositionError: a requested device is unhealthy or of another model.
        InsufficientGpusError: fewer free GPUs of ``model`` than needed.
    """
    names = _sorted(device_names)
    if count is None and not names:
        raise ValueError("give a count, device names, or both")
    desired = len(names) if count is None else count
    if desired < 0:
        raise ValueError(f"count must be >= 0, got {desired}")
    if names and desired != len(names):
        raise ValueError(f"count {desired} differs from the {len(names)} device names given")

    by_name = {g.name: g for g in gpus}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise DirectorNotFoundError(
            f"no such GPU on the fabric: {name_list(unknown)}", device=",".join(unknown)
        )
    if model is not None and not any(g.model == model for g in gpus):
        known = ", ".join(sorted({g.model for g in gpus})) or "none"
        raise UnknownModelError(f"no GPU of model {model!r} on the fabric (models present: {known})")

    def fits(g: Gpu) -> bool:
        return (model is None or g.model == model) and (not names or g.name in names)

    held = [by_name[n] for n in _sorted(current) if n in by_name and by_name[n].machine_id == machine_id]
    keep = [g.name for g in held if fits(g)][:desired]
    detach = _sorted(g.name for g in held if g.name not in keep)
    need = desired - len(keep)
    skip = set(excluded) | set(keep)

    if names:
        attach = []
        for n in names:
            g = by_name[n]
            if n in keep:
                continue
            if g.machine_id is not None and g.machine_id != machine_id:
                raise DirectorConflictError(
                    f"GPU {n} is attached to machine {g.machine or g.machine_id}",
                    device=n,
                    machine=g.machine or g.machine_id,
                )
            if g.machine_id is None and g.group_id not in (None, group_id):
                raise DirectorConflictError(
                    f"GPU {n} sits in the pool of group {g.group or g.group_id}", device=n
                )
            if model is not None and g.model != model:
                raise CompositionError(f"GPU {n} is a {g.model}, not a {model}", device=n)
            if not g.healthy:
                raise CompositionError(f"GPU {n} is not healthy (device_state {g.device_state})", device=n)
            if g.machine_id is None:
                attach.append(n)
        # A named GPU already on the machine but not yet held is adopted, not re-attached.
        adopted = [n for n in names if n not in keep and by_name[n].machine_id == machine_id]
        return CompositionPlan(keep=_sorted((*keep, *adopted)), attach=_sorted(attach), detach=detach)

    candidates = sorted(
        (
            g
            for g in gpus
            if g.machine_id is None
            and g.healthy
            and g.name not in skip
            and g.group_id in (None, group_id)
            and fits(g)
        ),
        key=lambda g: (g.group_id is None, natural_key(g.name)),
    )
    if len(candidates) < need:
        what = model or "GPU"
        free = name_list(g.name for g in candidates)
        raise InsufficientGpusError(
            f"need {need} more free {what} GPU(s) for machine id {machine_id}, "
            f"only {len(candidates)} free ({free})"
        )
    return CompositionPlan(
        keep=_sorted(keep), attach=_sorted(g.name for g in candidates[:need]), detach=detach
    )
