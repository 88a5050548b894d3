"""``GET device/info/gpu[/{name}]``, ``PUT|DELETE device/udesc/gpu/{id}`` (stand-in).

The paths the LIQID SDK calls (liqidinc/liqidsdk-generator: ``GetGPUDeviceInfo``,
``GetGPUDeviceInfoByName``, ``CreateDeviceDescription``, ``DeleteDeviceDescription``).
"""

from __future__ import annotations

from flask import Blueprint, Response

from .. import templates
from ..context import ctx, field_of, json_body, ok

bp = Blueprint("device", __name__)


@bp.get("/device/info/gpu")
def gpu_info() -> Response:
    """Vendor, model, memory and user description of every GPU."""
    f = ctx().fabric
    with f.lock:
        return ok([templates.gpu_info(f.state, g) for g in f.state.gpus])


@bp.get("/device/info/gpu/<name>")
def gpu_info_by_name(name: str) -> Response:
    """Vendor, model, memory and user description of one GPU (404 for an unknown name)."""
    f = ctx().fabric
    with f.lock:
        return ok([templates.gpu_info(f.state, f.gpu(name=name))])


@bp.put("/device/udesc/gpu/<dev_id>")
def put_udesc(dev_id: str) -> Response:
    """Set a GPU's user description (body ``{"udesc": ...}``)."""
    text = field_of(json_body(), "udesc")
    return ok([templates.udesc(ctx().fabric.set_udesc(dev_id, str(text)).udesc)])


@bp.delete("/device/udesc/gpu/<dev_id>")
def delete_udesc(dev_id: str) -> Response:
    """Clear a GPU's user description."""
    return ok([templates.udesc(ctx().fabric.set_udesc(dev_id, "").udesc)])
