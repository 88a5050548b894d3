"""``relate`` resource: attach/detach a GPU to/from a machine inside an open fabric edit.

Body: ``{"groupDeviceRelator": {"deviceStatus": ..., "group": ...}, "machine": ...}``
(LIQID ``MachineGPUDeviceRelator``; docs/domain.md "LIQID Director REST API").
Takes effect at ``fabric/reprogram``.
"""

from __future__ import annotations

from .._transport import Transport
from ..models import DeviceStatus, Group, GroupGpuRelator, Machine, MachineGpuRelator


def _body(status: DeviceStatus, group: Group, machine: Machine) -> dict[str, object]:
    relator = GroupGpuRelator(device_status=status, group=group)
    return MachineGpuRelator(group_device_relator=relator, machine=machine).wire()


def attach_gpu(t: Transport, *, status: DeviceStatus, group: Group, machine: Machine) -> None:
    """``POST relate/gpu``: relate the GPU to the machine (pending until reprogram)."""
    t.request(
        "POST",
        "relate/gpu",
        json=_body(status, group, machine),
        machine=machine.mach_name,
        device=status.name,
    )


def detach_gpu(t: Transport, *, status: DeviceStatus, group: Group, machine: Machine) -> None:
    """``DELETE relate/gpu``: unrelate the GPU from the machine (pending until reprogram)."""
    t.request(
        "DELETE",
        "relate/gpu",
        json=_body(status, group, machine),
        machine=machine.mach_name,
        device=status.name,
    )
