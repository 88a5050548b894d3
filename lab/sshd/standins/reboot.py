"""HARDWARE STAND-IN for ``reboot`` (systemd), used by the lab's sshd.

It is not a reboot: it "boots" the emulated host in place, immediately, and exits 0:

- ``$STANDIN_SYSROOT/proc/cmdline`` becomes ``BOOT_IMAGE=<kernel> <args>`` from the ``linux``
  line of ``boot/grub/grub.cfg`` (what ``update-grub`` generated, not ``/etc/default/grub``);
- ``proc/modules`` lists the hardware's modules (``var/lib/host-standin/hardware-modules``)
  except those blacklisted both in the initramfs snapshot (``update-initramfs -u``) and in
  ``etc/modprobe.d``;
- ``proc/sys/kernel/random/boot_id`` gets a new random id.

Firmware settings of DPUs (the mlxconfig stand-in) are not touched: a host warm reboot
does not reset a BlueField in DPU mode. Every invocation is appended to the invocation log.
"""

from __future__ import annotations

import re
import sys
import uuid

try:
    import _standin
except ImportError:  # pragma: no cover
    from lab.sshd.standins import _standin
try:
    from update_initramfs import blacklisted
except ImportError:  # pragma: no cover
    from lab.sshd.standins.update_initramfs import blacklisted


def boot() -> None:
    """Apply grub.cfg, the blacklists and a new boot id to the emulated /proc."""
    cfg = _standin.path("/boot/grub/grub.cfg").read_text()
    m = re.search(r"^\s*linux\s+(\S+)\s*(.*)$", cfg, re.MULTILINE)
    if not m:
        _standin.fail("reboot: no linux line in /boot/grub/grub.cfg", code=1)
    cmdline = f"BOOT_IMAGE={m.group(1)} {m.group(2)}".rstrip()
    _standin.write_atomic(_standin.path("/proc/cmdline"), cmdline + "\n")
    initrd = _standin.path(f"/boot/initrd.img-{_standin.KERNEL_VERSION}.blacklist")
    in_initrd = set(initrd.read_text().split()) if initrd.exists() else set()
    conf_dir = _standin.path("/etc/modprobe.d")
    in_rootfs = set(blacklisted([p.read_text() for p in sorted(conf_dir.glob("*.conf"))])) \
        if conf_dir.is_dir() else set()
    suppressed = in_initrd & in_rootfs
    modules = [line for line in _standin.HARDWARE_MODULES.read_text().splitlines()
               if line.strip() and line.split()[0] not in suppressed]
    _standin.write_atomic(_standin.path("/proc/modules"), "".join(f"{line}\n" for line in modules))
    _standin.write_atomic(_standin.path("/proc/sys/kernel/random/boot_id"), f"{uuid.uuid4()}\n")


def main(argv: list[str]) -> int:
    """Entry point (arguments such as ``--force`` are accepted and ignored)."""
    _standin.log_invocation("reboot", argv)
    with _standin.locked():
        boot()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
