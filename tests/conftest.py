"""Session fixtures shared by the whole suite.

- The environment of ``lab/env.sh`` (toolchain and venv on PATH, Pulumi home inside the
  checkout) is applied even when pytest is started directly.
- ``lab``: the local control planes and hardware simulators, started once per session if
  they are not already running, and stopped at the end if this session started them.
- ``lab_hosts_on_mothership``: the same lab with the hosts' Nodes on the mothership for one test.
- The run is guarded (``lab.run_guard``): every process it starts, the lab's included, is
  stopped by a watchdog when the runner ends, also when it is stopped by SIGTERM or SIGINT
  (which let pytest tear down for at most ``lab.run_guard.STOP_GRACE_SECONDS``) or killed.
  A lab that was already running when the run began is not touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab import run_guard

#: Skips fail under CI=true and every run ends with a one-line skip summary (tests/ci_skips.py).
pytest_plugins = ["tests.ci_skips"]
_GUARD = pytest.StashKey[run_guard.Guard]()

ROOT = Path(__file__).resolve().parent.parent
_paths = [str(ROOT / ".toolchain" / "bin"), str(ROOT / ".venv" / "bin"), os.environ["PATH"]]
os.environ["PATH"] = os.pathsep.join(_paths)
os.environ.setdefault("PULUMI_HOME", str(Path.home() / ".cache" / "composable-gpu" / "pulumi-home"))
os.environ["PULUMI_SKIP_UPDATE_CHECK"] = "1"
os.environ.setdefault("LAB_DIR", str(ROOT / ".lab"))


def pytest_configure(config: pytest.Config) -> None:
    """Guard the run before any test starts a process."""
    config.stash[_GUARD] = run_guard.guard_this_run(Path(os.environ["LAB_DIR"]))


def unmarked_lab_tests(items: list[Any]) -> list[str]:
    """The node ids of ``items`` (pytest items: ``nodeid``, ``fixturenames``,
    ``get_closest_marker``) that use the ``lab`` fixture, directly or through another fixture,
    without the ``lab`` marker. ``-m "not lab"`` is how a run leaves the lab alone (another
    checkout's lab may hold its fixed ports), so a lab test must say it is one."""
    return [
        item.nodeid
        for item in items
        if "lab" in getattr(item, "fixturenames", ()) and item.get_closest_marker("lab") is None
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse the run when a test uses the lab without the ``lab`` marker (names each one)."""
    unmarked = unmarked_lab_tests(list(items))
    if unmarked:
        raise pytest.UsageError(
            "tests using the lab fixture without the lab marker (add pytestmark = pytest.mark.lab): "
            + ", ".join(unmarked)
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run ended: the watchdog stops what is left (the run waits for it)."""
    guard = config.stash.get(_GUARD, None)
    if guard is not None:
        guard.close()


@pytest.fixture(scope="session")
def lab() -> Iterator[object]:
    """The running lab (``lab.settings.LabConfig`` of the mothership): the mothership's kubeconfig
    is ``lab.kubeconfig``, the second cluster's (the hypervisor cluster ``lab-workers``)
    ``lab.hypervisor.kubeconfig``; the hosts' Nodes (``blade-slot-*``) are in ``lab.hosts_cluster``
    (``lab.hypervisor``, or the mothership with ``LAB_HOSTS_ON_MOTHERSHIP=1``)."""
    from lab import controlplane, processes, services

    cfg = controlplane.LabConfig()
    was_running = all(controlplane.status(cfg).values())
    try:
        controlplane.start(cfg)
        services.start_simulators(cfg, hotplug_latency_seconds=0.2)
    except processes.LabProcessError as exc:
        controlplane.stop(cfg)
        pytest.fail(f"the lab did not start (run `make setup` first?): {exc}")
    yield cfg
    if not was_running:
        controlplane.stop(cfg)



@pytest.fixture
def lab_hosts_on_mothership(lab: Any) -> Iterator[Any]:
    """The running lab with the hosts' Nodes registered on the mothership for one test
    (``LabConfig(hosts_on_mothership=True)``, the GPU agent following them), moved back to
    ``lab.hosts_cluster`` after it: for a program that labels the hosts' Nodes through its
    mothership provider."""
    from dataclasses import replace

    from lab import controlplane, services

    def place(cfg: Any) -> None:
        controlplane.start(cfg)
        services.start_simulators(cfg, hotplug_latency_seconds=0.2)

    moved = replace(lab, hosts_on_mothership=True)
    place(moved)
    yield moved
    place(lab)
