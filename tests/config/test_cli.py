"""``python -m stack_config validate``: what it prints for invalid stack files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stack_config.__main__ import main
from tests.config.factories import encrypted, valid_estate

FLAG_HINT = "or validate the rest with: python -m stack_config validate --allow-missing-secrets"


def _write_stack(tmp_path: Path, estate: dict[str, Any]) -> Path:
    """Write ``estate`` as a stack file holds it (its secrets encrypted: :func:`encrypted`)."""
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(yaml.safe_dump({"config": {"composable-gpu:estate": encrypted(estate)}}))
    return path


def test_missing_secrets_get_one_command_each_and_the_flag_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = valid_estate()
    del raw["fabric"]["director"]["password"]
    del raw["hosts"][0]["bmc"]["password"]
    path = _write_stack(tmp_path, raw)
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: invalid stack config composable-gpu:estate (2 problems):",
        "  - fabric.director.password: required key is missing "
        "(a secret; set it with: pulumi config set --secret --path 'estate.fabric.director.password')",
        "  - hosts[0].bmc.password: required key is missing "
        "(a secret; set it with: pulumi config set --secret --path 'estate.hosts[0].bmc.password')",
        f"{path}: 2 secrets missing: set them as shown above, {FLAG_HINT} {path}",
    ]
    assert main(["validate", "--allow-missing-secrets", str(path)]) == 0


def test_no_flag_hint_without_missing_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = valid_estate()
    raw["fabric"]["directr"] = raw["fabric"].pop("director")
    path = _write_stack(tmp_path, raw)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "  - fabric.directr: unknown key (did you mean 'director'?)" in err.splitlines()
    assert "--allow-missing-secrets" not in err
