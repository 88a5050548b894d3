"""Host-privilege interfaces of BlueField-3 BMC firmware generations (pure: no I/O).

NVIDIA documents three ways to restrict what the host may do to its DPU, one after the other
(NVIDIA BlueField BMC Software docs, "NIC Subsystem Management", one page per release):

=========================  ==================================================================
interface                  where, and how it is set
=========================  ==================================================================
``bios``                   BIOS attribute ``HostPrivilegeLevel`` (``"Host Privilege Level"``
                           before BSP 4.9 / BMC 24.10) under ``Systems/Bluefield/Bios``,
                           staged in ``Bios/Settings`` and applied on reset ("BIOS
                           Configuration" pages).
``external``               ``GET``/``POST Systems/Bluefield/Oem/Nvidia/Connectx/
                           ExternalHostPrivileges`` with ``HostPriv*`` properties set to
                           ``Default``/``Enabled``/``Disabled`` (pages 24.10-LTS ... 25.07,
                           "Getting/Setting External Host Privileges"). The values are NV
                           configuration of the NIC; NVIDIA's UEFI page "BlueField External
                           Host Priv Configuration" says a reboot applies them. The resource
                           shows the configured values only (no pending/effective split).
``config``                 ``Chassis/Card1/NetworkAdapters/NvidiaNetworkAdapter/Oem/Nvidia/
                           HostPrivilegeConfig``: preset ``PrivilegeMode`` (``Privileged`` |
                           ``Restricted``) over ``PrivilegeSettings``, changes staged in its
                           ``@Redfish.Settings`` object until reset (pages 25.10-LTS, 26.01,
                           "Host Privileges Configuration", "Configuration Breakdown by Mode").
=========================  ==================================================================

A BMC is probed, not assumed: :func:`probe_order` gives the order in which the client tries
the interfaces for a firmware version (the generation the version names first, then the
others newest first), and the first one the BMC answers is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from dynamic_providers.redfish.models import AttrValue

Interface = Literal["bios", "external", "config"]
INTERFACES: tuple[Interface, ...] = ("config", "external", "bios")

EXTERNAL_PATH = "/redfish/v1/Systems/Bluefield/Oem/Nvidia/Connectx/ExternalHostPrivileges"
CONFIG_PATH = "/redfish/v1/Chassis/Card1/NetworkAdapters/NvidiaNetworkAdapter/Oem/Nvidia/HostPrivilegeConfig"

#: First release of each interface (NVIDIA BlueField BMC docs: 24.10-LTS is the first page with
#: the compact BIOS keys next to ExternalHostPrivileges in this project's reading; 25.10 the
#: first with HostPrivilegeConfig).
EXTERNAL_SINCE = (24, 10)
CONFIG_SINCE = (25, 10)

#: The eight ``HostPriv*`` properties (NVIDIA bmcweb ``externalHostPrivilege`` table and the
#: BMC 23.09 page's IPMI field list HOST_PRIV_FLASH_ACCESS ... HOST_PRIV_PCC_UPDATE).
EXTERNAL_PROPERTIES = ("HostPrivFlashAccess", "HostPrivFwUpdate", "HostPrivNicReset", "HostPrivNvGlobal",
                       "HostPrivNvHost", "HostPrivNvInternalCpu", "HostPrivNvPort", "HostPrivPccUpdate")
EXTERNAL_VALUES = ("Default", "Enabled", "Disabled")

#: ``PrivilegeSettings`` of the presets (26.01 page, table "Configuration Breakdown by Mode"):
#: ``Privileged`` has every access ``Enabled`` and every switch ``true``, ``Restricted`` the reverse.
CONFIG_ACCESS_SETTINGS = ("FirmwareUpdate", "FlashAccess", "GlobalParametersAccess", "HostParametersAccess",
                          "InternalCPUAccess", "NicReset", "PccUpdate", "PortAccess")
CONFIG_SWITCH_SETTINGS = ("ManagementInterfaceEnabled", "PortOwnerEnabled", "ReadCountersEnabled",
                          "TracerEnabled")


def _preset(level: str, *, allow: bool) -> dict[str, AttrValue]:
    return {"HostPrivilegeLevel": level,
            **dict.fromkeys(CONFIG_ACCESS_SETTINGS, "Enabled" if allow else "Disabled"),
            **dict.fromkeys(CONFIG_SWITCH_SETTINGS, allow)}


CONFIG_PRESETS: dict[str, dict[str, AttrValue]] = {
    "Privileged": _preset("Privileged", allow=True),
    "Restricted": _preset("Restricted", allow=False),
}
#: What ``PrivilegeMode`` reads when the single settings match no preset.
CUSTOM = "Custom"


def firmware_release(firmware: str | None) -> tuple[int, int] | None:
    """``(year, month)`` of a BlueField BMC version such as ``BF-24.10-17`` or ``25.10-LTS``.

    >>> firmware_release("BF-25.10-3"), firmware_release("weird")
    ((25, 10), None)
    """
    m = re.search(r"(?:^|[^0-9])(\d{2})\.(\d{2})(?:[^0-9]|$)", firmware or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def generation_for(firmware: str | None) -> Interface | None:
    """The interface NVIDIA's pages document for this release (None: version not recognised)."""
    release = firmware_release(firmware)
    if release is None:
        return None
    if release >= CONFIG_SINCE:
        return "config"
    if release >= EXTERNAL_SINCE:
        return "external"
    return "bios"


def probe_order(firmware: str | None) -> list[Interface]:
    """Interfaces to try, in order: the firmware's own generation first, then newest first."""
    first = generation_for(firmware)
    return ([first] if first else []) + [i for i in INTERFACES if i != first]


def level_from_external(privileges: Mapping[str, str]) -> str | None:
    """``Restricted`` when every ``HostPriv*`` is ``Disabled``, ``Privileged`` when none is,
    ``Custom`` for a mix; None when the resource lists no privilege at all."""
    values = [privileges[k] for k in EXTERNAL_PROPERTIES if k in privileges]
    if not values:
        return None
    disabled = sum(v == "Disabled" for v in values)
    if disabled == len(EXTERNAL_PROPERTIES):
        return "Restricted"
    return "Privileged" if disabled == 0 else CUSTOM


def external_values(level: str) -> dict[str, str]:
    """The ``HostPriv*`` body that sets ``level``: all ``Disabled`` for ``Restricted``, all
    ``Enabled`` for ``Privileged`` (the 26.01 preset table's mapping of the same eight rights).

    Raises:
        ValueError: ``level`` is neither.
    """
    if level not in CONFIG_PRESETS:
        raise ValueError(f"host privilege must be one of {list(CONFIG_PRESETS)}, got {level!r}")
    value = "Disabled" if level == "Restricted" else "Enabled"
    return dict.fromkeys(EXTERNAL_PROPERTIES, value)


def mode_of(settings: Mapping[str, AttrValue]) -> str:
    """The ``PrivilegeMode`` that ``settings`` amount to: a preset's name, or ``Custom``."""
    for name, preset in CONFIG_PRESETS.items():
        if all(settings.get(k) == v and isinstance(settings.get(k), bool) == isinstance(v, bool)
               for k, v in preset.items()):
            return name
    return CUSTOM
