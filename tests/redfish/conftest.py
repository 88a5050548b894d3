"""Fixtures for the Redfish tests: the BMC simulator as real subprocesses on 127.0.0.1.

Two simulator processes per test session (ports chosen by the OS, read from
``endpoints.json``):

- HTTP: one BlueField BMC per host-privilege generation: ``dpu-legacy`` (BF-24.04-5, BIOS
  attribute with the spaced ``Host Privilege Level`` key), ``dpu`` (BF-24.10-17,
  ``ExternalHostPrivileges``; its BIOS has the compact keys), ``dpu-2510`` (BF-25.10-4) and
  ``dpu-2601`` (BF-26.01-2, ``HostPrivilegeConfig``); ``host`` (generic host BMC, ``Systems/1``);
- HTTPS (``--tls``): ``dpu-tls``, verified with the simulator's ``tls/ca.pem``.

Every test starts from factory state (``POST /_sim/reset`` on each BMC).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from lab import readiness

ROOT = Path(__file__).resolve().parents[2]
USERNAME = "root"
PASSWORD = "sim-password-5f1e"


@dataclass
class SimProcess:
    """One running simulator process."""

    proc: subprocess.Popen
    state_dir: Path
    endpoints: dict[str, dict[str, Any]]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def start_sim(state_dir: Path, bmcs: list[str], *, tls: bool = False,
              timeout_seconds: float = 120.0) -> SimProcess:
    """Start ``python -m lab.redfish_sim`` and wait for ``endpoints.json``.

    Raises:
        readiness.NotReadyError: the simulator exited or did not come up in time (its log quoted).
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "endpoints.json").unlink(missing_ok=True)
    argv = [sys.executable, "-m", "lab.redfish_sim", "--host", "127.0.0.1", "--state-dir", str(state_dir)]
    for b in bmcs:
        argv += ["--bmc", b]
    if tls:
        argv.append("--tls")
    env = {**os.environ, "REDFISH_SIM_USERNAME": USERNAME, "REDFISH_SIM_PASSWORD": PASSWORD}
    log = (state_dir / "sim.log").open("wb")
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    path = state_dir / "endpoints.json"
    try:
        endpoints = readiness.wait_until(lambda: path.exists() and json.loads(path.read_text()),
                                         what="redfish sim", timeout_seconds=timeout_seconds,
                                         interval_seconds=0.05, alive=lambda: proc.poll() is None,
                                         log=state_dir / "sim.log")
    except readiness.NotReadyError:
        proc.kill()
        proc.wait()
        raise
    return SimProcess(proc, state_dir, endpoints)


class Sim:
    """The simulated BMCs: URLs and the ``/_sim`` control path."""

    def __init__(self, http: SimProcess, https: SimProcess) -> None:
        self.endpoints = {**http.endpoints, **https.endpoints}
        self.ca_bundle = str(https.state_dir / "tls" / "ca.pem")
        self.username, self.password = USERNAME, PASSWORD
        self._ctl = requests.Session()

    def url(self, name: str) -> str:
        """Base URL of BMC ``name`` (``http(s)://127.0.0.1:PORT``)."""
        return self.endpoints[name]["url"]

    def _post(self, name: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self._ctl.post(self.url(name) + path, json=body, timeout=10, verify=self.ca_bundle)
        resp.raise_for_status()
        return resp.json()

    def state(self, name: str) -> dict[str, Any]:
        """``GET /_sim/state``."""
        resp = self._ctl.get(self.url(name) + "/_sim/state", timeout=10, verify=self.ca_bundle)
        resp.raise_for_status()
        return resp.json()

    def drift(self, name: str, **change: Any) -> dict[str, Any]:
        """Out-of-band change (``POST /_sim/state``)."""
        return self._post(name, "/_sim/state", change)

    def fault(self, name: str, **fault: Any) -> None:
        """Arm a fault (``POST /_sim/faults``)."""
        self._post(name, "/_sim/faults", fault)

    def concurrent_write(self, name: str, attributes: dict[str, Any]) -> None:
        """Arm a concurrent settings write after the next GET of Bios/Settings."""
        self._post(name, "/_sim/concurrent-write", {"attributes": attributes})

    def expire_sessions(self, name: str) -> None:
        """Drop every session on the BMC."""
        self._post(name, "/_sim/expire-sessions", {})

    def host_privilege(self, name: str) -> str:
        """The host privilege in effect on the simulated card, read behind the BMC's back:
        ``Privileged``, ``Restricted`` or ``Custom`` (for the interface its firmware has)."""
        st = self.state(name)
        if st["privilege_interface"] == "external":
            values = set(st["external_privileges_effective"].values())
            if values == {"Disabled"}:
                return "Restricted"
            return "Custom" if "Disabled" in values else "Privileged"
        if st["privilege_interface"] == "config":
            return st["privilege_mode"]
        attrs = st["attributes"]
        return attrs.get("HostPrivilegeLevel", attrs.get("Host Privilege Level"))

    def requests_to(self, name: str, method: str, path: str) -> list[dict[str, Any]]:
        """Logged requests with this method and path."""
        return [r for r in self.state(name)["requests"] if r["method"] == method and r["path"] == path]

    def factory_reset(self) -> None:
        """Every BMC back to factory state."""
        for name in self.endpoints:
            self._post(name, "/_sim/reset", {})


@pytest.fixture(scope="session")
def sim_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    base = tmp_path_factory.mktemp("redfish-sim")
    http = start_sim(base / "http", ["dpu=0", "dpu-legacy=0:BF-24.04-5", "dpu-2510=0:BF-25.10-4",
                                        "dpu-2601=0:BF-26.01-2", "host=0"])
    try:
        https = start_sim(base / "https", ["dpu-tls=0"], tls=True)
    except Exception:
        http.stop()
        raise
    try:
        yield Sim(http, https)
    finally:
        http.stop()
        https.stop()


@pytest.fixture
def sim(sim_session: Sim) -> Sim:
    """The simulated BMCs, in factory state."""
    sim_session.factory_reset()
    return sim_session


@pytest.fixture
def free_port() -> int:
    """A port on 127.0.0.1 with nothing listening (for 'unreachable' cases)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
