"""``pool`` resource: the group pool transaction (``pool/edit`` -> moves -> ``pool/done`` | ``pool/cancel``).

Each call's body is a ``GroupPool``: the group id, the Director's default coordinates and its
fabric id (``liqidinc/liqidsdk-java`` ``LiqidClient.java``: ``groupPoolEdit`` 3461-3478,
``groupPoolDone`` 3420-3437, ``cancelGroupPoolEdit`` 653-667); the coordinates and fabric id come
from ``GET coordinates`` and ``GET fabric/id`` (``LiqidClientBase.java:342-347``).
"""

from __future__ import annotations

from .._transport import Transport
from ..errors import DirectorProtocolError
from ..models import Coordinates, GroupPool
from . import parse_one


def default_coordinates(t: Transport) -> Coordinates:
    """``GET coordinates``: the Director's default Liqid coordinates (``LiqidClient.java:1338-1350``)."""
    return parse_one(Coordinates, t.request("GET", "coordinates"), method="GET", path="coordinates")


def fabric_id(t: Transport) -> int:
    """``GET fabric/id``: the id of the fabric the Director manages (``LiqidClient.java:1306-1318``).

    Raises:
        DirectorProtocolError: the answer is not one integer.
    """
    data = t.request("GET", "fabric/id")
    if len(data) != 1 or not isinstance(data[0], int) or isinstance(data[0], bool):
        raise DirectorProtocolError(
            f"expected one fabric id, got {data!r:.80}", method="GET", path="fabric/id"
        )
    return data[0]


def open_edit(t: Transport, *, pool: GroupPool) -> None:
    """``POST pool/edit``.

    Raises:
        DirectorConflictError: the group's pool is already being edited.
    """
    t.request("POST", "pool/edit", json=pool.wire())


def done(t: Transport, *, pool: GroupPool) -> None:
    """``POST pool/done``: apply the queued moves, close the pool edit."""
    t.request("POST", "pool/done", json=pool.wire())


def cancel(t: Transport, *, pool: GroupPool) -> None:
    """``POST pool/cancel``: drop the queued moves, close the pool edit."""
    t.request("POST", "pool/cancel", json=pool.wire())
