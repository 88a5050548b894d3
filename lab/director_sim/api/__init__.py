"""Director simulator handlers (hardware stand-in), one module per API resource like the real tree.

``status``, ``device``, ``group``, ``machine``, ``predevice``, ``relate``, ``fabric``, ``digest``,
``coordinates``, ``pool`` and ``job`` (the poll link of HTTP 202 answers)
under ``/liqid/api/v2/``; client side: ``dynamic_providers.director.api``.
"""

from __future__ import annotations

from flask import Blueprint

from . import coordinates, device, digest, fabric, group, job, machine, pool, predevice, relate, status

BLUEPRINTS: tuple[Blueprint, ...] = (
    status.bp,
    device.bp,
    group.bp,
    machine.bp,
    predevice.bp,
    relate.bp,
    fabric.bp,
    digest.bp,
    coordinates.bp,
    pool.bp,
    job.bp,
)
