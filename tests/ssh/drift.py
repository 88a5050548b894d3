"""Out-of-band changes on the lab sshd's emulated host and DPU (behind the providers' back),
as an administrator with a shell on the machine would make them. Files are rewritten in place,
so they keep the SSH user as owner."""

from __future__ import annotations

import json

from lab.sshd import SshdLab

GRUB = "/etc/default/grub"
CMDLINE = "/proc/cmdline"
BLACKLIST = "/etc/modprobe.d/composable-gpu-blacklist.conf"


def _rewrite(lab: SshdLab, absolute: str, text: str) -> None:
    with (lab.sysroot / absolute.lstrip("/")).open("w", encoding="utf-8") as fh:
        fh.write(text)


def drop_kernel_arg(lab: SshdLab, arg: str) -> None:
    """Remove ``arg`` from ``GRUB_CMDLINE_LINUX`` in ``/etc/default/grub``."""
    text = lab.read(GRUB)
    _rewrite(lab, GRUB, "\n".join(
        line.replace(f" {arg}", "").replace(f'"{arg} ', '"').replace(f'"{arg}"', '""')
        if line.startswith("GRUB_CMDLINE_LINUX=") else line for line in text.split("\n")))


def boot_without(lab: SshdLab, arg: str) -> None:
    """The running kernel's command line lacks ``arg`` (as after a boot from an edited entry)."""
    _rewrite(lab, CMDLINE, " ".join(t for t in lab.read(CMDLINE).split() if t != arg) + "\n")


def unblacklist(lab: SshdLab, module: str) -> None:
    """Delete the ``blacklist <module>`` line from our modprobe.d file."""
    text = lab.read(BLACKLIST)
    _rewrite(lab, BLACKLIST, "".join(line for line in text.splitlines(keepends=True)
                                     if line.strip() != f"blacklist {module}"))


def set_mlx(lab: SshdLab, name: str, *, next_boot: int, current: int | None = None) -> None:
    """Set a parameter's Next Boot (and Current) value in the mlxconfig stand-in's state."""
    path = lab.sysroot / "var" / "lib" / "mlxconfig-standin" / "devices.json"
    devices = json.loads(path.read_text())
    param = devices[lab.device]["params"][name]
    param["next"] = next_boot
    if current is not None:
        param["current"] = current
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(devices, indent=1, sort_keys=True))
