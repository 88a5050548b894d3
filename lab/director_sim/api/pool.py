"""``POST pool/edit``, ``pool/done``, ``pool/cancel`` (stand-in): the group pool transaction.

Body and answer: ``GroupPool`` ``{"coordinates": {...}, "fabr_id", "grp_id"}`` (``LiqidClient.java``
``groupPoolEdit`` 3461-3478, ``groupPoolDone`` 3420-3437, ``cancelGroupPoolEdit`` 653-667). The
coordinates must be the Director's own and the fabric id its fabric's (LIQID's mock refuses other
coordinates, ``MockLiqidClient.java:463-468``). Moves queued by ``predevice/gpu`` inside the edit
are applied by ``pool/done`` (``MockLiqidClient.java:2688-2718``), when its job ends if it answered
HTTP 202.
"""

from __future__ import annotations

from flask import Blueprint, Response, g, request

from .. import templates
from ..context import ctx, field_of, json_body, ok
from ..state import GroupRecord, SimError

bp = Blueprint("pool", __name__)


def _group() -> GroupRecord:
    body = json_body()
    f = ctx().fabric
    coords = field_of(body, "coordinates")
    if coords != templates.coordinates() or int(field_of(body, "fabr_id")) != f.state.fabric_id:
        raise SimError(
            400, f"Wrong coordinates {coords} / fabric {body.get('fabr_id')}", type_="LiqidException"
        )
    return f.group(grp_id=int(field_of(body, "grp_id")))


def _answer(grp: GroupRecord) -> Response:
    f = ctx().fabric
    with f.lock:
        return ok([templates.group_pool(f.state, grp)])


@bp.post("/pool/edit")
def edit() -> Response:
    """Open a pool edit on the group."""
    who = request.headers.get("X-API-Key", "")[:8] or (
        request.authorization.username if request.authorization else "?"
    )
    return _answer(ctx().fabric.open_pool_edit(_group().grp_id, opened_by=who))


@bp.post("/pool/done")
def done() -> Response:
    """Apply the queued moves and close the pool edit."""
    f = ctx().fabric
    grp = f.begin_pool_done(_group().grp_id)
    grp_id = grp.grp_id
    if "sim_async" in g:
        g.sim_finish = lambda failed: f.finish_pool_done(grp_id, failed=failed)
    else:
        f.finish_pool_done(grp_id)
    return _answer(grp)


@bp.post("/pool/cancel")
def cancel() -> Response:
    """Drop the queued moves and close the pool edit."""
    return _answer(ctx().fabric.cancel_pool_edit(_group().grp_id))
