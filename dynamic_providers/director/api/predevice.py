"""``predevice`` resource: devices assigned to group pools (LIQID ``PreDevice``, ``GroupGPUDeviceRelator``).

``GET predevice?grp_id=`` lists a group's devices; ``grp_id`` is required (``liqidinc/liqidsdk-java``
``LiqidClient.java:1378-1393``). ``POST predevice/gpu`` moves a GPU from the system free pool into a
group's free pool and ``DELETE predevice/gpu`` (with a body) moves it back, both inside a pool
edit (``api/pool.py``; ``LiqidClient.java:205-219, 3707-3722``; kubint
``AssignToGroupAction.java:56-64``).
"""

from __future__ import annotations

from .._transport import Transport
from ..models import DeviceStatus, Group, GroupGpuRelator, PreDevice
from . import parse_records


def list_predevices(
    t: Transport, *, grp_id: int, dev_type: str = "gpu", mach_id: int | None = None
) -> list[PreDevice]:
    """``GET predevice?dev_type=&grp_id=[&mach_id=]``: one group's devices (pool or attached),
    or those attached to one of its machines."""
    params: dict[str, object] = {"dev_type": dev_type, "grp_id": grp_id}
    if mach_id is not None:
        params["mach_id"] = mach_id
    return parse_records(
        PreDevice, t.request("GET", "predevice", params=params), method="GET", path="predevice"
    )


def _body(status: DeviceStatus, group: Group) -> dict[str, object]:
    return GroupGpuRelator(device_status=status, group=group).wire()


def add_gpu_to_group(t: Transport, *, status: DeviceStatus, group: Group) -> None:
    """``POST predevice/gpu``: system free pool -> ``group``'s free pool (inside a pool edit)."""
    t.request("POST", "predevice/gpu", json=_body(status, group), device=status.name)


def remove_gpu_from_group(t: Transport, *, status: DeviceStatus, group: Group) -> None:
    """``DELETE predevice/gpu``: ``group``'s free pool -> system free pool (inside a pool edit)."""
    t.request("DELETE", "predevice/gpu", json=_body(status, group), device=status.name)
