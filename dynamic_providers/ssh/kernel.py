"""Kernel command line and module blacklist planning (pure functions over file contents).

Facts followed:

- Debian/Ubuntu GRUB: ``/etc/default/grub`` is a shell fragment; ``GRUB_CMDLINE_LINUX``
  holds arguments for every menu entry (recovery included); ``update-grub`` regenerates
  ``/boot/grub/grub.cfg`` from it (GNU GRUB manual, "Simple configuration handling").
- ``/proc/cmdline`` is the command line the running kernel booted with, so an argument in
  the GRUB file but not in ``/proc/cmdline`` waits for a reboot (proc(5)).
- ``blacklist <module>`` in ``/etc/modprobe.d/*.conf`` stops alias-based autoloading
  (modprobe.d(5)); NVIDIA's driver installation guide also sets ``options nouveau
  modeset=0`` and rebuilds the initramfs (``update-initramfs -u``), since nouveau loads
  from it early. ``/proc/modules`` lists the loaded modules: a blacklisted one still listed
  there waits for a reboot.

Only arguments are *added* (exact tokens); existing ones are kept, since several kernel
parameters (``pci=``) combine across occurrences and removing one could break a host.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

__all__ = [
    "BLACKLIST_FILE",
    "GRUB_DEFAULTS",
    "GRUB_VARIABLE",
    "PROC_CMDLINE",
    "PROC_MODULES",
    "blacklist_conf",
    "blacklisted_modules",
    "grub_args",
    "loaded_modules",
    "missing_args",
    "with_grub_args",
]

GRUB_DEFAULTS = "/etc/default/grub"
GRUB_VARIABLE = "GRUB_CMDLINE_LINUX"
PROC_CMDLINE = "/proc/cmdline"
PROC_MODULES = "/proc/modules"
#: The one modprobe.d file this project owns.
BLACKLIST_FILE = "/etc/modprobe.d/composable-gpu-blacklist.conf"

_MODULE_OPTIONS = {"nouveau": "options nouveau modeset=0"}


def _assignment(variable: str) -> re.Pattern[str]:
    return re.compile(rf"^\s*(?:export\s+)?{re.escape(variable)}=(.*)$")


def grub_args(defaults_text: str, variable: str = GRUB_VARIABLE) -> list[str]:
    """Arguments of the last ``variable=...`` assignment in ``/etc/default/grub``.

    Quotes are removed with shell rules (``shlex``); ``$VAR`` references stay literal.
    Returns ``[]`` when the variable is not assigned.
    Raises:
        ValueError: the assignment is not valid shell quoting.
    """
    pattern = _assignment(variable)
    value = None
    for line in defaults_text.splitlines():
        m = pattern.match(line)
        if m:
            value = m.group(1)
    if value is None:
        return []
    try:
        return " ".join(shlex.split(value, comments=True)).split()
    except ValueError as exc:
        raise ValueError(f"{variable} in {GRUB_DEFAULTS} is not valid shell: {exc}") from exc


def missing_args(wanted: Iterable[str], present: Iterable[str]) -> list[str]:
    """``wanted`` arguments (in order, without duplicates) that are not in ``present``."""
    have = set(present)
    out: list[str] = []
    for arg in wanted:
        if arg not in have and arg not in out:
            out.append(arg)
    return out


def with_grub_args(defaults_text: str, wanted: Iterable[str], variable: str = GRUB_VARIABLE) -> str:
    """``/etc/default/grub`` content whose ``variable`` contains every ``wanted`` argument.

    Returns ``defaults_text`` unchanged (the same string) when nothing is missing;
    otherwise the last assignment is rewritten as ``variable="<old args> <missing args>"``
    (or appended when there was none). Every other line is kept byte for byte.
    """
    current = grub_args(defaults_text, variable)
    missing = missing_args(wanted, current)
    if not missing:
        return defaults_text
    new_line = f'{variable}="{" ".join([*current, *missing])}"'
    lines = defaults_text.splitlines(keepends=True)
    pattern = _assignment(variable)
    last = max((i for i, line in enumerate(lines) if pattern.match(line.rstrip("\n"))), default=None)
    if last is None:
        prefix = defaults_text if not defaults_text or defaults_text.endswith("\n") else defaults_text + "\n"
        return prefix + new_line + "\n"
    ending = "\n" if lines[last].endswith("\n") else ""
    lines[last] = new_line + ending
    return "".join(lines)


def blacklist_conf(modules: Iterable[str]) -> str:
    """Content of :data:`BLACKLIST_FILE` for ``modules`` (deterministic, sorted)."""
    body = ["# Managed by composable-gpu (HostKernelPrep); edits are overwritten."]
    for module in sorted(set(modules)):
        body.append(f"blacklist {module}")
        if module in _MODULE_OPTIONS:
            body.append(_MODULE_OPTIONS[module])
    return "\n".join(body) + "\n"


def loaded_modules(proc_modules_text: str) -> set[str]:
    """Module names listed in ``/proc/modules`` (first field of each line)."""
    return {line.split()[0] for line in proc_modules_text.splitlines() if line.strip()}


def blacklisted_modules(conf_text: str | None) -> list[str]:
    """Modules a modprobe.d file blacklists (``blacklist <module>`` lines, modprobe.d(5)),
    sorted; ``[]`` for a missing (None) file. Comments and other directives are ignored."""
    found = set()
    for line in (conf_text or "").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2 and words[0] == "blacklist":
            found.add(words[1])
    return sorted(found)
