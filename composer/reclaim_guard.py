"""Guards of the idle reclaim: opt-out annotations, per-pool budgets, UTC windows. No I/O.

An idle node's reclaim starts only when no guard holds it (:func:`held_by`):

- ``do-not-reclaim``: the annotation ``composer.liqid.io/do-not-reclaim: "true"`` on the Node,
  or on a non-terminal pod bound to it;
- ``window``: reclaim windows are configured and ``now`` (UTC) is in none of them;
- ``budget``: the node's pool already has as many nodes reclaiming as its budget allows.

Budgets follow Karpenter's NodePool disruption budgets (``nodes: "3"`` or ``nodes: "10%"``; a
percentage is of the pool's nodes, rounded up; https://karpenter.sh/docs/concepts/disruption/
"NodePool Disruption Budgets"). A node counts as reclaiming from the moment its reclaim starts
until the taint is lifted. Windows are ``HH:MM-HH:MM`` in UTC; one whose end is before its start
spans midnight (``22:00-06:00``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

_BUDGET = re.compile(r"^(\d{1,6})(%?)$")
_WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]|24):([0-5]\d)$")


class Hold(StrEnum):
    """Why a reclaim is held (named in the ``ReclaimHeld`` Event)."""

    DO_NOT_RECLAIM = "do-not-reclaim"
    WINDOW = "window"
    BUDGET = "budget"


@dataclass(frozen=True, slots=True)
class Budget:
    """At most ``count`` nodes, or ``percent`` % of the pool's nodes (rounded up), reclaiming at once."""

    count: int | None = None
    percent: int | None = None

    def allowed(self, pool_nodes: int) -> int:
        """Nodes of a pool of ``pool_nodes`` nodes that may be reclaiming at once."""
        if self.count is not None:
            return self.count
        return math.ceil(pool_nodes * (self.percent or 0) / 100)

    def __str__(self) -> str:
        return f"{self.percent}%" if self.percent is not None else str(self.count)


def parse_budget(value: str) -> Budget:
    """``"3"`` -> at most 3 nodes; ``"20%"`` -> 20 % of the pool's nodes (0 % to 100 %).

    Raises:
        ValueError: anything else (the message quotes the value).
    """
    m = _BUDGET.match(value.strip())
    if not m:
        raise ValueError(f"reclaim budget {value!r}: expected a node count (\"2\") or a percentage (\"20%\")")
    n = int(m.group(1))
    if m.group(2):
        if n > 100:
            raise ValueError(f"reclaim budget {value!r}: a percentage is at most 100%")
        return Budget(percent=n)
    return Budget(count=n)


@dataclass(frozen=True, slots=True)
class Window:
    """A daily UTC window, minutes since midnight; ``end < start`` spans midnight."""

    start: int
    end: int

    def contains(self, minute: int) -> bool:
        """True when minute-of-day ``minute`` (UTC) is inside the window (start inclusive)."""
        if self.start <= self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end


def parse_window(value: str) -> Window:
    """``"22:00-06:00"`` -> a :class:`Window` (UTC; ``24:00`` allowed as an end).

    Raises:
        ValueError: not ``HH:MM-HH:MM``, or an empty window (start == end).
    """
    m = _WINDOW.match(value.strip())
    if not m:
        raise ValueError(f"reclaim window {value!r}: expected HH:MM-HH:MM in UTC, e.g. 22:00-06:00")
    start, end = int(m.group(1)) * 60 + int(m.group(2)), int(m.group(3)) * 60 + int(m.group(4))
    if end > 24 * 60:
        raise ValueError(f"reclaim window {value!r}: ends after 24:00")
    if start == end:
        raise ValueError(f"reclaim window {value!r}: start and end are the same time")
    return Window(start, end)


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
