"""Fixtures for the Director tests: the simulator on a free 127.0.0.1 port, fast clients."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from dynamic_providers.director import provider as provider_mod
from dynamic_providers.director.client import DirectorClient
from lab.director_sim import Fabric, SimulatorServer, create_app, load_inventory

ROOT = Path(__file__).resolve().parents[2]
INVENTORIES = ROOT / "lab" / "inventories"
FIXTURES = ROOT / "tests" / "fixtures" / "director"
USER, PASSWORD = "sim-admin", "sim-password-4f1c"

#: Fast client settings for tests (no real backoff, short waits).
FAST = {"backoff_factor": 0.0, "edit_wait": 0.3, "poll_interval": 0.02}


@dataclass
class Sim:
    """A running simulator and helpers to drive its ``/_sim`` control API."""

    server: SimulatorServer
    fabric: Fabric

    @property
    def url(self) -> str:
        return self.server.url

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        r = requests.post(f"{self.url}/_sim/{path}", json=body, timeout=5)
        r.raise_for_status()
        return r.json()

    def fault(self, **rule: Any) -> None:
        """Add a fault rule (see lab.director_sim.faults)."""
        self._post("faults", rule)

    def detach(self, device: str) -> None:
        self._post("detach", {"device": device})

    def attach(self, device: str, machine: str) -> None:
        self._post("attach", {"device": device, "machine": machine})

    def state(self) -> dict[str, Any]:
        r = requests.get(f"{self.url}/_sim/state", timeout=5)
        r.raise_for_status()
        return r.json()

    def fabric_state(self) -> dict[str, Any]:
        """Placement, pools, tags and open edits, for 'state unchanged' comparisons.

        Leaves out traffic counters, digests and the machines' audit trail (``mtime``,
        ``connection_history``), which record that something was tried and undone.
        """
        s = self.state()
        for key in ("counters", "digests", "violations", "jobs_running"):
            s.pop(key)
        for m in s["machines"]:
            m.pop("mtime_ms")
            m.pop("history")
        return s

    def calls(self, what: str) -> int:
        """How many times ``METHOD path`` was called."""
        return int(self.state()["counters"].get(what, 0))

    def gpu(self, name: str) -> dict[str, Any]:
        return next(g for g in self.state()["gpus"] if g["name"] == name)

    def machine_id(self, name: str) -> int:
        return next(m["mach_id"] for m in self.state()["machines"] if m["name"] == name)


def start_sim(
    inventory: str = "rich.yaml",
    *,
    state_file: Path | None = None,
    latency: float = 0.0,
    async_seconds: float | None = None,
) -> Sim:
    """A simulator on a free port; ``async_seconds``: every change answers HTTP 202 with a job."""
    fabric = Fabric(load_inventory(INVENTORIES / inventory), state_file=state_file, hotplug_latency=latency)
    app = create_app(fabric, username=USER, password=PASSWORD, async_seconds=async_seconds)
    server = SimulatorServer(app, quiet=True).start()
    return Sim(server, fabric)


@pytest.fixture
def sim() -> Iterator[Sim]:
    """The simulator with the rich inventory (4 hosts, 10 GPUs, 2 models, 3 switches)."""
    s = start_sim()
    yield s
    s.server.stop()


@pytest.fixture
def dev_sim() -> Iterator[Sim]:
    """The simulator with the dev inventory (2 hosts, 2 Tesla T4)."""
    s = start_sim("dev.yaml")
    yield s
    s.server.stop()


def make_client(url: str, **kw: Any) -> DirectorClient:
    opts: dict[str, Any] = {"username": USER, "password": PASSWORD, "timeout": 2.0, "retries": 2, **FAST}
    opts.update(kw)
    return DirectorClient(url, **opts)


@pytest.fixture
def client(sim: Sim) -> Iterator[DirectorClient]:
    with make_client(sim.url) as c:
        yield c


@pytest.fixture
def fast_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """Provider clients without real backoff or long waits."""
    monkeypatch.setattr(provider_mod, "CLIENT_DEFAULTS", {**FAST, "retries": 2})


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))
