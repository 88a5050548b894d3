"""Host-privilege resources of the simulated BlueField-3 BMC (hardware stand-in), by firmware.

NVIDIA BlueField BMC Software docs, "NIC Subsystem Management" (one page per release):

- 24.10-LTS ... 25.07: ``GET``/``POST /redfish/v1/Systems/Bluefield/Oem/Nvidia/Connectx/
  ExternalHostPrivileges`` ``{"HostPrivFwUpdate": "Disabled", ...}`` (values ``Default``,
  ``Enabled``, ``Disabled``); the stored values apply on the next reset.
- 25.10-LTS, 26.01: ``GET /redfish/v1/Chassis/Card1/NetworkAdapters/NvidiaNetworkAdapter/Oem/
  Nvidia/HostPrivilegeConfig`` (effective) and ``GET``/``PATCH .../HostPrivilegeConfig/Settings``
  (staged until reset) with ``PrivilegeMode`` (``Privileged``/``Restricted`` presets) and
  ``PrivilegeSettings``; ``If-Match`` on the PATCH (412 when stale).

On firmware of another generation these paths answer 404, as a BMC without them does.
``Chassis``, ``Chassis/Card1`` ("DPU Chassis" page), its ``NetworkAdapters`` collection and
``NvidiaNetworkAdapter`` are served on every BlueField BMC; the adapter links
``HostPrivilegeConfig`` only on firmware that has it. See ``state`` for the rules this
stand-in chose where the pages are silent.
"""

from __future__ import annotations

from flask import Blueprint, Response, abort, request

from lab.redfish_sim import fixtures
from lab.redfish_sim.context import bmc, json_response, request_json
from lab.redfish_sim.state import BmcState, privilege_mode_of

bp = Blueprint("privileges", __name__)
CHASSIS = "/redfish/v1/Chassis"
CARD = f"{CHASSIS}/Card1"
ADAPTERS = f"{CARD}/NetworkAdapters"
ADAPTER = f"{ADAPTERS}/NvidiaNetworkAdapter"
CONFIG = f"{ADAPTER}/Oem/Nvidia/HostPrivilegeConfig"
EXTERNAL = "/redfish/v1/Systems/Bluefield/Oem/Nvidia/Connectx/ExternalHostPrivileges"


def _bluefield(interface: str | None = None) -> BmcState:
    state = bmc()
    if state.spec.kind != "bluefield" or (interface and state.spec.privilege_interface != interface):
        abort(404)
    return state


@bp.get(CHASSIS)
def chassis_collection() -> Response:
    """The chassis collection (``Card1`` on a BlueField BMC, empty on a host BMC)."""
    members = [{"@odata.id": CARD}] if bmc().spec.kind == "bluefield" else []
    return json_response({"@odata.id": CHASSIS, "@odata.type": "#ChassisCollection.ChassisCollection",
                          "Members": members, "Members@odata.count": len(members),
                          "Name": "Chassis Collection"})


@bp.get(CARD)
def card() -> Response:
    """The DPU card."""
    _bluefield()
    return json_response({"@odata.id": CARD, "@odata.type": "#Chassis.v1_23_0.Chassis", "ChassisType": "Card",
                          "Id": "Card1", "Name": "Card1", "NetworkAdapters": {"@odata.id": ADAPTERS}})


@bp.get(ADAPTERS)
def adapters() -> Response:
    """The card's network adapters (one)."""
    _bluefield()
    return json_response({"@odata.id": ADAPTERS,
                          "@odata.type": "#NetworkAdapterCollection.NetworkAdapterCollection",
                          "Members": [{"@odata.id": ADAPTER}], "Members@odata.count": 1,
                          "Name": "Network Adapter Collection"})


@bp.get(ADAPTER)
def adapter() -> Response:
    """The NIC; ``Oem.Nvidia.HostPrivilegeConfig`` on 25.10+ firmware."""
    state = _bluefield()
    body = {"@odata.id": ADAPTER, "@odata.type": "#NetworkAdapter.v1_11_0.NetworkAdapter",
            "Id": "NvidiaNetworkAdapter", "Name": "NvidiaNetworkAdapter"}
    if state.spec.privilege_interface == "config":
        body["Oem"] = {"Nvidia": {"HostPrivilegeConfig": {"@odata.id": CONFIG}}}
    return json_response(body)


@bp.route(EXTERNAL, methods=["GET", "POST"])
def external_host_privileges() -> Response:
    """GET the stored ``HostPriv*`` values; POST some or all of them."""
    state = _bluefield("external")
    if request.method == "POST":
        state.set_external_privileges(request_json())
        return json_response(fixtures.success_body())
    body = fixtures.template("external_host_privileges.json")
    with state.lock:
        body.update(state.data["external_privileges"])
    return json_response(body)


def _config_body(settings: dict, odata_id: str, **extra: object) -> dict:
    body = fixtures.template("host_privilege_config.json")
    body["@odata.id"] = odata_id
    body["PrivilegeSettings"] = settings
    body["PrivilegeMode"] = privilege_mode_of(settings)
    body.update(extra)
    return body


@bp.get(CONFIG)
def host_privilege_config() -> Response:
    """Effective ``PrivilegeMode`` and ``PrivilegeSettings``, linking the settings object."""
    state = _bluefield("config")
    with state.lock:
        settings = dict(state.data["privilege_settings"])
    return json_response(_config_body(settings, CONFIG))


@bp.route(f"{CONFIG}/Settings", methods=["GET", "PATCH"])
def host_privilege_config_settings() -> Response:
    """GET what applies at the next reset (with ETag); PATCH ``PrivilegeMode``/``PrivilegeSettings``."""
    state = _bluefield("config")
    if request.method == "PATCH":
        state.patch_privilege_settings(request_json(), request.headers.get("If-Match"))
        return json_response(fixtures.success_body(), etag=state.privilege_settings_etag())
    with state.lock:
        settings = state.privilege_settings_next()
        etag = state.privilege_settings_etag()
    body = _config_body(settings, f"{CONFIG}/Settings", Id="Settings",
                        Name="Host Privilege Configuration Settings")
    body.pop("@Redfish.Settings", None)
    body["@odata.etag"] = etag
    return json_response(body, etag=etag)
