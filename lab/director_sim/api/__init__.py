"""Director simulator handlers (hardware stand-in), one module per API resource like the real tree.

``status``, ``device``, ``group``, ``machine``, ``predevice``, ``relate``, ``fabric``, ``digest``
under ``/liqid/api/v2/``; client side: ``dynamic_providers.director.api``.
"""

from __future__ import annotations

from flask import Blueprint

from . import device, digest, fabric, group, machine, predevice, relate, status

BLUEPRINTS: tuple[Blueprint, ...] = (
    status.bp,
    device.bp,
    group.bp,
    machine.bp,
    predevice.bp,
    relate.bp,
    fabric.bp,
    digest.bp,
)
