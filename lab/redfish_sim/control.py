"""Test-only control path of the BMC simulator (hardware stand-in): ``/_sim/...``.

Not Redfish and not authenticated (the simulator listens on 127.0.0.1 only). Lets tests
look inside the "hardware" and change it behind the BMC API's back:

- ``GET /_sim/state``: attributes, pending settings, mode, host rshim, power, boot, reset
  count, session counters and the request log (method, path, status).
- ``POST /_sim/state``: out-of-band drift, e.g. ``{"mode": "NicMode", "host_rshim": "Enabled",
  "attributes": {...}, "pending": {...}, "power_state": "Off", "password": "new"}``.
- ``POST /_sim/faults``: ``{"method": "GET", "path": "/redfish/v1/...", "status": 503,
  "delay_seconds": 0.5, "count": 2}`` (any field optional; ``{"clear": true}`` disarms all).
  A ``status`` below 400 acknowledges the request without carrying it out.
- ``POST /_sim/concurrent-write``: ``{"attributes": {...}}`` is written to the pending settings
  right after the next ``GET Bios/Settings`` is answered (a concurrent writer, so the
  client's ETag is stale when it PATCHes).
- ``POST /_sim/expire-sessions``: drop every session (as a BMC reboot or idle timeout does).
- ``POST /_sim/reset``: factory state.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from lab.redfish_sim.context import bmc, json_response

bp = Blueprint("control", __name__)


def _body() -> dict:
    body = request.get_json(silent=True)
    return body if isinstance(body, dict) else {}


@bp.get("/_sim/state")
def get_state() -> Response:
    """Everything tests assert on."""
    return json_response(bmc().snapshot())


@bp.post("/_sim/state")
def change_state() -> Response:
    """Out-of-band change (drift)."""
    state = bmc()
    try:
        state.out_of_band(_body())
    except ValueError as exc:
        return json_response({"error": str(exc)}, 400)
    return json_response(state.snapshot())


@bp.post("/_sim/faults")
def faults() -> Response:
    """Arm (or clear) faults."""
    state = bmc()
    body = _body()
    with state.lock:
        if body.get("clear"):
            state.faults.clear()
        else:
            state.faults.append(dict(body))
        return json_response({"faults": list(state.faults)})


@bp.post("/_sim/concurrent-write")
def concurrent_write() -> Response:
    """Arm one concurrent pending-settings write."""
    state = bmc()
    attrs = _body().get("attributes")
    if not isinstance(attrs, dict):
        return json_response({"error": "expected {\"attributes\": {...}}"}, 400)
    with state.lock:
        state.concurrent_writes.append(attrs)
    return json_response({"armed": len(state.concurrent_writes)})


@bp.post("/_sim/expire-sessions")
def expire_sessions() -> Response:
    """Forget every session."""
    state = bmc()
    with state.lock:
        state.sessions.clear()
    return json_response({"sessions_active": 0})


@bp.post("/_sim/reset")
def factory_reset() -> Response:
    """Factory state."""
    state = bmc()
    state.factory_reset()
    return json_response(state.snapshot())
