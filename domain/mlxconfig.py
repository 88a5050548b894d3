"""Pure validation of the mlxconfig parameters this project manages on BlueField-3 DPUs.

No I/O: :func:`violations` and :func:`validate` take the desired ``{name: value}`` map and
return (or raise) decisions. The provider calls them in ``check``, before any SSH
connection is opened, so a typo or an out-of-range value never reaches a device.

Managed parameters (names as ``mlxconfig -d <dev> query`` prints them) and their bounds:

=================================  ======  =====  =====================================================
name                               kind    range  source
=================================  ======  =====  =====================================================
``VIRTIO_NET_EMULATION_ENABLE``    bool    0..1   [1] table "Mlxconfig Entries" (must be TRUE)
``VIRTIO_NET_EMULATION_NUM_PF``    int     0..31  [2] "hot plug up to 31 virtio-net PCIe PF" (BlueField-3)
``VIRTIO_NET_EMULATION_NUM_VF``    int     0..504 [2] "... or 504 virtio-net PCIe VF"; [3] note 4
``PCI_SWITCH_EMULATION_ENABLE``    bool    0..1   [1] (TRUE enables hot-plug)
``PCI_SWITCH_EMULATION_NUM_PORT``  int     0..32  [4] BlueField-3 DPUFlavor sets 32; [3] uses 0 when off
=================================  ======  =====  =====================================================

Cross-parameter rules:

- ``VIRTIO_NET_EMULATION_NUM_PF * VIRTIO_NET_EMULATION_NUM_VF <= 504``: VFs are reserved
  per PF, ``max_num_vf = NUM_VF * NUM_PF`` and the device maximum is 504 ([3] note 4, [2]).
- With ``PCI_SWITCH_EMULATION_ENABLE=1`` that product must be ``<= 127``: "To support more
  than 127 VFs, hotplug capability shall be disabled" ([3] note 3).

Booleans accept ``0``/``1``, ``True``/``False`` and the strings ``"0"``, ``"1"``, ``"true"``,
``"false"`` (any case), as mlxconfig's ``set`` does; integers accept ints and decimal
strings, never booleans. Integral floats count as ints (Pulumi carries every number as a
double). Everything is normalised to ``int``.

Sources:

[1] NVIDIA BlueField Virtio-net v24.10, "Virtio-net Deployment", table "Mlxconfig Entries"
    (https://docs.nvidia.com/networking/display/bluefieldvirtionetv2410/Virtio-net+Deployment).
[2] NVIDIA BlueField DPU BSP v4.2.0 / DOCA 2.5, "VirtIO-net Emulated Devices": "hot plug up to
    31 virtio-net PCIe PF Ethernet NIC devices or 504 virtio-net PCIe VF Ethernet NIC devices"
    (https://docs.nvidia.com/networking/display/bluefielddpubspv420/virtio-net+emulated+devices).
[3] NVIDIA virtio-net-controller README, "System Preparation", notes 3 and 4.
[4] NVIDIA/doca-platform, ``docs/public/user-guides/host-trusted/use-cases/hbn-snap/manifests/
    04.1-dpudeployment-installation-nvme/dpuflavor.yaml`` (``PCI_SWITCH_EMULATION_NUM_PORT=32``).

The firmware of a given card may accept less (``mlxconfig -d <dev> show_confs`` tells);
these bounds are the documented BlueField-3 maxima, so a value inside them can still be
refused by the device, which the provider then reports as a command error.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MAX_TOTAL_VIRTIO_NET_VFS",
    "MAX_VFS_WITH_HOTPLUG",
    "PARAMETERS",
    "MlxconfigValidationError",
    "ParameterRule",
    "Violation",
    "normalise_value",
    "validate",
    "violations",
]

#: Device-wide maximum of virtio-net VFs (NUM_PF * NUM_VF), sources [2], [3] note 4.
MAX_TOTAL_VIRTIO_NET_VFS = 504
#: Maximum NUM_PF * NUM_VF while PCI switch emulation (hot-plug) is on, source [3] note 3.
MAX_VFS_WITH_HOTPLUG = 127


@dataclass(frozen=True)
class ParameterRule:
    """Bounds of one managed mlxconfig parameter.

    Attributes:
        name: the mlxconfig name (``VIRTIO_NET_EMULATION_NUM_PF``).
        kind: ``"bool"`` (0 or 1) or ``"int"``.
        minimum: smallest accepted value (inclusive).
        maximum: largest accepted value (inclusive).
        source: where the bound comes from (see the module docstring).
    """

    name: str
    kind: Literal["bool", "int"]
    minimum: int
    maximum: int
    source: str


_DEPLOYMENT = "Virtio-net Deployment, Mlxconfig Entries"

PARAMETERS: dict[str, ParameterRule] = {
    r.name: r
    for r in (
        ParameterRule("VIRTIO_NET_EMULATION_ENABLE", "bool", 0, 1, _DEPLOYMENT),
        ParameterRule("VIRTIO_NET_EMULATION_NUM_PF", "int", 0, 31,
                      "BlueField BSP 'VirtIO-net Emulated Devices': up to 31 PFs"),
        ParameterRule("VIRTIO_NET_EMULATION_NUM_VF", "int", 0, MAX_TOTAL_VIRTIO_NET_VFS,
                      "BlueField BSP 'VirtIO-net Emulated Devices': up to 504 VFs"),
        ParameterRule("PCI_SWITCH_EMULATION_ENABLE", "bool", 0, 1, _DEPLOYMENT),
        ParameterRule("PCI_SWITCH_EMULATION_NUM_PORT", "int", 0, 32,
                      "DPF BlueField-3 DPUFlavor (32 ports)"),
    )
}


@dataclass(frozen=True)
class Violation:
    """One problem with the desired parameters.

    Attributes:
        parameter: the offending parameter name, or ``"A*B"`` for a cross-parameter rule.
        reason: one sentence naming the parameter, the value and the accepted range.
    """

    parameter: str
    reason: str


class MlxconfigValidationError(ValueError):
    """The desired mlxconfig parameters break at least one rule.

    Attributes:
        violations: every problem found, in parameter order.
    """

    def __init__(self, found: list[Violation]) -> None:
        self.violations = found
        super().__init__("; ".join(v.reason for v in found))


_TRUE = {"1", "true"}
_FALSE = {"0", "false"}


def normalise_value(rule: ParameterRule, value: object) -> int:
    """Convert ``value`` to the int mlxconfig stores for ``rule``'s parameter.

    Raises:
        ValueError: the value has the wrong type or is outside ``rule.minimum..rule.maximum``;
            the message names the parameter.
    """
    name = rule.name
    number: int
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # Pulumi carries every number as a double
    if rule.kind == "bool":
        if isinstance(value, bool):
            number = int(value)
        elif isinstance(value, int):
            number = value
        elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            number = 1 if value.strip().lower() in _TRUE else 0
        else:
            raise ValueError(f"{name}: {value!r} is not a boolean (use 0/1 or true/false)")
    else:
        if isinstance(value, bool):
            raise ValueError(f"{name}: {value!r} is a boolean, expected an integer")
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and value.strip().isdigit():
            number = int(value.strip())
        else:
            raise ValueError(f"{name}: {value!r} is not an integer")
    if not rule.minimum <= number <= rule.maximum:
        raise ValueError(
            f"{name}: {value!r} is out of range {rule.minimum}..{rule.maximum} (source: {rule.source})"
        )
    return number


def violations(params: Mapping[str, object]) -> list[Violation]:
    """Every problem with ``params`` (empty list when they are valid).

    Args:
        params: desired ``{mlxconfig name: value}``; names are case-sensitive, as in
            mlxconfig's own output.
    Returns:
        Unknown names first (with a close match suggested when there is one), then
        type/range problems, then cross-parameter rules (only checked when the values
        involved are themselves valid).
    """
    found: list[Violation] = []
    if not params:
        return [Violation("parameters", "parameters: at least one mlxconfig parameter is required")]
    for name in params:
        if name not in PARAMETERS:
            close = difflib.get_close_matches(str(name).upper(), list(PARAMETERS), n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; supported: {', '.join(PARAMETERS)}"
            found.append(Violation(str(name), f"{name}: unknown mlxconfig parameter{hint}"))
    good: dict[str, int] = {}
    for name, value in params.items():
        rule = PARAMETERS.get(name)
        if rule is None:
            continue
        try:
            good[name] = normalise_value(rule, value)
        except ValueError as exc:
            found.append(Violation(name, str(exc)))
    pf = good.get("VIRTIO_NET_EMULATION_NUM_PF")
    vf = good.get("VIRTIO_NET_EMULATION_NUM_VF")
    if pf is not None and vf is not None:
        total = pf * vf
        pair = "VIRTIO_NET_EMULATION_NUM_PF*VIRTIO_NET_EMULATION_NUM_VF"
        if total > MAX_TOTAL_VIRTIO_NET_VFS:
            found.append(Violation(pair, f"{pair}: {pf}*{vf}={total} virtio-net VFs exceeds the device "
                                         f"maximum of {MAX_TOTAL_VIRTIO_NET_VFS}"))
        elif good.get("PCI_SWITCH_EMULATION_ENABLE") == 1 and total > MAX_VFS_WITH_HOTPLUG:
            found.append(Violation(pair, f"{pair}: {pf}*{vf}={total} virtio-net VFs exceeds "
                                         f"{MAX_VFS_WITH_HOTPLUG}, the maximum while "
                                         "PCI_SWITCH_EMULATION_ENABLE=1 (disable hot-plug for more)"))
    return found


def validate(params: Mapping[str, object]) -> dict[str, int]:
    """Validate and normalise ``params``.

    Returns:
        ``{name: int}`` in the caller's order, booleans as 0/1.
    Raises:
        MlxconfigValidationError: at least one :class:`Violation`; its message joins them all.

    Example::

        >>> validate({"VIRTIO_NET_EMULATION_ENABLE": True, "VIRTIO_NET_EMULATION_NUM_PF": "10"})
        {'VIRTIO_NET_EMULATION_ENABLE': 1, 'VIRTIO_NET_EMULATION_NUM_PF': 10}
    """
    found = violations(params)
    if found:
        raise MlxconfigValidationError(found)
    return {name: normalise_value(PARAMETERS[name], value) for name, value in params.items()}
