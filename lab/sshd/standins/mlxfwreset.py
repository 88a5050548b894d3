"""HARDWARE STAND-IN for NVIDIA's ``mlxfwreset`` (MFT), used by the lab's sshd.

It is not the real tool: a "reset" copies every parameter's Next Boot value to Current in
the mlxconfig stand-in's state file, which is what loading the new firmware configuration
does on a real device. Command line and messages follow the real tool:

    mlxfwreset -d <device> [--level|-l <0..5>] [--sync <0|1>] [-y] reset|r
    mlxfwreset -d <device> query|q

Without ``-y`` it asks ``Continue with reset?[y/N]`` on stdin. Every invocation is appended
to the stand-in invocation log.
"""

from __future__ import annotations

import json
import sys

try:
    import _standin
except ImportError:  # pragma: no cover
    from lab.sshd.standins import _standin

LEVELS = {
    0: "Driver, PCI link, network link will remain up (\"live-Patch\")",
    1: "Only ARM side will not remain up (\"Immediate reset\").",
    3: "Driver restart and PCI reset",
    4: "Warm Reboot",
}


def main(argv: list[str]) -> int:
    """Entry point."""
    _standin.log_invocation("mlxfwreset", argv)
    device, level, yes = None, 3, False
    args = list(argv)
    command = None
    while args:
        a = args.pop(0)
        if a in ("-d", "--device"):
            device = args.pop(0) if args else None
        elif a in ("-l", "--level"):
            text = args.pop(0) if args else ""
            if not text.isdigit() or int(text) not in LEVELS:
                _standin.fail(f"-E- Reset level {text} is not supported for this device")
            level = int(text)
        elif a == "--sync":
            args.pop(0) if args else None
        elif a in ("-y", "--yes"):
            yes = True
        elif a in ("reset", "r", "query", "q"):
            command = a
        else:
            _standin.fail(f"-E- Unknown argument: {a}")
    if device is None:
        _standin.fail("-E- Please specify a device with -d")
    with _standin.locked():
        devices = json.loads(_standin.MLX_DEVICES.read_text())
        if device not in devices:
            _standin.fail(f"-E- Failed to open device: {device}")
        if command in ("query", "q"):
            print("Reset-levels:")
            for n, text in LEVELS.items():
                print(f"{n}: {text:<60}-Supported     {'(Default)' if n == 3 else ''}".rstrip())
            return 0
        if command not in ("reset", "r"):
            _standin.fail("-E- No command given (reset or query)")
        print(f"\nRequested reset level for device, {device}:\n\n{level}: {LEVELS[level]}")
        print("Continue with reset?[y/N] " + ("y" if yes else ""), end="\n" if yes else "")
        if not yes and sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print()
            _standin.fail("-E- Aborted by user.")
        for p in devices[device]["params"].values():
            p["current"] = p["next"]
        _standin.write_atomic(_standin.MLX_DEVICES, json.dumps(devices, indent=1, sort_keys=True))
    for step in ("Sending Reset Command To Fw", "Stopping Driver", "Resetting PCI", "Starting Driver",
                 "Restarting MST"):
        print(f"-I- {step:<40}-Done")
    print("-I- FW was loaded successfully.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
