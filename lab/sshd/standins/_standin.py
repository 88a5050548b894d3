"""Shared helpers of the lab's hardware-tool stand-ins (stdlib only: they run under the
system ``/usr/bin/python3`` as the unprivileged SSH user).

Every stand-in keeps its state in files under ``$STANDIN_SYSROOT`` (set by the lab sshd's
``SetEnv``; default ``~/sysroot``), a small tree that mirrors the real paths
(``etc/default/grub``, ``boot/grub/grub.cfg``, ``proc/cmdline``, ...), and appends one JSON
line per invocation to ``var/log/standin-invocations.jsonl`` so tests can prove what ran.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

SYSROOT = Path(os.environ.get("STANDIN_SYSROOT") or Path.home() / "sysroot")
INVOCATION_LOG = SYSROOT / "var" / "log" / "standin-invocations.jsonl"
MLX_DEVICES = SYSROOT / "var" / "lib" / "mlxconfig-standin" / "devices.json"
HARDWARE_MODULES = SYSROOT / "var" / "lib" / "host-standin" / "hardware-modules"
KERNEL_VERSION = "6.1.0-18-amd64"


def path(absolute: str) -> Path:
    """``absolute`` (``/etc/default/grub``) inside the stand-in sysroot."""
    return SYSROOT / absolute.lstrip("/")


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Serialise read-modify-write of stand-in state across concurrent invocations."""
    lock = SYSROOT / "var" / "lib" / ".standin.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def log_invocation(tool: str, argv: list[str]) -> None:
    """Append ``{"tool", "argv", "time"}`` to the invocation log."""
    INVOCATION_LOG.parent.mkdir(parents=True, exist_ok=True)
    with locked(), INVOCATION_LOG.open("a") as fh:
        fh.write(json.dumps({"tool": tool, "argv": argv, "time": time.time()}) + "\n")


def write_atomic(target: Path, text: str) -> None:
    """Replace ``target`` with ``text`` (temp file + rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".standin.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` the way the emulated tool does (stdout) and exit with ``code``."""
    print(message)
    sys.exit(code)
