"""``machine`` resource: machines (hosts) and their details (LIQID ``Machine``, ``MachineDetails``)."""

from __future__ import annotations

from .._transport import Transport
from ..models import Machine, MachineDetails
from . import parse_one, parse_records


def list_machines(
    t: Transport, *, grp_id: int | None = None, mach_id: int | None = None, mach_name: str | None = None
) -> list[Machine]:
    """``GET machine[?grp_id=&mach_id=&mach_name=]``: every machine, those of one group, or one
    machine by id or by name (``LiqidClient.java``: ``getMachinesByGroupId`` 2518,
    ``getMachineByName`` 2555-2565)."""
    params: dict[str, int | str] = {}
    if grp_id is not None:
        params["grp_id"] = grp_id
    if mach_id is not None:
        params["mach_id"] = mach_id
    if mach_name is not None:
        params["mach_name"] = mach_name
    return parse_records(
        Machine, t.request("GET", "machine", params=params or None), method="GET", path="machine"
    )


def machine_details(t: Transport, *, mach_id: int) -> MachineDetails:
    """``GET machine/details/{mach_id}``.

    Raises:
        DirectorNotFoundError: no such machine.
    """
    path = f"machine/details/{mach_id}"
    return parse_one(MachineDetails, t.request("GET", path, machine=mach_id), method="GET", path=path)
