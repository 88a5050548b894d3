"""Pulumi program for the policy pack's CLI tests (copied into a temporary project as __main__.py).

It registers one ComponentResource per entry of the layout file named by the stack config key
``policy-fixture:layout`` (see ``layouts.py``): the entry's type token, name and props, exactly
as the component contract in docs/architecture.md passes them. ``{"$secret": v}`` becomes
``pulumi.Output.secret(v)``; ``{"$unknown": true}`` becomes an output that is unknown during
preview. It creates no real resources.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pulumi


class FixtureComponent(pulumi.ComponentResource):
    """A stand-in component: the contract's token and props, no children."""

    def __init__(
        self, token: str, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None
    ) -> None:
        super().__init__(token, name, props, opts)
        self.register_outputs({})


def _unknown() -> pulumi.Output[Any]:
    loop = asyncio.get_event_loop()
    value: asyncio.Future[Any] = loop.create_future()
    value.set_result(None)
    known: asyncio.Future[bool] = loop.create_future()
    known.set_result(False)
    return pulumi.Output(set(), value, known)


def _convert(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("$unknown") is True:
            return _unknown()
        if "$secret" in value:
            return pulumi.Output.secret(value["$secret"])
        return {k: _convert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_convert(v) for v in value]
    return value


layout = json.loads(Path(pulumi.Config("policy-fixture").require("layout")).read_text())
registered: dict[str, FixtureComponent] = {}
for entry in layout:
    parent = registered.get(entry.get("parent", ""))
    registered[entry["name"]] = FixtureComponent(
        entry["type"], entry["name"], _convert(entry["props"]), pulumi.ResourceOptions(parent=parent)
    )
