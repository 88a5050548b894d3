"""Pure decisions for the Redfish providers: what to write, what drifted, what awaits a reset.

No I/O here; the providers feed in what the client read and act on the answer.

Model (Redfish "Settings" pattern, DSP0266 "Settings resource"): a BIOS attribute has an
*effective* value (``Bios``) and may have a *pending* one (``Bios/Settings``) that takes
effect at the next reset. The value the system will run with after the next reset is
``pending.get(key, effective[key])``; a setting needs a write only when that differs from
the desired value, so staging the same value twice, or re-staging a value that is
already pending, never happens.

BlueField-3 specifics (NVIDIA BlueField BMC docs): the host privilege level is set through one
of three interfaces depending on the firmware generation (see :mod:`privilege`): the BIOS
attribute ``HostPrivilegeLevel`` (firmware before BF-24.10 spells it ``Host Privilege
Level``), ``ExternalHostPrivileges`` (24.10 to 25.07) or ``HostPrivilegeConfig`` (25.10+);
the DPU mode is set with ``Oem/Nvidia`` ``Mode.Set`` and reads back as ``Mode``;
this project treats a pending mode as the pending ``NicMode`` BIOS attribute (see
``lab/redfish_sim/state.py``). Host rshim applies immediately.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dynamic_providers.redfish.models import AttrValue

#: Spellings of the host-privilege BIOS attribute, newest first.
PRIVILEGE_KEYS = ("HostPrivilegeLevel", "Host Privilege Level")
#: BIOS attribute holding the DPU mode (BlueField docs: BF-2 sets it directly by PATCH).
MODE_ATTRIBUTE = "NicMode"
DPU_MODES = ("DpuMode", "NicMode")
PRIVILEGE_LEVELS = ("Restricted", "Privileged")
RSHIM_STATES = ("Disabled", "Enabled")


def same_value(a: AttrValue, b: AttrValue) -> bool:
    """Equality that keeps ``True`` and ``1`` apart (JSON booleans are not numbers)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def next_boot(effective: Mapping[str, AttrValue], pending: Mapping[str, AttrValue], key: str) -> AttrValue:
    """The value ``key`` will have after the next reset (None when the BIOS has no such key)."""
    return pending[key] if key in pending else effective.get(key)


def privilege_attribute_key(attribute_names: Iterable[str]) -> str | None:
    """Which spelling of the host-privilege attribute this BIOS uses, or None if neither.

    >>> privilege_attribute_key(["NicMode", "Host Privilege Level"])
    'Host Privilege Level'
    """
    names = set(attribute_names)
    for key in PRIVILEGE_KEYS:
        if key in names:
            return key
    return None


def normalise_value(value: AttrValue) -> AttrValue:
    """Integral floats become ints (Pulumi carries every number as a float64)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def plan_bios(desired: Mapping[str, AttrValue], effective: Mapping[str, AttrValue],
              pending: Mapping[str, AttrValue]) -> dict[str, AttrValue]:
    """Attributes to PATCH into ``Bios/Settings``: those whose next-boot value is not desired.

    Attributes the BIOS does not have are included (the BMC then rejects them by name).
    """
    return {k: v for k, v in desired.items() if not same_value(next_boot(effective, pending, k), v)}


def awaiting_reset(desired: Mapping[str, AttrValue], effective: Mapping[str, AttrValue],
                   pending: Mapping[str, AttrValue]) -> list[str]:
    """Desired attributes that are staged but not yet effective (a reset would apply them)."""
    return sorted(k for k, v in desired.items()
                  if k in pending and same_value(pending[k], v) and not same_value(effective.get(k), v))


@dataclass(frozen=True)
class DpuDesired:
    """Desired DPU posture: ``mode`` (DpuMode|NicMode), ``host_privilege``
    (Restricted|Privileged), ``host_rshim`` (Disabled|Enabled)."""

    mode: str = "DpuMode"
    host_privilege: str = "Restricted"
    host_rshim: str = "Disabled"


@dataclass(frozen=True)
class DpuObserved:
    """What the BMC reports.

    Attributes:
        mode: effective ``Oem/Nvidia`` ``Mode``.
        host_rshim: ``Oem/Nvidia`` ``HostRshim`` (immediate, never pending).
        attributes: effective BIOS attributes.
        pending: pending BIOS settings (``Bios/Settings``).
        settings_etag: ETag of ``Bios/Settings`` when read (for ``If-Match``).
        firmware_version: the BMC's ``FirmwareVersion``.
        interface: where the host privilege lives: ``bios`` (the BIOS attribute, read from
            ``attributes``/``pending``), ``external`` or ``config`` (see :mod:`privilege`).
        privilege_now, privilege_next: for ``external``/``config``, the level in effect and
            the level after the next reset (``Privileged``, ``Restricted`` or ``Custom``).
        privilege_pending: for ``config``, the staged settings that differ from the effective ones.
        privilege_etag: ETag of the ``config`` settings object (for ``If-Match``).
    """

    mode: str | None
    host_rshim: str | None
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)
    pending: Mapping[str, AttrValue] = field(default_factory=dict)
    settings_etag: str | None = None
    firmware_version: str | None = None
    interface: str = "bios"
    privilege_now: str | None = None
    privilege_next: str | None = None
    privilege_pending: Mapping[str, AttrValue] = field(default_factory=dict)
    privilege_etag: str | None = None

    @property
    def privilege_key(self) -> str | None:
        """The property holding the level: ``HostPrivilegeLevel`` or ``Host Privilege Level``
        (BIOS; None: neither exists), ``HostPriv*`` (external) or ``PrivilegeMode`` (config)."""
        if self.interface == "external":
            return "HostPriv*"
        if self.interface == "config":
            return "PrivilegeMode"
        return privilege_attribute_key(self.attributes)

    @property
    def host_privilege_level(self) -> str | None:
        """Effective host privilege level."""
        if self.interface != "bios":
            return self.privilege_now
        key = self.privilege_key
        value = self.attributes.get(key) if key else None
        return None if value is None else str(value)

    @property
    def next_mode(self) -> str | None:
        """Mode after the next reset (pending ``NicMode`` attribute, else effective)."""
        value = self.pending.get(MODE_ATTRIBUTE, self.mode)
        return None if value is None else str(value)

    @property
    def next_host_privilege(self) -> str | None:
        """Host privilege level after the next reset."""
        if self.interface != "bios":
            return self.privilege_next
        key = self.privilege_key
        if key is None:
            return None
        value = next_boot(self.attributes, self.pending, key)
        return None if value is None else str(value)


@dataclass(frozen=True)
class DpuPlan:
    """Writes that bring a DPU to the desired posture (empty: nothing to write).

    Attributes:
        bios_attributes: to PATCH into ``Bios/Settings`` (privilege, with the BIOS's key spelling).
        privilege: level to write through the ``external``/``config`` interface, or None.
        mode: value for ``Mode.Set``, or None.
        host_rshim: value for ``HostRshim.Set``, or None.
    """

    bios_attributes: dict[str, AttrValue] = field(default_factory=dict)
    mode: str | None = None
    host_rshim: str | None = None
    privilege: str | None = None

    @property
    def empty(self) -> bool:
        """Nothing to write."""
        return (not self.bios_attributes and self.privilege is None and self.mode is None
                and self.host_rshim is None)

    @property
    def settings(self) -> list[str]:
        """Names of the posture settings this plan changes (``mode``, ``host_privilege``, ``host_rshim``)."""
        names = []
        if self.mode is not None:
            names.append("mode")
        if self.bios_attributes or self.privilege is not None:
            names.append("host_privilege")
        if self.host_rshim is not None:
            names.append("host_rshim")
        return names


class NoPrivilegeAttributeError(LookupError):
    """The BIOS has neither ``HostPrivilegeLevel`` nor ``Host Privilege Level``."""


def plan_dpu_posture(desired: DpuDesired, observed: DpuObserved) -> DpuPlan:
    """The writes that make the next-boot posture equal ``desired``.

    Raises:
        NoPrivilegeAttributeError: the BIOS interface is in use and exposes no host-privilege attribute.
    """
    mode = None if observed.next_mode == desired.mode else desired.mode
    rshim = None if observed.host_rshim == desired.host_rshim else desired.host_rshim
    privilege_ok = observed.next_host_privilege == desired.host_privilege
    if observed.interface != "bios":
        level = None if privilege_ok else desired.host_privilege
        return DpuPlan(privilege=level, mode=mode, host_rshim=rshim)
    key = observed.privilege_key
    if key is None:
        raise NoPrivilegeAttributeError(
            f"BIOS has none of {list(PRIVILEGE_KEYS)}; attributes: {sorted(observed.attributes)[:40]}")
    bios = {} if privilege_ok else {key: desired.host_privilege}
    return DpuPlan(bios_attributes=bios, mode=mode, host_rshim=rshim)


def dpu_awaiting_reset(desired: DpuDesired, observed: DpuObserved) -> list[str]:
    """Posture settings staged as desired but not yet effective (``mode``, ``host_privilege``)."""
    names = []
    if observed.next_mode == desired.mode and observed.mode != desired.mode:
        names.append("mode")
    if (observed.next_host_privilege == desired.host_privilege
            and observed.host_privilege_level != desired.host_privilege):
        names.append("host_privilege")
    return names
