"""``GET predevice``, ``POST|DELETE predevice/gpu`` (stand-in): group pools."""

from __future__ import annotations

from flask import Blueprint, Response, request

from .. import templates
from ..context import ctx, field_of, json_body, ok

bp = Blueprint("predevice", __name__)


@bp.get("/predevice")
def list_predevices() -> Response:
    """Group-assigned devices, filtered by ``dev_type``, ``grp_id``, ``mach_id``."""
    f = ctx().fabric
    dev_type = request.args.get("dev_type", "gpu").lower()
    grp_id = request.args.get("grp_id", type=int)
    mach_id = request.args.get("mach_id", type=int)
    with f.lock:
        by_id = templates.machines_by_id(f.state)
        data = (
            []
            if dev_type not in ("gpu", "")
            else [
                templates.predevice(f.state, g, by_id)
                for g in f.state.gpus
                if g.grp_id is not None
                and (grp_id is None or g.grp_id == grp_id)
                and (mach_id is None or g.mach_id == mach_id)
            ]
        )
    return ok(data)


def _relator() -> tuple[str, int]:
    body = json_body()
    return str(field_of(body, "deviceStatus", "name")), int(field_of(body, "group", "grp_id"))


@bp.post("/predevice/gpu")
def add_to_group() -> Response:
    """System free pool -> group pool."""
    device, grp_id = _relator()
    f = ctx().fabric
    g = f.add_to_group(device, grp_id)
    with f.lock:
        return ok([templates.group_gpu_relator(f.state, g, f.group(grp_id=grp_id))])


@bp.delete("/predevice/gpu")
def remove_from_group() -> Response:
    """Group pool -> system free pool."""
    device, grp_id = _relator()
    f = ctx().fabric
    g = f.remove_from_group(device, grp_id)
    with f.lock:
        return ok([templates.group_gpu_relator(f.state, g, f.group(grp_id=grp_id))])
