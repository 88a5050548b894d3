"""Flask app of the LIQID Director simulator: a hardware stand-in for the lab and the tests.

Serves the Director REST API under ``/liqid/api/v2/`` (see ``api/``) with the real envelope,
HTTP Basic and message-digest (``X-API-Key``) auth, and a test-control API under ``/_sim/``
outside the API tree:

- ``GET /_sim/state``: the whole fabric state, open edits and call counters.
- ``POST /_sim/reset``: back to the inventory; faults, digests and counters cleared.
- ``GET|POST|DELETE /_sim/faults``: list / add (:class:`~.faults.FaultRule` JSON) / clear fault
  rules. ``{"kind": "open_edit", "machine": NAME}`` leaves an edit open on a machine, as a
  crashed client would.
- ``POST /_sim/detach {"device"}`` / ``POST /_sim/attach {"device", "machine"}``: out-of-band
  changes (someone else moved the GPU).
- ``POST /_sim/device-state {"device", "state"}``: break or heal a GPU (``ERROR`` / ``ON``).
- ``POST /_sim/digests/expire``: invalidate every digest (next call with one gets 401).
"""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, Flask, Response, g, jsonify, request
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from .api import BLUEPRINTS
from .context import EXTENSION, SimContext, ctx, fail, field_of, json_body
from .faults import FaultRule
from .state import Fabric, SimError

API_PREFIX = "/liqid/api/v2"

__all__ = ["API_PREFIX", "create_app"]


def _api_path() -> str | None:
    if request.path.startswith(API_PREFIX + "/"):
        return request.path[len(API_PREFIX) + 1 :]
    return None


def _check_auth(c: SimContext, path: str) -> None:
    key = request.headers.get("X-API-Key")
    basic = request.authorization
    basic_ok = (
        basic is not None
        and basic.type == "basic"
        and basic.username == c.username
        and basic.password == c.password
    )
    if path.startswith("digest/") and request.method == "POST":
        if not basic_ok:
            raise SimError(401, "Authentication required", type_="AuthenticationException")
        return
    if key is not None:
        if not c.digest_valid(key):
            raise SimError(401, "Digest expired or unknown", type_="AuthenticationException")
        return
    if not basic_ok:
        raise SimError(401, "Authentication required", type_="AuthenticationException")


def _control_blueprint() -> Blueprint:
    bp = Blueprint("sim_control", __name__, url_prefix="/_sim")

    @bp.get("/health")
    def health() -> Response:
        return jsonify({"ok": True})

    @bp.get("/state")
    def state() -> Response:
        c = ctx()
        snap = c.fabric.snapshot()
        with c.lock:
            snap["counters"] = dict(c.counters)
            snap["digests"] = sorted(c.digests)
        return jsonify(snap)

    @bp.post("/reset")
    def reset() -> Response:
        c = ctx()
        c.fabric.reset()
        c.faults.clear()
        with c.lock:
            c.digests.clear()
            c.counters.clear()
        return jsonify({"ok": True})

    @bp.get("/faults")
    def list_faults() -> Response:
        return jsonify([r.model_dump() for r in ctx().faults.list()])

    @bp.post("/faults")
    def add_fault() -> Response | tuple[Response, int]:
        body = json_body()
        c = ctx()
        if body.get("kind") == "open_edit":
            m = c.fabric.machine(name=str(field_of(body, "machine")))
            c.fabric.open_edit(m.mach_id, opened_by=str(body.get("opened_by", "other-client")))
            return jsonify({"ok": True, "machine": m.name})
        try:
            rule = FaultRule.model_validate(body)
        except ValidationError as exc:
            return jsonify({"error": exc.errors(include_url=False)}), 400
        c.faults.add(rule)
        return jsonify(rule.model_dump())

    @bp.delete("/faults")
    def clear_faults() -> Response:
        ctx().faults.clear()
        return jsonify({"ok": True})

    @bp.post("/detach")
    def detach() -> Response:
        g_ = ctx().fabric.force_detach(str(field_of(json_body(), "device")))
        return jsonify(g_.model_dump())

    @bp.post("/attach")
    def attach() -> Response:
        body = json_body()
        g_ = ctx().fabric.force_attach(str(field_of(body, "device")), str(field_of(body, "machine")))
        return jsonify(g_.model_dump())

    @bp.post("/device-state")
    def device_state() -> Response:
        body = json_body()
        g_ = ctx().fabric.set_state(str(field_of(body, "device")), str(field_of(body, "state")))
        return jsonify(g_.model_dump())

    @bp.post("/digests/expire")
    def expire() -> Response:
        c = ctx()
        with c.lock:
            c.digests.clear()
        return jsonify({"ok": True})

    return bp


def create_app(fabric: Fabric, *, username: str, password: str, digest_ttl: float | None = None) -> Flask:
    """The simulator's WSGI app.

    Args:
        fabric: the simulated fabric (state, persistence, hot-plug latency).
        username / password: the accepted credentials (HTTP Basic, and to create digests).
        digest_ttl: seconds a digest stays valid (``None``: until deleted or expired by test).
    """
    app = Flask("director_sim")
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions[EXTENSION] = SimContext(
        fabric=fabric, username=username, password=password, digest_ttl=digest_ttl
    )
    for bp in BLUEPRINTS:
        app.register_blueprint(bp, url_prefix=API_PREFIX)
    app.register_blueprint(_control_blueprint())

    @app.before_request
    def _gate() -> Any:
        path = _api_path()
        if path is None:
            return None
        c = ctx()
        c.count(f"{request.method} {path}")
        _check_auth(c, path)
        rule = c.faults.take(("error", "delay"), request.method, path)
        if rule is None:
            return None
        if rule.kind == "error":
            return fail(
                SimError(
                    rule.status,
                    rule.message,
                    type_=rule.type,
                    http_status=rule.http_status,
                    envelope_code=1 if rule.http_status == 200 else rule.status,
                )
            )
        if rule.after:
            g.sim_delay_after = rule.delay_seconds
        else:
            time.sleep(rule.delay_seconds)
        return None

    @app.after_request
    def _late(resp: Response) -> Response:
        delay = g.pop("sim_delay_after", 0.0)
        if delay:
            time.sleep(delay)
        return resp

    @app.errorhandler(SimError)
    def _refusal(err: SimError) -> tuple[Response, int]:
        return fail(err)

    @app.errorhandler(HTTPException)
    def _http(err: HTTPException) -> tuple[Response, int] | HTTPException:
        if _api_path() is None:
            return err
        return fail(SimError(err.code or 500, err.description or err.name, type_=err.name.replace(" ", "")))

    return app
