"""The composer's background Director read in a worker process, against the Director simulator."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator

import pytest

from composer.decide.round_types import Policy
from composer.model.fabric import DirectorFactory, read_fabric
from composer.run.controller import Controller
from composer.shell.act import Executor
from composer.shell.fabric_process import FabricReadError, ProcessFabricReader, background_reader
from composer.shell.metrics import Metrics
from dynamic_providers.director.known import shared_statuses
from tests.composer.fakes import FakeFabric, FakeKube
from tests.director.conftest import PASSWORD, USER, Sim, start_sim


@pytest.fixture
def sim() -> Iterator[Sim]:
    s = start_sim()
    yield s
    s.server.stop()


def _factory(url: str) -> DirectorFactory:
    return DirectorFactory(url, username=USER, password=PASSWORD, timeout=2.0, retries=0)


def _children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def test_the_worker_reads_what_a_client_here_reads_and_shares_its_status_records(sim: Sim) -> None:
    factory = _factory(sim.url)
    known = shared_statuses(sim.url)
    known.forget()
    here = factory()
    reader = ProcessFabricReader(factory)
    before = _children()
    try:
        view = reader.read()
        assert _children() - before, "the read ran in a worker process"
        statuses = known.get(["gpu0", "gpu1"], max_age=60.0)  # the worker's, validated now
        assert statuses is not None
        assert view == read_fabric(here)
        assert statuses["gpu0"] == here.gpu_statuses(names=["gpu0"])[0]  # type: ignore[attr-defined]
    finally:
        reader.close()
        here.close()
    assert not (_children() - before), "close stops the worker"


def test_a_change_on_the_director_is_in_the_next_read(sim: Sim) -> None:
    reader = ProcessFabricReader(_factory(sim.url))
    try:
        first = reader.read()
        free = next(g for g in first.gpus if g.machine is None)
        machine = sorted(first.machines)[0]
        sim.attach(free.name, machine)
        again = {g.name: g for g in reader.read().gpus}
        assert again[free.name].machine == machine
    finally:
        reader.close()


def test_a_failed_read_says_why_and_the_next_read_works(sim: Sim) -> None:
    reader = ProcessFabricReader(_factory(sim.url))
    try:
        sim.fault(kind="error", method="GET", path="status/gpu", status=500, times=1)
        with pytest.raises(FabricReadError, match="status/gpu"):
            reader.read()
        assert reader.read().gpus
    finally:
        reader.close()


def test_a_worker_that_died_is_replaced_by_the_next_read(sim: Sim) -> None:
    reader = ProcessFabricReader(_factory(sim.url))
    before = _children()
    try:
        reader.read()
        (worker,) = _children() - before
        os.kill(worker, signal.SIGKILL)
        with pytest.raises(FabricReadError, match="died"):
            reader.read()
        assert reader.read().gpus
        assert worker not in _children()
    finally:
        reader.close()


def test_the_password_is_not_in_the_factorys_repr() -> None:
    factory = DirectorFactory("http://d", username="u", password="s3cret", timeout=1, retries=0)
    assert "s3cret" not in repr(factory)


def test_the_composer_reads_a_real_director_in_a_worker_and_a_fake_on_a_thread() -> None:
    """Only a real Director's factory can be pickled to a worker; a test's in-memory fabric
    lives in this process and keeps being read on a thread."""
    assert isinstance(background_reader(_factory("http://127.0.0.1:9")), ProcessFabricReader)
    assert background_reader(lambda: FakeFabric([], [])) is None


def test_the_controllers_background_refresh_reads_a_real_director_in_a_worker(sim: Sim) -> None:
    """The controller's first read is on its own thread; the refresh of an old read lands a read
    made in a worker process, which sees a change made on the Director meanwhile."""
    now = [0.0]
    factory = _factory(sim.url)
    pol = Policy(idle_timeout_seconds=60, advertise_timeout_seconds=30, schedule_timeout_seconds=120)
    metrics = Metrics()
    controller = Controller(FakeKube(), factory, pol, metrics, Executor(FakeKube(), factory, pol, metrics),
                            fabric_max_age_seconds=10, clock=lambda: now[0])
    cache = controller.fabric
    before = _children()
    try:
        first = cache.view()
        assert not (_children() - before), "the first read is on the caller's thread"
        free = next(g for g in first.gpus if g.machine is None)
        machine = sorted(first.machines)[0]
        sim.attach(free.name, machine)
        now[0] = 11.0
        assert cache.view() is first  # old: returned, and refreshed in the background
        assert cache.wait_refreshed(60.0)
        assert _children() - before, "the background read ran in a worker process"
        assert {g.name: g.machine for g in cache.view().gpus}[free.name] == machine
    finally:
        cache.close()
    assert not (_children() - before)
