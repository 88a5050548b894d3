"""The DRA driver's slices over the Director simulator and the real Director client: each free
GPU published with the model string, memory and fabric id the Director serves in LIQID's wire
format (``device/info/gpu`` ``model`` and ``dram_size``, ``status/gpu`` ``fabr_id``), and a
failed ``device/info/gpu`` read skipping the round."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from composer.decide.round_types import Policy
from composer.run.dra import DraDriver
from composer.run.dra_loop import DraController
from composer.shell.act import Executor
from composer.shell.metrics import Metrics
from lab.director_sim import Fabric, SimulatorServer, create_app, load_inventory
from tests.composer.fakes import Clock, node
from tests.composer.test_dra_driver import FakeDraKube, devices
from tests.director.conftest import INVENTORIES, PASSWORD, USER, Sim, make_client

#: Not 0 (the client's default for a record without one): the published id is the one served.
FABRIC_ID = 5


@pytest.fixture
def sim() -> Iterator[Sim]:
    """The simulator with the rich inventory (4 hosts, 10 GPUs, 2 models) on fabric 5."""
    inventory = load_inventory(INVENTORIES / "rich.yaml").model_copy(update={"fabric_id": FABRIC_ID})
    fabric = Fabric(inventory)
    server = SimulatorServer(create_app(fabric, username=USER, password=PASSWORD), quiet=True).start()
    yield Sim(server, fabric)
    server.stop()


@pytest.fixture
def loop(sim: Sim) -> Iterator[tuple[FakeDraKube, DraController]]:
    kube = FakeDraKube()
    for name in ("blade-slot-1", "blade-slot-2", "blade-slot-3", "blade-slot-4"):
        kube.add_node(node(name))
    clock = Clock()
    policy = Policy(idle_timeout_seconds=60)
    ex = Executor(kube, lambda: make_client(sim.url, retries=0), policy, Metrics(), clock=clock)
    ctrl = DraController(DraDriver(kube, ex, policy, clock=clock), Metrics(), clock=clock)
    yield kube, ctrl
    ctrl.close()


def _facts(device: dict[str, Any]) -> tuple[str, str, int]:
    attrs = device["attributes"]
    return attrs["model"]["string"], device["capacity"]["memory"]["value"], attrs["fabric"]["int"]


def test_published_devices_carry_the_model_memory_and_fabric_the_director_serves(
    sim: Sim, loop: tuple[FakeDraKube, DraController]
) -> None:
    kube, ctrl = loop
    assert ctrl.round() is not None
    got = devices(kube)
    assert _facts(got["gpu0"]) == ("Tesla T4", "15Gi", FABRIC_ID)  # dram_size "15360"
    assert _facts(got["gpu4"]) == ("NVIDIA A100-PCIE-40GB", "40Gi", FABRIC_ID)  # dram_size "40960"
    assert got["gpu4"]["attributes"]["productName"] == {"string": "NVIDIA-A100-PCIE-40GB"}
    assert got["gpu0"]["attributes"]["pcieSwitch"] == {"string": sim.gpu("gpu0")["swit_gid"]}


def test_a_failed_device_info_read_skips_the_round_and_the_next_round_publishes(
    sim: Sim, loop: tuple[FakeDraKube, DraController]
) -> None:
    kube, ctrl = loop
    sim.fault(kind="error", method="GET", path="device/info/gpu", status=503, times=1)
    assert ctrl.round() is None  # the owner tags come with the facts: nothing to decide on
    assert ctrl.metrics.round_failures.labels("observe-director")._value.get() == 1
    assert kube.slices == {}
    assert ctrl.round() is not None
    assert _facts(devices(kube)["gpu0"]) == ("Tesla T4", "15Gi", FABRIC_ID)
