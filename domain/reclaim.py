"""The composer's reclaim safety settings: budgets, UTC windows and the owner tag, declared once.

Each value has one shape (a regular expression, also the JSON-schema ``pattern``) and one set of
rules (the ``parse_*``/``check_*`` functions below). They are used by the composer's own settings
(:class:`composer.shell.config.Settings`, :mod:`composer.decide.reclaim_guard`) and by the Pulumi stack config
(:class:`stack_config.models.ComposerConfig`); the chart's ``values.schema.json`` patterns and
``values.yaml`` defaults are checked against them by ``tests/composer/test_settings_table.py``.
What the guards do: ``docs/composer-reclaim.md``.

- **Reclaim budget**: most nodes of a pool reclaiming at once, a node count (``"2"``) or a
  percentage of the pool's nodes (``"20%"``, 0 % to 100 %, rounded up), as Karpenter's NodePool
  disruption budgets (``nodes: "3"`` or ``nodes: "10%"``; https://karpenter.sh/docs/concepts/disruption/
  "NodePool Disruption Budgets").
- **Reclaim window**: ``HH:MM-HH:MM`` in UTC; an end before the start spans midnight
  (``22:00-06:00``); ``24:00`` is allowed as an end; start and end may not be equal.
- **Owner tag**: the Director user description (``udesc``) written on the GPUs the composer
  attaches. The Director writes ``"n/a"`` where a description is absent (``docs/domain.md``
  "LIQID Director REST API"), so an empty tag or ``n/a`` would read as "no owner".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = [
    "BUDGET_PATTERN",
    "DEFAULT_OWNER_TAG",
    "OWNER_TAG_MAX_LENGTH",
    "OWNER_TAG_PATTERN",
    "WINDOW_PATTERN",
    "Budget",
    "Window",
    "budget_as_text",
    "check_owner_tag",
    "reads_as_no_description",
    "parse_budget",
    "parse_window",
]

#: A reclaim budget: a node count (up to 6 digits) or a percentage.
BUDGET_PATTERN = r"^[0-9]{1,6}%?$"
#: A reclaim window, ``HH:MM-HH:MM`` UTC (``24`` only as the end hour).
WINDOW_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]-([01][0-9]|2[0-3]|24):[0-5][0-9]$"
#: An owner tag: letters, digits and ``._:/+-``, starting with a letter or digit.
OWNER_TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/+-]*$"
#: Longest owner tag, in characters.
OWNER_TAG_MAX_LENGTH = 64
#: The composer's owner tag when none is configured (the chart's ``composer.ownerTag``).
DEFAULT_OWNER_TAG = "gpu-composer"
#: What the Director shows for a device without a user description.
_NO_DESCRIPTION = "n/a"

_BUDGET = re.compile(BUDGET_PATTERN)
_WINDOW = re.compile(WINDOW_PATTERN)
_OWNER_TAG = re.compile(OWNER_TAG_PATTERN)


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


def budget_as_text(value: object) -> object:
    """A budget written as a bare number in YAML (``reclaimBudget: 2``) is the count ``"2"``;
    anything else (booleans included) is returned unchanged, for the pattern to judge."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def parse_budget(value: str) -> Budget:
    """``"3"`` -> at most 3 nodes; ``"20%"`` -> 20 % of the pool's nodes (0 % to 100 %).

    Raises:
        ValueError: not :data:`BUDGET_PATTERN`, or a percentage above 100 (the message quotes
            the value).
    """
    if not _BUDGET.fullmatch(value):
        raise ValueError(f"reclaim budget {value!r}: expected a node count (\"2\") or a percentage (\"20%\")")
    n = int(value.rstrip("%"))
    if value.endswith("%"):
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


def _minutes(hh_mm: str) -> int:
    hours, minutes = hh_mm.split(":")
    return int(hours) * 60 + int(minutes)


def parse_window(value: str) -> Window:
    """``"22:00-06:00"`` -> a :class:`Window` (UTC; ``24:00`` allowed as an end).

    Raises:
        ValueError: not :data:`WINDOW_PATTERN`, an end after 24:00, or an empty window
            (start == end); the message quotes the value.
    """
    if not _WINDOW.fullmatch(value):
        raise ValueError(f"reclaim window {value!r}: expected HH:MM-HH:MM in UTC, e.g. 22:00-06:00")
    start, end = (_minutes(part) for part in value.split("-"))
    if end > 24 * 60:
        raise ValueError(f"reclaim window {value!r}: ends after 24:00")
    if start == end:
        raise ValueError(f"reclaim window {value!r}: start and end are the same time")
    return Window(start, end)


def reads_as_no_description(text: str | None) -> bool:
    """True for a user description the Director shows as absent: None, blank or ``n/a``."""
    return text is None or text.strip() in ("", _NO_DESCRIPTION)


def check_owner_tag(value: str) -> str:
    """``value`` when it is a usable owner tag, else an error.

    Returns:
        ``value`` unchanged.

    Raises:
        ValueError: empty, longer than :data:`OWNER_TAG_MAX_LENGTH`, not :data:`OWNER_TAG_PATTERN`,
            or ``n/a`` (the Director's "no description"); the message quotes the value.
    """
    if reads_as_no_description(value):
        raise ValueError(f"owner tag {value!r} reads as no description on the Director")
    if len(value) > OWNER_TAG_MAX_LENGTH:
        raise ValueError(f"owner tag {value!r}: at most {OWNER_TAG_MAX_LENGTH} characters")
    if not _OWNER_TAG.fullmatch(value):
        raise ValueError(
            f"owner tag {value!r}: letters, digits and . _ : / + - only, starting with a letter or digit"
        )
    return value
