"""The composer's numeric settings: one default and one bound each, declared once.

:class:`composer.shell.config.Settings` builds its fields from :data:`COMPOSER_SETTINGS`; the Pulumi stack
config (:class:`stack_config.models.ComposerConfig`) takes its idle and advertise timeouts from it; the
chart's ``values.yaml`` defaults and ``values.schema.json`` bounds (``composer.<camelCaseName>``) and the
round policy's defaults (:class:`composer.decide.round_types.Policy`) are checked against it by
``tests/composer/test_settings_table.py``. The meaning of each setting is in ``charts/composer/README.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


class FieldArgs(TypedDict, total=False):
    """Keyword arguments for ``pydantic.Field`` of one setting: ``default``, ``gt`` or ``ge``
    (whichever the setting's minimum is), and ``le``."""

    default: float
    gt: float
    ge: float
    le: float


@dataclass(frozen=True, slots=True)
class Setting:
    """One numeric composer setting.

    Attributes:
        name: the field name in :class:`composer.shell.config.Settings` (``idle_timeout_seconds``).
        default: value when unset (unit: seconds for ``*_seconds``, else a count).
        minimum: lowest value (excluded when ``exclusive_minimum``).
        maximum: highest value accepted (inclusive).
        exclusive_minimum: ``minimum`` itself is refused (``> minimum`` rather than ``>= minimum``).
        integer: a whole number (a count), else any real number.
        in_chart: the chart exposes it as ``composer.<chart_key>``.
        description: one line for ``--help`` and the environment variable.
    """

    name: str
    default: float
    minimum: float
    maximum: float
    description: str
    exclusive_minimum: bool = False
    integer: bool = False
    in_chart: bool = True

    @property
    def chart_key(self) -> str:
        """The key under ``composer:`` in the chart's values (camelCase): ``idleTimeoutSeconds``."""
        head, *rest = self.name.split("_")
        return head + "".join(w.capitalize() for w in rest)

    def field_args(self) -> FieldArgs:
        """Keyword arguments for ``pydantic.Field``: ``default``, ``gt`` or ``ge``, and ``le``."""
        default = int(self.default) if self.integer else self.default
        if self.exclusive_minimum:
            return {"default": default, "gt": self.minimum, "le": self.maximum}
        return {"default": default, "ge": self.minimum, "le": self.maximum}

    def accepts(self, value: float) -> bool:
        """True when ``value`` is inside the bounds (and whole, for an integer setting)."""
        if self.integer and value != int(value):
            return False
        above = value > self.minimum if self.exclusive_minimum else value >= self.minimum
        return above and value <= self.maximum


_DAY = 86400.0
_WEEK = 7 * _DAY

#: Every bounded numeric setting of the composer, in the order of the chart's values.
COMPOSER_SETTINGS: tuple[Setting, ...] = (
    Setting("idle_timeout_seconds", 600.0, 0, _WEEK, "no GPU pod for this long: GPUs go back to the pool",
            exclusive_minimum=True),
    Setting("advertise_timeout_seconds", 120.0, 0, 3600,
            "wait for the node to advertise GPUs, then restart its device plugin", exclusive_minimum=True),
    Setting("schedule_timeout_seconds", 300.0, 0, _DAY, "advertised but still unscheduled: give the pod up",
            exclusive_minimum=True),
    Setting("compose_max_attempts", 5, 1, 100, "compose attempts per pod", integer=True),
    Setting("retry_base_seconds", 5.0, 0, 600, "first retry backoff"),
    Setting("retry_max_seconds", 300.0, 0, 3600, "longest retry backoff"),
    Setting("resync_seconds", 5.0, 0, 600, "longest pause between rounds (changes wake the loop sooner)",
            exclusive_minimum=True),
    Setting("compose_workers", 8, 1, 64, "nodes worked on in parallel", integer=True),
    Setting("cache_resync_seconds", 600.0, 0, _DAY, "full relist period of the watch caches (0 = never)",
            in_chart=False),
    Setting("director_resync_seconds", 10.0, 0, 600,
            "age at which the Director read is refreshed in the background while rounds plan "
            "on the last one (0 = read the Director every round)"),
    Setting("batch_idle_seconds", 0.05, 0, 60,
            "gated pods: plan a batch once no new gated pod arrived for this long "
            "(Karpenter batches with 1 s idle / 10 s max)"),
    Setting("batch_max_seconds", 1.0, 0, 600, "gated pods: plan a batch at the latest after this long"),
    Setting("reservation_timeout_seconds", 300.0, 0, _DAY,
            "a gated pod's GPU reservation not released (advertised) by then expires and the "
            "pod is planned again", exclusive_minimum=True),
    Setting("unserved_wait_seconds", 60.0, 0, _DAY,
            "a gated pod nothing in the pool can serve is ungated unchanged this long after "
            "its creation (so a node autoscaler can act)"),
    Setting("orphan_grace_seconds", 600.0, 0, _WEEK,
            "GPUs this composer attached to a machine that has no Node for this long go back "
            "to the free pool"),
)

#: :data:`COMPOSER_SETTINGS` by name.
SETTINGS: dict[str, Setting] = {s.name: s for s in COMPOSER_SETTINGS}
