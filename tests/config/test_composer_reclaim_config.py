"""The composer's reclaim guards and orphan cleanup as stack-config keys: ``composer.reclaim_budget``,
``composer.pools[].reclaim_budget``, ``composer.reclaim_windows_utc``, ``composer.owner_tag`` and
``composer.orphan_grace_seconds``.

Good values load; each rule of :mod:`domain.reclaim` (and the orphan grace's bounds from
:mod:`domain.settings`) refuses a bad value with one problem naming the key and the rule, through
the same loader ``pulumi preview``/``up`` runs before any resource is registered. The exported JSON
schema (what editors check) refuses what the loader refuses where a pattern can say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from domain.settings import SETTINGS
from stack_config import EstateConfigError, load_estate
from stack_config.schema import SCHEMA_PATH
from tests.config.factories import encrypted, valid_estate

CHART = Path(__file__).resolve().parents[2] / "charts" / "composer"


def _with(key: str, value: Any, *, pool: int | None = None) -> dict[str, Any]:
    raw = valid_estate()
    section = raw["composer"] if pool is None else raw["composer"]["pools"][pool]
    section[key] = value
    return raw


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    return [str(p) for p in err.value.problems]


def test_defaults_are_the_charts() -> None:
    composer = load_estate(valid_estate()).composer
    assert composer is not None
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["composer"]
    assert composer.reclaim_budget == chart["reclaimBudget"] is None
    assert composer.reclaim_windows_utc == chart["reclaimWindowsUtc"] == []
    assert composer.owner_tag == chart["ownerTag"] == "gpu-composer"
    assert composer.orphan_grace_seconds == chart["orphanGraceSeconds"] == 600
    assert [p.reclaim_budget for p in composer.pools] == [None, None]


@pytest.mark.parametrize(("value", "loaded"), [("0", "0"), ("2", "2"), ("20%", "20%"), ("100%", "100%"),
                                               (3, "3"), (0, "0")])
def test_good_budgets_load_as_text(value: Any, loaded: str) -> None:
    """A count or a percentage; a bare YAML number is the count (as the chart takes it)."""
    composer = load_estate(_with("reclaim_budget", value)).composer
    assert composer is not None and composer.reclaim_budget == loaded
    pooled = load_estate(_with("reclaim_budget", value, pool=1)).composer
    assert pooled is not None and pooled.pools[1].reclaim_budget == loaded


SHAPE = "expected a node count (\"2\") or a percentage (\"20%\")"


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("101%", "reclaim budget '101%': a percentage is at most 100%"),
        ("ten", f"reclaim budget 'ten': {SHAPE}"),
        ("1.5", f"reclaim budget '1.5': {SHAPE}"),
        ("-1", f"reclaim budget '-1': {SHAPE}"),
        (-1, f"reclaim budget '-1': {SHAPE}"),
        ("5 %", f"reclaim budget '5 %': {SHAPE}"),
        ("", f"reclaim budget '': {SHAPE}"),
        ("1234567", f"reclaim budget '1234567': {SHAPE}"),
        ("2\n", f"reclaim budget '2\\n': {SHAPE}"),
    ],
)
def test_bad_budgets_name_the_key_and_the_rule(value: Any, rule: str) -> None:
    assert _problems(_with("reclaim_budget", value)) == [f"composer.reclaim_budget: {rule}"]
    assert _problems(_with("reclaim_budget", value, pool=0)) == [f"composer.pools[0].reclaim_budget: {rule}"]


def test_a_boolean_budget_is_not_a_count() -> None:
    assert _problems(_with("reclaim_budget", True)) == [
        "composer.reclaim_budget: Input should be a valid string (got True)"
    ]


@pytest.mark.parametrize("windows", [["22:00-06:00"], ["09:30-17:00", "00:00-24:00"], ["23:59-00:00"]])
def test_good_windows_load(windows: list[str]) -> None:
    composer = load_estate(_with("reclaim_windows_utc", windows)).composer
    assert composer is not None and composer.reclaim_windows_utc == windows


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("22-06", "expected HH:MM-HH:MM in UTC, e.g. 22:00-06:00"),
        ("25:00-01:00", "expected HH:MM-HH:MM in UTC, e.g. 22:00-06:00"),
        ("9:00-17:00", "expected HH:MM-HH:MM in UTC, e.g. 22:00-06:00"),
        ("10:00-24:30", "ends after 24:00"),
        ("06:00-06:00", "start and end are the same time"),
    ],
)
def test_bad_windows_name_the_key_and_the_rule(value: str, rule: str) -> None:
    assert _problems(_with("reclaim_windows_utc", ["22:00-06:00", value])) == [
        f"composer.reclaim_windows_utc[1]: reclaim window '{value}': {rule}"
    ]


def test_windows_are_a_list() -> None:
    assert _problems(_with("reclaim_windows_utc", "22:00-06:00")) == [
        "composer.reclaim_windows_utc: Input should be a valid list (got '22:00-06:00')"
    ]


@pytest.mark.parametrize("tag", ["composer-east", "gpu-composer", "team.a:composer/1+x", "A" * 64])
def test_good_owner_tags_load(tag: str) -> None:
    composer = load_estate(_with("owner_tag", tag)).composer
    assert composer is not None and composer.owner_tag == tag


@pytest.mark.parametrize(
    ("tag", "rule"),
    [
        ("n/a", "owner tag 'n/a' reads as no description on the Director"),
        ("", "owner tag '' reads as no description on the Director"),
        ("  ", "owner tag '  ' reads as no description on the Director"),
        ("A" * 65, f"owner tag '{'A' * 65}': at most 64 characters"),
        ("east composer", "owner tag 'east composer': letters, digits and . _ : / + - only, starting with a "
         "letter or digit"),
        ("-east", "owner tag '-east': letters, digits and . _ : / + - only, starting with a letter or digit"),
    ],
)
def test_bad_owner_tags_name_the_key_and_the_rule(tag: str, rule: str) -> None:
    assert _problems(_with("owner_tag", tag)) == [f"composer.owner_tag: {rule}"]


def test_orphan_grace_bounds_are_the_composers() -> None:
    setting = SETTINGS["orphan_grace_seconds"]
    low, high = int(setting.minimum), int(setting.maximum)
    for good in (low, 120, high):
        composer = load_estate(_with("orphan_grace_seconds", good)).composer
        assert composer is not None and composer.orphan_grace_seconds == good
    for bad in (low - 1, high + 1):
        assert _problems(_with("orphan_grace_seconds", bad)) == [
            f"composer.orphan_grace_seconds: {bad} is outside {low}..{high}"
        ]


def test_every_bad_guard_value_is_reported_at_once() -> None:
    raw = valid_estate()
    raw["composer"].update(reclaim_budget="150%", reclaim_windows_utc=["x"], owner_tag="n/a",
                           orphan_grace_seconds=-5)
    raw["composer"]["pools"][1]["reclaim_budget"] = "y"
    paths = [m.split(":")[0] for m in _problems(raw)]
    assert paths == ["composer.pools[1].reclaim_budget", "composer.reclaim_budget",
                     "composer.reclaim_windows_utc[0]", "composer.owner_tag", "composer.orphan_grace_seconds"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("reclaim_budget", "ten"), ("reclaim_budget", -1), ("reclaim_windows_utc", ["22-06"]),
     ("owner_tag", "n/a"), ("owner_tag", ""), ("owner_tag", "a b"), ("orphan_grace_seconds", -1)],
)
def test_the_json_schema_refuses_them_too(key: str, value: Any) -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    doc = {"config": {"composable-gpu:estate": encrypted(_with(key, value))}}
    errors = list(validator.iter_errors(doc))
    assert len(errors) == 1

    def paths(errs: Any) -> list[list[Any]]:  # the section is optional (anyOf null): look inside
        return [p for e in errs for p in ([list(e.absolute_path)[2:4]] + paths(e.context))]

    assert ["composer", key] in paths(errors)
    good = {"config": {"composable-gpu:estate": encrypted(_with("reclaim_budget", 2))}}
    assert list(validator.iter_errors(good)) == []


def test_the_messages_docs_composer_reclaim_quotes_are_the_loaders() -> None:
    doc = " ".join((CHART.parents[1] / "docs" / "composer-reclaim.md").read_text().split())
    for key, value in (("reclaim_budget", "150%"), ("reclaim_windows_utc", ["06:00-06:00"]),
                       ("owner_tag", "n/a")):
        (message,) = _problems(_with(key, value))
        assert f"`{message}`" in doc, message
