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
import time
from pathlib import Path
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
