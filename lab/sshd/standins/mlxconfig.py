"""HARDWARE STAND-IN for NVIDIA's ``mlxconfig`` (MFT / mstflint), used by the lab's sshd.

It is not the real tool: it keeps each device's firmware configuration (Default, Current,
Next Boot per parameter) in ``$STANDIN_SYSROOT/var/lib/mlxconfig-standin/devices.json`` and
follows the real command line and output layout (mstflint ``mlxconfig_ui.cpp``):

    mlxconfig [-d <device>] [-y] [-e] query|q [NAME ...]
    mlxconfig [-d <device>] [-y] set|s NAME=VALUE ...
    mlxconfig [-d <device>] [-y] reset|r
    mlxconfig [-d <device>] show_confs|i

- ``query`` prints the device header and a ``Configurations:`` table; with ``-e`` the
  columns are ``Default Current Next Boot`` and rows whose Next Boot differs are marked ``*``.
- ``set`` changes Next Boot only (Current changes on ``mlxfwreset`` or a power cycle), asks
  ``Apply new Configuration? (y/n) [n] :`` unless ``-y``, and ends with
  ``-I- Please reboot machine to load new configurations.``
- Booleans print as ``False(0)``/``True(1)`` and accept 0/1/true/false; unknown names fail
  with ``-E- Unknown Parameter: <NAME>``; values above the device's maximum fail as the
  firmware would refuse them.

Every invocation is appended to the stand-in invocation log.
"""

from __future__ import annotations

import json
import sys

try:  # run as a script by the lab (standins/ on sys.path) or imported from tests
    import _standin
except ImportError:  # pragma: no cover
    from lab.sshd.standins import _standin

NAME_WIDTH = 56  # 1 (diff) + 2 (RO) + 5 spaces + 48 (name), as printSingleParam
VALUE_WIDTH = 20


def load() -> dict:
    """All devices: ``{device: {"type", "name", "description", "params": {NAME: {...}}}}``."""
    return json.loads(_standin.MLX_DEVICES.read_text())


def save(devices: dict) -> None:
    """Persist ``devices``."""
    _standin.write_atomic(_standin.MLX_DEVICES, json.dumps(devices, indent=1, sort_keys=True))


def render_value(spec: dict, value: int) -> str:
    """``False(0)`` / ``True(1)`` for booleans, the number otherwise."""
    if spec["kind"] == "bool":
        return f"{'True' if value else 'False'}({value})"
    return str(value)


def parse_value(spec: dict, text: str) -> int | None:
    """The int for ``text`` (``1``, ``true``, ``True(1)``), or None if not acceptable."""
    t = text.strip()
    if spec["kind"] == "bool":
        low = t.lower()
        if low in ("1", "true", "true(1)"):
            return 1
        if low in ("0", "false", "false(0)"):
            return 0
        return None
    return int(t) if t.isdigit() else None


def opening(index: int, device: str, info: dict) -> str:
    """The per-device header (printOpening)."""
    return "\n".join([
        "", f"Device #{index}:", "----------", "",
        f"{'Device type:':<20}{info['type']:<20}",
        f"{'Name:':<20}{info['name']:<20}",
        f"{'Description:':<20}{info['description']:<20}",
        f"{'Device:':<20}{device:<20}",
        "",
    ])


def header(columns: list[str]) -> str:
    """``Configurations:`` plus the column titles (printConfHeader)."""
    return f"{'Configurations:':<{NAME_WIDTH}}" + " ".join(f"{c:<{VALUE_WIDTH}}" for c in columns).rstrip()


def row(name: str, values: list[str], *, differs: bool) -> str:
    """One parameter row (printSingleParam)."""
    lead = f"{'*' if differs else ' '}       {name:<48}"
    return lead + " ".join(f"{v:<{VALUE_WIDTH}}" for v in values).rstrip()


def query(index: int, device: str, info: dict, names: list[str], show_default: bool) -> list[str]:
    """Lines of ``query`` for one device."""
    params = info["params"]
    unknown = [n for n in names if n not in params]
    if unknown:
        _standin.fail(f"-E- Unknown Parameter: {unknown[0]}")
    lines = [opening(index, device, info)]
    columns = ["Default", "Current", "Next Boot"] if show_default else ["Next Boot"]
    lines.append(header(columns))
    any_diff = False
    for name in names or sorted(params):
        p = params[name]
        vals = [p["default"], p["current"], p["next"]] if show_default else [p["next"]]
        differs = show_default and (p["next"] != p["default"] or p["next"] != p["current"])
        any_diff |= differs
        lines.append(row(name, [render_value(p, v) for v in vals], differs=differs))
    if any_diff:
        lines.append("The '*' shows parameters with next value different from default/current value.")
    return lines


def main(argv: list[str]) -> int:
    """Entry point: parse options (before the command, as the real tool), run the command."""
    _standin.log_invocation("mlxconfig", argv)
    device = None
    yes = show_default = False
    args = list(argv)
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt in ("-d", "--dev"):
            if not args:
                _standin.fail("-E- missing device after -d")
            device = args.pop(0)
        elif opt in ("-y", "--yes"):
            yes = True
        elif opt in ("-e", "--show_default"):
            show_default = True
        elif opt in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            _standin.fail(f"-E- Unknown flag \"{opt}\"")
    if not args:
        _standin.fail("-E- No command found. For more information please read the help message:")
    command, rest = args[0], args[1:]
    with _standin.locked():
        devices = load()
        targets = [device] if device else sorted(devices)
        for d in targets:
            if d not in devices:
                _standin.fail(f"-E- Failed to open the device: {d}: No such file or directory")
        if command in ("q", "query"):
            out: list[str] = []
            for i, d in enumerate(targets, 1):
                out += query(i, d, devices[d], rest, show_default)
            print("\n".join(out))
            return 0
        if command in ("s", "set"):
            if device is None:
                _standin.fail("-E- A device must be specified.")
            return do_set(device, devices, rest, yes)
        if command in ("r", "reset"):
            if device is None:
                _standin.fail("-E- A device must be specified.")
            print(opening(1, device, devices[device]))
            print(" Reset configuration for device " + device + "? (y/n) [n] : " + ("y" if yes else ""))
            if not yes and sys.stdin.readline().strip().lower() not in ("y", "yes"):
                _standin.fail("-E- Aborted by user.")
            for p in devices[device]["params"].values():
                p["next"] = p["default"]
            save(devices)
            print("Applying... Done!\n-I- Please reboot machine to load new configurations.")
            return 0
        if command in ("i", "show_confs"):
            print(f"\nList of configurations the device {targets[0]} may support:")
            for name, p in sorted(devices[targets[0]]["params"].items()):
                shape = "<False|True>" if p["kind"] == "bool" else "<NUM>"
                print(f"                    {name}={shape:<24}max {p['max']}")
            return 0
    _standin.fail(f"-E- Unknown command \"{command}\"")
    return 1


def do_set(device: str, devices: dict, assignments: list[str], yes: bool) -> int:
    """``set NAME=VALUE ...``: validate all, show Next Boot / New, ask, apply to Next Boot."""
    info = devices[device]
    params = info["params"]
    if not assignments:
        _standin.fail("-E- No parameters to set")
    new: dict[str, int] = {}
    for item in assignments:
        name, sep, text = item.partition("=")
        if not sep:
            _standin.fail(f"-E- Bad format in {item}, expected NAME=VALUE")
        if name not in params:
            _standin.fail(f"-E- Unknown Parameter: {name}")
        value = parse_value(params[name], text)
        if value is None:
            _standin.fail(f"-E- Failed to set configuration: {text} is not a valid value for {name}")
        if value > params[name]["max"]:
            _standin.fail(f"-E- Failed to set configuration: {name}={value} exceeds the maximum "
                          f"{params[name]['max']} supported by the device firmware")
        new[name] = value
    print(opening(1, device, info))
    print(header(["Next Boot", "New"]))
    for name, value in new.items():
        p = params[name]
        print(row(name, [render_value(p, p["next"]), render_value(p, value)], differs=False))
    print("\n Apply new Configuration? (y/n) [n] : " + ("y" if yes else ""), end="\n" if yes else "")
    if not yes and sys.stdin.readline().strip().lower() not in ("y", "yes"):
        print()
        _standin.fail("-E- Aborted by user.")
    for name, value in new.items():
        params[name]["next"] = value
    save(devices)
    print("Applying... Done!")
    print("-I- Please reboot machine to load new configurations.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
