"""tests/ci_skips.py: under CI=true a skip fails, naming what was missing; locally it skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = '''
import pytest

def test_runtime_skip():
    pytest.skip("helm is not on PATH: run `make setup`")

@pytest.mark.skipif(True, reason="lab binaries missing (kwok)")
def test_marked_skip():
    pass

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False

def test_passes():
    pass
'''

MODULE_SKIP = '''
import pytest
pytest.skip("sshd is not installed", allow_module_level=True)
'''


def _run(tmp_path: Path, ci: str | None, source: str = SAMPLE) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ci_skips", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )


def test_locally_a_skip_stays_a_skip_and_is_summarised(tmp_path: Path) -> None:
    run = _run(tmp_path, ci=None)
    assert run.returncode == 0, run.stdout
    assert "1 passed, 2 skipped, 1 xfailed" in run.stdout
    assert ("skips: 2 (1 x helm is not on PATH: run `make setup`; 1 x lab binaries missing (kwok))"
            in run.stdout)


def test_in_ci_a_skip_fails_naming_what_is_missing(tmp_path: Path) -> None:
    run = _run(tmp_path, ci="true")
    assert run.returncode == 1, run.stdout
    assert "CI=true: this test would have been skipped (helm is not on PATH: run `make setup`)" in run.stdout
    assert "CI=true: this test would have been skipped (lab binaries missing (kwok))" in run.stdout
    assert "1 xfailed" in run.stdout  # an expected failure is not a skip
    assert "skips: none" in run.stdout


def test_in_ci_a_module_level_skip_fails_too(tmp_path: Path) -> None:
    run = _run(tmp_path, ci="1", source=MODULE_SKIP)
    assert run.returncode != 0, run.stdout
    assert "sshd is not installed" in run.stdout


def test_ci_false_is_local(tmp_path: Path) -> None:
    assert _run(tmp_path, ci="false").returncode == 0
