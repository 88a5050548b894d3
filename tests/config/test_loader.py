"""Loader details: key paths, stack files with encrypted leaves, path resolution."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stack_config import EstateConfigError, load_estate
from stack_config.loader import (
    SECRET_PLACEHOLDER,
    _problem_from_pydantic,
    fill_missing_secrets,
    format_path,
    resolve_path,
)
from stack_config.models import EstateConfig
from stack_config.stack_file import load_stack_file
from tests.config.factories import encrypted, valid_estate


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
    """Write ``estate`` as a stack file holds it (its secrets encrypted: :func:`encrypted`)."""
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(yaml.safe_dump({"config": {"composable-gpu:estate": encrypted(estate)}}))
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
    assert [str(p) for p in err.value.problems] == [
        "hosts[1].dpu.bmc.password: required key is missing "
        "(a secret; set it with: pulumi config set --secret --path 'estate.hosts[1].dpu.bmc.password')"
    ]
    assert load_stack_file(path, require_secrets=False).hosts[1].dpu is not None


def test_missing_secret_names_its_command_and_the_program_sees_no_cli_flag() -> None:
    """The Pulumi program reports ``str(EstateConfigError)`` of :func:`load_estate`: the
    ``pulumi config set`` command is there, the ``validate`` CLI's flag is not."""
    raw = valid_estate()
    del raw["fabric"]["director"]["password"]
    del raw["fabric"]["director"]["username"]
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    assert [(str(p), p.missing_secret) for p in err.value.problems] == [
        ("fabric.director.username: required key is missing", False),
        (
            "fabric.director.password: required key is missing (a secret; set it with: "
            "pulumi config set --secret --path 'estate.fabric.director.password')",
            True,
        ),
    ]
    assert "--allow-missing-secrets" not in str(err.value)


@pytest.mark.parametrize(
    ("where", "key", "typo", "problem"),
    [
        ((), "tenants", "tenats", "tenats: unknown key (did you mean 'tenants'?)"),
        (("fabric",), "director", "directr", "fabric.directr: unknown key (did you mean 'director'?)"),
        (("hosts", 0), "bmc", "bcm", "hosts[0].bcm: unknown key (did you mean 'bmc'?)"),
        (
            ("hosts", 1, "dpu", "bmc"),
            "password",
            "passwrd",
            "hosts[1].dpu.bmc.passwrd: unknown key (did you mean 'password'?)",
        ),
        # nothing close at that level: no suggestion
        (("fabric",), None, "xyzzy", "fabric.xyzzy: unknown key"),
        (("hosts", 0), None, "q", "hosts[0].q: unknown key"),
    ],
)
def test_unknown_key_suggests_a_close_spelling_at_its_level(
    where: tuple[str | int, ...], key: str | None, typo: str, problem: str
) -> None:
    raw = valid_estate()
    section = raw
    for part in where:
        section = section[part]
    section[typo] = section.pop(key) if key else 1  # misspell an existing key, or add a stray one
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    assert problem in [str(p) for p in err.value.problems]


def test_unknown_key_suggestion_uses_the_alias_the_user_writes() -> None:
    class Aliased(BaseModel):
        model_config = ConfigDict(extra="forbid")
        boot_mac: str = Field(alias="bootMac")

    with pytest.raises(ValidationError) as err:
        Aliased.model_validate({"bootMc": "x"})
    problems = [str(_problem_from_pydantic(e, Aliased)) for e in err.value.errors()]
    assert problems == ["bootMac: required key is missing", "bootMc: unknown key (did you mean 'bootMac'?)"]


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


NO_ESTATE = (
    "Pulumi.x.yaml has no config key composable-gpu:inventory (the estate's folder) nor composable-gpu:estate"
)


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        (["other:key"], NO_ESTATE),
        (
            ["aws:region", "composable-gpu:estat", "composable-gpu:region"],
            f"{NO_ESTATE} (it has 'composable-gpu:estat', "
            "'composable-gpu:region'; rename 'composable-gpu:estat' to 'composable-gpu:estate'?)",
        ),
        (
            ["composable-gpu:region"],  # ours, but nothing close: listed, no suggestion
            f"{NO_ESTATE} (it has 'composable-gpu:region')",
        ),
        (
            ["composible-gpu:estate"],
            f"{NO_ESTATE} (it has 'composible-gpu:estate'; "
            "rename 'composible-gpu:estate' to 'composable-gpu:estate'?)",
        ),
        (["aws:estate"], NO_ESTATE),  # another project's
        (
            ["estate"],
            f"{NO_ESTATE} (it has 'estate'; "
            "rename 'estate' to 'composable-gpu:estate'?)",
        ),
    ],
)
def test_stack_file_without_estate_key(tmp_path: Path, keys: list[str], problem: str) -> None:
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(yaml.safe_dump({"config": {k: {"fabric": {}} for k in keys}}))
    with pytest.raises(EstateConfigError) as err:
        load_stack_file(path)
    assert [str(p) for p in err.value.problems] == [problem]


def test_error_message_lists_every_problem() -> None:
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
