"""``GET coordinates`` (stand-in): the Director's default Liqid coordinates.

Path and answer (one ``Coordinates``): ``LiqidClient.java:1338-1350`` ``getDefaultCoordinates``.
"""

from __future__ import annotations

from flask import Blueprint, Response

from .. import templates
from ..context import ok

bp = Blueprint("coordinates", __name__)


@bp.get("/coordinates")
def default_coordinates() -> Response:
    """One Coordinates record."""
    return ok([templates.coordinates()])
