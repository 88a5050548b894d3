"""The DRA kubelet plugin (``node/kubeletplugin``, Go): its own tests, run from this suite so CI
covers them (its pins: ``tests/toolchain/test_versions.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "node" / "kubeletplugin"


@pytest.mark.slow
def test_go_tests_pass() -> None:
    """``go test ./...`` with the flags ``lab/toolchain/build.sh`` builds the plugin with (so a
    warm build cache serves both) and the pins of the committed go.sum (``-mod=readonly``)."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("go not on PATH (make setup builds the toolchain with it)")
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    proc = subprocess.run([go, "test", "-trimpath", "-count=1", "./..."], cwd=MODULE, env=env,
                          capture_output=True, text=True, timeout=850, check=False)
    assert proc.returncode == 0, (proc.stdout[-8000:] + proc.stderr[-4000:])
    assert "FAIL" not in proc.stdout and proc.stdout.count("ok ") >= 2, proc.stdout
