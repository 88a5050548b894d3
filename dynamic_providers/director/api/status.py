"""``status`` resource: live device status (LIQID ``DeviceStatus``).

See docs/domain.md "LIQID Director REST API"."""

from __future__ import annotations

from collections.abc import Collection

from .._transport import Transport
from ..models import DeviceStatus
from . import parse_records


def list_devices(t: Transport) -> list[DeviceStatus]:
    """``GET status``: every device on the fabric (GPUs, compute hosts...)."""
    return parse_records(DeviceStatus, t.request("GET", "status"), method="GET", path="status")


def list_gpus(t: Transport, *, free_only: bool, names: Collection[str] | None = None) -> list[DeviceStatus]:
    """``GET status/gpu?filter=true|false``: GPUs in the system free pool only, or all GPUs.

    The filter is always sent explicitly (the LIQID SDK does the same). ``names``: validate and
    return only the records of these GPUs; the other records of the answer are not validated (a
    compose needs the few GPUs it attaches, and validating 1,000 records was most of its own CPU
    time on a loaded host).

    Raises:
        DirectorProtocolError: a returned record does not have the documented shape.
    """
    data = t.request("GET", "status/gpu", params={"filter": "true" if free_only else "false"})
    if names is not None:
        wanted = frozenset(names)
        data = [r for r in data if isinstance(r, dict) and r.get("name") in wanted]
    return parse_records(DeviceStatus, data, method="GET", path="status/gpu")
