"""The exported JSON schema is current, and agrees with the loader on the stack files."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from stack_config.schema import SCHEMA_PATH, render_schema
from tests.config.factories import encrypted, valid_estate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_file_is_current() -> None:
    assert SCHEMA_PATH.read_text() == render_schema(), "run: python -m stack_config schema"


@pytest.mark.parametrize("stack", ["dev", "staging", "production"])
def test_stack_files_match_the_schema(validator: jsonschema.Draft202012Validator, stack: str) -> None:
    doc = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    assert [e.message for e in validator.iter_errors(doc)] == []


def test_schema_rejects_what_the_loader_rejects(validator: jsonschema.Draft202012Validator) -> None:
    raw = encrypted(valid_estate())
    raw["tenants"][1]["networks"][0]["vxlan_id"] = 16777216
    raw["hosts"][0]["typo"] = True
    errors = sorted(
        validator.iter_errors({"config": {"composable-gpu:estate": raw}}), key=lambda e: list(e.path)
    )
    where = [list(e.path)[2:] for e in errors]
    assert ["hosts", 0] in where  # additionalProperties: false
    assert ["tenants", 1, "networks", 0, "vxlan_id"] in where  # maximum


def test_secrets_only_in_pulumi_encrypted_form(validator: jsonschema.Draft202012Validator) -> None:
    raw = encrypted(valid_estate())
    assert list(validator.iter_errors({"config": {"composable-gpu:estate": raw}})) == []
    del raw["hosts"][0]["bmc"]["password"]  # set per deployment
    assert list(validator.iter_errors({"config": {"composable-gpu:estate": raw}})) == []
    raw["fabric"]["director"]["password"] = "typed-without-secret"
    best = jsonschema.exceptions.best_match(validator.iter_errors({"config": {"composable-gpu:estate": raw}}))
    assert best is not None and list(best.absolute_path)[2:] == ["fabric", "director", "password"]
    assert best.validator == "type"  # a string where only {secure: ...} is allowed


def test_only_the_config_keys_the_program_reads_in_its_namespace(
    validator: jsonschema.Draft202012Validator,
) -> None:
    config: dict[str, object] = {"composable-gpu:estate": encrypted(valid_estate())}
    config |= {"aws:region": "eu-west-1", "pulumi:tags": {}}
    assert list(validator.iter_errors({"config": config})) == []
    config["composable-gpu:idle_timeout"] = 30
    errors = list(validator.iter_errors({"config": config}))
    assert [(e.instance, list(e.absolute_path)) for e in errors] == [
        ("composable-gpu:idle_timeout", ["config"])
    ]
