"""``group`` resource: groups, each with a free device pool (LIQID ``Group``)."""

from __future__ import annotations

from .._transport import Transport
from ..models import Group
from . import parse_records


def list_groups(t: Transport) -> list[Group]:
    """``GET group``: every group."""
    return parse_records(Group, t.request("GET", "group"), method="GET", path="group")
