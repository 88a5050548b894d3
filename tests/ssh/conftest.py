"""Fixtures of the SSH host/DPU preparation tests.

- ``sshd_lab`` (session): a real Debian sshd on 127.0.0.1 (free port) with the hardware-tool
  stand-ins, for a per-session user ``gpuprep-t<pid>``, in a ``mkdtemp`` directory (the SSH
  user must be able to reach it; pytest's own tmp dirs are root-only). Skipped when not root
  or when openssh-server is not installed (``make setup`` installs it). Stopped, the user
  deleted and the directory removed at the end.
- ``ssh_lab``: ``sshd_lab`` with the emulated host and DPU reset to factory state.
- ``target``: an :class:`~dynamic_providers.ssh.models.SshTarget` for it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dynamic_providers.ssh.models import SshTarget
from lab import processes, sshd


@pytest.fixture(scope="session")
def sshd_lab() -> Iterator[sshd.SshdLab]:
    if os.geteuid() != 0:
        pytest.skip("the lab sshd needs root (it creates the SSH user)")
    if not sshd.SSHD.exists() or not sshd.SYSTEM_PYTHON.exists():
        pytest.skip("openssh-server or /usr/bin/python3 missing: run `make setup`")
    instance = Path(tempfile.mkdtemp(prefix="gpuprep-sshd-"))
    try:
        lab = sshd.start(instance, user=f"gpuprep-t{os.getpid()}")
    except processes.LabProcessError as exc:
        sshd.stop(instance, wipe=True)
        pytest.fail(f"lab sshd did not start: {exc}")
    yield lab
    sshd.stop(instance, wipe=True)
    shutil.rmtree(instance, ignore_errors=True)


@pytest.fixture
def ssh_lab(sshd_lab: sshd.SshdLab) -> sshd.SshdLab:
    sshd.reset_state(sshd_lab)
    return sshd_lab


@pytest.fixture
def target(ssh_lab: sshd.SshdLab) -> SshTarget:
    return SshTarget(host="127.0.0.1", port=ssh_lab.port, user=ssh_lab.user,
                     private_key=ssh_lab.client_private_key(), host_key=ssh_lab.host_key,
                     connect_timeout_seconds=5, command_timeout_seconds=30)
