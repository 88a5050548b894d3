"""``relate`` resource: attach/detach a GPU to/from a machine inside an open fabric edit.

Body: ``{"groupDeviceRelator": {"deviceStatus": ..., "group": ...}, "machine": ...}``
(LIQID ``MachineGPUDeviceRelator``; docs/domain.md "LIQID Director REST API").
Takes effect at ``fabric/reprogram``.
"""

from __future__ import annotations

from .._transport import Transport
from ..models import DeviceStatus, Group, GroupGpuRelator, Machine, MachineGpuRelator


def _relate(t: Transport, method: str, *, status: DeviceStatus, group: Group, machine: Machine) -> None:
    """``<method> relate/gpu`` with the relator body; errors name the machine and the GPU."""
    relator = GroupGpuRelator(device_status=status, group=group)
    t.request(
        method,
        "relate/gpu",
        json=MachineGpuRelator(group_device_relator=relator, machine=machine).wire(),
        machine=machine.mach_name,
        device=status.name,
    )


def attach_gpu(t: Transport, *, status: DeviceStatus, group: Group, machine: Machine) -> None:
    """``POST relate/gpu``: relate the GPU to the machine (pending until reprogram)."""
    _relate(t, "POST", status=status, group=group, machine=machine)


def detach_gpu(t: Transport, *, status: DeviceStatus, group: Group, machine: Machine) -> None:
    """``DELETE relate/gpu``: unrelate the GPU from the machine (pending until reprogram)."""
    _relate(t, "DELETE", status=status, group=group, machine=machine)
