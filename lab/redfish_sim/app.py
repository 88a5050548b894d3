"""Flask application for one simulated BMC (a hardware stand-in, not a real BMC).

``create_app(state)`` serves one BMC's Redfish tree (DSP0266) plus the test-only control
path ``/_sim/...``. Auth follows DSP0266 "Security details": the service root and session
creation are open; everything else under ``/redfish/v1`` needs ``X-Auth-Token`` (a session)
or HTTP Basic. Errors are Redfish error bodies (``error.@Message.ExtendedInfo``).
"""

from __future__ import annotations

import base64
import time

from flask import Flask, Response, g, request

from lab.redfish_sim import accounts, control, fixtures, managers, privileges, protocol, service, systems
from lab.redfish_sim.context import EXTENSION, LOGIN_PATHS, OPEN_PATHS, error_response
from lab.redfish_sim.state import BmcState, SimHttpError


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
    app = Flask(f"redfish_sim.{state.spec.name}")
    app.url_map.strict_slashes = False
    app.extensions[EXTENSION] = state
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
