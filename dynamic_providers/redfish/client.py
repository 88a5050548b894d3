"""Redfish client for BMCs: sessions, systems, reset, boot override, BIOS settings, and the
BlueField-3 ``Oem/Nvidia`` extension.

Built on ``requests`` + urllib3 ``Retry`` rather than ``sushy`` (5.14.0, evaluated for the
generic parts). sushy does sessions, systems, reset and boot override well, but three of its
behaviours go against what this project needs:

1. ``Connector.patch`` answers a 412 (stale ``If-Match``) by retrying *without* the ETag, so
   a concurrent change is silently overwritten. Here a 412 must surface as
   :class:`~dynamic_providers.redfish.errors.PreconditionFailedError` and nothing is written
   (``tests/redfish/test_client.py::test_sushy_drops_if_match_on_412`` pins the sushy
   behaviour that rules it out).
2. Its own retry loop retries any method on connection errors and read timeouts, with fixed
   sleeps, so a ``ComputerSystem.Reset`` or ``Mode.Set`` could be sent twice. Here urllib3
   ``Retry`` retries connection failures (nothing was sent) for all methods, but read
   timeouts and 5xx only for idempotent methods.
3. The BlueField parts (``Oem/Nvidia`` mode and host rshim, the spaced and compact
   privilege keys) are not in sushy, so most calls would be raw connector calls with
   sushy's exceptions translated anyway.

Shapes and paths follow DSP0266 (sessions: "Session management"; ETags: "ETags"; errors:
"Error responses") and NVIDIA's BlueField BMC docs for ``Systems/Bluefield`` and the host-privilege
resources of each firmware generation (:meth:`RedfishClient.privilege_interface`, see
:mod:`dynamic_providers.redfish.privilege` and ``docs/bluefield-bmc-generations.md``).

A client instance is for one thread. Use it as a context manager: the session is created
on entry (or first use), reused, and deleted on exit::

    with RedfishClient("https://10.0.0.5", username="root", password=pw, ca_bundle="ca.pem") as bmc:
        bmc.set_bios_attributes("Bluefield", {"HostPrivilegeLevel": "Restricted"})
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar
from urllib.parse import urljoin, urlsplit

import requests
from pydantic import BaseModel, ValidationError
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from dynamic_providers.redfish import errors, privilege
from dynamic_providers.redfish.models import (
    ActionInfo,
    AttrValue,
    Bios,
    BiosSettings,
    Collection,
    ComputerSystem,
    ErrorResponse,
    ExternalHostPrivileges,
    HostPrivilegeConfig,
    Manager,
    NvidiaSystem,
    RedfishMessage,
    ServiceRoot,
)
from dynamic_providers.redfish.posture import privilege_attribute_key

log = logging.getLogger(__name__)

AuthMode = Literal["auto", "session", "basic"]
M = TypeVar("M", bound=BaseModel)

#: Methods urllib3 may retry after a read timeout or a 5xx (idempotent per RFC 9110).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
RETRY_STATUSES = (500, 502, 503, 504)
#: Reset types that restart a running system, in order of preference.
RESTART_PREFERENCE = ("GracefulRestart", "ForceRestart", "PowerCycle")
BLUEFIELD_SYSTEM_ID = "Bluefield"

#: Which host-privilege interface each BMC offers, by ``(endpoint, firmware version)``: probed
#: once per provider process (a firmware update changes the key, so it is probed again).
_INTERFACE_CACHE: dict[tuple[str, str | None], privilege.Interface] = {}
_INTERFACE_LOCK = threading.Lock()


def pick_reset_type(allowed: Sequence[str] | None) -> str:
    """The gentlest restart among ``allowed`` (``GracefulRestart`` > ``ForceRestart`` >
    ``PowerCycle``); ``GracefulRestart`` when the BMC does not say.

    Raises:
        errors.BadRequestError: ``allowed`` is given but has no restart type.
    """
    if not allowed:
        return RESTART_PREFERENCE[0]
    for candidate in RESTART_PREFERENCE:
        if candidate in allowed:
            return candidate
    raise errors.BadRequestError(f"no restart among the allowed reset types {list(allowed)}")


def _messages(resp: requests.Response) -> tuple[list[RedfishMessage], str]:
    """(ExtendedInfo messages, short detail) from an error response."""
    try:
        body = resp.json()
    except ValueError:
        text = resp.text.strip().replace("\n", " ")[: errors.MAX_BODY_CHARS]
        return [], text or (resp.reason or "no body")
    try:
        info = ErrorResponse.model_validate(body).error
    except ValidationError:
        return [], str(body)[: errors.MAX_BODY_CHARS]
    msgs = list(info.extended_info)
    top = errors.most_severe(msgs)
    return msgs, (top.message if top and top.message else info.message or info.code or resp.reason or "")


def error_for_response(method: str, url: str, resp: requests.Response) -> errors.RedfishError:
    """The :mod:`errors` exception for an HTTP error response (status >= 400)."""
    msgs, detail = _messages(resp)
    kw: dict[str, Any] = {"method": method, "url": url, "status": resp.status_code, "messages": msgs}
    status = resp.status_code
    if status in (401, 403):
        return errors.AuthError(detail or "not authorised", **kw)
    if status == 404:
        return errors.NotFoundError(detail or "not found", **kw)
    if status == 412:
        return errors.PreconditionFailedError(detail or "ETag mismatch", **kw)
    if status == 409:
        return errors.ConflictError(detail or "conflict", **kw)
    if status == 400:
        unknown = [m.message_args[0] for m in msgs if m.short_id == "PropertyUnknown" and m.message_args]
        if unknown:
            return errors.UnknownAttributeError(detail, attributes=unknown, **kw)
        return errors.BadRequestError(detail or "bad request", **kw)
    if status >= 500:
        return errors.ServerError(detail or "server error", **kw)
    return errors.RedfishError(detail or f"HTTP {status}", **kw)


def _transport_error(method: str, url: str, exc: requests.RequestException) -> errors.RedfishError:
    text = str(exc)
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    detail = f"{type(reason or exc).__name__}: {reason or text}"[: errors.MAX_BODY_CHARS]
    if isinstance(exc, requests.exceptions.SSLError):
        return errors.TlsError(f"TLS failed ({detail}); check verify_tls / ca_bundle", method=method, url=url)
    if isinstance(exc, requests.exceptions.Timeout) or "timed out" in text.lower():
        return errors.RedfishTimeoutError(f"timed out ({detail})", method=method, url=url)
    return errors.UnreachableError(f"BMC unreachable ({detail})", method=method, url=url)


class RedfishClient:
    """One BMC's Redfish service.

    Args:
        endpoint: ``https://host[:port]`` (or ``http://``); no path, no credentials in it.
        username, password: BMC account. Never logged, never put in an error message.
        verify_tls: verify the BMC certificate (default True).
        ca_bundle: PEM file of CAs to trust instead of the system store (implies verify).
        timeout_seconds: read timeout per request (seconds).
        connect_timeout_seconds: TCP/TLS connect timeout per attempt (seconds).
        retries: retries for connection failures (any method) and, for idempotent methods,
            read timeouts and 500/502/503/504.
        backoff_seconds: urllib3 backoff factor (sleeps 0, 2x, 4x ... this, seconds).
        auth: ``session`` (X-Auth-Token), ``basic``, or ``auto`` (a session when the service
            root links a SessionService, else Basic).

    Errors: every method raises subclasses of :class:`errors.RedfishError`.
    """

    def __init__(self, endpoint: str, *, username: str, password: str, verify_tls: bool = True,
                 ca_bundle: str | None = None, timeout_seconds: float = 10.0,
                 connect_timeout_seconds: float = 3.0, retries: int = 3, backoff_seconds: float = 0.1,
                 auth: AuthMode = "auto") -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint must be http(s)://host[:port], got {endpoint!r}")
        if parts.username or parts.password:
            raise ValueError("endpoint must not carry credentials; pass username/password")
        self.endpoint = f"{parts.scheme}://{parts.netloc}"
        self._username = username
        self._password = password
        self._auth_mode: AuthMode = auth
        self._timeout = (connect_timeout_seconds, timeout_seconds)
        self._http = requests.Session()
        # Passed on every request: requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override
        # Session.verify (even verify=False), which would silently change whom we trust.
        self._verify: bool | str = ca_bundle if ca_bundle else verify_tls
        self._http.headers.update({"Accept": "application/json", "OData-Version": "4.0"})
        retry = Retry(total=retries, connect=retries, read=retries, status=retries, other=0,
                      allowed_methods=IDEMPOTENT_METHODS, status_forcelist=RETRY_STATUSES,
                      backoff_factor=backoff_seconds, raise_on_status=False,
                      respect_retry_after_header=True)
        adapter = HTTPAdapter(max_retries=retry)
        self._http.mount("http://", adapter)
        self._http.mount("https://", adapter)
        self._root: ServiceRoot | None = None
        self._token: str | None = None
        self.session_uri: str | None = None
        self.auth_method: Literal["session", "basic"] | None = None

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> RedfishClient:
        self.open()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedfishClient({self.endpoint!r}, auth={self.auth_method or self._auth_mode})"

    def open(self) -> None:
        """Authenticate now (otherwise the first call does). Idempotent.

        Raises:
            errors.AuthError: wrong credentials.
            errors.UnreachableError, errors.TlsError: no usable connection.
        """
        if self.auth_method is None:
            self._login()

    def close(self) -> None:
        """Delete the session (best effort: a failed logout is logged, not raised) and
        close the connection pool. Safe to call twice."""
        if self.session_uri is not None:
            uri, self.session_uri = self.session_uri, None
            try:
                self._request("DELETE", uri, reauth=False)
            except errors.RedfishError as exc:
                log.warning("Redfish logout from %s failed: %s", self.endpoint, exc)
        self._token = None
        self._http.headers.pop("X-Auth-Token", None)
        self._http.auth = None
        self.auth_method = None
        self._http.close()

    def _login(self) -> None:
        mode = self._auth_mode
        sessions = None
        if mode != "basic":
            sessions = self.service_root().sessions_path
            if sessions is None and mode == "session":
                raise errors.ProtocolError("the service root links no SessionService", url=self.endpoint)
        if sessions is None:
            self._http.auth = (self._username, self._password)
            self.auth_method = "basic"
            return
        url = self._url(sessions)
        try:
            resp = self._http.post(url, json={"UserName": self._username, "Password": self._password},
                                   timeout=self._timeout, verify=self._verify)
        except requests.RequestException as exc:
            raise _transport_error("POST", url, exc) from exc
        if resp.status_code in (404, 405) and mode == "auto":
            self._http.auth = (self._username, self._password)
            self.auth_method = "basic"
            return
        if resp.status_code in (401, 403):
            err = error_for_response("POST", url, resp)
            raise errors.AuthError(f"login refused for user {self._username!r}: {err.detail}", method="POST",
                                   url=url, status=resp.status_code, messages=err.messages)
        if resp.status_code >= 400:
            raise error_for_response("POST", url, resp)
        token = resp.headers.get("X-Auth-Token")
        if not token:
            raise errors.ProtocolError("session created without an X-Auth-Token header", method="POST",
                                       url=url, status=resp.status_code)
        location = resp.headers.get("Location")
        if not location:
            try:
                location = resp.json().get("@odata.id")
            except ValueError:
                location = None
        self._token = token
        self._http.headers["X-Auth-Token"] = token
        self.session_uri = location
        self.auth_method = "session"

    # --- transport -----------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return path if urlsplit(path).scheme else urljoin(self.endpoint + "/", path.lstrip("/"))

    def _request(self, method: str, path: str, *, json: Any = None, headers: Mapping[str, str] | None = None,
                 reauth: bool = True, authenticated: bool = True) -> requests.Response:
        if authenticated and self.auth_method is None:
            self._login()
        url = self._url(path)
        try:
            resp = self._http.request(method, url, json=json, headers=dict(headers or {}),
                                      timeout=self._timeout, verify=self._verify)
        except requests.RequestException as exc:
            raise _transport_error(method, url, exc) from exc
        if resp.status_code == 401 and authenticated and reauth and self.auth_method == "session":
            log.info("Redfish session on %s expired; logging in again", self.endpoint)
            self._token, self.session_uri, self.auth_method = None, None, None
            self._http.headers.pop("X-Auth-Token", None)
            self._login()
            return self._request(method, path, json=json, headers=headers, reauth=False)
        if resp.status_code >= 400:
            raise error_for_response(method, url, resp)
        return resp

    def _get(self, path: str, model: type[M], *, authenticated: bool = True) -> M:
        resp = self._request("GET", path, authenticated=authenticated)
        try:
            payload = resp.json()
        except ValueError as exc:
            raise errors.ProtocolError("response is not JSON", method="GET", url=resp.url,
                                       status=resp.status_code) from exc
        if isinstance(payload, dict) and "etag" in model.model_fields:
            payload = {**payload, "etag": resp.headers.get("ETag") or payload.get("@odata.etag")}
        try:
            return model.model_validate(payload)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise errors.ProtocolError(f"unexpected {model.__name__} payload: {where}: {first['msg']}",
                                       method="GET", url=resp.url, status=resp.status_code) from exc

    # --- generic resources ---------------------------------------------------------------

    def service_root(self) -> ServiceRoot:
        """``GET /redfish/v1`` (no authentication needed); cached per client."""
        if self._root is None:
            self._root = self._get("/redfish/v1", ServiceRoot, authenticated=False)
        return self._root

    def _systems_path(self) -> str:
        root = self.service_root()
        return (root.systems.odata_id if root.systems else "/redfish/v1/Systems").rstrip("/")

    def _managers_path(self) -> str:
        root = self.service_root()
        return (root.managers.odata_id if root.managers else "/redfish/v1/Managers").rstrip("/")

    def system_ids(self) -> list[str]:
        """Ids of the ComputerSystems (``Bluefield`` on a BlueField BMC, e.g. ``1`` on a host)."""
        return self._get(self._systems_path(), Collection).ids

    def system(self, system_id: str) -> ComputerSystem:
        """``GET /redfish/v1/Systems/{system_id}``, with its ETag.

        Raises:
            errors.NotFoundError: no such system on this BMC.
        """
        return self._get(f"{self._systems_path()}/{system_id}", ComputerSystem)

    def reset_types(self, system_id: str) -> list[str] | None:
        """Allowed ``ResetType`` values (inline AllowableValues or the ActionInfo), None if unstated."""
        action = self.system(system_id).actions.reset
        if action is None:
            return None
        if action.allowable_values is not None:
            return action.allowable_values
        if action.action_info:
            info = self._get(action.action_info, ActionInfo)
            for param in info.parameters:
                if param.name == "ResetType":
                    return param.allowable_values
        return None

    def reset_system(self, system_id: str, reset_type: str | None = None) -> str:
        """``POST .../Actions/ComputerSystem.Reset``; returns the reset type sent.

        ``reset_type`` None picks the gentlest restart the BMC allows (:func:`pick_reset_type`).
        Never retried after the request was sent.

        Raises:
            errors.BadRequestError: ``reset_type`` not among the BMC's allowed values (not sent).
            errors.ProtocolError: the system has no reset action.
        """
        system = self.system(system_id)
        action = system.actions.reset
        if action is None:
            raise errors.ProtocolError("system has no #ComputerSystem.Reset action",
                                       url=self._url(system.odata_id))
        allowed = self.reset_types(system_id)
        chosen = reset_type or pick_reset_type(allowed)
        if allowed is not None and chosen not in allowed:
            raise errors.BadRequestError(f"reset type {chosen!r} not allowed; allowed: {allowed}",
                                         method="POST", url=self._url(action.target))
        self._request("POST", action.target, json={"ResetType": chosen})
        return chosen

    def set_boot_override(self, system_id: str, *, target: str, enabled: str = "Once",
                          mode: str | None = None) -> ComputerSystem:
        """PATCH ``Boot`` (``BootSourceOverrideTarget``/``Enabled``/``Mode``) with If-Match.

        Args:
            target: e.g. ``Pxe``, ``Hdd``, ``Cd``, ``UefiHttp``, ``None``.
            enabled: ``Once``, ``Continuous`` or ``Disabled``.
            mode: ``UEFI`` or ``Legacy``; None leaves it.

        Returns the system as read back.

        Raises:
            errors.BadRequestError: target not in ``BootSourceOverrideTarget@Redfish.AllowableValues``.
            errors.PreconditionFailedError: the system changed between read and write.
        """
        system = self.system(system_id)
        allowed = system.boot.allowed_targets
        if allowed is not None and target not in allowed:
            raise errors.BadRequestError(f"boot target {target!r} not allowed; allowed: {allowed}",
                                         method="PATCH", url=self._url(system.odata_id))
        boot: dict[str, str] = {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": enabled}
        if mode is not None:
            boot["BootSourceOverrideMode"] = mode
        headers = {"If-Match": system.etag} if system.etag else None
        self._request("PATCH", system.odata_id, json={"Boot": boot}, headers=headers)
        return self.system(system_id)

    def manager_ids(self) -> list[str]:
        """Ids of the managers (``Bluefield_BMC`` on a BlueField BMC)."""
        return self._get(self._managers_path(), Collection).ids

    def manager(self, manager_id: str | None = None) -> Manager:
        """``GET /redfish/v1/Managers/{id}`` (the first manager when ``manager_id`` is None).

        Raises:
            errors.NotFoundError: no such manager.
        """
        if manager_id is None:
            ids = self.manager_ids()
            if not ids:
                raise errors.NotFoundError("the BMC lists no managers", url=self._url(self._managers_path()))
            manager_id = ids[0]
        return self._get(f"{self._managers_path()}/{manager_id}", Manager)

    # --- BIOS ----------------------------------------------------------------------------

    def bios(self, system_id: str) -> Bios:
        """Effective BIOS attributes (the ``Bios`` link of the system; ``/Bios`` or ``/BIOS``).

        Raises:
            errors.NotFoundError: the system has no BIOS resource.
        """
        system = self.system(system_id)
        if system.bios is None:
            raise errors.NotFoundError("system has no Bios resource", url=self._url(system.odata_id))
        return self._get(system.bios.odata_id, Bios)

    def _settings_path(self, bios: Bios) -> str:
        if bios.settings_path is None:
            raise errors.ProtocolError("Bios has no @Redfish.Settings; cannot stage attributes",
                                       url=self._url(bios.odata_id))
        return bios.settings_path

    def bios_settings(self, system_id: str, *, bios: Bios | None = None) -> BiosSettings:
        """Pending BIOS attributes (apply at the next reset) and the ETag for ``If-Match``."""
        bios = bios or self.bios(system_id)
        return self._get(self._settings_path(bios), BiosSettings)

    def set_bios_attributes(self, system_id: str, attributes: Mapping[str, AttrValue], *,
                            etag: str | None = None, bios: Bios | None = None) -> BiosSettings:
        """Stage ``attributes`` in ``Bios/Settings`` (PATCH with ``If-Match``); they apply on reset.

        Args:
            etag: the Settings ETag the caller's decision was based on; None reads it now.
            bios: an already-read :class:`Bios` (saves a round trip).

        Returns the pending settings as read back.

        Raises:
            errors.PreconditionFailedError: the settings changed since ``etag`` (nothing written).
            errors.UnknownAttributeError: the BMC has no such attribute (nothing written).
            errors.BadRequestError: wrong value or type.
        """
        bios = bios or self.bios(system_id)
        path = self._settings_path(bios)
        if etag is None:
            etag = self._get(path, BiosSettings).etag
        headers = {"If-Match": etag} if etag else None
        self._request("PATCH", path, json={"Attributes": dict(attributes)}, headers=headers)
        return self._get(path, BiosSettings)

    # --- BlueField-3 OEM -----------------------------------------------------------------

    def nvidia_system(self, system_id: str = BLUEFIELD_SYSTEM_ID) -> NvidiaSystem:
        """``GET /redfish/v1/Systems/Bluefield/Oem/Nvidia``: ``Mode`` and ``HostRshim``.

        Raises:
            errors.NotFoundError: not a BlueField BMC.
        """
        system = self.system(system_id)
        path = system.oem.nvidia.odata_id if system.oem.nvidia else f"{system.odata_id}/Oem/Nvidia"
        return self._get(path, NvidiaSystem)

    def set_dpu_mode(self, mode: str, *, system_id: str = BLUEFIELD_SYSTEM_ID) -> None:
        """``POST .../Oem/Nvidia/Actions/Mode.Set`` ``{"Mode": mode}`` (``DpuMode``/``NicMode``).

        The new mode takes effect after a DPU reset.

        Raises:
            errors.BadRequestError: mode not accepted.
        """
        oem = self.nvidia_system(system_id)
        target = oem.actions.mode_set.target if oem.actions.mode_set else f"{oem.odata_id}/Actions/Mode.Set"
        self._request("POST", target, json={"Mode": mode})

    def set_host_rshim(self, state: str, *, system_id: str = BLUEFIELD_SYSTEM_ID) -> None:
        """``POST .../Oem/Nvidia/Actions/HostRshim.Set`` ``{"HostRshim": state}``
        (``Enabled``/``Disabled``).

        Raises:
            errors.BadRequestError: state not accepted.
        """
        oem = self.nvidia_system(system_id)
        action = oem.actions.host_rshim_set
        target = action.target if action else f"{oem.odata_id}/Actions/HostRshim.Set"
        self._request("POST", target, json={"HostRshim": state})

    # --- BlueField-3 host privilege (three firmware generations, see privilege) ------------

    def privilege_interface(self, *, firmware: str | None = None) -> privilege.Interface:
        """Which host-privilege interface this BMC offers: ``config`` (HostPrivilegeConfig,
        25.10+), ``external`` (ExternalHostPrivileges, 24.10 to 25.07) or ``bios``.

        The firmware version (``firmware``, else the manager's ``FirmwareVersion``) says which to
        probe first (:func:`privilege.probe_order`); a probe is a GET of the documented resource
        (for ``bios``: a BIOS listing a host-privilege attribute). The answer is cached per
        endpoint and firmware version.

        Raises:
            errors.NotFoundError: the BMC offers none of the three.
        """
        if firmware is None:
            firmware = self.manager().firmware_version
        key = (self.endpoint, firmware)
        with _INTERFACE_LOCK:
            cached = _INTERFACE_CACHE.get(key)
        if cached is not None:
            return cached
        for candidate in privilege.probe_order(firmware):
            if self._offers(candidate):
                with _INTERFACE_LOCK:
                    _INTERFACE_CACHE[key] = candidate
                return candidate
        raise errors.NotFoundError(
            f"BMC (firmware {firmware!r}) offers no host-privilege interface: no HostPrivilegeConfig, "
            "no ExternalHostPrivileges and no HostPrivilegeLevel BIOS attribute", url=self.endpoint)

    def _offers(self, interface: privilege.Interface) -> bool:
        try:
            if interface == "config":
                self.host_privilege_config()
            elif interface == "external":
                self.external_host_privileges()
            else:
                return privilege_attribute_key(self.bios(BLUEFIELD_SYSTEM_ID).attributes) is not None
        except errors.NotFoundError:
            return False
        return True

    def external_host_privileges(self) -> ExternalHostPrivileges:
        """``GET .../Oem/Nvidia/Connectx/ExternalHostPrivileges`` (the configured ``HostPriv*``).

        Raises:
            errors.NotFoundError: this firmware has no such resource.
        """
        return self._get(privilege.EXTERNAL_PATH, ExternalHostPrivileges)

    def set_external_host_privileges(self, values: Mapping[str, str]) -> ExternalHostPrivileges:
        """``POST .../Connectx/ExternalHostPrivileges`` with ``values`` (e.g. every ``HostPriv*``
        set to ``Disabled``), as the 24.10-LTS ... 25.07 pages show; applies on the next reset.

        Returns the resource as read back.

        Raises:
            errors.UnknownAttributeError: a property the BMC does not have (nothing written).
            errors.BadRequestError: a value other than ``Default``/``Enabled``/``Disabled``.
        """
        self._request("POST", privilege.EXTERNAL_PATH, json=dict(values))
        return self.external_host_privileges()

    def host_privilege_config(self) -> HostPrivilegeConfig:
        """``GET .../NvidiaNetworkAdapter/Oem/Nvidia/HostPrivilegeConfig``: the *effective*
        ``PrivilegeMode`` and ``PrivilegeSettings``.

        Raises:
            errors.NotFoundError: this firmware has no such resource (before 25.10).
        """
        return self._get(privilege.CONFIG_PATH, HostPrivilegeConfig)

    def host_privilege_config_settings(self, config: HostPrivilegeConfig | None = None,
                                       ) -> HostPrivilegeConfig:
        """The ``@Redfish.Settings`` object of HostPrivilegeConfig: what applies at the next
        reset, with the ETag for ``If-Match``.

        Raises:
            errors.ProtocolError: the resource names no settings object.
        """
        config = config or self.host_privilege_config()
        if config.settings_path is None:
            raise errors.ProtocolError("HostPrivilegeConfig has no @Redfish.Settings; cannot stage a mode",
                                       url=self._url(config.odata_id))
        return self._get(config.settings_path, HostPrivilegeConfig)

    def set_host_privilege_mode(self, mode: str, *, etag: str | None = None,
                                config: HostPrivilegeConfig | None = None) -> HostPrivilegeConfig:
        """Stage the preset ``PrivilegeMode`` (``Privileged``/``Restricted``) in the settings
        object (PATCH with ``If-Match``); it applies at the next reset. Returns the settings read back.

        Raises:
            errors.PreconditionFailedError: the settings changed since ``etag`` (nothing written).
            errors.BadRequestError: the mode is not accepted.
        """
        config = config or self.host_privilege_config()
        if config.settings_path is None:
            raise errors.ProtocolError("HostPrivilegeConfig has no @Redfish.Settings; cannot stage a mode",
                                       url=self._url(config.odata_id))
        if etag is None:
            etag = self._get(config.settings_path, HostPrivilegeConfig).etag
        headers = {"If-Match": etag} if etag else None
        self._request("PATCH", config.settings_path, json={"PrivilegeMode": mode}, headers=headers)
        return self._get(config.settings_path, HostPrivilegeConfig)
