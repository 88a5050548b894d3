"""``/redfish/v1/Systems`` of the simulated BMC (hardware stand-in).

Tree (``<sid>`` is ``Bluefield`` on a BlueField-3 BMC, ``1`` on a host BMC):

- ``Systems``, ``Systems/<sid>`` (GET; PATCH ``Boot`` with optional ``If-Match``)
- ``Systems/<sid>/Actions/ComputerSystem.Reset`` ``{"ResetType": ...}``; BlueField lists its
  reset types in ``Systems/Bluefield/ResetActionInfo``, the host inline
  (``ResetType@Redfish.AllowableValues``), both shapes exist in the field
- ``Systems/<sid>/Bios`` (GET; effective ``Attributes``, ``@Redfish.Settings`` link)
- ``Systems/<sid>/Bios/Settings`` (GET pending; PATCH ``{"Attributes": {...}}`` with
  ``If-Match``: 412 PreconditionFailed on a stale ETag, 400 PropertyUnknown /
  PropertyValueNotInList / PropertyValueTypeError, nothing applied on error)
- BlueField only: ``Systems/Bluefield/Oem/Nvidia`` (``Mode``, ``HostRshim``) with actions
  ``Mode.Set`` ``{"Mode": "DpuMode"|"NicMode"}`` and ``HostRshim.Set``
  ``{"HostRshim": "Enabled"|"Disabled"}`` (NVIDIA BlueField BMC docs, "BlueField Modes of
  Operation Configuration" and "NIC Subsystem Management").
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, abort, request

from lab.redfish_sim import fixtures
from lab.redfish_sim.context import bmc, json_response, request_json
from lab.redfish_sim.state import BmcState, SimHttpError

bp = Blueprint("systems", __name__)
SYSTEMS = "/redfish/v1/Systems"
RESET_ACTION = "ComputerSystem.Reset"


def _state_for(system_id: str) -> BmcState:
    state = bmc()
    if system_id != state.spec.system_id:
        abort(404)
    return state


def _system_template(state: BmcState) -> dict[str, Any]:
    name = "system_bluefield.json" if state.spec.kind == "bluefield" else "system_host.json"
    return fixtures.template(name)


def reset_types(state: BmcState) -> list[str]:
    """Allowed ``ResetType`` values of this BMC's system."""
    if state.spec.kind == "bluefield":
        return fixtures.template("reset_action_info_bluefield.json")["Parameters"][0]["AllowableValues"]
    action = _system_template(state)["Actions"]["#ComputerSystem.Reset"]
    return action["ResetType@Redfish.AllowableValues"]


@bp.get(SYSTEMS)
def systems() -> Response:
    """The ComputerSystem collection (one member)."""
    state = bmc()
    body = fixtures.template("systems_collection.json")
    body["Members"] = [{"@odata.id": f"{SYSTEMS}/{state.spec.system_id}"}]
    return json_response(body)


@bp.route(f"{SYSTEMS}/<system_id>", methods=["GET", "PATCH"])
def system(system_id: str) -> Response:
    """GET the system; PATCH ``{"Boot": {BootSourceOverrideTarget, ...Enabled, ...Mode}}``."""
    state = _state_for(system_id)
    if request.method == "PATCH":
        _patch_boot(state, request_json())
    body = _system_template(state)
    with state.lock:
        body["PowerState"] = state.data["power_state"]
        body["Boot"].update(state.data["boot"])
        etag = state.system_etag()
    body["@odata.etag"] = etag
    return json_response(body, etag=etag)


def _patch_boot(state: BmcState, body: dict[str, Any]) -> None:
    template_boot = _system_template(state)["Boot"]
    allowed = {
        "BootSourceOverrideTarget": template_boot["BootSourceOverrideTarget@Redfish.AllowableValues"],
        "BootSourceOverrideEnabled": ["Disabled", "Once", "Continuous"],
        "BootSourceOverrideMode": ["UEFI", "Legacy"],
    }
    problems = [fixtures.message("PropertyUnknown", k, related=[f"#/{k}"]) for k in body if k != "Boot"]
    boot = body.get("Boot")
    if not isinstance(boot, dict):
        problems.append(fixtures.message("PropertyMissing", "Boot"))
        boot = {}
    for key, value in boot.items():
        pointer = f"#/Boot/{key}"
        if key not in allowed:
            problems.append(fixtures.message("PropertyUnknown", key, related=[pointer]))
        elif value not in allowed[key]:
            problems.append(fixtures.message("PropertyValueNotInList", str(value), key, related=[pointer]))
    if problems:
        raise SimHttpError(400, problems)
    state.set_boot(boot, request.headers.get("If-Match"))


@bp.get(f"{SYSTEMS}/<system_id>/ResetActionInfo")
def reset_action_info(system_id: str) -> Response:
    """BlueField's ActionInfo for ComputerSystem.Reset."""
    state = _state_for(system_id)
    if state.spec.kind != "bluefield":
        abort(404)
    return json_response(fixtures.template("reset_action_info_bluefield.json"))


@bp.post(f"{SYSTEMS}/<system_id>/Actions/ComputerSystem.Reset")
def reset(system_id: str) -> Response:
    """Reset; restarts apply pending BIOS settings (and a pending DPU mode)."""
    state = _state_for(system_id)
    body = request_json()
    reset_type = body.get("ResetType")
    if reset_type is None:
        raise SimHttpError(400, [fixtures.message("ActionParameterMissing", RESET_ACTION, "ResetType")])
    if reset_type not in reset_types(state):
        raise SimHttpError(400, [fixtures.message("ActionParameterValueNotInList", str(reset_type),
                                                  "ResetType", RESET_ACTION)])
    state.reset(reset_type)
    return json_response(fixtures.success_body())


@bp.get(f"{SYSTEMS}/<system_id>/Bios")
def bios(system_id: str) -> Response:
    """Effective BIOS attributes."""
    state = _state_for(system_id)
    name = "bios_host.json" if state.spec.kind == "host" else "bios_bluefield.json"
    body = fixtures.template(name)
    with state.lock:
        body["Attributes"] = dict(state.attributes)
        etag = state.bios_etag()
    body["@odata.etag"] = etag
    return json_response(body, etag=etag)


@bp.route(f"{SYSTEMS}/<system_id>/Bios/Settings", methods=["GET", "PATCH"])
def bios_settings(system_id: str) -> Response:
    """GET pending attributes (with ETag); PATCH ``{"Attributes": {...}}``."""
    state = _state_for(system_id)
    if request.method == "PATCH":
        body = request_json()
        extra = [k for k in body if k not in ("Attributes", "@Redfish.SettingsApplyTime")]
        problems = [fixtures.message("PropertyUnknown", k, related=[f"#/{k}"]) for k in extra]
        attrs = body.get("Attributes")
        if not isinstance(attrs, dict):
            problems.append(fixtures.message("PropertyMissing", "Attributes"))
        if problems:
            raise SimHttpError(400, problems)
        state.patch_settings(attrs, request.headers.get("If-Match"))
        return json_response(fixtures.success_body(), etag=state.settings_etag())
    body = fixtures.template("bios_settings.json")
    body["@odata.id"] = f"{SYSTEMS}/{system_id}/Bios/Settings"
    with state.lock:
        body["Attributes"] = dict(state.pending)
        etag = state.settings_etag()
    body["@odata.etag"] = etag
    resp = json_response(body, etag=etag)
    state.apply_concurrent_write()
    return resp


def _oem_state(system_id: str) -> BmcState:
    state = _state_for(system_id)
    if state.spec.kind != "bluefield":
        abort(404)
    return state


@bp.get(f"{SYSTEMS}/<system_id>/Oem/Nvidia")
def oem_nvidia(system_id: str) -> Response:
    """``Mode`` (effective) and ``HostRshim``."""
    state = _oem_state(system_id)
    body = fixtures.template("oem_nvidia_system.json")
    with state.lock:
        body["Mode"] = state.mode
        body["HostRshim"] = state.data["host_rshim"]
    return json_response(body)


def _oem_action(state: BmcState, action: str, param: str) -> str:
    actions = fixtures.template("oem_nvidia_system.json")["Actions"]
    allowed = actions[f"#{action}"][f"{param}@Redfish.AllowableValues"]
    value = request_json().get(param)
    if value is None:
        raise SimHttpError(400, [fixtures.message("ActionParameterMissing", action, param)])
    if value not in allowed:
        raise SimHttpError(400, [fixtures.message("ActionParameterValueNotInList", str(value), param,
                                                  action)])
    return value


@bp.post(f"{SYSTEMS}/<system_id>/Oem/Nvidia/Actions/Mode.Set")
def mode_set(system_id: str) -> Response:
    """Record the DPU mode for the next reset."""
    state = _oem_state(system_id)
    state.set_mode(_oem_action(state, "Mode.Set", "Mode"))
    return json_response(fixtures.success_body())


@bp.post(f"{SYSTEMS}/<system_id>/Oem/Nvidia/Actions/HostRshim.Set")
def host_rshim_set(system_id: str) -> Response:
    """Enable or disable the host's rshim (immediate)."""
    state = _oem_state(system_id)
    state.set_host_rshim(_oem_action(state, "HostRshim.Set", "HostRshim"))
    return json_response(fixtures.success_body())
