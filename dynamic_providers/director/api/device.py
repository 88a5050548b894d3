"""``device`` resource: GPU facts (``device/info/gpu``) and user descriptions (``device/udesc``).

Paths from the LIQID SDK (``get_gpu_device_info``; ``get_gpu_device_info_by_name``:
``GET device/info/gpu/{name}``; ``create_device_description``: ``PUT device/udesc/{type}/{id}``
with ``{"udesc": ...}``; liqidinc/liqidsdk-generator, ``GetGPUDeviceInfoByName``).
"""

from __future__ import annotations

from .._transport import Transport
from ..models import GpuInfo
from . import parse_one, parse_records


def list_gpu_info(t: Transport) -> list[GpuInfo]:
    """``GET device/info/gpu``: vendor, model, memory (MiB) and ``udesc`` of every GPU."""
    return parse_records(GpuInfo, t.request("GET", "device/info/gpu"), method="GET", path="device/info/gpu")


def gpu_info(t: Transport, name: str) -> GpuInfo:
    """``GET device/info/gpu/{name}``: one GPU's vendor, model, memory and ``udesc``.

    Raises:
        DirectorNotFoundError: no GPU of that name.
    """
    path = f"device/info/gpu/{name}"
    return parse_one(GpuInfo, t.request("GET", path, device=name), method="GET", path=path)


def set_gpu_description(t: Transport, *, dev_id: str, text: str, device: str) -> None:
    """``PUT device/udesc/gpu/{dev_id}``: set the GPU's user description to ``text``."""
    t.request("PUT", f"device/udesc/gpu/{dev_id}", json={"udesc": text}, device=device)


def clear_gpu_description(t: Transport, *, dev_id: str, device: str) -> None:
    """``DELETE device/udesc/gpu/{dev_id}``: remove the GPU's user description."""
    t.request("DELETE", f"device/udesc/gpu/{dev_id}", device=device)
