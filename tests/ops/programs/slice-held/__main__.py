"""Test program for the estate lock tests: a stand-in for one stack of a split estate.

It declares one dynamic resource named after the stack's ``composable-gpu:role`` whose ``create``
is held while the file ``<SLICE_HOLD_DIR>/<stack>`` exists (at most 60 s), so a test can see the
stack's lock while its update runs. The resource's outputs record when ``create`` started and
ended (Unix seconds), so two updates can be shown to overlap in time. Nothing here talks to
anything but the local file system.
"""

import os
import time

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider

HOLD_LIMIT_SECONDS = 60.0


class SliceProvider(ResourceProvider):
    def create(self, props):
        started = time.time()
        hold = props["hold_file"]
        deadline = time.monotonic() + HOLD_LIMIT_SECONDS
        while hold and os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)
        return CreateResult(id_=props["name"], outs={**props, "started": started, "ended": time.time()})


class Slice(Resource):
    started: pulumi.Output[float]
    ended: pulumi.Output[float]

    def __init__(self, name: str, hold_file: str) -> None:
        props = {"name": name, "hold_file": hold_file, "started": None, "ended": None}
        super().__init__(SliceProvider(), name, props)


role = pulumi.Config("composable-gpu").require("role")
hold_dir = os.environ.get("SLICE_HOLD_DIR", "")
part = Slice(role.replace(":", "-"), os.path.join(hold_dir, pulumi.get_stack()) if hold_dir else "")
pulumi.export("started", part.started)
pulumi.export("ended", part.ended)
