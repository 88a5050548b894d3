"""Loader details: key paths, stack files with encrypted leaves, path resolution."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stack_config import EstateConfigError
from stack_config.loader import (
    SECRET_PLACEHOLDER,
    fill_missing_secrets,
    format_path,
    load_stack_file,
    resolve_path,
)
from stack_config.models import EstateConfig
from tests.config.factories import valid_estate


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("tenants", 1, "networks", 0, "vxlan_id"), "tenants[1].networks[0].vxlan_id"),
        (("hosts", 0, "dpu", "mlxconfig", "bad-key", "[key]"), "hosts[0].dpu.mlxconfig.bad-key"),
        (("environment",), "environment"),
        ((), ""),
    ],
)
def test_format_path(loc: tuple, path: str) -> None:
    assert format_path(loc) == path


def _write_stack(tmp_path: Path, estate: object) -> Path:
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(yaml.safe_dump({"config": {"composable-gpu:estate": estate}}))
    return path


def test_stack_file_with_encrypted_leaves(tmp_path: Path) -> None:
    raw = valid_estate()
    raw["fabric"]["director"]["password"] = {"secure": "v1:abc:def"}
    estate = load_stack_file(_write_stack(tmp_path, raw))
    assert estate.fabric.director.password.get_secret_value() == SECRET_PLACEHOLDER


def test_stack_file_missing_secrets(tmp_path: Path) -> None:
    raw = valid_estate()
    del raw["hosts"][1]["dpu"]["bmc"]["password"]
    path = _write_stack(tmp_path, raw)
    with pytest.raises(EstateConfigError) as err:
        load_stack_file(path)
    assert [str(p) for p in err.value.problems] == ["hosts[1].dpu.bmc.password: required key is missing"]
    assert load_stack_file(path, require_secrets=False).hosts[1].dpu is not None


def test_fill_missing_secrets_touches_only_secret_fields() -> None:
    raw = valid_estate()
    del raw["fabric"]["director"]["password"]
    del raw["hosts"][0]["bmc"]["password"]
    del raw["hosts"][0]["bmc"]["username"]
    filled = fill_missing_secrets(EstateConfig, raw)
    assert filled["fabric"]["director"]["password"] == SECRET_PLACEHOLDER
    assert filled["hosts"][0]["bmc"]["password"] == SECRET_PLACEHOLDER
    assert "username" not in filled["hosts"][0]["bmc"]  # not a secret: still reported missing
    assert raw["fabric"]["director"].get("password") is None  # input untouched


def test_stack_file_without_estate_key(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("config:\n  other:key: 1\n")
    with pytest.raises(EstateConfigError, match="has no config key composable-gpu:estate"):
        load_stack_file(path)


def test_error_message_lists_every_problem() -> None:
    from stack_config import load_estate

    raw = valid_estate()
    raw["tenants"][0]["networks"][0]["vlan_id"] = 5000
    raw["tenants"][1]["networks"][0]["vxlan_id"] = 16777216
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    assert str(err.value) == (
        "invalid stack config composable-gpu:estate (2 problems):\n"
        "  - tenants[0].networks[0].vlan_id: 5000 is outside 1..4094\n"
        "  - tenants[1].networks[0].vxlan_id: 16777216 is outside 1..16777215"
    )


def test_resolve_path(tmp_path: Path) -> None:
    assert resolve_path(".lab/kubeconfig", tmp_path) == tmp_path / ".lab/kubeconfig"
    assert resolve_path("/etc/kubeconfig", tmp_path) == Path("/etc/kubeconfig")
    assert resolve_path("~/k", tmp_path) == Path.home() / "k"
