"""LIQID Director simulator: a hardware stand-in for the lab and the tests (not the real Director).

It follows the Director REST API as published (docs/domain.md "LIQID Director REST API"; LIQID SDK 3.x paths
and field names): groups, machines and GPUs (vendor, model, fabric and PCIe switch ids); the
system and group free pools; fabric edit -> relate/unrelate -> reprogram with cancel; HTTP
Basic and digest (``X-API-Key``) auth; the ``{"response": {...}}`` envelope. State is
file-backed; hot-plug latency is configurable; faults are injected through ``/_sim/``.

Run: ``python -m lab.director_sim --port 18080 --inventory lab/inventories/dev.yaml``.
Embed: ``SimulatorServer(create_app(Fabric(load_inventory(path)), username=..., password=...))``.

Layering: this package never imports ``dynamic_providers`` or ``composer``.
"""

from __future__ import annotations

from .app import API_PREFIX, create_app
from .inventory import Inventory, load_inventory
from .server import SimulatorServer
from .state import Fabric

__all__ = ["API_PREFIX", "Fabric", "Inventory", "SimulatorServer", "create_app", "load_inventory"]
