"""Service root and SessionService of the simulated BMC (hardware stand-in).

- ``GET /redfish``, ``GET /redfish/v1``: open (DSP0266 "Service root").
- ``POST /redfish/v1/SessionService/Sessions`` (or its ``Members`` property URI, DSP0266
  "POST (create)") ``{"UserName", "Password"}`` → 201, headers ``X-Auth-Token`` and
  ``Location`` (the session's URI); wrong credentials → 401.
- ``DELETE /redfish/v1/SessionService/Sessions/<id>`` → 204 (log out).
"""

from __future__ import annotations

import uuid

from flask import Blueprint, Response, g, request

from lab.redfish_sim import fixtures
from lab.redfish_sim.context import SESSIONS_PATH, bmc, error_response, json_response, request_json
from lab.redfish_sim.state import SimHttpError

bp = Blueprint("service", __name__)


@bp.get("/redfish")
def versions() -> Response:
    """``{"v1": "/redfish/v1/"}``."""
    return json_response({"v1": "/redfish/v1/"})


@bp.get("/redfish/v1")
def service_root() -> Response:
    """The service root; Vendor/Product and the managing BMC depend on the BMC kind."""
    state = bmc()
    body = fixtures.template("service_root.json")
    body["UUID"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"redfish-sim/{state.spec.name}"))
    body["Links"]["ManagerProvidingService"]["@odata.id"] = f"/redfish/v1/Managers/{state.spec.manager_id}"
    if state.spec.kind == "host":
        body["Vendor"], body["Product"] = "Generic", "Host BMC"
    return json_response(body)


@bp.get("/redfish/v1/SessionService")
def session_service() -> Response:
    """SessionService (``SessionTimeout`` in seconds)."""
    return json_response(fixtures.template("session_service.json"))


def _session_body(session_id: str, username: str, origin: str) -> dict:
    body = fixtures.template("session.json")
    body["@odata.id"] = f"{SESSIONS_PATH}/{session_id}"
    body["Id"] = session_id
    body["UserName"] = username
    body["ClientOriginIPAddress"] = origin
    return body


@bp.get(SESSIONS_PATH)
def sessions() -> Response:
    """The session collection."""
    state = bmc()
    with state.lock:
        members = [{"@odata.id": f"{SESSIONS_PATH}/{sid}"} for sid in state.sessions]
    return json_response({
        "@odata.id": SESSIONS_PATH,
        "@odata.type": "#SessionCollection.SessionCollection",
        "Members": members,
        "Members@odata.count": len(members),
        "Name": "Session Collection",
    })


@bp.post(SESSIONS_PATH)
@bp.post(f"{SESSIONS_PATH}/Members")
def create_session() -> Response:
    """Log in. Body ``{"UserName": str, "Password": str}``."""
    body = request_json()
    missing = [k for k in ("UserName", "Password") if not isinstance(body.get(k), str)]
    if missing:
        raise SimHttpError(400, [fixtures.message("PropertyMissing", k) for k in missing])
    state = bmc()
    session = state.create_session(body["UserName"], body["Password"], request.remote_addr or "")
    if session is None:
        return error_response(401, [fixtures.message("ResourceAtUriUnauthorized", SESSIONS_PATH,
                                                     "Invalid username or password")])
    location = f"{SESSIONS_PATH}/{session.id}"
    return json_response(_session_body(session.id, session.username, session.origin), 201,
                         headers={"X-Auth-Token": session.token, "Location": location})


@bp.get(f"{SESSIONS_PATH}/<session_id>")
def get_session(session_id: str) -> Response:
    """One session."""
    state = bmc()
    with state.lock:
        session = state.sessions.get(session_id)
    if session is None:
        return error_response(404, [fixtures.message("ResourceNotFound", "Session", session_id)])
    return json_response(_session_body(session.id, session.username, session.origin))


@bp.delete(f"{SESSIONS_PATH}/<session_id>")
def delete_session(session_id: str) -> Response:
    """Log out (any authenticated caller may delete a session, as on bmcweb for admins)."""
    if not bmc().delete_session(session_id):
        return error_response(404, [fixtures.message("ResourceNotFound", "Session", session_id)])
    g.pop("session_id", None)
    return Response(status=204)
