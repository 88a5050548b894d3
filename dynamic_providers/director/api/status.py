"""``status`` resource: live device status (LIQID ``DeviceStatus``).

See docs/domain.md "LIQID Director REST API"."""

from __future__ import annotations

from .._transport import Transport
from ..models import DeviceStatus
from . import parse_records


def list_devices(t: Transport) -> list[DeviceStatus]:
    """``GET status``: every device on the fabric (GPUs, compute hosts...)."""
    return parse_records(DeviceStatus, t.request("GET", "status"), method="GET", path="status")


def list_gpus(t: Transport, *, free_only: bool) -> list[DeviceStatus]:
    """``GET status/gpu?filter=true|false``: GPUs in the system free pool only, or all GPUs.

    The filter is always sent explicitly (the LIQID SDK does the same).
    """
    data = t.request("GET", "status/gpu", params={"filter": "true" if free_only else "false"})
    return parse_records(DeviceStatus, data, method="GET", path="status/gpu")
