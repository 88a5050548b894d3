"""The Director read rounds plan on: refreshed in the background, never waited for once there is
one, kept true across composes made while a refresh is in flight, dropped after a forget."""

from __future__ import annotations

import threading

from composer.model.fabric import FabricGpu, FabricView
from composer.shell.fabric_cache import FabricCache
from dynamic_providers.director.errors import DirectorServerError
from tests.composer.fakes import FakeFabric, FakeGpu


class _SlowFabric(FakeFabric):
    """A FakeFabric whose ``gpus()`` read waits on ``gate`` once ``hold`` is set."""

    def __init__(self, gpus: list[FakeGpu], machines: list[str]) -> None:
        super().__init__(gpus, machines)
        self.hold = threading.Event()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.reads = 0

    def gpus(self) -> list[FakeGpu]:
        self.reads += 1
        if self.hold.is_set():
            self.entered.set()
            assert self.gate.wait(10), "the test never released the read"
        return super().gpus()


def _cache(
    fab: FakeFabric, now: list[float], max_age: float = 10.0, woken: list[int] | None = None
) -> FabricCache:
    return FabricCache(
        lambda: fab,
        max_age_seconds=max_age,
        on_refresh=(lambda: woken.append(1)) if woken is not None else None,
        clock=lambda: now[0],
    )


def _stale_read_in_flight(cache: FabricCache, fab: _SlowFabric, now: list[float]) -> FabricView:
    """A first read, then 11 s later a view that starts a background read held at ``fab.gate``;
    returns the first read."""
    first = cache.view()
    now[0] = 11.0
    fab.hold.set()
    assert cache.view() is first
    assert fab.entered.wait(5)
    return first


def _machines_of(view: FabricView) -> dict[str, str | None]:
    return {g.name: g.machine for g in view.gpus}


def test_a_stale_read_is_refreshed_in_the_background_and_never_waited_for():
    fab = _SlowFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["h1"])
    now, woken = [0.0], []
    cache = _cache(fab, now, woken=woken)
    try:
        first = cache.view()  # no read yet: read now
        assert fab.reads == 1 and cache.view() is first  # recent: reused
        now[0] = 11.0
        fab.hold.set()
        fab.by("gpu1").machine = "h1"  # attached behind the composer's back
        assert cache.view() is first  # stale: the old read, at once, while a read starts
        assert fab.entered.wait(5) and cache.refreshing
        assert cache.view() is first and fab.reads == 2  # one background read at a time
        fab.gate.set()
        assert cache.wait_refreshed(5)
        assert _machines_of(cache.view()) == {"gpu0": None, "gpu1": "h1"}
        assert woken == [1]  # the change wakes the loop
    finally:
        fab.gate.set()
        cache.close()


def test_a_refresh_that_finds_nothing_new_wakes_nobody():
    fab = FakeFabric([FakeGpu("gpu0")], ["h1"])
    now, woken = [0.0], []
    cache = _cache(fab, now, woken=woken)
    try:
        cache.view()
        now[0] = 11.0
        cache.view()
        assert cache.wait_refreshed(5)
        assert woken == []
    finally:
        cache.close()


def test_a_compose_made_while_a_refresh_is_in_flight_is_kept_in_the_fresh_read():
    fab = _SlowFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["h1"])
    now = [0.0]
    cache = _cache(fab, now)
    try:
        _stale_read_in_flight(cache, fab, now)  # the read has the fabric as it was before the compose
        cache.applied("h1", ["gpu0"])  # the compose lands while the read is in flight
        assert _machines_of(cache.view()) == {"gpu0": "h1", "gpu1": None}
        fab.gate.set()
        assert cache.wait_refreshed(5)
        assert _machines_of(cache.view()) == {"gpu0": "h1", "gpu1": None}  # not free again
    finally:
        fab.gate.set()
        cache.close()


def test_a_read_started_before_a_forget_is_dropped_and_the_next_view_reads_now():
    fab = _SlowFabric([FakeGpu("gpu0")], ["h1"])
    now = [0.0]
    cache = _cache(fab, now)
    try:
        _stale_read_in_flight(cache, fab, now)
        cache.forget()  # e.g. a reclaim detached GPUs: that read may predate it
        fab.hold.clear()
        fab.by("gpu0").machine = "h1"
        fresh = cache.view()  # read now, on this thread
        assert _machines_of(fresh) == {"gpu0": "h1"}
        fab.by("gpu0").machine = None  # what the dropped read would have missed, reversed
        fab.gate.set()
        assert cache.wait_refreshed(5)
        assert cache.view() is fresh  # the older read did not replace it
    finally:
        fab.gate.set()
        cache.close()


def test_a_failed_background_read_makes_the_next_view_read_now_and_raise():
    fab = FakeFabric([FakeGpu("gpu0")], ["h1"])
    now = [0.0]
    cache = _cache(fab, now)
    try:
        cache.view()
        now[0] = 11.0
        err = DirectorServerError("down", method="GET", path="status/gpu")
        fab.fail["gpus"] = [err, err]  # the background read, then the round's own
        cache.view()
        assert cache.wait_refreshed(5)
        try:
            cache.view()
        except DirectorServerError:
            pass
        else:
            raise AssertionError("a stale read was served after the Director failed")
        assert _machines_of(cache.view()) == {"gpu0": None}  # the Director answers again
    finally:
        cache.close()


def test_max_age_zero_reads_on_every_view():
    fab = FakeFabric([FakeGpu("gpu0")], ["h1"])
    fab_reads: list[int] = []
    real = fab.gpus
    fab.gpus = lambda: (fab_reads.append(1), real())[1]  # type: ignore[method-assign]
    cache = _cache(fab, [0.0], max_age=0)
    try:
        cache.view()
        cache.view()
        assert len(fab_reads) == 2 and not cache.refreshing
    finally:
        cache.close()


def test_a_derived_view_is_kept_per_running_set_and_its_free_pool_matches_a_fresh_one():
    gpus = tuple(
        FabricGpu(f"gpu{i}", "Tesla-T4", machine="h2" if i == 3 else None, owner_tag="x" if i == 5 else None)
        for i in range(8)
    )
    view = FabricView(gpus, frozenset({"h1", "h2"}), {"h1": "3", "h2": "3"})
    kw = {"excluded": frozenset({"gpu6"}), "device_pools": {"gpu4": "alpha"}}
    view.free(**kw)  # computed on the read, as a round does
    busy = view.without(frozenset({"gpu1"}), frozenset({"h2"}))
    assert view.without(frozenset({"gpu1"}), frozenset({"h2"})) is busy  # same running set: kept
    fresh = FabricView(busy.gpus, busy.machines, busy.machine_groups)
    assert busy.free(**kw) == fresh.free(**kw)
    assert [f.name for f in busy.free(**kw)] == ["gpu0", "gpu2", "gpu4", "gpu7"]
    assert "gpu3" not in {g.name for g in busy.gpus} and dict(busy.attached("h2")) == {}
    assert view.tagged("x") == (gpus[5],) and busy.tagged_other_than("y") == frozenset({"gpu5"})


def test_the_composers_director_clients_reuse_the_background_reads_status_records():
    """Every client the composer builds lets its composes take the GPUs' status records from
    the whole list the background refresh read (up to ``STATUS_REUSE_SECONDS`` old)."""
    from composer.model.fabric import STATUS_REUSE_SECONDS, DirectorFactory

    make = DirectorFactory("http://127.0.0.1:9", username="u", password="p", timeout=1.0, retries=0)
    client = make()
    try:
        assert client.reuse_statuses_seconds == STATUS_REUSE_SECONDS > 0  # type: ignore[attr-defined]
    finally:
        client.close()
