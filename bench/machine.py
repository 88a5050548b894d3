"""What the figures were measured on: machine, load and software versions.

Sources: ``/proc/cpuinfo`` (CPU model), ``os.cpu_count()``, ``/proc/meminfo`` (MemTotal, kB),
``os.getloadavg()``, ``importlib.metadata`` for Python packages, ``--version`` of the toolchain
binaries found on PATH.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

#: The repository root (the git checkout whose commit is measured).
ROOT = Path(__file__).resolve().parents[1]

#: Python distributions whose versions the report states.
PACKAGES = (
    "pulumi",
    "pulumi_kubernetes",
    "pydantic",
    "requests",
    "kubernetes",
    "Flask",
    "matplotlib",
)
#: Toolchain binaries and the argument that prints their version.
BINARIES = {
    "pulumi": ["version"],
    "kube-apiserver": ["--version"],
    "etcd": ["--version"],
    "kwok": ["--version"],
}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_mib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return None


def _binary_version(name: str, args: list[str]) -> str | None:
    path = shutil.which(name)
    if path is None:
        return None
    try:
        out = subprocess.run([path, *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0].strip() if text else None


def describe(*, binaries: bool = True) -> dict[str, Any]:
    """The machine and versions as a JSON-ready dict.

    Keys: ``cpu_model``, ``cores`` (logical CPUs), ``memory_mib``, ``loadavg`` (1/5/15 min at
    the time of the call), ``python``, ``platform``, ``packages`` (name -> version or None),
    ``binaries`` (name -> first line of its version output, or None when not on PATH),
    ``timestamp`` (UTC, ISO 8601).
    """
    pkgs: dict[str, str | None] = {}
    for p in PACKAGES:
        try:
            pkgs[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            pkgs[p] = None
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_mib": _mem_total_mib(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": pkgs,
        "binaries": {n: _binary_version(n, a) for n, a in BINARIES.items()} if binaries else {},
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def commit(paths: tuple[str, ...]) -> dict[str, Any]:
    """The commit measured: ``{"sha", "dirty", "paths"}`` (dirty: uncommitted changes under
    ``paths``, ``bench/results`` aside, the code the part measures); ``sha`` None outside a git
    checkout."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", *paths, ":!bench/results"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None, "paths": list(paths)}
    return {"sha": sha, "dirty": bool(dirty), "paths": list(paths)}


class LoadSampler:
    """The 1-minute load average sampled during a run, on a daemon thread.

    Use as a context manager; :meth:`summary` then gives ``{"samples", "mean", "max", "cores"}``
    (load averages as ``os.getloadavg()`` reports them: runnable and uninterruptible tasks,
    averaged over a minute, so a load above ``cores`` means tasks waited for a CPU), or
    ``{"samples": 0, "cores": ...}`` when nothing was sampled.

    Args:
        interval_seconds: time between samples (the first is taken on entry, the last on exit).
        read: returns the load averages (1/5/15 min); ``os.getloadavg`` by default.
    """

    def __init__(
        self, *, interval_seconds: float = 5.0, read: Callable[[], tuple[float, float, float]] = os.getloadavg
    ) -> None:
        self.interval_seconds = interval_seconds
        self._read = read
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Take one sample now."""
        self._samples.append(self._read()[0])

    def _run(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            self.sample()

    def __enter__(self) -> LoadSampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval_seconds + 1)
        self.sample()

    def summary(self) -> dict[str, Any]:
        """The samples' count, mean and max (2 decimals) and the machine's logical cores."""
        v = list(self._samples)
        if not v:
            return {"samples": 0, "cores": os.cpu_count()}
        return {
            "samples": len(v),
            "mean": round(sum(v) / len(v), 2),
            "max": round(max(v), 2),
            "cores": os.cpu_count(),
        }
