"""``POST|DELETE relate/gpu`` (stand-in): pending attach/detach inside an open fabric edit.

Answer: ``MachineGPUDeviceRelator`` (``LiqidClient.java:246-258``, ``3748-3762``).
"""

from __future__ import annotations

from flask import Blueprint, Response

from .. import templates
from ..context import ctx, field_of, json_body, ok

bp = Blueprint("relate", __name__)


def _relate(attach: bool) -> Response:
    body = json_body()
    device = str(field_of(body, "groupDeviceRelator", "deviceStatus", "name"))
    mach_id = int(field_of(body, "machine", "mach_id"))
    f = ctx().fabric
    g = f.relate(mach_id, device, attach=attach)
    with f.lock:
        m = f.machine(mach_id=mach_id)
        return ok([templates.machine_gpu_relator(f.state, g, f.group(grp_id=m.grp_id), m)])


@bp.post("/relate/gpu")
def attach() -> Response:
    """Relate a GPU to the machine (pending until reprogram)."""
    return _relate(True)


@bp.delete("/relate/gpu")
def detach() -> Response:
    """Unrelate a GPU from the machine (pending until reprogram)."""
    return _relate(False)
