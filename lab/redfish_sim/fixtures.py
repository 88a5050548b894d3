"""Payload templates and Redfish error bodies for the BMC simulator (a hardware stand-in).

The templates are the JSON files in ``tests/fixtures/redfish/`` (written from NVIDIA's
BlueField BMC documentation and the DMTF schemas, see that folder's README). The simulator
copies them and fills in the values that change at run time, so the simulator's payloads and
the client tests' fixtures are the same shapes.

Error bodies follow DSP0266 section "Error responses": ``{"error": {"code", "message",
"@Message.ExtendedInfo": [Message, ...]}}``, with messages from the Base registry
(``messages_base.json``), ``code``/``message`` taken from the first message as bmcweb
(the OpenBMC web server that BlueField BMCs run) does.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "redfish"


@functools.cache
def _load(name: str) -> dict[str, Any]:
    with (FIXTURE_DIR / name).open(encoding="utf-8") as fh:
        return json.load(fh)


def template(name: str) -> dict[str, Any]:
    """A deep copy of fixture ``name`` (e.g. ``"system_bluefield.json"``), safe to modify.

    Raises:
        FileNotFoundError: no such fixture.
    """
    return copy.deepcopy(_load(name))


def registry() -> dict[str, Any]:
    """The Base message registry subset: ``{"RegistryPrefix", "RegistryVersion", "Messages"}``."""
    return _load("messages_base.json")


def message(key: str, *args: str, related: list[str] | None = None) -> dict[str, Any]:
    """One ``Message`` object for registry entry ``key`` (e.g. ``"PropertyUnknown"``).

    ``args`` replace ``%1``, ``%2``, ... in order. ``related`` fills ``RelatedProperties``
    (JSON pointers such as ``"#/Attributes/Foo"``).

    Raises:
        KeyError: ``key`` is not in the registry subset.
    """
    reg = registry()
    entry = reg["Messages"][key]
    text = entry["Message"]
    for i, arg in enumerate(args, start=1):
        text = text.replace(f"%{i}", str(arg))
    msg: dict[str, Any] = {
        "@odata.type": "#Message.v1_1_1.Message",
        "Message": text,
        "MessageArgs": [str(a) for a in args],
        "MessageId": f"{reg['RegistryPrefix']}.{reg['RegistryVersion']}.{key}",
        "MessageSeverity": entry["MessageSeverity"],
        "Resolution": entry["Resolution"],
    }
    if related:
        msg["RelatedProperties"] = related
    return msg


def error_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """An error response body carrying ``messages`` as ``@Message.ExtendedInfo``."""
    first = messages[0]
    return {
        "error": {
            "@Message.ExtendedInfo": messages,
            "code": first["MessageId"],
            "message": first["Message"],
        }
    }


def success_body() -> dict[str, Any]:
    """The body bmcweb returns for a successful PATCH or action: one ``Success`` message."""
    return {"@Message.ExtendedInfo": [message("Success")]}
