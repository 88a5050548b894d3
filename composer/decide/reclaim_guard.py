"""Guards of the idle reclaim: opt-out annotations, per-pool budgets, UTC windows. No I/O.

An idle node's reclaim starts only when no guard holds it (:func:`held_by`):

- ``do-not-reclaim``: the annotation ``composer.liqid.io/do-not-reclaim: "true"`` on the Node,
  or on a non-terminal pod bound to it;
- ``window``: reclaim windows are configured and ``now`` (UTC) is in none of them;
- ``budget``: the node's pool already has as many nodes reclaiming as its budget allows.

A node counts as reclaiming from the moment its reclaim starts until the taint is lifted.
Budgets and windows (their shape, rules and parsing: :class:`Budget`, :class:`Window`,
:func:`parse_budget`, :func:`parse_window`) are declared in :mod:`domain.reclaim`, which the stack
config validates with too; they are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum

from domain.reclaim import Budget, Window, parse_budget, parse_window


class Hold(StrEnum):
    """Why a reclaim is held (named in the ``ReclaimHeld`` Event)."""

    DO_NOT_RECLAIM = "do-not-reclaim"
    WINDOW = "window"
    BUDGET = "budget"


def in_windows(now: float, windows: Iterable[Window]) -> bool:
    """True when there are no windows, or ``now`` (seconds since the epoch) is in one (UTC)."""
    ws = tuple(windows)
    if not ws:
        return True
    t = datetime.fromtimestamp(now, UTC)
    minute = t.hour * 60 + t.minute
    return any(w.contains(minute) for w in ws)


def opted_out(annotations: Mapping[str, str] | None, key: str) -> bool:
    """The opt-out annotation ``key`` is ``"true"`` (case-insensitive)."""
    return str((annotations or {}).get(key, "")).strip().lower() == "true"


def held_by(
    *,
    do_not_reclaim: str,
    now: float,
    windows: Iterable[Window],
    reclaiming: int,
    allowed: int | None,
) -> tuple[Hold, str] | None:
    """Whether an idle node's reclaim may start now.

    Args:
        do_not_reclaim: what carries the opt-out annotation (``"node"``, ``"pod ns/name"``),
            "" when nothing does.
        now: seconds since the epoch.
        windows: the configured reclaim windows (none = any time).
        reclaiming: nodes of the node's pool reclaiming now (this round's starts included).
        allowed: the pool's budget (None = no budget).

    Returns:
        ``(hold, explanation)`` of the first guard that holds, or None when the reclaim may start.
    """
    if do_not_reclaim:
        return Hold.DO_NOT_RECLAIM, f"{do_not_reclaim} is annotated do-not-reclaim"
    if not in_windows(now, windows):
        return Hold.WINDOW, "outside the reclaim window(s)"
    if allowed is not None and reclaiming >= allowed:
        return Hold.BUDGET, f"{reclaiming} node(s) of the pool reclaiming, budget allows {allowed}"
    return None


__all__ = [
    "Budget",
    "Hold",
    "Window",
    "held_by",
    "in_windows",
    "opted_out",
    "parse_budget",
    "parse_window",
]
