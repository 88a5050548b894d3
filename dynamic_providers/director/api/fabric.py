"""``fabric`` resource: the edit / reprogram / cancel cycle that changes PCIe connections.

``POST fabric/edit`` (body: machine) opens an edit; ``POST fabric/reprogram`` applies the
pending relations and closes it; ``POST fabric/edit/cancel`` discards them (``liqidinc/liqidsdk-java``
``LiqidClient.java``: ``editFabric`` 1049-1062, ``reprogramFabric`` 4039-4050, ``cancelEditFabric``
618-625; order and cancel-on-failure as in kubint ``ReconfigureMachineAction.java:75-113``).
"""

from __future__ import annotations

from .._transport import Transport
from ..models import Machine


def open_edit(t: Transport, *, machine: Machine) -> None:
    """``POST fabric/edit``.

    Raises:
        DirectorConflictError: an edit is already open on the machine.
    """
    t.request("POST", "fabric/edit", json=machine.wire(), machine=machine.mach_name)


def cancel_edit(t: Transport, *, machine: Machine) -> None:
    """``POST fabric/edit/cancel``: discard pending relations and close the edit."""
    t.request("POST", "fabric/edit/cancel", json=machine.wire(), machine=machine.mach_name)


def reprogram(t: Transport, *, machine: Machine, timeout: float, device: str | None = None) -> None:
    """``POST fabric/reprogram``: hot-plug the pending relations; blocks for the hot-plug.

    Args:
        timeout: read timeout in seconds (hot-plug takes seconds to minutes).
    """
    t.request(
        "POST",
        "fabric/reprogram",
        json=machine.wire(),
        timeout=timeout,
        machine=machine.mach_name,
        device=device,
    )
