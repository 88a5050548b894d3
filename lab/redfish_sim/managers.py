"""``/redfish/v1/Managers`` of the simulated BMC (hardware stand-in).

``Managers/Bluefield_BMC`` on a BlueField-3 BMC (NVIDIA BlueField BMC docs, "DPU Chassis":
the card is ``ManagedBy`` ``/redfish/v1/Managers/Bluefield_BMC``), ``Managers/1`` on a host
BMC. ``FirmwareVersion`` is the simulator's ``--bmc NAME=PORT:firmware`` value.
"""

from __future__ import annotations

from flask import Blueprint, Response, abort

from lab.redfish_sim import fixtures
from lab.redfish_sim.context import bmc, json_response

bp = Blueprint("managers", __name__)
MANAGERS = "/redfish/v1/Managers"


@bp.get(MANAGERS)
def managers() -> Response:
    """The manager collection (one member)."""
    body = fixtures.template("managers_collection.json")
    body["Members"] = [{"@odata.id": f"{MANAGERS}/{bmc().spec.manager_id}"}]
    return json_response(body)


@bp.get(f"{MANAGERS}/<manager_id>")
def manager(manager_id: str) -> Response:
    """The BMC itself, with its firmware version."""
    state = bmc()
    if manager_id != state.spec.manager_id:
        abort(404)
    name = "manager_bluefield_bmc.json" if state.spec.kind == "bluefield" else "manager_host.json"
    body = fixtures.template(name)
    body["FirmwareVersion"] = state.spec.firmware
    return json_response(body)
