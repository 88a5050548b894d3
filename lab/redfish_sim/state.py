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
    def manager_id(self) -> str:
        """``Bluefield_BMC`` on a DPU BMC, ``1`` on a host BMC."""
        return "Bluefield_BMC" if self.kind == "bluefield" else "1"


def uses_spaced_keys(firmware: str) -> bool:
    """True when BlueField BMC ``firmware`` (``BF-YY.MM-N``) predates the compact attribute keys."""
    m = re.match(r"BF-(\d+)\.(\d+)", firmware)
    return bool(m) and (int(m.group(1)), int(m.group(2))) < COMPACT_KEYS_SINCE


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
        return {
            "kind": self.spec.kind,
            "firmware": self.spec.firmware,
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
            if data.get("firmware") == self.spec.firmware and data.get("kind") == self.spec.kind:
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
        ``mode``, ``host_rshim``, ``power_state``, ``password`` (until restart or reset).

        Raises:
            ValueError: an unknown key.
        """
        known = {"attributes", "pending", "mode", "host_rshim", "power_state", "password"}
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
