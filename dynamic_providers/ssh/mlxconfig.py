"""``mlxconfig`` / ``mlxfwreset`` command lines and output parsing (pure, no I/O).

Command-line shapes follow NVIDIA MFT / mstflint's ``mlxconfig`` (options before the
command): ``mlxconfig -d <dev> -e query [NAME ...]`` prints the Default, Current and Next
Boot columns; ``mlxconfig -d <dev> -y set NAME=VALUE ...`` changes Next Boot without asking;
``mlxfwreset -d <dev> --level <n> -y reset`` makes Next Boot current.

Query output (mstflint ``mlxconfig_ui.cpp``: ``printOpening``, ``printConfHeader``,
``printSingleParam``)::

    Device #1:
    ----------

    Device type:        BlueField3
    ...
    Configurations:                                Default         Current         Next Boot
    *        PCI_SWITCH_EMULATION_NUM_PORT         16              16              10
             VIRTIO_NET_EMULATION_ENABLE           False(0)        False(0)        False(0)
    The '*' shows parameters with next value different from default/current value.

Each row starts with an optional ``*`` (next differs) and ``RO`` (read-only) marker;
values print as a number or ``LABEL(number)``; ``N/A`` and ``Array[..]`` have no number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from dynamic_providers.ssh.errors import ToolOutputError
from dynamic_providers.ssh.models import MlxconfigRow

__all__ = ["mlxfwreset_argv", "parse_query", "query_argv", "set_argv"]

_VALUE = re.compile(r"^(?:.*\((\d+)\)|(\d+))$")
_COLUMNS = ("Default", "Current", "Next Boot", "New")
_MARKERS = {"*", "RO", "*RO"}


def query_argv(device: str, names: Iterable[str]) -> list[str]:
    """``mlxconfig -d <device> -e query NAME...`` (``-e``: show Default and Current too)."""
    return ["mlxconfig", "-d", device, "-e", "query", *names]


def set_argv(device: str, values: Mapping[str, int]) -> list[str]:
    """``mlxconfig -d <device> -y set NAME=VALUE...`` for exactly ``values`` (non-interactive)."""
    if not values:
        raise ValueError("set_argv: nothing to set")
    return ["mlxconfig", "-d", device, "-y", "set", *(f"{k}={v}" for k, v in values.items())]


def mlxfwreset_argv(device: str, level: int) -> list[str]:
    """``mlxfwreset -d <device> --level <level> -y reset``: load the Next Boot configuration."""
    return ["mlxfwreset", "-d", device, "--level", str(level), "-y", "reset"]


def _number(token: str) -> int | None:
    m = _VALUE.match(token)
    if not m:
        return None  # N/A, Array[0..7], or a label without a number
    return int(m.group(1) or m.group(2))


def parse_query(output: str) -> dict[str, MlxconfigRow]:
    """Rows of an ``mlxconfig query`` output, by parameter name.

    Returns:
        ``{name: MlxconfigRow}``; ``default``/``current`` are None when the header shows
        only ``Next Boot`` (query without ``-e``).
    Raises:
        ToolOutputError: no ``Configurations:`` header, or a row whose value count does
            not match the header, or a Next Boot value without a number.
    """
    lines = output.splitlines()
    header_at = next((i for i, line in enumerate(lines) if line.startswith("Configurations:")), None)
    if header_at is None:
        raise ToolOutputError("mlxconfig query output has no 'Configurations:' header",
                              command="mlxconfig query", stderr=output)
    header = lines[header_at][len("Configurations:"):]
    columns = [c for c in _COLUMNS if c in header]
    if "Next Boot" not in columns:
        raise ToolOutputError("mlxconfig query header has no 'Next Boot' column", command="mlxconfig query",
                              stderr=lines[header_at])
    rows: dict[str, MlxconfigRow] = {}
    for line in lines[header_at + 1:]:
        if not line.strip() or line.startswith(("The '", "-I-", "-W-", "-E-")):
            continue  # blank line, footer or a message
        if not (line[0].isspace() or line[0] in "*R"):
            break  # the next device's section ("Device #2:")
        tokens = line.split()
        while tokens and tokens[0] in _MARKERS:
            tokens.pop(0)
        if len(tokens) != 1 + len(columns):
            raise ToolOutputError(f"mlxconfig query row has {len(tokens) - 1} values, "
                                  f"expected {len(columns)}", command="mlxconfig query", stderr=line)
        name, values = tokens[0], dict(zip(columns, tokens[1:], strict=True))
        next_boot = _number(values["Next Boot"])
        if next_boot is None:
            if values["Next Boot"].startswith("Array"):
                continue  # array parameters are not managed here
            raise ToolOutputError(f"mlxconfig query: {name} has no numeric Next Boot value",
                                  command="mlxconfig query", stderr=line)
        rows[name] = MlxconfigRow(
            name=name,
            default=_number(values["Default"]) if "Default" in values else None,
            current=_number(values["Current"]) if "Current" in values else None,
            next_boot=next_boot,
        )
    return rows
