"""The watch-fed cluster cache (composer.shell.cache) and how the controller uses it.

Offline: the informers are not started; their callbacks are fed by hand, which is what a
lagging watch looks like (the events of the composer's own writes have not arrived yet).
The real watch against the lab API server is exercised in ``test_cache_lab.py``.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from composer.decide.decide import Policy, reconcile_record
from composer.decide.round_types import RoundContext
from composer.model import annotations as ann
from composer.model.annotations import NodeRecord, Reclaim
from composer.model.fabric import FabricGpu, FabricView
from composer.model.nodestate import node_view
from composer.run.controller import Controller, ListingSource
from composer.shell.act import Executor
from composer.shell.cache import ClusterCache, resource_version
from composer.shell.metrics import Metrics
from dynamic_providers.director.errors import DirectorServerError
from tests.composer.fakes import FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod, probe_at_first_change


def frozen_cache(kube: FakeKube, wakes: list[int] | None = None) -> ClusterCache:
    """A cache fed once with the fake's current objects, whose watch then never delivers."""
    wake = (lambda: wakes.append(1)) if wakes is not None else None
    cache = ClusterCache(client.ApiClient(), on_change=wake)
    for n in kube.nodes.values():
        cache.nodes._put(copy.deepcopy(n))
    for p in kube.list_pods():
        cache.pods._put(p)
    for ns, pool in kube.pools.items():
        cache.namespaces._put({"metadata": {"name": ns, "labels": {ann.POOL_LABEL: pool}}})
    for inf in (cache.pods, cache.nodes, cache.namespaces):
        inf.synced.set()
    return cache


def with_rv(obj: dict, rv: int, **annotations: str) -> dict:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = str(rv)
    out["metadata"].setdefault("annotations", {}).update(annotations)
    return out


def test_resource_version_parses_or_defaults_to_zero():
    assert resource_version({"metadata": {"resourceVersion": "42"}}) == 42
    assert resource_version({"metadata": {}}) == 0
    assert resource_version({"metadata": {"resourceVersion": "abc"}}) == 0


def test_an_assumed_write_wins_until_the_watch_delivers_it_or_newer():
    base = node("h1")
    cache = ClusterCache(client.ApiClient())
    cache.nodes._put(with_rv(base, 5))
    written = with_rv(base, 7, **{ann.DEVICES: "gpu0"})
    cache.assume(written)

    def devices() -> set[str]:
        (n,) = cache.read()[1]
        return set(n.record.devices)

    assert devices() == {"gpu0"}  # the watch still holds rv 5
    cache.nodes._put(with_rv(base, 6))  # an older event arrives late
    assert devices() == {"gpu0"}
    cache.nodes._put(written)  # the watch catches up: the overlay is dropped
    assert devices() == {"gpu0"}
    cache.nodes._put(with_rv(base, 8))  # someone removed the annotation afterwards: that wins
    assert devices() == set()


def test_an_assumed_node_that_was_deleted_stays_deleted():
    base = with_rv(node("h1"), 3)
    cache = ClusterCache(client.ApiClient())
    cache.nodes._put(base)
    cache.assume(with_rv(base, 4, **{ann.DEVICES: "gpu0"}))
    cache.nodes._delete(base)
    assert cache.read()[1] == ()


def test_only_view_changes_wake_the_loop():
    wakes: list[int] = []
    kube = FakeKube()
    kube.add_node(node("h1"))
    cache = frozen_cache(kube, wakes)
    n0 = len(wakes)
    beat = with_rv(kube.nodes["h1"], 9)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-29T20:00:00Z"
    cache.nodes._put(beat)  # a heartbeat: timestamps only
    assert len(wakes) == n0
    cache.nodes._put(with_rv(kube.nodes["h1"], 10, **{ann.DEVICES: "gpu0"}))
    assert len(wakes) == n0 + 1
    cache.pods._put(pod("a", 1))
    assert len(wakes) == n0 + 2
    cache.pods._delete(pod("a", 1))
    assert len(wakes) == n0 + 3


def test_namespace_pools_come_from_the_label():
    kube = FakeKube(pools={"team-a": "a"})
    cache = frozen_cache(kube)
    assert cache.read()[2] == {"team-a": "a"}


def _controller(w: FakeWorld, source, **kw) -> Controller:
    pol = Policy(idle_timeout_seconds=60, advertise_timeout_seconds=30, schedule_timeout_seconds=120)
    metrics = Metrics()
    ex = Executor(w.kube, lambda: w.fabric, pol, metrics)
    return Controller(w.kube, lambda: w.fabric, pol, metrics, ex, workers=2, source=source, **kw)


def _world() -> FakeWorld:
    kube = FakeKube()
    kube.add_node(node("h1"))
    kube.add_pod(pod("a", 1, host="h1"))
    return FakeWorld(kube, FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1"), FakeGpu("gpu2")], ["h1"]))


def composes(w: FakeWorld) -> list[tuple]:
    return [c for c in w.fabric.calls if c[0] == "compose"]


@pytest.mark.parametrize("honour_writes", [True, False])
def test_a_lagging_watch_never_makes_the_controller_plan_a_pod_twice(honour_writes):
    """The job's intent write is not in the watch yet; the next round must still see it.

    With the overlay switched off (``honour_writes=False``) the same rounds plan the pod a
    second time (before the spare count below, they composed a second GPU): the check below
    would catch a regression.
    """
    w = _world()
    cache = frozen_cache(w.kube)
    if not honour_writes:
        cache.assume = lambda node_obj: None  # type: ignore[method-assign]
    ctrl = _controller(w, cache)
    ctrl.round()
    assert ctrl.wait_idle(10)
    assert composes(w) == [("compose", "h1", ("gpu0",))]
    ctrl.round()  # the pod is still Pending (nothing advertised yet) and the watch lags
    assert ctrl.wait_idle(10)
    assert composes(w) == [("compose", "h1", ("gpu0",))]  # (the attached GPU counts as coming)
    if honour_writes:
        assert w.kube.reasons("a") == ["Composed"]  # planned once
    else:
        assert w.kube.reasons("a") == ["Composed", "UsingSpareGpus"]  # planned a second time
    ctrl.close()


@pytest.mark.parametrize("echo_check", [True, False])
def test_the_composers_own_node_writes_come_back_on_the_watch_without_waking_the_loop(echo_check):
    """Each Node write of a job is laid over the cache as it is made (the intent is visible
    before the Director is called) and its watch echo wakes no round; someone else's later
    change does. With the echo check switched off the echoes wake the loop (the check below
    would catch that regression)."""
    w = _world()
    wakes: list[int] = []
    cache = frozen_cache(w.kube, wakes)
    if not echo_check:
        cache.nodes._echo = None
    seen: list[set[str]] = []

    def intents_in_cache(machine: str) -> None:
        (n,) = cache.read()[1]
        seen.append(set(n.record.intents))

    probe_at_first_change(w.fabric, intents_in_cache)
    ctrl = _controller(w, cache)  # the controller connects the executor's writes to its cache
    ctrl.round()
    assert ctrl.wait_idle(10)
    assert seen == [{"uid-a"}]  # the intent write was in the cache before the Director changed anything
    before = len(wakes)
    cache.nodes._put(copy.deepcopy(w.kube.nodes["h1"]))  # the watch delivers the job's last write
    assert len(wakes) == (before if echo_check else before + 1)
    later = with_rv(w.kube.nodes["h1"], int(w.kube.nodes["h1"]["metadata"]["resourceVersion"]) + 1,
                    **{"example.com/other": "x"})
    later["metadata"]["labels"]["example.com/team"] = "b"
    cache.nodes._put(later)  # a change by someone else
    assert len(wakes) == (before + 1 if echo_check else before + 2)
    ctrl.close()


def test_no_round_before_the_cache_listed_everything():
    w = _world()
    cache = ClusterCache(client.ApiClient())  # never synced: an empty cache would look idle
    ctrl = _controller(w, cache)
    assert ctrl.round() is None
    assert w.fabric.calls == [] and w.kube.writes == []


def test_the_director_is_read_again_only_after_a_failure_or_when_too_old():
    w = _world()
    reads: list[int] = []
    real = w.fabric.gpus

    def counted():
        reads.append(1)
        return real()

    w.fabric.gpus = counted  # type: ignore[method-assign]
    now = [time.time()]
    ctrl = _controller(w, ListingSource(w.kube), fabric_max_age_seconds=10, clock=lambda: now[0])
    try:
        ctrl.round()  # read 1; composes gpu0 onto h1
        assert ctrl.wait_idle(10)
        d = ctrl.round()  # the clean compose was applied to the cached read: no read
        assert len(reads) == 1
        assert d is not None and sum(d.free_by_model.values()) == 2  # gpu0 is not free any more
        w.kube.add_pod(pod("b", 1, host="h1"))
        w.fabric.fail["compose"] = [DirectorServerError("boom", method="POST", path="fabric/reprogram")]
        ctrl.round()  # plans b on the cached read; the compose fails
        assert ctrl.wait_idle(10)
        assert len(reads) == 1
        ctrl.round()  # after a failure the Director is read again
        assert len(reads) == 2
        assert ctrl.wait_idle(10)
        ctrl.round()
        n = len(reads)
        now[0] += 11
        ctrl.round()  # older than 10 s: read again, in the background
        assert ctrl.fabric.wait_refreshed(10)
        assert len(reads) == n + 1
        ctrl.round()  # the fresh read is recent: no other read
        assert not ctrl.fabric.refreshing and len(reads) == n + 1
    finally:
        ctrl.close()


def test_a_view_with_attached_gpus_moves_them_to_the_machine_and_its_group():
    view = FabricView(
        (FabricGpu("gpu0", "Tesla-T4"), FabricGpu("gpu1", "Tesla-T4", group="7")),
        frozenset({"h1"}),
        {"h1": "3"},
    )
    after = view.with_attached("h1", ["gpu0"])
    assert dict(after.attached("h1")) == {"gpu0": "Tesla-T4"}
    assert [g.group for g in after.gpus] == ["3", "7"]
    assert [f.name for f in after.free(excluded=frozenset(), device_pools={})] == ["gpu1"]
    assert dict(view.attached("h1")) == {}  # the original is unchanged


def test_a_view_with_attached_gpus_keeps_the_free_pool_it_computed_minus_them():
    """The free pool computed on a view carries over to the view after a compose (minus the
    attached GPUs) and equals a fresh computation on the same GPUs."""
    gpus = tuple(FabricGpu(f"gpu{i}", "Tesla-T4", group="3" if i % 2 else None) for i in range(6))
    view = FabricView(gpus, frozenset({"h1"}), {"h1": "3"})
    kw = {"excluded": frozenset({"gpu5"}), "device_pools": {"gpu4": "alpha"}}
    assert [f.name for f in view.free(**kw)] == ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4"]
    after = view.with_attached("h1", ["gpu1", "gpu2"])
    fresh = FabricView(after.gpus, after.machines, after.machine_groups)
    assert after.free(**kw) == fresh.free(**kw)
    assert [f.name for f in after.free(**kw)] == ["gpu0", "gpu3", "gpu4"]
    assert [f.name for f in view.free(**kw)] == ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4"]


def test_the_compose_intent_is_written_in_the_same_patch_as_the_reconciliation():
    """One PATCH before the Director changes anything (it was two): less time to the compose request."""
    w = _world()
    seen: list[int] = []
    probe_at_first_change(
        w.fabric, lambda machine: seen.append(len([x for x in w.kube.writes if x[0] == "annotations"]))
    )
    ctrl = _controller(w, ListingSource(w.kube))
    ctrl.round()
    assert ctrl.wait_idle(10)
    assert seen == [1]
    intents = json.loads(w.kube.writes[0][2][ann.INTENTS])
    assert list(intents) and all(v["phase"] == "Composing" for v in intents.values())
    ctrl.close()


def test_a_finished_job_wakes_the_loop():
    w = _world()
    woke = threading.Event()
    ctrl = _controller(w, ListingSource(w.kube), on_job_done=woke.set)
    ctrl.round()
    assert woke.wait(10)
    ctrl.close()


@given(
    devices=st.frozensets(st.sampled_from([f"gpu{i}" for i in range(6)])),
    attached=st.frozensets(st.sampled_from([f"gpu{i}" for i in range(6)])),
    reclaiming=st.booleans(),
)
def test_a_node_without_intents_keeps_exactly_its_attached_managed_devices(devices, attached, reclaiming):
    """The shortcut for nodes with nothing to reconcile gives what the full path gives: the
    managed devices still attached, no intents, the reclaim untouched, nothing to do."""
    reclaim = Reclaim(tuple(sorted(devices)), "Tainted", 5.0) if reclaiming else None
    view = replace(node_view(node("h1")), record=NodeRecord(devices, {}, reclaim))
    ctx = RoundContext(pods_by_uid={}, usage={}, now=10.0, policy=Policy())
    rc = reconcile_record(view, ctx, attached={d: "Tesla-T4" for d in attached})
    assert rc.record == NodeRecord(frozenset(devices & attached), {}, reclaim)
    assert (rc.restart_plugin, rc.cancel_edit, rc.given_up) == (False, False, ())
    # a managed device gone without a reclaim of it is reported (on the node: no pod uses it here)
    lost = () if reclaiming else tuple(sorted(devices - attached))
    assert rc.lost == lost
    assert [(e.kind, e.reason) for e in rc.events] == [("Node", "GpuDetachedOutOfBand")] * bool(lost)


def test_the_wired_executor_lays_its_node_writes_over_the_watch_cache(tmp_path, monkeypatch):
    """``python -m composer`` wires the executor's write hook to the cache it plans on, and
    gives it one intent-writer thread per compose worker."""
    from composer.run.wiring import build_controller
    from composer.shell.config import Settings

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "pw")
    wired = build_controller(
        Settings(
            kubeconfig=str(kubeconfig), director_url="http://127.0.0.1:1", director_username="u",
            compose_workers=7,
        )
    )
    assert wired.cache is not None
    assert wired.controller.executor.on_node_written == wired.cache.assume
    assert wired.controller.executor.write_workers == wired.controller.workers == 7


def test_a_pod_view_carries_the_time_the_watch_first_delivered_the_pod():
    t = [50.0]
    cache = ClusterCache(client.ApiClient())
    cache.pods._clock = lambda: t[0]  # type: ignore[method-assign]
    raw = pod("a", 1)
    raw["metadata"]["resourceVersion"] = "1"
    cache.pods._put(copy.deepcopy(raw))
    t[0] = 60.0
    raw["metadata"]["resourceVersion"] = "2"
    raw["metadata"]["labels"] = {"changed": "yes"}
    cache.pods._put(copy.deepcopy(raw))  # a change later: still first seen at 50
    (view,) = cache.read()[0]
    assert view.seen_at == 50.0 and view.labels == {"changed": "yes"}
    cache.pods._delete(copy.deepcopy(raw))
    cache.pods._put(copy.deepcopy(raw))  # the same name again (a new pod): seen now
    (view,) = cache.read()[0]
    assert view.seen_at == 60.0


@pytest.mark.parametrize("honour_writes", [True, False])
def test_a_released_pod_is_not_released_again_while_the_watch_lags(honour_writes):
    """The release patch's answer is laid over the pod watch: the next round sees the pod pinned
    and ungated, not the gated view the watch still holds, so it sends no second release (whose
    ``test`` of the gate list the API server refuses, 422, counted as a gate patch failure).

    With the overlay switched off the second round sends the release again and it is refused.
    """
    kube = FakeKube()
    kube.add_node(node("h1"))
    kube.add_pod(pod("a", 1, gated=True))
    w = FakeWorld(kube, FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["h1"]))
    cache = frozen_cache(w.kube)
    if not honour_writes:
        cache.assume_pod = lambda pod_obj: None  # type: ignore[method-assign]
    pol = Policy(idle_timeout_seconds=60, advertise_timeout_seconds=30, schedule_timeout_seconds=120,
                 batch_idle_seconds=0.0, batch_max_seconds=0.0)  # a gated pod is planned at once
    metrics = Metrics()
    ex = Executor(w.kube, lambda: w.fabric, pol, metrics)
    ctrl = Controller(w.kube, lambda: w.fabric, pol, metrics, ex, workers=2, source=cache)
    ctrl.round()
    assert ctrl.wait_idle(10)
    assert composes(w) == [("compose", "h1", ("gpu0",))]
    w.agent_step()  # the node advertises the GPU; the watch delivers the Node, not the pod
    cache.nodes._put(copy.deepcopy(w.kube.nodes["h1"]))
    ctrl.round()  # released: pinned and ungated in one patch
    assert ctrl.wait_idle(10)
    assert "schedulingGates" not in w.kube.pods["ml/a"]["spec"]
    releases = [wr for wr in w.kube.writes if wr[0] == "pod"]
    assert len(releases) == 1
    ctrl.round()  # the pod watch still shows the pod gated
    assert ctrl.wait_idle(10)
    failures = ctrl.metrics.registry.get_sample_value(
        "composer_gate_patch_failures_total", {"kind": "release"}) or 0.0
    again = [wr for wr in w.kube.writes if wr[0] == "pod"]
    if honour_writes:
        assert again == releases and failures == 0
    else:
        assert len(again) == 2 and failures == 1
    ctrl.close()
