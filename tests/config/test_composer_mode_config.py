"""``composer.mode`` in the stack config: the modes of :mod:`domain.composer_mode`, refused by key
and rule when unknown (by the loader ``pulumi preview``/``up`` runs before any resource), carried
into the chart's ``dra.mode``, and the rendered chart's RBAC and webhook in each mode."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.composer import composer_rbac_rules, composer_values
from domain.composer_mode import DEFAULT_MODE
from stack_config import EstateConfigError, load_estate
from tests.config.factories import valid_estate

CHART = Path(__file__).resolve().parents[2] / "charts" / "composer"


def _estate(mode: str | None) -> dict[str, Any]:
    raw = valid_estate()
    if mode is not None:
        raw["composer"]["mode"] = mode
    return raw


def _values(mode: str | None) -> dict[str, Any]:
    composer = load_estate(_estate(mode)).composer
    assert composer is not None
    return composer_values(
        config=composer,
        director_url="http://127.0.0.1:18080",
        director_username="admin",
        credentials_secret="composer-director-credentials",
        excluded_devices=[],
        tenant_pools=[],
    )


def test_the_default_mode_is_the_charts() -> None:
    composer = load_estate(valid_estate()).composer
    assert composer is not None and composer.mode == DEFAULT_MODE == "deviceplugin"
    assert yaml.safe_load((CHART / "values.yaml").read_text())["dra"]["mode"] == DEFAULT_MODE


@pytest.mark.parametrize("mode", ["gpu-operator", "DRA", ""])
def test_an_unknown_mode_names_the_key_and_the_modes(mode: str) -> None:
    with pytest.raises(EstateConfigError) as err:
        load_estate(_estate(mode))
    assert [str(p) for p in err.value.problems] == [
        f"composer.mode: Input should be 'deviceplugin' or 'dra' (got {mode!r})"
    ]


@pytest.mark.parametrize("mode", ["deviceplugin", "dra"])
def test_the_mode_reaches_the_chart_values(mode: str) -> None:
    assert _values(mode)["dra"] == {"mode": mode}


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make setup)")
@pytest.mark.parametrize("mode", ["deviceplugin", "dra"])
def test_the_rendered_chart_has_the_modes_rbac_and_webhook(tmp_path: Path, mode: str) -> None:
    values = tmp_path / "values.json"
    values.write_text(json.dumps(_values(mode)))
    out = subprocess.run(
        ["helm", "template", "composer", str(CHART), "-n", "composer-system", "-f", str(values)],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    rules = [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    assert rules == composer_rbac_rules(dra=mode == "dra")
    hooks = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    assert len(hooks) == (1 if mode == "deviceplugin" else 0)
