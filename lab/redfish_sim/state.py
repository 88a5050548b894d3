"""State of one simulated BMC (a hardware stand-in for a BlueField-3 BMC or a host BMC).

What is kept, and where:

- persisted in ``<state-dir>/<name>.json`` (survives a simulator restart, like BMC flash):
  effective BIOS attributes, pending BIOS settings, host rshim, power state, boot override,
  reset count, firmware version;
- in memory only (lost on restart, like a BMC reboot): sessions, credentials overridden
  through the control path, armed faults, the request log.

Behaviour this stand-in chooses, where NVIDIA's documentation is silent:

- ``Mode`` under ``Systems/Bluefield/Oem/Nvidia`` is the effective value of the ``NicMode``
  BIOS attribute. ``Mode.Set`` records a *pending* ``NicMode`` (visible in
  ``Bios/Settings``) that, like every pending attribute, applies on
  ``ComputerSystem.Reset`` (NVIDIA: "changes need a DPU reset"; one reset is enough here,
  the real card wants the Arm cores rebooted twice). Setting the mode already in effect
  drops a pending mode change instead.
- ``HostRshim.Set`` applies at once (the BMC owns rshim at run time).
- Firmware older than ``BF-24.10`` exposes the spaced attribute keys of BSP 4.8.0
  (``Host Privilege Level``); ``BF-24.10`` and newer the compact keys of BSP 4.9
  (``HostPrivilegeLevel``). The cut-over is this stand-in's reading of those two pages.
- Host privilege, one interface per firmware generation (NVIDIA BlueField BMC Software, "NIC
  Subsystem Management", one page per release): before ``BF-24.10`` only the BIOS attribute;
  ``BF-24.10`` to ``BF-25.07`` ``Systems/Bluefield/Oem/Nvidia/Connectx/ExternalHostPrivileges``
  (the 24.04 page documents it too; this stand-in leaves it out of 24.04 so that one simulated
  firmware offers the BIOS generation alone); ``BF-25.10`` and newer
  ``Chassis/Card1/NetworkAdapters/NvidiaNetworkAdapter/Oem/Nvidia/HostPrivilegeConfig``. The
  BIOS attribute stays in the BIOS of newer firmware but is a separate value here; the
  newer resources are what the generation's page tells administrators to use.
- ``ExternalHostPrivileges``: a POST stores the ``HostPriv*`` values as NV configuration that
  the next reset makes effective (NVIDIA's UEFI page "BlueField External Host Priv
  Configuration": "A reboot is needed"); GET shows the stored values, as the resource has no
  pending/effective split. ``/_sim/state`` shows both.
- ``HostPrivilegeConfig``: GET shows the effective ``PrivilegeMode``/``PrivilegeSettings``; a
  PATCH of its ``/Settings`` stages a change that the next reset applies. ``PrivilegeMode``
  ``Privileged``/``Restricted`` sets every setting to the preset (26.01 table "Configuration
  Breakdown by Mode"); ``PrivilegeSettings`` changes single settings, after the preset when
  both are sent (this stand-in's reading of "Parameter Precedence", a section the stored copy
  of the page does not show in full); ``PrivilegeMode`` reads ``Custom`` when the settings match
  no preset, and ``Custom`` cannot be written (400).
- ETags are a hash of the resource's changing content, so they change exactly when it does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lab.redfish_sim import fixtures

BmcKind = Literal["bluefield", "host"]
AttrValue = str | int | float | bool | None

DEFAULT_BLUEFIELD_FIRMWARE = "BF-24.10-17"
DEFAULT_HOST_FIRMWARE = "1.0.0"
#: Firmware from which BlueField BMCs use compact BIOS attribute keys.
COMPACT_KEYS_SINCE = (24, 10)
#: Firmware from which the privilege lives in ExternalHostPrivileges, then in HostPrivilegeConfig.
EXTERNAL_PRIVILEGES_SINCE = (24, 10)
PRIVILEGE_CONFIG_SINCE = (25, 10)
PrivilegeInterface = Literal["bios", "external", "config", "none"]
EXTERNAL_VALUES = ("Default", "Enabled", "Disabled")
SESSION_TIMEOUT_SECONDS = 1800
RESTART_TYPES = frozenset({"GracefulRestart", "ForceRestart", "PowerCycle"})
OFF_TYPES = frozenset({"GracefulShutdown", "ForceOff"})
MODE_ATTRIBUTE = "NicMode"


class SimHttpError(Exception):
    """A Redfish error response: HTTP ``status`` and Base-registry ``messages``."""

    def __init__(self, status: int, messages: list[dict[str, Any]], headers: dict[str, str] | None = None):
        super().__init__(f"{status}: {messages[0]['Message']}")
        self.status = status
        self.messages = messages
        self.headers = headers or {}


@dataclass(frozen=True)
class BmcSpec:
    """One ``--bmc NAME=PORT[:firmware]`` argument.

    ``kind`` is ``bluefield`` when the firmware starts with ``BF-``, or, without a firmware
    token, when the name contains ``dpu`` or ``bluefield``; otherwise ``host``.
    ``port`` 0 asks the OS for a free port (see ``endpoints.json`` in the state dir).
    """

    name: str
    port: int
    kind: BmcKind
    firmware: str

    @classmethod
    def parse(cls, text: str) -> BmcSpec:
        """Parse ``NAME=PORT[:firmware]``.

        Raises:
            ValueError: malformed text, with the expected shape in the message.
        """
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)=(\d+)(?::(.+))?", text)
        if not m:
            raise ValueError(f"--bmc {text!r}: expected NAME=PORT[:firmware], e.g. dpu-a=18441:BF-24.10-17")
        name, port, firmware = m.group(1), int(m.group(2)), m.group(3)
        if firmware:
            kind: BmcKind = "bluefield" if firmware.startswith("BF-") else "host"
        else:
            lowered = name.lower()
            kind = "bluefield" if ("dpu" in lowered or "bluefield" in lowered) else "host"
            firmware = DEFAULT_BLUEFIELD_FIRMWARE if kind == "bluefield" else DEFAULT_HOST_FIRMWARE
        return cls(name=name, port=port, kind=kind, firmware=firmware)

    @property
    def system_id(self) -> str:
        """``Bluefield`` on a DPU BMC, ``1`` on a host BMC."""
        return "Bluefield" if self.kind == "bluefield" else "1"

    @property
    def privilege_interface(self) -> PrivilegeInterface:
        """Where this firmware keeps the host privilege (``none`` on a host BMC)."""
        if self.kind != "bluefield":
            return "none"
        release = firmware_release(self.firmware)
        if release is not None and release >= PRIVILEGE_CONFIG_SINCE:
            return "config"
        if release is not None and release >= EXTERNAL_PRIVILEGES_SINCE:
            return "external"
        return "bios"

    @property
    def manager_id(self) -> str:
        """``Bluefield_BMC`` on a DPU BMC, ``1`` on a host BMC."""
        return "Bluefield_BMC" if self.kind == "bluefield" else "1"


def firmware_release(firmware: str) -> tuple[int, int] | None:
    """``(year, month)`` of a BlueField BMC firmware ``BF-YY.MM-N``; None for other versions."""
    m = re.match(r"BF-(\d+)\.(\d+)", firmware)
    return (int(m.group(1)), int(m.group(2))) if m else None


def uses_spaced_keys(firmware: str) -> bool:
    """True when BlueField BMC ``firmware`` (``BF-YY.MM-N``) predates the compact attribute keys."""
    release = firmware_release(firmware)
    return release is not None and release < COMPACT_KEYS_SINCE


def privilege_mode_of(settings: dict[str, Any]) -> str:
    """``Privileged``/``Restricted`` when ``settings`` equal that preset, else ``Custom``."""
    for name, preset in fixtures.template("host_privilege_presets.json").items():
        if all(k in settings and settings[k] == v and isinstance(settings[k], bool) == isinstance(v, bool)
               for k, v in preset.items()):
            return name
    return "Custom"


def etag_of(value: Any) -> str:
    """A strong ETag (quoted) for a JSON-able value."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]
    return f'"{digest}"'


def _same_type(current: AttrValue, new: AttrValue) -> bool:
    if isinstance(current, bool) or isinstance(new, bool):
        return isinstance(current, bool) and isinstance(new, bool)
    if isinstance(current, int | float):
        return isinstance(new, int | float)
    return isinstance(new, type(current))


@dataclass
class Session:
    """An authenticated session; ``token`` is the ``X-Auth-Token`` value."""

    id: str
    token: str
    username: str
    origin: str
    last_used: float = field(default_factory=time.monotonic)


class BmcState:
    """Everything one simulated BMC knows; thread-safe (one lock per BMC).

    Public methods raise :class:`SimHttpError` for requests a real BMC would refuse.
    """

    def __init__(self, spec: BmcSpec, state_dir: Path, *, username: str, password: str) -> None:
        self.spec = spec
        self.path = state_dir / f"{spec.name}.json"
        self.lock = threading.RLock()
        self._initial_credentials = (username, password)
        self.username, self.password = username, password
        self.sessions: dict[str, Session] = {}
        self.sessions_created = 0
        self.sessions_deleted = 0
        self.faults: list[dict[str, Any]] = []
        self.concurrent_writes: list[dict[str, AttrValue]] = []
        self.request_log: list[dict[str, Any]] = []
        self.data = self._load_or_factory()

    # --- persistence -------------------------------------------------------------------

    def _factory(self) -> dict[str, Any]:
        if self.spec.kind == "bluefield":
            legacy = uses_spaced_keys(self.spec.firmware)
            name = "bios_bluefield_legacy.json" if legacy else "bios_bluefield.json"
            system = fixtures.template("system_bluefield.json")
            rshim: str | None = fixtures.template("oem_nvidia_system.json")["HostRshim"]
        else:
            name = "bios_host.json"
            system = fixtures.template("system_host.json")
            rshim = None
        boot = {k: v for k, v in system["Boot"].items() if "@" not in k}
        external = {k: v for k, v in fixtures.template("external_host_privileges.json").items()
                    if k.startswith("HostPriv")}
        config = fixtures.template("host_privilege_config.json")["PrivilegeSettings"]
        return {
            "kind": self.spec.kind,
            "firmware": self.spec.firmware,
            "privilege_interface": self.spec.privilege_interface,
            "external_privileges": external,
            "external_privileges_effective": dict(external),
            "privilege_settings": config,
            "privilege_settings_pending": None,
            "attributes": fixtures.template(name)["Attributes"],
            "pending": {},
            "host_rshim": rshim,
            "power_state": system["PowerState"],
            "boot": boot,
            "reset_count": 0,
        }

    def _load_or_factory(self) -> dict[str, Any]:
        if self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if (data.get("firmware") == self.spec.firmware and data.get("kind") == self.spec.kind
                    and data.get("privilege_interface") == self.spec.privilege_interface):
                return data
        data = self._factory()
        self._write(data)
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)

    def save(self) -> None:
        """Persist the hardware part of the state (atomic replace)."""
        with self.lock:
            self._write(self.data)

    def factory_reset(self) -> None:
        """Back to factory state; drop sessions, faults, the log and credential overrides."""
        with self.lock:
            self.data = self._factory()
            self.username, self.password = self._initial_credentials
            self.sessions.clear()
            self.faults.clear()
            self.concurrent_writes.clear()
            self.request_log.clear()
            self.sessions_created = self.sessions_deleted = 0
            self.save()

    # --- auth --------------------------------------------------------------------------

    def check_password(self, username: str, password: str) -> bool:
        """Constant-time credential check."""
        import hmac

        return hmac.compare_digest(username.encode(), self.username.encode()) and hmac.compare_digest(
            password.encode(), self.password.encode()
        )

    def create_session(self, username: str, password: str, origin: str) -> Session | None:
        """A new session, or None for wrong credentials."""
        if not self.check_password(username, password):
            return None
        with self.lock:
            session = Session(id=secrets.token_hex(5), token=secrets.token_urlsafe(24), username=username,
                              origin=origin)
            self.sessions[session.id] = session
            self.sessions_created += 1
            return session

    def session_for_token(self, token: str) -> Session | None:
        """The live session holding ``token`` (refreshing its idle timer), or None."""
        with self.lock:
            now = time.monotonic()
            for sid, session in list(self.sessions.items()):
                if now - session.last_used > SESSION_TIMEOUT_SECONDS:
                    del self.sessions[sid]
                    continue
                if secrets.compare_digest(session.token, token):
                    session.last_used = now
                    return session
            return None

    def delete_session(self, session_id: str) -> bool:
        """Delete a session; False when there is none with that id."""
        with self.lock:
            if self.sessions.pop(session_id, None) is None:
                return False
            self.sessions_deleted += 1
            return True

    # --- BIOS ----------------------------------------------------------------------------

    @property
    def attributes(self) -> dict[str, AttrValue]:
        """Effective BIOS attributes (a live dict; hold ``lock`` to change it)."""
        return self.data["attributes"]

    @property
    def pending(self) -> dict[str, AttrValue]:
        """Pending BIOS settings, applied on the next reset (a live dict)."""
        return self.data["pending"]

    def bios_etag(self) -> str:
        """ETag of ``Bios`` (changes with the effective attributes)."""
        return etag_of(self.attributes)

    def settings_etag(self) -> str:
        """ETag of ``Bios/Settings`` (changes with the pending attributes)."""
        return etag_of(self.pending)

    def system_etag(self) -> str:
        """ETag of the ComputerSystem (changes with power state and boot override)."""
        return etag_of([self.data["power_state"], self.data["boot"]])

    def validate_attributes(self, attrs: dict[str, Any]) -> list[dict[str, Any]]:
        """Base-registry messages for every unknown attribute, wrong type or value (empty = valid)."""
        allowed = fixtures.template("bios_attribute_values.json")
        problems: list[dict[str, Any]] = []
        for key, value in attrs.items():
            pointer = f"#/Attributes/{key}"
            if key not in self.attributes:
                problems.append(fixtures.message("PropertyUnknown", key, related=[pointer]))
            elif not _same_type(self.attributes[key], value):
                problems.append(fixtures.message("PropertyValueTypeError", json.dumps(value), key,
                                                 related=[pointer]))
            elif key in allowed and value not in allowed[key]:
                problems.append(fixtures.message("PropertyValueNotInList", json.dumps(value), key,
                                                 related=[pointer]))
        return problems

    def patch_settings(self, attrs: dict[str, Any], if_match: str | None) -> None:
        """Merge ``attrs`` into the pending settings, all or nothing.

        Raises:
            SimHttpError: 412 when ``if_match`` is given and stale; 400 for unknown attributes,
                wrong types or values outside the allowed list.
        """
        with self.lock:
            if if_match and if_match != "*" and if_match != self.settings_etag():
                raise SimHttpError(412, [fixtures.message("PreconditionFailed")])
            problems = self.validate_attributes(attrs)
            if problems:
                raise SimHttpError(400, problems)
            self.pending.update(attrs)
            self.save()

    def apply_concurrent_write(self) -> None:
        """Apply one armed out-of-band settings write (test hook for ETag races)."""
        with self.lock:
            if self.concurrent_writes:
                self.pending.update(self.concurrent_writes.pop(0))
                self.save()

    # --- BlueField OEM ----------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """Effective DPU mode (``DpuMode`` or ``NicMode``)."""
        return str(self.attributes.get(MODE_ATTRIBUTE, "DpuMode"))

    def set_mode(self, mode: str) -> None:
        """``Mode.Set``: record the mode for the next reset (or drop a pending change)."""
        with self.lock:
            if mode == self.mode:
                self.pending.pop(MODE_ATTRIBUTE, None)
            else:
                self.pending[MODE_ATTRIBUTE] = mode
            self.save()

    def set_host_rshim(self, value: str) -> None:
        """``HostRshim.Set``: immediate."""
        with self.lock:
            self.data["host_rshim"] = value
            self.save()

    # --- host privilege (ExternalHostPrivileges, HostPrivilegeConfig) ---------------------

    def set_external_privileges(self, values: dict[str, Any]) -> None:
        """POST ``ExternalHostPrivileges``: store ``HostPriv*`` values for the next reset, all or nothing.

        Raises:
            SimHttpError: 400 for an empty body, unknown properties or values outside
                ``Default``/``Enabled``/``Disabled``.
        """
        with self.lock:
            known = self.data["external_privileges"]
            problems = []
            for key, value in values.items():
                if key not in known:
                    problems.append(fixtures.message("PropertyUnknown", key, related=[f"#/{key}"]))
                elif value not in EXTERNAL_VALUES:
                    problems.append(fixtures.message("PropertyValueNotInList", json.dumps(value), key,
                                                     related=[f"#/{key}"]))
            if not values:
                problems.append(fixtures.message("PropertyMissing", "HostPriv*"))
            if problems:
                raise SimHttpError(400, problems)
            known.update(values)
            self.save()

    def privilege_settings_next(self) -> dict[str, Any]:
        """``PrivilegeSettings`` after the next reset (the staged ones, else the effective ones)."""
        pending = self.data["privilege_settings_pending"]
        return dict(pending if pending is not None else self.data["privilege_settings"])

    def privilege_settings_etag(self) -> str:
        """ETag of ``HostPrivilegeConfig/Settings`` (changes with the staged settings)."""
        return etag_of(self.privilege_settings_next())

    def patch_privilege_settings(self, body: dict[str, Any], if_match: str | None) -> None:
        """PATCH ``HostPrivilegeConfig/Settings``: stage a preset and/or single settings.

        Raises:
            SimHttpError: 412 on a stale ``if_match``; 400 for unknown properties, ``Custom`` or
                another value outside the presets, or a wrongly typed setting; nothing staged on error.
        """
        presets = fixtures.template("host_privilege_presets.json")
        with self.lock:
            if if_match and if_match != "*" and if_match != self.privilege_settings_etag():
                raise SimHttpError(412, [fixtures.message("PreconditionFailed")])
            problems = [fixtures.message("PropertyUnknown", k, related=[f"#/{k}"])
                        for k in body if k not in ("PrivilegeMode", "PrivilegeSettings")]
            staged = self.privilege_settings_next()
            mode = body.get("PrivilegeMode")
            if "PrivilegeMode" in body and mode not in presets:
                problems.append(fixtures.message("PropertyValueNotInList", json.dumps(mode), "PrivilegeMode",
                                                 related=["#/PrivilegeMode"]))
            elif mode is not None:
                staged = dict(presets[mode])
            singles = body.get("PrivilegeSettings", {})
            if not isinstance(singles, dict):
                problems.append(fixtures.message("PropertyValueTypeError", json.dumps(singles),
                                                 "PrivilegeSettings", related=["#/PrivilegeSettings"]))
                singles = {}
            for key, value in singles.items():
                pointer = f"#/PrivilegeSettings/{key}"
                allowed = {p[key] for p in presets.values()} if key in staged else None
                if allowed is None:
                    problems.append(fixtures.message("PropertyUnknown", key, related=[pointer]))
                elif not _same_type(staged[key], value) or value not in allowed:
                    problems.append(fixtures.message("PropertyValueNotInList", json.dumps(value), key,
                                                     related=[pointer]))
            if not body:
                problems.append(fixtures.message("PropertyMissing", "PrivilegeMode"))
            if problems:
                raise SimHttpError(400, problems)
            staged.update(singles)
            same = staged == self.data["privilege_settings"]
            self.data["privilege_settings_pending"] = None if same else staged
            self.save()

    # --- systems ---------------------------------------------------------------------------

    def reset(self, reset_type: str) -> None:
        """``ComputerSystem.Reset``: restarts (and power-on) apply pending settings."""
        with self.lock:
            if reset_type in OFF_TYPES:
                self.data["power_state"] = "Off"
            else:
                if reset_type in RESTART_TYPES or self.data["power_state"] == "Off":
                    self.attributes.update(self.pending)
                    self.pending.clear()
                    self.data["external_privileges_effective"] = dict(self.data["external_privileges"])
                    if self.data["privilege_settings_pending"] is not None:
                        self.data["privilege_settings"] = self.data["privilege_settings_pending"]
                        self.data["privilege_settings_pending"] = None
                self.data["power_state"] = "On"
            self.data["reset_count"] += 1
            self.save()

    def set_boot(self, boot: dict[str, str], if_match: str | None) -> None:
        """Merge a boot override.

        Raises:
            SimHttpError: 412 on a stale ``if_match``.
        """
        with self.lock:
            if if_match and if_match != "*" and if_match != self.system_etag():
                raise SimHttpError(412, [fixtures.message("PreconditionFailed")])
            self.data["boot"].update(boot)
            self.save()

    # --- control path ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Everything a test may want to assert on (no credentials, no tokens)."""
        with self.lock:
            return {
                "name": self.spec.name,
                "kind": self.spec.kind,
                "firmware": self.spec.firmware,
                "system_id": self.spec.system_id,
                "attributes": dict(self.attributes),
                "pending": dict(self.pending),
                "mode": self.mode if self.spec.kind == "bluefield" else None,
                "host_rshim": self.data["host_rshim"],
                "privilege_interface": self.spec.privilege_interface,
                "external_privileges": dict(self.data["external_privileges"]),
                "external_privileges_effective": dict(self.data["external_privileges_effective"]),
                "privilege_mode": privilege_mode_of(self.data["privilege_settings"]),
                "privilege_settings": dict(self.data["privilege_settings"]),
                "privilege_settings_pending": self.data["privilege_settings_pending"],
                "power_state": self.data["power_state"],
                "boot": dict(self.data["boot"]),
                "reset_count": self.data["reset_count"],
                "sessions_active": len(self.sessions),
                "sessions_created": self.sessions_created,
                "sessions_deleted": self.sessions_deleted,
                "requests": list(self.request_log),
            }

    def out_of_band(self, change: dict[str, Any]) -> None:
        """Change the hardware behind the BMC's back (drift), without validation.

        Keys: ``attributes`` (merged into effective), ``pending`` (replaces pending),
        ``mode``, ``host_rshim``, ``power_state``, ``password`` (until restart or reset),
        ``external_privileges`` (``HostPriv*`` values, stored and effective at once),
        ``privilege_mode`` (a preset made effective at once), ``privilege_settings`` (single
        settings merged into the effective ones), ``privilege_pending_mode`` (a preset staged in
        ``HostPrivilegeConfig/Settings``, as another client would).

        Raises:
            ValueError: an unknown key.
        """
        known = {"attributes", "pending", "mode", "host_rshim", "power_state", "password",
                 "external_privileges", "privilege_mode", "privilege_settings", "privilege_pending_mode"}
        unknown = set(change) - known
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}; known: {sorted(known)}")
        with self.lock:
            if "attributes" in change:
                self.attributes.update(change["attributes"])
            if "pending" in change:
                self.data["pending"] = dict(change["pending"])
            if "mode" in change:
                self.attributes[MODE_ATTRIBUTE] = change["mode"]
            if "host_rshim" in change:
                self.data["host_rshim"] = change["host_rshim"]
            if "power_state" in change:
                self.data["power_state"] = change["power_state"]
            if "password" in change:
                self.password = change["password"]
            if "external_privileges" in change:
                self.data["external_privileges"].update(change["external_privileges"])
                self.data["external_privileges_effective"].update(change["external_privileges"])
            if "privilege_mode" in change:
                presets = fixtures.template("host_privilege_presets.json")
                self.data["privilege_settings"] = dict(presets[change["privilege_mode"]])
            if "privilege_settings" in change:
                self.data["privilege_settings"].update(change["privilege_settings"])
            if "privilege_pending_mode" in change:
                presets = fixtures.template("host_privilege_presets.json")
                self.data["privilege_settings_pending"] = dict(presets[change["privilege_pending_mode"]])
            self.save()

    def log_request(self, method: str, path: str, status: int) -> None:
        """Remember the last 500 requests (method, path, status) for tests."""
        with self.lock:
            self.request_log.append({"method": method, "path": path, "status": status})
            del self.request_log[:-500]

    def take_fault(self, method: str, path: str) -> dict[str, Any] | None:
        """The first armed fault matching ``method`` and ``path`` (its count is decremented)."""
        with self.lock:
            for fault in self.faults:
                if fault.get("method", "*") not in ("*", method):
                    continue
                if fault.get("path", "*") not in ("*", path.rstrip("/")):
                    continue
                fault["count"] = fault.get("count", 1) - 1
                if fault["count"] <= 0:
                    self.faults.remove(fault)
                return fault
            return None
