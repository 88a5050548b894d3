"""The composer's numeric settings have one default and one bound each (domain.settings).

Checked here against every other place that states them: the composer's ``Settings`` fields, the
round ``Policy`` defaults, the chart's ``values.yaml`` defaults and ``values.schema.json`` bounds, and
the Pulumi stack config's composer timeouts.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from composer.config import Settings
from composer.round_types import Policy
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


@pytest.mark.parametrize("name", ["idle_timeout_seconds", "advertise_timeout_seconds"])
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
