"""``predevice`` resource: devices assigned to group pools (LIQID ``PreDevice``, ``GroupGPUDeviceRelator``).

``POST predevice/gpu`` moves a GPU from the system free pool into a group's free pool;
``DELETE predevice/gpu`` moves it back (BRIEF.md "Group pool moves").
"""

from __future__ import annotations

from .._transport import Transport
from ..models import DeviceStatus, Group, GroupGpuRelator, PreDevice
from . import parse_records


def list_predevices(
    t: Transport, *, dev_type: str = "gpu", grp_id: int | None = None, mach_id: int | None = None
) -> list[PreDevice]:
    """``GET predevice?dev_type=&grp_id=&mach_id=``: group-assigned devices (pool or attached)."""
    params: dict[str, object] = {"dev_type": dev_type}
    if grp_id is not None:
        params["grp_id"] = grp_id
    if mach_id is not None:
        params["mach_id"] = mach_id
    return parse_records(
        PreDevice, t.request("GET", "predevice", params=params), method="GET", path="predevice"
    )


def _body(status: DeviceStatus, group: Group) -> dict[str, object]:
    return GroupGpuRelator(device_status=status, group=group).wire()


def add_gpu_to_group(t: Transport, *, status: DeviceStatus, group: Group) -> None:
    """``POST predevice/gpu``: system free pool -> ``group``'s free pool."""
    t.request("POST", "predevice/gpu", json=_body(status, group), device=status.name)


def remove_gpu_from_group(t: Transport, *, status: DeviceStatus, group: Group) -> None:
    """``DELETE predevice/gpu``: ``group``'s free pool -> system free pool."""
    t.request("DELETE", "predevice/gpu", json=_body(status, group), device=status.name)
