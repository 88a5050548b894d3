"""``GET group[?grp_id=]``, ``POST group`` (stand-in)."""

from __future__ import annotations

from flask import Blueprint, Response, request

from .. import templates
from ..context import ctx, field_of, json_body, ok

bp = Blueprint("group", __name__)


@bp.get("/group")
def list_groups() -> Response:
    """Groups, optionally one by ``grp_id``."""
    f = ctx().fabric
    grp_id = request.args.get("grp_id", type=int)
    with f.lock:
        return ok(
            [templates.group(f.state, g) for g in f.state.groups if grp_id is None or g.grp_id == grp_id]
        )


@bp.post("/group")
def create_group() -> Response:
    """Create a group from ``{"group_name": ...}``."""
    f = ctx().fabric
    g = f.create_group(str(field_of(json_body(), "group_name")))
    with f.lock:
        return ok([templates.group(f.state, g)])
