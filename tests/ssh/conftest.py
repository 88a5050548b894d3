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
from collections.abc import Iterator

import pytest

from dynamic_providers.ssh.models import SshTarget
from lab import processes, sshd


@pytest.fixture(scope="session")
def sshd_lab() -> Iterator[sshd.SshdLab]:
    reason = sshd.unavailable_reason()
    if reason:
        pytest.skip(reason)
    try:
        with sshd.temporary(prefix="gpuprep-sshd-", user=f"gpuprep-t{os.getpid()}") as lab:
            yield lab
    except processes.LabProcessError as exc:
        pytest.fail(f"lab sshd did not start: {exc}")


@pytest.fixture
def ssh_lab(sshd_lab: sshd.SshdLab) -> sshd.SshdLab:
    sshd.reset_state(sshd_lab)
    return sshd_lab


@pytest.fixture
def target(ssh_lab: sshd.SshdLab) -> SshTarget:
    return SshTarget(host="127.0.0.1", port=ssh_lab.port, user=ssh_lab.user,
                     private_key=ssh_lab.client_private_key(), host_key=ssh_lab.host_key,
                     connect_timeout_seconds=5, command_timeout_seconds=30)
