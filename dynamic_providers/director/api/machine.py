"""``machine`` resource: machines (hosts) and their details (LIQID ``Machine``, ``MachineDetails``)."""

from __future__ import annotations

from .._transport import Transport
from ..models import Machine, MachineDetails
from . import parse_one, parse_records


def list_machines(t: Transport, *, grp_id: int | None = None) -> list[Machine]:
    """``GET machine[?grp_id=]``: every machine, or those of one group."""
    params = {"grp_id": grp_id} if grp_id is not None else None
    return parse_records(Machine, t.request("GET", "machine", params=params), method="GET", path="machine")


def machine_details(t: Transport, *, mach_id: int) -> MachineDetails:
    """``GET machine/details/{mach_id}``.

    Raises:
        DirectorNotFoundError: no such machine.
    """
    path = f"machine/details/{mach_id}"
    return parse_one(MachineDetails, t.request("GET", path, machine=mach_id), method="GET", path=path)
