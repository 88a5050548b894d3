"""Flask application for one simulated BMC (a hardware stand-in, not a real BMC).

``create_app(state)`` serves one BMC's Redfish tree (DSP0266) plus the test-only control
path ``/_sim/...``. Auth follows DSP0266 "Security details": the service root and session
creation are open; everything else under ``/redfish/v1`` needs ``X-Auth-Token`` (a session)
or HTTP Basic. Errors are Redfish error bodies (``error.@Message.ExtendedInfo``).
"""

from __future__ import annotations

import base64
import time
from typing import Any

from flask import Flask, Response, current_app, g, jsonify, request

from lab.redfish_sim import fixtures
from lab.redfish_sim.state import BmcState, SimHttpError

#: Paths served without authentication (DSP0266: service root, OData docs, login).
OPEN_PATHS = frozenset({"/redfish", "/redfish/v1", "/redfish/v1/odata", "/redfish/v1/$metadata"})
SESSIONS_PATH = "/redfish/v1/SessionService/Sessions"
#: DSP0266 "POST (create)": a collection also takes a create at its ``Members`` property URI.
LOGIN_PATHS = frozenset({SESSIONS_PATH, f"{SESSIONS_PATH}/Members"})


def bmc() -> BmcState:
    """The BMC state behind the current request."""
    return current_app.extensions["redfish_bmc"]


def json_response(body: Any, status: int = 200, *, etag: str | None = None,
                  headers: dict[str, str] | None = None) -> Response:
    """A JSON response with OData-Version and, when given, an ETag header."""
    resp = jsonify(body)
    resp.status_code = status
    resp.headers["OData-Version"] = "4.0"
    if etag:
        resp.headers["ETag"] = etag
    for k, v in (headers or {}).items():
        resp.headers[k] = v
    return resp


def error_response(status: int, messages: list[dict[str, Any]],
                   headers: dict[str, str] | None = None) -> Response:
    """A Redfish error response."""
    return json_response(fixtures.error_body(messages), status, headers=headers)


def request_json() -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        SimHttpError: 400 MalformedJSON when the body is not a JSON object.
    """
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise SimHttpError(400, [fixtures.message("MalformedJSON")])
    return body


def _authenticate(state: BmcState) -> Response | None:
    path = request.path.rstrip("/") or "/"
    if path in OPEN_PATHS or not path.startswith("/redfish"):
        return None
    if path in LOGIN_PATHS and request.method == "POST":
        return None
    token = request.headers.get("X-Auth-Token")
    if token:
        session = state.session_for_token(token)
        if session is not None:
            g.session_id = session.id
            return None
    else:
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user, password = "", ""
            if state.check_password(user, password):
                return None
    return error_response(401, [fixtures.message("NoValidSession")],
                          headers={"WWW-Authenticate": 'Basic realm="Redfish"'})


def create_app(state: BmcState) -> Flask:
    """The Flask app serving ``state``'s BMC. Routes live in ``service``, ``systems``,
    ``managers``, ``privileges``, ``accounts`` (the Redfish tree), ``protocol`` (OData documents
    and the header/query rules every answer follows) and ``control`` (``/_sim``)."""
    from lab.redfish_sim import accounts, control, managers, privileges, protocol, service, systems

    app = Flask(f"redfish_sim.{state.spec.name}")
    app.url_map.strict_slashes = False
    app.extensions["redfish_bmc"] = state
    app.json.sort_keys = True  # type: ignore[attr-defined]

    @app.before_request
    def _before() -> Response | None:
        if request.path.startswith("/_sim"):
            return None
        fault = state.take_fault(request.method, request.path)
        if fault is not None:
            if fault.get("delay_seconds"):
                time.sleep(float(fault["delay_seconds"]))
            if fault.get("status"):
                status = int(fault["status"])
                if status < 400:  # acknowledged but never carried out
                    return Response(status=status)
                key = "ServiceTemporarilyUnavailable" if status == 503 else "InternalError"
                args = ["1"] if key == "ServiceTemporarilyUnavailable" else []
                return error_response(status, [fixtures.message(key, *args)])
        return protocol.check_request() or _authenticate(state)

    @app.after_request
    def _after(resp: Response) -> Response:
        if not request.path.startswith("/_sim"):
            protocol.add_headers(resp)
            state.log_request(request.method, request.path, resp.status_code)
        return resp

    @app.errorhandler(SimHttpError)
    def _sim_error(exc: SimHttpError) -> Response:
        return error_response(exc.status, exc.messages, exc.headers)

    @app.errorhandler(404)
    def _not_found(_exc: Exception) -> Response:
        kind = request.path.rstrip("/").rsplit("/", 2)[-2] if "/" in request.path.strip("/") else "Resource"
        name = request.path.rstrip("/").rsplit("/", 1)[-1]
        return error_response(404, [fixtures.message("ResourceNotFound", kind, name)])

    @app.errorhandler(405)
    def _not_allowed(exc: Exception) -> Response:
        allow = protocol.allowed_methods(getattr(exc, "valid_methods", None))
        return error_response(405, [fixtures.message("OperationNotAllowed")],
                              headers={"Allow": allow} if allow else None)

    app.register_blueprint(service.bp)
    app.register_blueprint(systems.bp)
    app.register_blueprint(managers.bp)
    app.register_blueprint(privileges.bp)
    app.register_blueprint(accounts.bp)
    app.register_blueprint(protocol.bp)
    app.register_blueprint(control.bp)
    return app
