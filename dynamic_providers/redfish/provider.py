"""Pulumi dynamic providers for Redfish BMCs: BlueField-3 DPU posture and host BIOS attributes.

Resources:

- :class:`DpuPosture`: DPU mode (``Oem/Nvidia`` ``Mode.Set``), host privilege level and host
  rshim (``HostRshim.Set``) of one BlueField-3, through its BMC. The privilege goes through
  whichever interface the BMC's firmware generation offers (probed once per BMC, see
  :mod:`dynamic_providers.redfish.privilege`): ``HostPrivilegeConfig`` ``PrivilegeMode``
  (25.10+), ``ExternalHostPrivileges`` (24.10 to 25.07: every ``HostPriv*`` ``Disabled`` is
  Restricted) or the BIOS attribute ``HostPrivilegeLevel`` / ``Host Privilege Level``.
- :class:`BiosAttributes`: any BIOS attributes of a host's ComputerSystem (virtualisation,
  IOMMU, SR-IOV ...), staged in ``Bios/Settings``.

Both follow the Redfish settings pattern: values are staged as *pending* and take effect at
the next reset. A reset happens only when ``apply_reset=True``; outputs say whether one is
still pending (``reset_pending``: anything pending on the BMC; ``awaiting_reset``: which of
*our* settings are staged but not effective). With ``apply_reset=True`` the provider resets
only when one of its own settings awaits a reset, then waits (up to
``reset_timeout_seconds``) until the values are effective.

Outputs that share an input's name (``mode``, ``host_rshim``, ``attributes``) carry what
the BMC reports as *effective*, so ``pulumi refresh`` shows drift as a changed value. A
refresh also rewrites the stored inputs to the values the BMC will run with after its next
reset, so the following ``pulumi preview`` shows the correction as ``NicMode => DpuMode``.

Deleting a resource stops managing the settings and changes nothing on the BMC (loosening
a DPU's zero-trust posture must be a deliberate, reviewed change, not a side effect).

Credentials: ``username`` and ``password`` are wrapped as secrets, listed in
``additional_secret_outputs``, and read from the resource's own properties in each call;
the pickled provider objects hold no state (no client, no config). Errors: every failure is
raised (``pulumi up`` fails, nothing is recorded as created or updated), with the
:mod:`dynamic_providers.redfish.errors` message that names the request, status and the
BMC's ``@Message.ExtendedInfo``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    DiffResult,
    ReadResult,
)

from dynamic_providers import kit, oneline, preflight
from dynamic_providers.redfish import errors, inputs, posture, privilege
from dynamic_providers.redfish.client import BLUEFIELD_SYSTEM_ID, RedfishClient
from dynamic_providers.redfish.models import AttrValue

#: Inputs that identify the device: a change replaces the resource.
_DPU_REPLACE_KEYS = ("bmc_endpoint",)
_BIOS_REPLACE_KEYS = ("bmc_endpoint", "system_id")
#: Inputs that do not touch the device but must be stored (an update re-syncs and stores them).
_CONNECTION_KEYS = ("username", "password", "verify_tls", "ca_bundle", "apply_reset", "reset_timeout_seconds")
# Inside the engine's provider process, report our typed errors as one line (see oneline).
oneline.install()

#: Inputs kept secret in state (``kit.DynamicResource``).
SECRET_KEYS = ("username", "password")
DEFAULT_RESET_TIMEOUT_SECONDS = inputs.DEFAULT_RESET_TIMEOUT_SECONDS
_POLL_SECONDS = 2.0


def _diff_connection_and_identity(
    olds: dict[str, Any], news: dict[str, Any], replace_keys: tuple[str, ...]
) -> DiffResult | None:
    """The part of both providers' diff that does not depend on the resource: a change (or an
    unknown) in ``replace_keys`` replaces, any unknown input or connection change updates.
    Returns None when the resource-specific comparison must decide."""
    replaces = [k for k in replace_keys if kit.is_unknown(news.get(k)) or olds.get(k) != news.get(k)]
    if replaces:
        return DiffResult(changes=True, replaces=replaces, delete_before_replace=True)
    if any(kit.is_unknown(v) for k, v in news.items() if k != "__provider"):
        return DiffResult(changes=True)
    if any(olds.get(k) != news.get(k) for k in _CONNECTION_KEYS):
        return DiffResult(changes=True)
    return None


#: One line for a preview probe's failure: what was refused and what to do.
_explain_refusal = kit.explainer(
    (errors.AuthError, lambda exc: kit.refused_credentials(exc.detail, "BMC account")),
    (errors.TlsError, lambda exc: f"TLS verification failed ({exc.detail}): check ca_bundle / verify_tls"),
    (errors.UnreachableError, lambda exc: kit.unreachable(
        "no answer", exc.detail, "bmc_endpoint and that the BMC is reachable")),
    (errors.RedfishError, lambda exc: f"probe failed: {exc}"),
)


#: The inputs the preview probe uses: an unknown one skips the probe.
_PROBE_KEYS = frozenset({"bmc_endpoint", "username", "password", "verify_tls", "ca_bundle"})


def _check(news: Mapping[str, Any],
           model: type[inputs.BmcConnection]) -> tuple[inputs.BmcConnection | None, list[CheckFailure]]:
    """Validate the known inputs with ``model`` (:mod:`dynamic_providers.redfish.inputs`), then
    probe the BMC read-only (log in, list the systems), once per endpoint and account per run.

    The probe is skipped when an input failed, or one it uses is unknown at preview.
    Returns the model (None when an input failed) and the failures."""
    checked = kit.check_known(model, news)
    spec = checked.spec
    if spec is None or checked.unknown & _PROBE_KEYS or not preflight.enabled():
        return spec, checked.failures
    if spec.ca_bundle and not os.path.isfile(spec.ca_bundle):  # requests would raise a bare OSError for it
        missing = f"no such file: {spec.ca_bundle} (the PEM file of the BMC's CA)"
        return spec, [CheckFailure("ca_bundle", missing)]

    def probe() -> None:
        with RedfishClient(spec.bmc_endpoint, username=spec.username, password=spec.password,
                           verify_tls=spec.verify_tls, ca_bundle=spec.ca_bundle,
                           retries=1, timeout_seconds=10.0) as bmc:
            bmc.system_ids()

    reason = preflight.endpoint_failure(
        "BMC", spec.bmc_endpoint, identity=f"{spec.username}|{spec.ca_bundle}",
        secret=spec.password, probe=probe, explain=_explain_refusal)
    return spec, [CheckFailure("bmc_endpoint", reason)] if reason else []


def _client(props: Mapping[str, Any]) -> RedfishClient:
    """A client built from the resource's own (already resolved) properties."""
    missing = [k for k in ("bmc_endpoint", "username", "password") if not props.get(k)]
    if missing:
        raise errors.RedfishError(f"resource properties lack {missing} (import is not supported)")
    return RedfishClient(props["bmc_endpoint"], username=props["username"], password=props["password"],
                         verify_tls=bool(props.get("verify_tls", True)), ca_bundle=props.get("ca_bundle"))


def _reset_timeout(props: Mapping[str, Any]) -> float:
    return float(props.get("reset_timeout_seconds") or DEFAULT_RESET_TIMEOUT_SECONDS)


def _wait_until(deadline_seconds: float, probe: Callable[[], bool], what: str) -> None:
    """Poll ``probe`` until it is true; transient BMC errors while polling are tolerated.

    Raises:
        errors.NotConvergedError: still false at the deadline.
    """
    deadline = time.monotonic() + deadline_seconds
    last: Exception | None = None
    while True:
        try:
            if probe():
                return
        except (errors.UnreachableError, errors.ServerError) as exc:
            last = exc
        if time.monotonic() >= deadline:
            tail = f" (last error: {last})" if last else ""
            raise errors.NotConvergedError(f"{what} not observed within {deadline_seconds:g} s{tail}")
        time.sleep(min(_POLL_SECONDS, max(deadline_seconds / 20, 0.05)))


# --- DPU posture ----------------------------------------------------------------------------


def _observe_dpu(bmc: RedfishClient) -> posture.DpuObserved:
    """Read mode, rshim, BIOS and the host privilege through the interface this BMC offers."""
    bios = bmc.bios(BLUEFIELD_SYSTEM_ID)
    settings = bmc.bios_settings(BLUEFIELD_SYSTEM_ID, bios=bios)
    oem = bmc.nvidia_system(BLUEFIELD_SYSTEM_ID)
    firmware = bmc.manager().firmware_version
    interface = bmc.privilege_interface(firmware=firmware)
    extra: dict[str, Any] = {}
    if interface == "external":
        level = privilege.level_from_external(bmc.external_host_privileges().privileges)
        extra = {"privilege_now": level, "privilege_next": level}
    elif interface == "config":
        config = bmc.host_privilege_config()
        staged = bmc.host_privilege_config_settings(config)
        if staged.mode != config.mode:
            pending: dict[str, Any] = {"PrivilegeMode": staged.mode}
        else:
            pending = {k: v for k, v in staged.settings.items() if config.settings.get(k) != v}
        extra = {"privilege_now": config.mode, "privilege_next": staged.mode,
                 "privilege_pending": pending, "privilege_etag": staged.etag}
    return posture.DpuObserved(mode=oem.mode, host_rshim=oem.host_rshim, attributes=dict(bios.attributes),
                               pending=dict(settings.attributes), settings_etag=settings.etag,
                               firmware_version=firmware, interface=interface, **extra)


def _dpu_desired(props: Mapping[str, Any]) -> posture.DpuDesired:
    return posture.DpuDesired(mode=props.get("mode", "DpuMode"),
                              host_privilege=props.get("host_privilege", "Restricted"),
                              host_rshim=props.get("host_rshim", "Disabled"))


def _dpu_plan(desired: posture.DpuDesired, observed: posture.DpuObserved, url: str) -> posture.DpuPlan:
    try:
        return posture.plan_dpu_posture(desired, observed)
    except posture.NoPrivilegeAttributeError as exc:
        raise errors.UnknownAttributeError(str(exc), attributes=list(posture.PRIVILEGE_KEYS),
                                           url=url) from exc


def _dpu_outputs(props: Mapping[str, Any], desired: posture.DpuDesired,
                 observed: posture.DpuObserved) -> dict[str, Any]:
    inputs = {k: props.get(k) for k in ("bmc_endpoint", *_CONNECTION_KEYS)}
    try:
        drift = posture.plan_dpu_posture(desired, observed).settings
    except posture.NoPrivilegeAttributeError:
        drift = ["host_privilege"]
    return {
        **inputs,
        "desired": {"mode": desired.mode, "host_privilege": desired.host_privilege,
                    "host_rshim": desired.host_rshim},
        "mode": observed.mode,
        "host_privilege_level": observed.host_privilege_level,
        "host_rshim": observed.host_rshim,
        "privilege_attribute": observed.privilege_key,
        "privilege_interface": observed.interface,
        "next_host_privilege": observed.next_host_privilege,
        "reset_pending": bool(observed.pending or observed.privilege_pending),
        "pending_attributes": {**observed.pending, **observed.privilege_pending},
        "awaiting_reset": posture.dpu_awaiting_reset(desired, observed),
        "drift": drift,
        "firmware_version": observed.firmware_version,
    }


def _converge_dpu(props: Mapping[str, Any]) -> dict[str, Any]:
    desired = _dpu_desired(props)
    endpoint = str(props["bmc_endpoint"])
    context = f"DpuPosture on {endpoint}"
    try:
        with _client(props) as bmc:
            observed = _observe_dpu(bmc)
            plan = _dpu_plan(desired, observed, endpoint)
            if plan.bios_attributes:
                bmc.set_bios_attributes(BLUEFIELD_SYSTEM_ID, plan.bios_attributes,
                                        etag=observed.settings_etag)
            if plan.privilege is not None and observed.interface == "external":
                bmc.set_external_host_privileges(privilege.external_values(plan.privilege))
            elif plan.privilege is not None:
                bmc.set_host_privilege_mode(plan.privilege, etag=observed.privilege_etag)
            if plan.mode is not None:
                bmc.set_dpu_mode(plan.mode)
            if plan.host_rshim is not None:
                bmc.set_host_rshim(plan.host_rshim)
            observed = _observe_dpu(bmc)
            # ExternalHostPrivileges shows configured values only: a write there is owed a reset
            # that no read can confirm, so it is reset for once, right after the write.
            unobservable = plan.privilege is not None and observed.interface == "external"
            if props.get("apply_reset") and (posture.dpu_awaiting_reset(desired, observed) or unobservable):
                bmc.reset_system(BLUEFIELD_SYSTEM_ID)

                def applied() -> bool:
                    nonlocal observed
                    observed = _observe_dpu(bmc)
                    return not posture.dpu_awaiting_reset(desired, observed)

                _wait_until(_reset_timeout(props), applied, "DPU reset applying the pending posture")
            remaining = _dpu_plan(desired, observed, endpoint)
            if not remaining.empty:
                raise errors.NotConvergedError(
                    f"BMC accepted the writes but still reports {remaining.settings} different from "
                    f"{desired} (mode={observed.mode}, next mode={observed.next_mode}, "
                    f"privilege={observed.next_host_privilege}, rshim={observed.host_rshim})", url=endpoint)
    except errors.RedfishError as exc:
        raise exc.with_context(context) from exc.__cause__
    return _dpu_outputs(props, desired, observed)


class DpuPostureProvider(kit.ConvergeProvider):
    """CRUD for :class:`DpuPosture`. Stateless: everything comes from the properties."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """Validate the inputs (:class:`~dynamic_providers.redfish.inputs.DpuPostureSpec`), then
        probe the BMC read-only (``preflight``); unknowns pass."""
        _spec, failures = _check(news, inputs.DpuPostureSpec)
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Pure: compare desired inputs with the last observation (no BMC call)."""
        early = _diff_connection_and_identity(olds, news, _DPU_REPLACE_KEYS)
        if early is not None:
            return early
        if olds.get("privilege_attribute") is None or olds.get("mode") is None:
            return DiffResult(changes=True)
        interface = olds.get("privilege_interface") or "bios"
        if interface == "bios":
            observed = posture.DpuObserved(
                mode=olds.get("mode"), host_rshim=olds.get("host_rshim"),
                attributes={olds["privilege_attribute"]: olds.get("host_privilege_level"),
                            posture.MODE_ATTRIBUTE: olds.get("mode")},
                pending=olds.get("pending_attributes") or {})
        else:
            pending = olds.get("pending_attributes") or {}
            observed = posture.DpuObserved(
                mode=olds.get("mode"), host_rshim=olds.get("host_rshim"),
                attributes={posture.MODE_ATTRIBUTE: olds.get("mode")},
                pending={k: v for k, v in pending.items() if k == posture.MODE_ATTRIBUTE},
                interface=interface, privilege_now=olds.get("host_privilege_level"),
                privilege_next=olds.get("next_host_privilege"))
        desired = _dpu_desired(news)
        if not posture.plan_dpu_posture(desired, observed).empty:
            return DiffResult(changes=True)
        reset_wanted = bool(news.get("apply_reset")) and bool(posture.dpu_awaiting_reset(desired, observed))
        return DiffResult(changes=reset_wanted)

    def converge(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Stage (and, with apply_reset, apply) the posture; create and update call it."""
        return _converge_dpu(props)

    def new_id(self, props: Mapping[str, Any], _outs: Mapping[str, Any]) -> str:
        """``<endpoint>/redfish/v1/Systems/Bluefield``."""
        return f"{props['bmc_endpoint'].rstrip('/')}/redfish/v1/Systems/{BLUEFIELD_SYSTEM_ID}"

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: report the BMC's current posture; inputs become its next-boot values."""
        try:
            with _client(props) as bmc:
                observed = _observe_dpu(bmc)
        except errors.RedfishError as exc:
            where = props.get("bmc_endpoint")
            raise exc.with_context(f"DpuPosture refresh on {where}") from exc.__cause__
        outs = _dpu_outputs(props, _dpu_desired(props.get("desired") or {}), observed)
        inputs = {k: props.get(k) for k in ("bmc_endpoint", *_CONNECTION_KEYS)}
        inputs.update(mode=observed.next_mode, host_privilege=observed.next_host_privilege,
                      host_rshim=observed.host_rshim)
        return ReadResult(id_, outs, inputs)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Forget the resource; the DPU keeps its posture (see module docstring)."""


class _BmcResource(kit.DynamicResource):
    """Program side shared by both Redfish resources: the secret BMC account and the outputs
    both have (see the module docstring for the settings pattern).

    Outputs:
        reset_pending: anything pending on the BMC.
        pending_attributes: ``{name: value}`` staged for the next reset.
        awaiting_reset: names of this resource's settings staged but not yet effective.
        drift: names of this resource's settings whose next-boot value is not the desired one.
        firmware_version: the BMC's ``FirmwareVersion``.
    """

    secret_inputs = SECRET_KEYS

    reset_pending: pulumi.Output[bool]
    pending_attributes: pulumi.Output[dict[str, AttrValue]]
    awaiting_reset: pulumi.Output[list[str]]
    drift: pulumi.Output[list[str]]
    firmware_version: pulumi.Output[str]


class DpuPosture(_BmcResource, module="redfish", name="DpuPosture"):
    """Zero-trust posture of one BlueField-3 DPU, set and checked through its BMC's Redfish.

    Args:
        resource_name: Pulumi resource name.
        bmc_endpoint: ``https://<bmc>[:port]`` of the DPU's BMC (a change replaces the resource).
        username, password: BMC account; stored only as Pulumi secrets.
        verify_tls: verify the BMC certificate (default True).
        ca_bundle: PEM CA bundle to verify the BMC with (e.g. the lab's ``tls/ca.pem``).
        mode: ``DpuMode`` (default) or ``NicMode``.
        host_privilege: ``Restricted`` (default, zero trust) or ``Privileged``.
        host_rshim: ``Disabled`` (default) or ``Enabled``.
        apply_reset: reset the DPU when one of these settings awaits a reset (default False).
        reset_timeout_seconds: how long to wait for a reset to apply them (default 600 s).
        opts: resource options (``additional_secret_outputs`` for the credentials is added).

    Outputs (BMC-reported): ``mode``, ``host_privilege_level``, ``host_rshim``,
    ``reset_pending`` (bool: anything pending on the BMC), ``pending_attributes`` (dict),
    ``awaiting_reset`` (list of our settings staged but not effective), ``drift`` (list of
    settings whose next-boot value is not the desired one; empty after a successful up),
    ``privilege_attribute`` (key spelling the firmware uses), ``privilege_interface`` (``bios``,
    ``external`` or ``config``: which of the firmware generations' host-privilege interfaces
    the BMC offers, see :mod:`dynamic_providers.redfish.privilege`), ``next_host_privilege``
    (the level after the next reset), ``firmware_version``,
    ``desired`` (the posture last applied: ``{mode, host_privilege, host_rshim}``).
    """

    mode: pulumi.Output[str]
    host_privilege_level: pulumi.Output[str]
    host_rshim: pulumi.Output[str]
    privilege_attribute: pulumi.Output[str]
    privilege_interface: pulumi.Output[str]
    next_host_privilege: pulumi.Output[str]
    desired: pulumi.Output[dict[str, str]]

    def __init__(self, resource_name: str, *, bmc_endpoint: pulumi.Input[str], username: pulumi.Input[str],
                 password: pulumi.Input[str], verify_tls: pulumi.Input[bool] = True,
                 ca_bundle: pulumi.Input[str] | None = None, mode: pulumi.Input[str] = "DpuMode",
                 host_privilege: pulumi.Input[str] = "Restricted", host_rshim: pulumi.Input[str] = "Disabled",
                 apply_reset: pulumi.Input[bool] = False,
                 reset_timeout_seconds: pulumi.Input[float] = DEFAULT_RESET_TIMEOUT_SECONDS,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(DpuPostureProvider(), resource_name, dict(
            bmc_endpoint=bmc_endpoint, username=username, password=password, verify_tls=verify_tls,
            ca_bundle=ca_bundle, mode=mode, host_privilege=host_privilege, host_rshim=host_rshim,
            apply_reset=apply_reset, reset_timeout_seconds=reset_timeout_seconds), opts)


# --- BIOS attributes ------------------------------------------------------------------------


def _normalise(attributes: Mapping[str, AttrValue] | None) -> dict[str, AttrValue]:
    return {str(k): posture.normalise_value(v) for k, v in (attributes or {}).items()}


def _bios_outputs(props: Mapping[str, Any], desired: Mapping[str, AttrValue],
                  effective: Mapping[str, AttrValue], pending: Mapping[str, AttrValue],
                  bios_version: str | None, firmware: str | None) -> dict[str, Any]:
    return {
        **{k: props.get(k) for k in ("bmc_endpoint", "system_id", *_CONNECTION_KEYS)},
        "attributes": {k: effective.get(k) for k in desired},
        "desired_attributes": dict(desired),
        "reset_pending": bool(pending),
        "pending_attributes": dict(pending),
        "awaiting_reset": posture.awaiting_reset(desired, effective, pending),
        "drift": sorted(posture.plan_bios(desired, effective, pending)),
        "bios_version": bios_version,
        "firmware_version": firmware,
    }


def _converge_bios(props: Mapping[str, Any]) -> dict[str, Any]:
    desired = _normalise(props.get("attributes"))
    system_id = str(props.get("system_id") or "1")
    context = f"BiosAttributes (Systems/{system_id}) on {props.get('bmc_endpoint')}"
    try:
        with _client(props) as bmc:

            def observe() -> tuple[dict[str, AttrValue], dict[str, AttrValue], str | None]:
                bios = bmc.bios(system_id)
                settings = bmc.bios_settings(system_id, bios=bios)
                return dict(bios.attributes), dict(settings.attributes), settings.etag

            effective, pending, etag = observe()
            writes = posture.plan_bios(desired, effective, pending)
            if writes:
                bmc.set_bios_attributes(system_id, writes, etag=etag)
                effective, pending, etag = observe()
            if props.get("apply_reset") and posture.awaiting_reset(desired, effective, pending):
                bmc.reset_system(system_id)

                def applied() -> bool:
                    nonlocal effective, pending, etag
                    effective, pending, etag = observe()
                    return not posture.awaiting_reset(desired, effective, pending)

                _wait_until(_reset_timeout(props), applied, "reset applying the pending BIOS attributes")
            left = posture.plan_bios(desired, effective, pending)
            if left:
                raise errors.NotConvergedError(
                    f"BMC accepted the writes but reports {sorted(left)} still different from {desired}",
                    url=str(props["bmc_endpoint"]))
            system = bmc.system(system_id)
            firmware = bmc.manager().firmware_version
    except errors.RedfishError as exc:
        raise exc.with_context(context) from exc.__cause__
    return _bios_outputs(props, desired, effective, pending, system.bios_version, firmware)


class BiosAttributesProvider(kit.ConvergeProvider):
    """CRUD for :class:`BiosAttributes`. Stateless: everything comes from the properties."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """Validate the inputs (:class:`~dynamic_providers.redfish.inputs.BiosAttributesSpec`), then
        probe the BMC read-only (``preflight``); integral numbers in ``attributes`` become ints."""
        spec, failures = _check(news, inputs.BiosAttributesSpec)
        if isinstance(spec, inputs.BiosAttributesSpec) and not kit.is_unknown(news.get("attributes")):
            news = {**news, "attributes": spec.attributes}
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Pure: desired attributes against the last observation (no BMC call)."""
        early = _diff_connection_and_identity(olds, news, _BIOS_REPLACE_KEYS)
        if early is not None:
            return early
        desired = _normalise(news.get("attributes"))
        effective = olds.get("attributes") or {}
        pending = olds.get("pending_attributes") or {}
        if set(desired) != set(effective) or posture.plan_bios(desired, effective, pending):
            return DiffResult(changes=True)
        waiting = posture.awaiting_reset(desired, effective, pending)
        reset_wanted = bool(news.get("apply_reset")) and bool(waiting)
        return DiffResult(changes=reset_wanted)

    def converge(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Stage (and, with apply_reset, apply) the attributes; create and update call it."""
        return _converge_bios(props)

    def new_id(self, props: Mapping[str, Any], _outs: Mapping[str, Any]) -> str:
        """``<endpoint>/redfish/v1/Systems/<system_id>/Bios``."""
        sid = props.get("system_id") or "1"
        return f"{props['bmc_endpoint'].rstrip('/')}/redfish/v1/Systems/{sid}/Bios"

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: effective values of the managed attributes; inputs become next-boot values."""
        system_id = str(props.get("system_id") or "1")
        managed = list((props.get("attributes") or {}).keys())
        try:
            with _client(props) as bmc:
                bios = bmc.bios(system_id)
                settings = bmc.bios_settings(system_id, bios=bios)
                system = bmc.system(system_id)
                firmware = bmc.manager().firmware_version
        except errors.RedfishError as exc:
            raise exc.with_context(f"BiosAttributes (Systems/{system_id}) refresh on "
                                   f"{props.get('bmc_endpoint')}") from exc.__cause__
        effective, pending = dict(bios.attributes), dict(settings.attributes)
        next_boot = {k: posture.next_boot(effective, pending, k) for k in managed}
        desired = _normalise(props.get("desired_attributes")) or next_boot
        outs = _bios_outputs(props, desired, effective, pending, system.bios_version, firmware)
        inputs = {k: props.get(k) for k in ("bmc_endpoint", "system_id", *_CONNECTION_KEYS)}
        inputs["attributes"] = next_boot
        return ReadResult(id_, outs, inputs)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Forget the resource; the BIOS keeps its values."""


class BiosAttributes(_BmcResource, module="redfish", name="BiosAttributes"):
    """BIOS attributes of one ComputerSystem behind a host BMC, staged via ``Bios/Settings``.

    Args:
        resource_name: Pulumi resource name.
        bmc_endpoint: ``https://<bmc>[:port]`` (a change replaces the resource).
        username, password: BMC account; stored only as Pulumi secrets.
        attributes: desired values, e.g. ``{"ProcVirtualization": "Enabled", "IOMMU": "Enabled",
            "SriovGlobalEnable": "Enabled"}`` (names are the BMC's attribute registry's).
        system_id: ComputerSystem id (default ``"1"``; a change replaces the resource).
        verify_tls, ca_bundle: TLS verification, as for :class:`DpuPosture`.
        apply_reset: reset the system when one of these attributes awaits a reset (default False).
        reset_timeout_seconds: how long to wait for a reset to apply them (default 600 s).
        opts: resource options (``additional_secret_outputs`` for the credentials is added).

    Outputs: ``attributes`` (effective values of the managed attributes), ``desired_attributes``
    (as last applied), ``reset_pending``, ``pending_attributes``, ``awaiting_reset``, ``drift``
    (attributes whose next-boot value is not the desired one), ``bios_version``,
    ``firmware_version``.
    """

    attributes: pulumi.Output[dict[str, AttrValue]]
    desired_attributes: pulumi.Output[dict[str, AttrValue]]
    bios_version: pulumi.Output[str]

    def __init__(self, resource_name: str, *, bmc_endpoint: pulumi.Input[str], username: pulumi.Input[str],
                 password: pulumi.Input[str], attributes: pulumi.Input[Mapping[str, Any]],
                 system_id: pulumi.Input[str] = "1", verify_tls: pulumi.Input[bool] = True,
                 ca_bundle: pulumi.Input[str] | None = None, apply_reset: pulumi.Input[bool] = False,
                 reset_timeout_seconds: pulumi.Input[float] = DEFAULT_RESET_TIMEOUT_SECONDS,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(BiosAttributesProvider(), resource_name, dict(
            bmc_endpoint=bmc_endpoint, username=username, password=password, attributes=attributes,
            system_id=system_id, verify_tls=verify_tls, ca_bundle=ca_bundle, apply_reset=apply_reset,
            reset_timeout_seconds=reset_timeout_seconds), opts)
