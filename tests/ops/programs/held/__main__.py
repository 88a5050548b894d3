"""Test program for the shared-state tests: one dynamic resource that carries a secret input
and can be held inside ``create`` (while a file exists) so that a test can observe the stack
lock of a running update, run a second update against it, or kill it mid-operation."""

import os
import time

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider

HOLD_LIMIT_SECONDS = 60.0


class HeldProvider(ResourceProvider):
    def create(self, props):
        hold = props.get("hold_file") or ""
        deadline = time.monotonic() + HOLD_LIMIT_SECONDS
        while hold and os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)
        return CreateResult(id_=props["name"], outs=dict(props))


class Held(Resource):
    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(HeldProvider(), name, {"name": name, **props}, opts)


cfg = pulumi.Config()
host = Held(
    "bmc-credential",
    {
        "hold_file": cfg.get("holdFile") or "",
        "password": cfg.require_secret("bmcPassword"),
        "marker": cfg.require("marker"),
    },
)
pulumi.export("id", host.id)
pulumi.export("password", cfg.require_secret("bmcPassword"))
