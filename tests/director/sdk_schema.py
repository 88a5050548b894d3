"""A checker of Director payloads against LIQID's SDK types, independent of our client's models.

The type table is ``tests/fixtures/director/sdk_types.json``, transcribed from the Go SDK's
generated structs (``liqidinc/liqidsdk-go`` ``liqidsdk/types_gen.go``, ``enums_gen.go``) and the
Java SDK where the two disagree (see the notes in that file). Nothing here imports
``dynamic_providers``: two pieces of our own that agree with each other prove nothing.

Rules (what the SDKs' JSON decoders accept, made strict): every field of the struct is present
and no other; ``string`` fields hold strings, ``int`` fields integers (not strings, not bools),
``bool`` fields booleans; enum fields one of the enum's values; nested structs and lists
recursively; ``null`` nowhere (the Director writes ``"n/a"`` for absent values).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SDK_TYPES = Path(__file__).resolve().parents[1] / "fixtures" / "director" / "sdk_types.json"

#: (method, path pattern) -> SDK type of each ``data`` record. ``int`` / ``string``: a bare datum.
#: Paths and types from ``liqidinc/liqidsdk-java`` ``liqidsdk/generated/com/liqid/sdk/LiqidClient.java``.
ENDPOINT_TYPES: dict[tuple[str, str], str] = {
    ("GET", "status/gpu"): "GPUDeviceStatus",
    ("GET", "status"): "DeviceStatus",
    ("GET", "device/info/gpu"): "GPUDeviceInfo",
    ("GET", "device/info/gpu/*"): "GPUDeviceInfo",
    ("PUT", "device/udesc/gpu/*"): "DeviceUserDescription",
    ("DELETE", "device/udesc/gpu/*"): "DeviceUserDescription",
    ("GET", "group"): "Group",
    ("GET", "machine"): "Machine",
    ("GET", "machine/details/*"): "MachineDetails",
    ("GET", "predevice"): "PreDevice",
    ("GET", "coordinates"): "Coordinates",
    ("GET", "fabric/id"): "int",
    ("POST", "pool/edit"): "GroupPool",
    ("POST", "pool/done"): "GroupPool",
    ("POST", "pool/cancel"): "GroupPool",
    ("POST", "predevice/gpu"): "GroupGPUDeviceRelator",
    ("DELETE", "predevice/gpu"): "GroupGPUDeviceRelator",
    ("POST", "relate/gpu"): "MachineGPUDeviceRelator",
    ("DELETE", "relate/gpu"): "MachineGPUDeviceRelator",
    ("POST", "fabric/edit"): "Machine",
    ("POST", "fabric/edit/cancel"): "Machine",
    ("POST", "fabric/reprogram"): "Machine",
    ("POST", "fabric/reprogram/cancel"): "Machine",
    ("POST", "digest/*"): "DigestInfo",
    ("DELETE", "digest/*"): "string",
    ("GET", "job/*"): "AsynchronousStatus",
}


@cache
def sdk_types() -> dict[str, Any]:
    """The transcribed type table (``types`` and ``enums``)."""
    return json.loads(SDK_TYPES.read_text(encoding="utf-8"))


def endpoint_type(method: str, path: str) -> str:
    """The SDK type of the records ``METHOD path`` answers. Raises KeyError for an unknown call."""
    for (m, pattern), t in ENDPOINT_TYPES.items():
        if m != method.upper():
            continue
        if pattern.endswith("/*"):
            if path.startswith(pattern[:-1]) and "/" not in path[len(pattern) - 1 :]:
                return t
        elif path == pattern:
            return t
    raise KeyError(f"{method} {path}")


def problems(
    value: Any, type_name: str, where: str = "$", *, allow: frozenset[str] = frozenset()
) -> list[str]:
    """Where ``value`` differs from the SDK type ``type_name`` (empty list: it conforms).

    Args:
        allow: extra keys tolerated on the top-level record (``links`` of an HTTP 202 answer).
    """
    table = sdk_types()
    if value is None:
        return [f"{where}: null"]
    if isinstance(type_name, dict):
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        out: list[str] = []
        for i, item in enumerate(value):
            out += problems(item, type_name["list"], f"{where}[{i}]")
        return out
    if type_name == "string":
        return [] if isinstance(value, str) else [f"{where}: {value!r} is not a string"]
    if type_name == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not an integer"]
    if type_name == "bool":
        return [] if isinstance(value, bool) else [f"{where}: {value!r} is not a boolean"]
    if type_name in table["enums"]:
        values = table["enums"][type_name]["values"]
        return [] if value in values else [f"{where}: {value!r} is not a {type_name} ({', '.join(values)})"]
    struct = table["types"][type_name]["fields"]
    if not isinstance(value, dict):
        return [f"{where}: not an object ({type_name})"]
    out = []
    missing = sorted(set(struct) - set(value))
    extra = sorted(set(value) - set(struct) - allow)
    if missing:
        out.append(f"{where}: {type_name} fields missing: {missing}")
    if extra:
        out.append(f"{where}: fields not in {type_name}: {extra}")
    for key, t in struct.items():
        if key in value:
            out += problems(value[key], t, f"{where}.{key}")
    return out


def record_type(method: str, path: str, record: Any) -> str:
    """The SDK type of one record; ``GET status`` mixes compute devices and the others."""
    t = endpoint_type(method, path)
    if t == "DeviceStatus" and isinstance(record, dict) and record.get("device_type") == "compute":
        return "ComputeDeviceStatus"
    return t


def envelope_problems(body: Any, method: str, path: str, *, status: int = 200) -> list[str]:
    """Check a whole answer: the envelope (``errors`` null on success) and every record."""
    if not isinstance(body, dict) or set(body) != {"response"}:
        return ["body is not {'response': ...}"]
    resp = body["response"]
    if set(resp) != {"code", "errors", "data"}:
        return [f"response keys {sorted(resp)}"]
    out = []
    failed = resp["code"] != 0 or bool(resp["errors"])
    if not failed:
        if resp["errors"] is not None:
            out.append(f"errors is {resp['errors']!r} on success, not null (liqidsdk-go client.go:491)")
        allow = frozenset({"links"}) if status == 202 else frozenset()
        for i, rec in enumerate(resp["data"] or []):
            out += problems(
                rec, record_type(method, path, rec), f"data[{i}]", allow=allow if i == 0 else frozenset()
            )
        if status == 202:
            links = (resp["data"] or [{}])[0].get("links") if resp["data"] else None
            if not (isinstance(links, list) and links and isinstance(links[0].get("href"), str)):
                out.append("HTTP 202 without data[0].links[0].href")
    else:
        for i, e in enumerate(resp["errors"] or []):
            if set(e) != {"code", "message", "type"} or not isinstance(e["code"], int):
                out.append(f"errors[{i}] is not an ErrorMessage: {e!r}")
    return out
