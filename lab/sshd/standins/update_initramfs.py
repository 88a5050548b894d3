"""HARDWARE STAND-IN for Debian's ``update-initramfs`` (initramfs-tools).

It is not the real tool: ``update-initramfs -u`` records which modules the files in
``$STANDIN_SYSROOT/etc/modprobe.d/*.conf`` blacklist into
``$STANDIN_SYSROOT/boot/initrd.img-<version>.blacklist`` (one name a line), standing for
the modprobe configuration copied into a real initramfs, and prints the real tool's
``update-initramfs: Generating /boot/initrd.img-<version>`` line. The reboot stand-in only
keeps a module unloaded when both the initramfs and the root file system blacklist it.
"""

from __future__ import annotations

import sys

try:
    import _standin
except ImportError:  # pragma: no cover
    from lab.sshd.standins import _standin

USAGE = "Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]"


def blacklisted(modprobe_dir_text: list[str]) -> list[str]:
    """Module names from ``blacklist <name>`` lines of the given file contents."""
    names = set()
    for text in modprobe_dir_text:
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) == 2 and words[0] == "blacklist":
                names.add(words[1])
    return sorted(names)


def main(argv: list[str]) -> int:
    """Entry point."""
    _standin.log_invocation("update-initramfs", argv)
    if "-u" not in argv and "-c" not in argv:
        print(USAGE, file=sys.stderr)
        return 2
    conf_dir = _standin.path("/etc/modprobe.d")
    texts = [p.read_text() for p in sorted(conf_dir.glob("*.conf"))] if conf_dir.is_dir() else []
    image = f"/boot/initrd.img-{_standin.KERNEL_VERSION}"
    print(f"update-initramfs: Generating {image}")
    with _standin.locked():
        names = "".join(f"{m}\n" for m in blacklisted(texts))
        _standin.write_atomic(_standin.path(image + ".blacklist"), names)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
