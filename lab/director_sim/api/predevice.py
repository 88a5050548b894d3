"""``GET predevice?grp_id=``, ``POST|DELETE predevice/gpu`` (stand-in): group pools.

``grp_id`` is required, as LIQID's SDK and mock require it (``LiqidClient.java:1378-1393``,
``MockLiqidClient.java:1764-1773``); the answer holds the group's devices, in its free pool or
attached (``mach_id`` narrows it to one machine's). The SDK's own ``getUnattachedDevicesForGroup``
filters that answer on ``mach_id`` (``LiqidClientBase.java:790-798``), so a free-pool-only answer
(as in LIQID's mock) is not assumed. Pool moves queue inside a pool edit (``api/pool.py``).
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from .. import templates
from ..context import ctx, field_of, json_body, ok
from ..state import SimError

bp = Blueprint("predevice", __name__)


@bp.get("/predevice")
def list_predevices() -> Response:
    """Group-assigned devices, filtered by ``dev_type``, ``grp_id``, ``mach_id``."""
    f = ctx().fabric
    dev_type = request.args.get("dev_type", "gpu").lower()
    grp_id = request.args.get("grp_id", type=int)
    if grp_id is None:
        raise SimError(400, "Parameter grp_id is required", type_="LiqidException")
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
    """Queue system free pool -> group pool (needs ``pool/edit``)."""
    device, grp_id = _relator()
    f = ctx().fabric
    g = f.add_to_group(device, grp_id)
    with f.lock:
        return ok([templates.group_gpu_relator(f.state, g, f.group(grp_id=grp_id))])


@bp.delete("/predevice/gpu")
def remove_from_group() -> Response:
    """Queue group pool -> system free pool (needs ``pool/edit``)."""
    device, grp_id = _relator()
    f = ctx().fabric
    g = f.remove_from_group(device, grp_id)
    with f.lock:
        return ok([templates.group_gpu_relator(f.state, g, f.group(grp_id=grp_id))])
