"""Shared plumbing of the Redfish simulator's route modules: the request's BMC, JSON and error
responses, body parsing. A leaf: the route modules and ``app`` import it, it imports none of them."""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, jsonify, request

from lab.redfish_sim import fixtures
from lab.redfish_sim.state import BmcState, SimHttpError

#: The Flask extension key under which ``app.create_app`` keeps the BMC's state.
EXTENSION = "redfish_bmc"
#: Paths served without authentication (DSP0266: service root, OData docs, login).
OPEN_PATHS = frozenset({"/redfish", "/redfish/v1", "/redfish/v1/odata", "/redfish/v1/$metadata"})
SESSIONS_PATH = "/redfish/v1/SessionService/Sessions"
#: DSP0266 "POST (create)": a collection also takes a create at its ``Members`` property URI.
LOGIN_PATHS = frozenset({SESSIONS_PATH, f"{SESSIONS_PATH}/Members"})


def bmc() -> BmcState:
    """The BMC state behind the current request."""
    return current_app.extensions[EXTENSION]


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
