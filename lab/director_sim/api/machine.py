"""``GET machine[?grp_id=&mach_id=&mach_name=]``, ``POST machine``, ``GET machine/details/{id}`` (stand-in).

``mach_name`` selects one machine by name (``liqidinc/liqidsdk-java`` ``LiqidClient.java:2555-2565``
``getMachineByName``).
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from .. import templates
from ..context import ctx, field_of, json_body, ok

bp = Blueprint("machine", __name__)


@bp.get("/machine")
def list_machines() -> Response:
    """Machines, filtered by ``grp_id`` / ``mach_id`` / ``mach_name`` when given."""
    f = ctx().fabric
    grp_id = request.args.get("grp_id", type=int)
    mach_id = request.args.get("mach_id", type=int)
    mach_name = request.args.get("mach_name")
    with f.lock:
        return ok(
            [
                templates.machine(f.state, m)
                for m in f.state.machines
                if (grp_id is None or m.grp_id == grp_id)
                and (mach_id is None or m.mach_id == mach_id)
                and (mach_name is None or m.name == mach_name)
            ]
        )


@bp.post("/machine")
def create_machine() -> Response:
    """Create a machine from ``{"mach_name": ..., "grp_id": ...}``."""
    body = json_body()
    f = ctx().fabric
    m = f.create_machine(str(field_of(body, "mach_name")), int(field_of(body, "grp_id")))
    with f.lock:
        return ok([templates.machine(f.state, m)])


@bp.get("/machine/details/<int:mach_id>")
def details(mach_id: int) -> Response:
    """Details of one machine."""
    f = ctx().fabric
    with f.lock:
        return ok([templates.machine_details(f.state, f.machine(mach_id=mach_id))])
