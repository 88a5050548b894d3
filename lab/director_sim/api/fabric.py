"""``POST fabric/edit``, ``fabric/edit/cancel``, ``fabric/reprogram``, ``fabric/reprogram/cancel``,
``GET fabric/id`` (stand-in).

Bodies and answers: the Machine (``LiqidClient.java:618-625, 693-699, 1049-1062, 4039-4050``);
``fabric/id`` answers one integer (``LiqidClient.java:1306-1318``). A reprogram answered with
HTTP 202 hot-plugs when its job ends (:mod:`..jobs`).
"""

from __future__ import annotations

from flask import Blueprint, Response, g, request

from .. import templates
from ..context import ctx, field_of, json_body, ok

bp = Blueprint("fabric", __name__)


def _mach_id() -> int:
    return int(field_of(json_body(), "mach_id"))


@bp.post("/fabric/edit")
def edit() -> Response:
    """Open an edit on the machine in the body."""
    c = ctx()
    who = request.headers.get("X-API-Key", "")[:8] or (
        request.authorization.username if request.authorization else "?"
    )
    m = c.fabric.open_edit(_mach_id(), opened_by=who)
    with c.fabric.lock:
        return ok([templates.machine(c.fabric.state, m)])


@bp.post("/fabric/edit/cancel")
def cancel() -> Response:
    """Drop the machine's pending relations and close its edit."""
    c = ctx()
    m = c.fabric.cancel_edit(_mach_id())
    with c.fabric.lock:
        return ok([templates.machine(c.fabric.state, m)])


@bp.post("/fabric/reprogram")
def reprogram() -> Response:
    """Apply the pending relations (hot-plug latency) and close the edit."""
    c = ctx()
    half = c.faults.take(("reprogram_half",), "POST", "fabric/reprogram") is not None
    if "sim_async" in g:  # the hot-plug happens when the job ends
        m = c.fabric.begin_reprogram(_mach_id())
        mach_id = m.mach_id
        g.sim_finish = lambda failed: c.fabric.finish_reprogram(mach_id, failed=failed)
    else:
        m = c.fabric.reprogram(_mach_id(), fail_half=half)
    with c.fabric.lock:
        return ok([templates.machine(c.fabric.state, m)])


@bp.post("/fabric/reprogram/cancel")
def reprogram_cancel() -> Response:
    """Stop a reprogram in progress (its job ends as failed); the edit stays open."""
    c = ctx()
    m = c.fabric.cancel_reprogram(_mach_id())
    c.jobs.abort(f"machine:{m.mach_id}")
    with c.fabric.lock:
        return ok([templates.machine(c.fabric.state, m)])


@bp.get("/fabric/id")
def fabric_id() -> Response:
    """The id of the fabric this Director manages."""
    return ok([ctx().fabric.state.fabric_id])
