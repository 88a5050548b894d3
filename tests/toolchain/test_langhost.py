"""The project's Python language host, driven by the real pulumi CLI (no lab needed)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.cli
ROOT = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path, program: str) -> dict[str, str]:
    (tmp_path / "Pulumi.yaml").write_text(textwrap.dedent(f"""\
        name: langhost-check
        runtime:
          name: python
          options:
            virtualenv: {ROOT / '.venv'}
        """))
    (tmp_path / "__main__.py").write_text(textwrap.dedent(program))
    (tmp_path / "state").mkdir()
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
           "PULUMI_CONFIG_PASSPHRASE": "test-only"}
    subprocess.run(["pulumi", "stack", "init", "t"], cwd=tmp_path, env=env, check=True, capture_output=True)
    return env


def _pulumi(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pulumi", *args, "--stack", "t", "--non-interactive"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_program_error_fails_the_update_with_the_traceback(tmp_path: Path) -> None:
    env = _project(tmp_path, """
        import pulumi
        raise ValueError("estate config is broken: hosts[0].name")
    """)
    result = _pulumi(tmp_path, env, "preview")
    assert result.returncode != 0
    assert "estate config is broken: hosts[0].name" in result.stdout + result.stderr


def test_config_and_secrets_reach_the_program_and_stay_secret(tmp_path: Path) -> None:
    env = _project(tmp_path, """
        import pulumi
        cfg = pulumi.Config()
        pulumi.export("plain", cfg.require("plain"))
        pulumi.export("secret", cfg.require_secret("password"))
        pulumi.export("project", pulumi.get_project())
    """)
    subprocess.run(["pulumi", "config", "set", "plain", "value-1", "--stack", "t"], cwd=tmp_path, env=env,
                   check=True, capture_output=True)
    subprocess.run(["pulumi", "config", "set", "--secret", "password", "s3cr3t-value", "--stack", "t"],
                   cwd=tmp_path, env=env, check=True, capture_output=True)
    up = _pulumi(tmp_path, env, "up", "--yes")
    assert up.returncode == 0, up.stdout + up.stderr
    outputs = _pulumi(tmp_path, env, "stack", "output", "--json")
    assert '"plain": "value-1"' in outputs.stdout
    assert '"project": "langhost-check"' in outputs.stdout
    assert "s3cr3t-value" not in outputs.stdout  # shown as [secret]
    state = _pulumi(tmp_path, env, "stack", "export")
    assert "s3cr3t-value" not in state.stdout
    assert "s3cr3t-value" not in up.stdout
