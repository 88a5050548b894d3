"""Checks on the raw ``Pulumi.<stack>.yaml`` file, before any value is validated: secrets only in
Pulumi's encrypted form, no ``composable-gpu:*`` key the program does not read, and a file that
cannot be read or parsed named in one line (``python -m stack_config validate``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stack_config import EstateConfigError, load_stack_file
from stack_config.__main__ import main
from stack_config.loader import unknown_config_keys
from stack_config.stack_file import plaintext_secrets_in_stack_file
from tests.config.factories import ALL_PASSWORDS, ENCRYPTED, encrypted, host_prep, valid_estate

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "Pulumi.dev.yaml"
#: The dev stack file as it was before its estate moved into environments/dev (inline estate).
LEGACY_DEV = ROOT / "tests" / "fixtures" / "legacy" / "Pulumi.dev.yaml"

#: Every secret leaf a stack file can hold, with the command the message names for it.
SECRET_PATHS = [
    ("fabric.director.password", ""),
    ("hosts[0].bmc.password", ""),
    ("hosts[0].dpu.bmc.password", ""),
    ("hosts[0].prep.private_key", " < <key file>"),
    ("hosts[0].dpu.prep.private_key", " < <key file>"),
]


def _write(tmp_path: Path, config: dict[str, Any], name: str = "Pulumi.test.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def _with_prep(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with SSH preparation sections on hosts[0] and its DPU (encrypted keys)."""
    raw["hosts"][0]["prep"] = {**host_prep(), "private_key": ENCRYPTED}
    raw["hosts"][0]["dpu"]["prep"] = {**host_prep(host="10.0.3.1"), "private_key": ENCRYPTED}
    return raw


def _set(raw: dict[str, Any], path: str, value: Any) -> None:
    """Set the leaf at a key path such as ``hosts[0].dpu.bmc.password``."""
    node: Any = raw
    parts = path.replace("[", ".").replace("]", "").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    node[parts[-1]] = value


# --------------------------------------------------------------------------- secrets in plain text


@pytest.mark.parametrize(("path", "from_file"), SECRET_PATHS)
def test_a_secret_in_plain_text_is_refused_naming_its_path_and_the_command(
    tmp_path: Path, path: str, from_file: str
) -> None:
    """``pulumi config set --path 'estate.<path>' <value>`` without ``--secret`` writes the value in
    plain text: the offline check and the program's check refuse it without quoting it."""
    raw = _with_prep(encrypted(valid_estate()))
    _set(raw, path, "typed-without-secret-5e1d")
    stack = _write(tmp_path, {"composable-gpu:estate": raw}, "Pulumi.dev.yaml")
    expected = (
        f"{path}: is in plain text in Pulumi.dev.yaml; store it encrypted: "
        f"pulumi config set --secret --path 'estate.{path}'{from_file}"
    )
    assert [str(p) for p in plaintext_secrets_in_stack_file(stack)] == [expected]
    with pytest.raises(EstateConfigError) as err:
        load_stack_file(stack)
    assert [str(p) for p in err.value.problems] == [expected]
    assert "typed-without-secret-5e1d" not in str(err.value)


def test_the_validator_refuses_a_plain_password_in_a_copy_of_the_dev_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reported case: the dev stack file (inline, as before its migration) with the Director
    password set without ``--secret``."""
    doc = yaml.safe_load(LEGACY_DEV.read_text())
    doc["config"]["composable-gpu:estate"]["fabric"]["director"]["password"] = "lab-director-password"
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump(doc))
    assert main(["validate", str(stack)]) == 1
    err = capsys.readouterr().err
    assert (
        "  - fabric.director.password: is in plain text in Pulumi.dev.yaml; store it encrypted: "
        "pulumi config set --secret --path 'estate.fabric.director.password'"
    ) in err.splitlines()
    assert "lab-director-password" not in err
    assert main(["validate", "--allow-missing-secrets", str(stack)]) == 1  # not a missing secret


def test_every_plain_secret_is_reported_with_the_structural_problems(tmp_path: Path) -> None:
    raw = valid_estate()  # decrypted: every password in plain text
    raw["tenants"][1]["networks"][0]["vxlan_id"] = 16777216
    with pytest.raises(EstateConfigError) as err:
        load_stack_file(_write(tmp_path, {"composable-gpu:estate": raw}))
    paths = [p.path for p in err.value.problems]
    assert paths == [  # the models' order, then the structural problems
        "fabric.director.password",
        "hosts[0].bmc.password",
        "hosts[0].dpu.bmc.password",
        "hosts[1].bmc.password",
        "hosts[1].dpu.bmc.password",
        "hosts[2].bmc.password",
        "hosts[3].bmc.password",
        "hosts[3].dpu.bmc.password",
        "tenants[1].networks[0].vxlan_id",
    ]
    assert not any(pw in str(err.value) for pw in ALL_PASSWORDS)


def test_encrypted_absent_and_null_secrets_are_not_plain_text(tmp_path: Path) -> None:
    raw = _with_prep(encrypted(valid_estate()))
    del raw["hosts"][1]["bmc"]["password"]  # set per deployment
    raw["hosts"][2]["bmc"]["password"] = None  # the models report it
    stack = _write(tmp_path, {"composable-gpu:estate": raw})
    assert plaintext_secrets_in_stack_file(stack) == []
    assert plaintext_secrets_in_stack_file(tmp_path / "Pulumi.absent.yaml") == []


def test_malformed_sections_are_left_to_the_models(tmp_path: Path) -> None:
    raw = encrypted(valid_estate())
    raw["hosts"] = "nope"
    raw["fabric"]["director"] = ["not", "a", "mapping"]
    assert plaintext_secrets_in_stack_file(_write(tmp_path, {"composable-gpu:estate": raw})) == []
    assert plaintext_secrets_in_stack_file(_write(tmp_path, {"composable-gpu:estate": None})) == []


def test_every_committed_stack_file_passes_the_validator(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in ROOT.glob("Pulumi.*.yaml"))
    assert len(files) >= 3
    assert main(["validate", "--allow-missing-secrets", *files]) == 0, capsys.readouterr().err


# --------------------------------------------------------------------------- unknown config keys


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        (
            "composable-gpu:idle_timeout",
            "composable-gpu:idle_timeout: unknown config key (composable-gpu reads only "
            "'composable-gpu:estate', 'composable-gpu:inventory', 'composable-gpu:credentials', "
            "'composable-gpu:role')",
        ),
        (
            "composable-gpu:estates",
            "composable-gpu:estates: unknown config key (did you mean 'composable-gpu:estate'?)",
        ),
    ],
)
def test_an_unknown_key_of_the_project_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, problem: str
) -> None:
    stack = _write(tmp_path, {"composable-gpu:estate": encrypted(valid_estate()), key: 30})
    with pytest.raises(EstateConfigError) as err:
        load_stack_file(stack)
    assert [str(p) for p in err.value.problems] == [problem]
    assert main(["validate", str(stack)]) == 1
    assert f"  - {problem}" in capsys.readouterr().err.splitlines()


def test_keys_of_other_namespaces_are_not_ours(tmp_path: Path) -> None:
    others = {"aws:region": "eu-west-1", "pulumi:tags": {"team": "gpu"}, "kubernetes:context": "lab"}
    assert unknown_config_keys(others) == []
    stack = _write(tmp_path, {"composable-gpu:estate": encrypted(valid_estate()), **others})
    assert load_stack_file(stack).environment == "staging"


def test_unknown_keys_are_reported_in_file_order_with_the_estate_problems(tmp_path: Path) -> None:
    raw = encrypted(valid_estate())
    raw["fabric"]["directr"] = raw["fabric"].pop("director")
    config = {"composable-gpu:zeta": 1, "composable-gpu:estate": raw, "composable-gpu:alpha": 2}
    with pytest.raises(EstateConfigError) as err:
        load_stack_file(_write(tmp_path, config))
    assert [p.path for p in err.value.problems] == [
        "composable-gpu:alpha",  # yaml.safe_dump sorts the keys
        "composable-gpu:zeta",
        "fabric.director",
        "fabric.directr",
    ]


# --------------------------------------------------------------------------- unreadable files


def test_a_missing_file_is_one_line_and_the_other_files_are_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing, production = tmp_path / "Pulumi.prod.yaml", ROOT / "Pulumi.production.yaml"
    assert main(["validate", "--allow-missing-secrets", str(missing), str(production)]) == 1
    out = capsys.readouterr()
    assert out.err.splitlines() == [f"{missing}: cannot read: No such file or directory"]
    assert out.out.startswith(f"{production}: ok (production")


def test_a_yaml_error_is_one_line_with_its_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  composable-gpu:estate:\n    environment: lab\n   fabric: {}\n")
    assert main(["validate", str(bad), str(DEV)]) == 1
    out = capsys.readouterr()
    assert out.err.splitlines() == [
        f"{bad}: not valid YAML: line 4, column 4: expected <block end>, but found '<block mapping start>'"
    ]
    assert out.out.startswith(f"{DEV}: ok (lab")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- config\n", "not a stack file: expected a mapping with a config key, got list"),
        ("config: [1, 2]\n", "not a stack file: config is a list, expected a mapping"),
        (b"config: \xff\xfe\n", "cannot read: not UTF-8 text"),
    ],
)
def test_a_file_that_is_not_a_stack_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, problem: str
) -> None:
    path = tmp_path / "Pulumi.odd.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [f"{path}: {problem}"]
