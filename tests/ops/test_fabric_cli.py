"""``python -m ops.fabric status`` as a process: one line and exit 1 when the Director refuses or
does not answer, or the API server does not answer; exit 2 without a password. The Director is the
lab's simulator on 127.0.0.1 (no cluster needed: the Director is read first)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import processes
from lab.settings import ROOT
from tests.director.conftest import PASSWORD, USER, start_sim
from tests.kubeconfigs import write_kubeconfig


@pytest.fixture
def director() -> Iterator[str]:
    """The Director simulator (dev inventory) on a free 127.0.0.1 port; yields its URL."""
    sim = start_sim("dev.yaml")
    try:
        yield sim.url
    finally:
        sim.server.stop()


def status(
    url: str, kubeconfig: Path, password: str | None = PASSWORD
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIQID_")}
    if password is not None:
        env["LIQID_DIRECTOR_PASSWORD"] = password
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.fabric",
            "status",
            "--director-url",
            url,
            "--director-username",
            USER,
            "--kubeconfig",
            str(kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
        check=False,
    )


def dead_kubeconfig(tmp_path: Path) -> tuple[Path, int]:
    port = processes.free_port()
    path = write_kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}",
                            cluster={"insecure-skip-tls-verify": True})
    return path, port


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 1 and out.stdout == "", out
    (line,) = out.stderr.strip().splitlines()
    return line


def test_unreachable_api_server_is_one_line(director: str, tmp_path: Path) -> None:
    kubeconfig, port = dead_kubeconfig(tmp_path)
    line = one_line(status(director, kubeconfig))
    assert line.startswith(f"fabric status: API server https://127.0.0.1:{port} could not be read: ")


def test_director_refusing_or_down_is_one_line_naming_it(director: str, tmp_path: Path) -> None:
    kubeconfig, _ = dead_kubeconfig(tmp_path)
    line = one_line(status(director, kubeconfig, password="wrong"))
    assert line.startswith(f"fabric status: Director {director} could not be read: DirectorAuthError")
    down = f"http://127.0.0.1:{processes.free_port()}"
    line = one_line(status(down, kubeconfig))
    assert line.startswith(f"fabric status: Director {down} could not be read: DirectorUnavailableError")


def test_no_password_is_a_usage_error(director: str, tmp_path: Path) -> None:
    out = status(director, dead_kubeconfig(tmp_path)[0], password=None)
    assert out.returncode == 2 and "LIQID_DIRECTOR_PASSWORD" in out.stderr
