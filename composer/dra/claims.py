"""ResourceClaims as the driver sees them, and the device status it writes: pure functions.

Field names from ``k8s.io/api`` v0.36.3 ``resource/v1/types.go``: ``ResourceClaimStatus``
(``allocation``, ``devices``), ``AllocationResult`` (``devices.results``, ``nodeSelector``),
``DeviceRequestAllocationResult`` (``request``, ``driver``, ``pool``, ``device``),
``AllocatedDeviceStatus`` (``driver``, ``pool``, ``device``, ``shareID``, ``conditions``; a list
map keyed by driver, device, pool and shareID, at most 8 conditions each, ``metav1.Condition``
with ``type``, ``status``, ``reason``, ``message``, ``lastTransitionTime``,
``observedGeneration``).

Where the node comes from: for a device with ``bindsToNode: true`` the scheduler's allocator
writes ``allocation.nodeSelector`` as one term with ``matchFields`` ``metadata.name In [node]``
(``k8s.io/dynamic-resource-allocation`` ``structured/internal/incubating/allocator_incubating.go``
``createNodeSelector``, commit 3d036712, after v0.37.0-alpha.2); a one-host
``kubernetes.io/hostname In [node]`` expression (what :mod:`composer.dra.slices` writes into a
slice's selector) is read too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from composer.dra.slices import DRIVER, POOL, is_driver_pool
from composer.model.models import HOSTNAME_LABEL

#: ``AllocatedDeviceStatus.conditions`` holds at most this many (``resource/v1/types.go``).
MAX_CONDITIONS = 8


@dataclass(frozen=True, slots=True)
class Condition:
    """One ``metav1.Condition`` of a device's status (``status``: ``True``/``False``/``Unknown``)."""

    type: str
    status: str
    reason: str
    message: str = ""
    observed_generation: int = 0
    last_transition: str = ""


@dataclass(frozen=True, slots=True)
class ClaimView:
    """What the driver needs of one ResourceClaim.

    Attributes:
        namespace, name, uid: the claim.
        generation: ``metadata.generation`` (written as the conditions' ``observedGeneration``).
        resource_version: ``metadata.resourceVersion`` (the status write is conditional on it).
        node: the node of the allocation (``status.allocation.nodeSelector``), None when the
            claim is not allocated or the selector names no single node.
        devices: DRA device names of this driver's fabric pools allocated to the claim, in result
            order (a device name names one GPU whatever its pool: :mod:`composer.dra.slices`).
        pools: DRA device name -> the pool it was allocated from.
        conditions: DRA device name -> its conditions in ``status.devices`` (this driver's pools).
        status_devices: every entry of ``status.devices`` as read (other drivers' included).
    """

    namespace: str
    name: str
    uid: str
    generation: int = 0
    resource_version: str = ""
    node: str | None = None
    devices: tuple[str, ...] = ()
    pools: Mapping[str, str] = field(default_factory=dict)
    conditions: Mapping[str, tuple[Condition, ...]] = field(default_factory=dict)
    status_devices: tuple[Mapping[str, Any], ...] = ()

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


def allocation_node(selector: Mapping[str, Any] | None) -> str | None:
    """The one node an ``allocation.nodeSelector`` names, or None.

    A single term with exactly one requirement, ``metadata.name`` (``matchFields``) or
    ``kubernetes.io/hostname`` (``matchExpressions``), operator ``In``, one value.
    """
    terms: list[Any] = list((selector or {}).get("nodeSelectorTerms") or [])
    if len(terms) != 1:
        return None
    term = terms[0] or {}
    reqs = [("metadata.name", r) for r in term.get("matchFields") or ()]
    reqs += [(HOSTNAME_LABEL, r) for r in term.get("matchExpressions") or ()]
    if len(reqs) != 1:
        return None
    key, req = reqs[0]
    values: list[Any] = list(req.get("values") or [])
    if req.get("key") != key or req.get("operator") != "In" or len(values) != 1:
        return None
    return str(values[0]) or None


def _condition(raw: Mapping[str, Any]) -> Condition:
    return Condition(
        type=str(raw.get("type") or ""),
        status=str(raw.get("status") or ""),
        reason=str(raw.get("reason") or ""),
        message=str(raw.get("message") or ""),
        observed_generation=int(raw.get("observedGeneration") or 0),
        last_transition=str(raw.get("lastTransitionTime") or ""),
    )


def claim_view(obj: Mapping[str, Any], *, driver: str = DRIVER, pool: str = POOL) -> ClaimView:
    """Parse one ``resource.k8s.io/v1`` ResourceClaim JSON object (never raises on missing fields);
    ``pool``: the prefix of the driver's pool names (:func:`composer.dra.slices.is_driver_pool`)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    allocation = status.get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or ()
    mine = [
        r for r in results
        if r.get("driver") == driver and is_driver_pool(r.get("pool"), pool) and r.get("device")
    ]
    ours = tuple(str(r["device"]) for r in mine)
    entries = tuple(status.get("devices") or ())
    conditions = {
        str(e.get("device")): tuple(_condition(c) for c in e.get("conditions") or ())
        for e in entries
        if e.get("driver") == driver and is_driver_pool(e.get("pool"), pool) and not e.get("shareID")
    }
    return ClaimView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        generation=int(meta.get("generation") or 0),
        resource_version=str(meta.get("resourceVersion") or ""),
        node=allocation_node(allocation.get("nodeSelector")) if allocation else None,
        devices=ours,
        pools={str(r["device"]): str(r["pool"]) for r in mine},
        conditions=conditions,
        status_devices=entries,
    )


def rfc3339(now: float) -> str:
    """``now`` (seconds since the epoch) as ``metav1.Time`` writes it (``2026-12-04T16:30:00Z``)."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _same(a: Condition, b: Condition) -> bool:
    return (a.type, a.status, a.reason, a.message, a.observed_generation) == (
        b.type,
        b.status,
        b.reason,
        b.message,
        b.observed_generation,
    )


def merged_conditions(
    current: Sequence[Condition], wanted: Sequence[Condition], *, now: float
) -> tuple[Condition, ...] | None:
    """``current`` with ``wanted`` laid over it by type, or None when nothing changes.

    A condition keeps its ``lastTransitionTime`` while its status stays; otherwise it gets
    ``now``. Conditions of other types are kept.

    Raises:
        ValueError: the result would hold more than :data:`MAX_CONDITIONS` conditions.
    """
    by_type = {c.type: c for c in current}
    changed = False
    for w in wanted:
        old = by_type.get(w.type)
        if old is not None and _same(old, w):
            continue
        changed = True
        kept = old is not None and old.status == w.status and old.last_transition
        stamp = old.last_transition if kept and old is not None else rfc3339(now)
        by_type[w.type] = Condition(w.type, w.status, w.reason, w.message, w.observed_generation, stamp)
    if not changed:
        return None
    if len(by_type) > MAX_CONDITIONS:
        raise ValueError(
            f"status.devices[].conditions: at most {MAX_CONDITIONS} conditions, got {len(by_type)}"
        )
    return tuple(by_type.values())


def _condition_json(c: Condition) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": c.type,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": c.last_transition,
    }
    if c.observed_generation:
        out["observedGeneration"] = c.observed_generation
    return out


def status_patch(
    claim: ClaimView,
    wanted: Mapping[str, Sequence[Condition]],
    *,
    now: float,
    driver: str = DRIVER,
    pool: str = POOL,
) -> dict[str, Any] | None:
    """The JSON merge patch of the claim's ``status`` subresource that sets ``wanted``, or None
    when every wanted condition is already there.

    Args:
        claim: the claim as read.
        wanted: DRA device name (of ``claim.devices``) -> the conditions to set on it.
        now: seconds since the epoch, for changed conditions' ``lastTransitionTime``.

    Returns:
        ``{"metadata": {"resourceVersion": ...}, "status": {"devices": [...]}}``: the whole
        ``status.devices`` list (a merge patch replaces lists), other drivers' and other devices'
        entries unchanged, this driver's entries with the merged conditions; the resource
        version makes the write fail with a conflict when the claim changed since it was read.

    Raises:
        ValueError: a device of ``wanted`` is not allocated to the claim by this driver, or a
            device would hold more than :data:`MAX_CONDITIONS` conditions.
    """
    unknown = sorted(set(wanted) - set(claim.devices))
    if unknown:
        raise ValueError(f"claim {claim.key}: devices {unknown} are not allocated to it by {driver}/{pool}")
    merged: dict[str, tuple[Condition, ...]] = {}
    for device, conds in wanted.items():
        new = merged_conditions(claim.conditions.get(device, ()), conds, now=now)
        if new is not None:
            merged[device] = new
    if not merged:
        return None
    entries: list[dict[str, Any]] = []
    for e in claim.status_devices:
        mine = e.get("driver") == driver and is_driver_pool(e.get("pool"), pool) and not e.get("shareID")
        if mine and str(e.get("device")) in merged:
            device = str(e.get("device"))
            entries.append({**e, "conditions": [_condition_json(c) for c in merged.pop(device)]})
        else:
            entries.append(dict(e))
    for device in claim.devices:
        if device in merged:
            conds = merged.pop(device)
            listed = [_condition_json(c) for c in conds]
            entry_pool = claim.pools.get(device, pool)
            entries.append({"driver": driver, "pool": entry_pool, "device": device, "conditions": listed})
    return {"metadata": {"resourceVersion": claim.resource_version}, "status": {"devices": entries}}
