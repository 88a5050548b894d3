"""``GET digest``, ``POST|DELETE digest/{label}`` (stand-in): message-digest sessions (``X-API-Key``)."""

from __future__ import annotations

from flask import Blueprint, Response

from .. import templates
from ..context import ctx, ok

bp = Blueprint("digest", __name__)


@bp.get("/digest")
def labels() -> Response:
    """Labels of the live digests."""
    return ok(sorted(ctx().digests))


@bp.post("/digest/<label>")
def create(label: str) -> Response:
    """Create a digest for ``label`` (Basic auth only)."""
    d = ctx().new_digest(label)
    return ok([templates.digest(d.digest_id, d.key, d.label)])


@bp.delete("/digest/<label>")
def delete(label: str) -> Response:
    """Delete the digest of ``label`` (idempotent); answers the label, a string
    (``liqidinc/liqidsdk-go`` ``liqidsdk/client.go:484-503``: StringWrapper, one datum)."""
    c = ctx()
    with c.lock:
        c.digests.pop(label, None)
    return ok([label])
