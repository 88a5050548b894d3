"""``GET status``, ``GET status/gpu?filter=`` (stand-in for the Director's status resource)."""

from __future__ import annotations

from flask import Blueprint, Response, request

from .. import templates
from ..context import ctx, ok

bp = Blueprint("status", __name__)


@bp.get("/status")
def all_devices() -> Response:
    """Every device: machines' compute devices, then GPUs."""
    f = ctx().fabric
    with f.lock:
        data = [templates.cpu_status(f.state, m) for m in f.state.machines]
        by_id = templates.machines_by_id(f.state)
        data += [templates.device_status(f.state, g, by_id) for g in f.state.gpus]
    return ok(data)


@bp.get("/status/gpu")
def gpus() -> Response:
    """GPUs; ``filter=true`` (the default): system free pool only (docs/domain.md, Director API)."""
    free_only = request.args.get("filter", "true").lower() != "false"
    f = ctx().fabric
    with f.lock:
        by_id = templates.machines_by_id(f.state)
        data = [
            templates.gpu_status(f.state, g, by_id)
            for g in f.state.gpus
            if not free_only or (g.grp_id is None and g.mach_id is None)
        ]
    return ok(data)
