"""``POST fabric/edit``, ``POST fabric/edit/cancel``, ``POST fabric/reprogram`` (stand-in)."""

from __future__ import annotations

from flask import Blueprint, Response, request

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
    m = c.fabric.reprogram(_mach_id(), fail_half=half)
    with c.fabric.lock:
        return ok([templates.machine(c.fabric.state, m)])
