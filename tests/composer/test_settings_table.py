"""The composer's numeric settings have one default and one bound each (domain.settings), and its
reclaim-guard values one shape each (domain.reclaim).

Checked here against every other place that states them: the composer's ``Settings`` fields, the
round ``Policy`` defaults, the chart's ``values.yaml`` defaults and ``values.schema.json`` bounds and
patterns, and the Pulumi stack config's composer keys.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from composer.decide.round_types import Policy
from composer.shell.config import Settings
from domain import reclaim
from domain.settings import COMPOSER_SETTINGS, SETTINGS, Setting
from stack_config.models import ComposerConfig

CHART = Path(__file__).resolve().parents[2] / "charts" / "composer"
IN_CHART = [s for s in COMPOSER_SETTINGS if s.in_chart]
#: Required fields, and partners of the cross-field rules (retry base <= max, batch idle <= max)
#: at values that let any single setting range over its whole bound.
BASE = {
    "director_url": "http://d",
    "director_password": "pw",
    "retry_base_seconds": 0,
    "retry_max_seconds": 3600,
    "batch_idle_seconds": 0,
    "batch_max_seconds": 600,
}


def _ids(s: Setting) -> str:
    return s.name


def _edges(s: Setting) -> tuple[list[float], list[float]]:
    """Values just inside and just outside the bounds."""
    step = 1 if s.integer else 0.001
    inside = [s.minimum + step if s.exclusive_minimum else s.minimum, s.maximum]
    outside = [s.minimum if s.exclusive_minimum else s.minimum - step, s.maximum + step]
    return inside, outside


@pytest.mark.parametrize("setting", COMPOSER_SETTINGS, ids=_ids)
def test_settings_field_has_the_tables_default_and_bounds(setting: Setting) -> None:
    assert Settings.model_fields[setting.name].default == setting.default
    inside, outside = _edges(setting)
    for v in inside:
        assert getattr(Settings(**{**BASE, setting.name: v}), setting.name) == v
    for v in outside:
        with pytest.raises(ValidationError):
            Settings(**{**BASE, setting.name: v})


def test_policy_defaults_are_the_tables() -> None:
    shared = [f for f in dataclasses.fields(Policy) if f.name in SETTINGS]
    assert {f.name for f in shared} >= {"idle_timeout_seconds", "advertise_timeout_seconds"}
    for f in shared:
        assert f.default == SETTINGS[f.name].default, f.name


@pytest.mark.parametrize("setting", IN_CHART, ids=_ids)
def test_chart_values_default_is_the_tables(setting: Setting) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["composer"]
    assert values[setting.chart_key] == setting.default


@pytest.mark.parametrize("setting", IN_CHART, ids=_ids)
def test_chart_schema_bounds_are_the_tables(setting: Setting) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    prop = schema["properties"]["composer"]["properties"][setting.chart_key]
    low = "exclusiveMinimum" if setting.exclusive_minimum else "minimum"
    assert (prop.get(low), prop.get("maximum")) == (setting.minimum, setting.maximum)
    assert prop["type"] == ("integer" if setting.integer else "number")


@pytest.mark.parametrize(
    "name", ["idle_timeout_seconds", "advertise_timeout_seconds", "orphan_grace_seconds"]
)
def test_stack_config_composer_timeouts_are_the_tables(name: str) -> None:
    setting = SETTINGS[name]
    field = ComposerConfig.model_fields[name]
    assert field.default == setting.default
    base = {"pool": "p", "target_cluster": "c"}
    ComposerConfig.model_validate({**base, name: int(setting.maximum)})
    for bad in (int(setting.minimum) if setting.exclusive_minimum else int(setting.minimum) - 1,
                int(setting.maximum) + 1):
        with pytest.raises(ValidationError):
            ComposerConfig.model_validate({**base, name: bad})


def test_chart_reclaim_guard_schema_and_defaults_are_the_domains() -> None:
    """The chart states the reclaim-guard shapes in JSON (it cannot import them): they must be
    :mod:`domain.reclaim`'s, which the composer and the stack config validate with."""
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["composer"]["properties"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())["composer"]
    assert schema["reclaimBudget"]["pattern"] == reclaim.BUDGET_PATTERN
    assert schema["pools"]["items"]["properties"]["reclaimBudget"]["pattern"] == reclaim.BUDGET_PATTERN
    assert schema["reclaimWindowsUtc"]["items"]["pattern"] == reclaim.WINDOW_PATTERN
    owner = schema["ownerTag"]
    assert (owner["pattern"], owner["maxLength"]) == (reclaim.OWNER_TAG_PATTERN, reclaim.OWNER_TAG_MAX_LENGTH)
    assert values["ownerTag"] == reclaim.DEFAULT_OWNER_TAG == Settings.model_fields["owner_tag"].default
    assert ComposerConfig.model_fields["owner_tag"].default == reclaim.DEFAULT_OWNER_TAG == Policy().owner_tag
    assert values["reclaimBudget"] is None and values["reclaimWindowsUtc"] == []
