"""Flask app of the LIQID Director simulator: a hardware stand-in for the lab and the tests.

Serves the Director REST API under ``/liqid/api/v2/`` (see ``api/``) with the real envelope,
HTTP Basic and message-digest (``X-API-Key``) auth, and a test-control API under ``/_sim/``
outside the API tree:

- ``GET /_sim/state``: the whole fabric state, open edits and call counters.
- ``POST /_sim/reset``: back to the inventory; faults, digests and counters cleared.
- ``GET|DELETE /_sim/calls``: the ordered log of API calls (``method``, ``path``, ``query``,
  ``client`` address, JSON ``body``,
  ``status``) / clear it; for tests that assert LIQID's call order.
- ``GET|POST|DELETE /_sim/faults``: list / add (:class:`~.faults.FaultRule` JSON) / clear fault
  rules. ``{"kind": "open_edit", "machine": NAME}`` leaves a fabric edit open on a machine, and
  ``{"kind": "open_pool_edit", "group": NAME}`` a pool edit on a group, as a crashed client would.
  ``{"kind": "async", ...}`` answers matching changes with HTTP 202 and a job (:mod:`.jobs`).

With ``async_seconds`` set (``--async-seconds``, ``$DIRECTOR_SIM_ASYNC_SECONDS``) every change
(POST/PUT/DELETE outside ``digest/``) answers HTTP 202 with a job that ends that many seconds
later. A change that arrives for a machine or group while a job still holds it is refused
(HTTP 409) and recorded in ``violations`` of ``GET /_sim/state``: LIQID's SDK waits for every
job before its next call (``LiqidClientBase.java:176-237``), so a client that does not is wrong.
- ``POST /_sim/detach {"device"}`` / ``POST /_sim/attach {"device", "machine"}``: out-of-band
  changes (someone else moved the GPU).
- ``POST /_sim/device-state {"device", "state"}``: break or heal a GPU (``ERROR`` / ``active | online``).
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
        c.jobs.settle()
        snap = c.fabric.snapshot()
        with c.lock:
            snap["counters"] = dict(c.counters)
            snap["digests"] = sorted(c.digests)
            snap["violations"] = list(c.violations)
        snap["jobs_running"] = c.jobs.running_count()
        return jsonify(snap)

    @bp.get("/calls")
    def calls() -> Response:
        c = ctx()
        with c.lock:
            return jsonify(list(c.calls))

    @bp.delete("/calls")
    def clear_calls() -> Response:
        c = ctx()
        with c.lock:
            c.calls.clear()
        return jsonify({"ok": True})

    @bp.post("/reset")
    def reset() -> Response:
        c = ctx()
        c.fabric.reset()
        c.faults.clear()
        c.jobs.clear()
        with c.lock:
            c.digests.clear()
            c.counters.clear()
            c.calls.clear()
            c.violations.clear()
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
        if body.get("kind") == "open_pool_edit":
            grp = c.fabric.group(name=str(field_of(body, "group")))
            c.fabric.open_pool_edit(grp.grp_id, opened_by=str(body.get("opened_by", "other-client")))
            return jsonify({"ok": True, "group": grp.name})
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


def _resource_key(path: str) -> str:
    """The machine or group a change is about (``machine:1``, ``group:2``), from its body."""
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        return ""
    try:
        if path.startswith("fabric/"):
            return f"machine:{int(body['mach_id'])}"
        if path == "relate/gpu":
            return f"machine:{int(body['machine']['mach_id'])}"
        if path.startswith("pool/"):
            return f"group:{int(body['grp_id'])}"
        if path == "predevice/gpu":
            return f"group:{int(body['group']['grp_id'])}"
    except (KeyError, TypeError, ValueError):
        return ""
    return ""


def _is_change(path: str) -> bool:
    return request.method in ("POST", "PUT", "DELETE") and not path.startswith(("digest", "job/"))


def _accepted(c: SimContext, resp: Response, path: str) -> Response:
    """Turn a successful answer into HTTP 202 with a job link in ``data[0].links[0].href``."""
    delay, fail = g.pop("sim_async")
    body = resp.get_json(silent=True)
    finish = g.pop("sim_finish", None)
    if resp.status_code != 200 or not isinstance(body, dict) or body["response"]["code"] != 0:
        if finish is not None:  # the call failed after deferring its effect: nothing to run
            finish(True)
        return resp
    data = body["response"]["data"] or []
    first = data[0] if data and isinstance(data[0], dict) else {}
    job = c.jobs.start(
        key=g.get("sim_key", ""),
        call=f"{request.method} {path}",
        delay=delay,
        fail=fail,
        finish=finish,
        device_id=str(first.get("dev_id", first.get("fabr_gid", "0x00000000"))),
    )
    href = f"{request.host_url.rstrip('/')}{API_PREFIX}/job/{job.job_id}"
    record = dict(first, links=[{"href": href}])
    body["response"]["data"] = [record, *data[1:]] if data else [record]
    out = jsonify(body)
    out.status_code = 202
    return out


def create_app(
    fabric: Fabric,
    *,
    username: str,
    password: str,
    digest_ttl: float | None = None,
    async_seconds: float | None = None,
) -> Flask:
    """The simulator's WSGI app.

    Args:
        fabric: the simulated fabric (state, persistence, hot-plug latency).
        username / password: the accepted credentials (HTTP Basic, and to create digests).
        digest_ttl: seconds a digest stays valid (``None``: until deleted or expired by test).
        async_seconds: answer every change with HTTP 202 and a job of this many seconds
            (``None``: answer at once, after the hot-plug latency for a reprogram).
    """
    app = Flask("director_sim")
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions[EXTENSION] = SimContext(
        fabric=fabric,
        username=username,
        password=password,
        digest_ttl=digest_ttl,
        async_seconds=async_seconds,
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
        c.jobs.settle()
        g.sim_call = c.record(request.method, path, dict(request.args), client=request.remote_addr,
                              body=request.get_json(silent=True))
        c.count(f"{request.method} {path}")
        _check_auth(c, path)
        if _is_change(path):
            g.sim_key = _resource_key(path)
            running = c.jobs.running(g.sim_key)
            if running is not None and path != "fabric/reprogram/cancel":
                c.violation(f"{request.method} {path} while job {running.job_id} ({running.call}) runs")
                raise SimError(
                    409, f"Job {running.job_id} ({running.call}) is still running", type_="LiqidException"
                )
            rule = c.faults.take(("async",), request.method, path)
            if rule is not None:
                g.sim_async = (rule.delay_seconds, rule.fail)
            elif c.async_seconds is not None:
                g.sim_async = (c.async_seconds, False)
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
        path = _api_path()
        if path is not None and "sim_async" in g:
            resp = _accepted(ctx(), resp, path)
        if "sim_call" in g:
            g.sim_call["status"] = resp.status_code
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
