"""Timers that outlive the leader, over the in-memory fakes.

The orphan grace and the idle timeout count from the first time any replica saw the condition:
the idle timer is the Node's ``composer.liqid.io/idle-since`` annotation, the orphan timers are
in the ConfigMap ``<leaseName>-orphans`` (:mod:`composer.shell.timers`). A leader change is a second
:class:`~composer.run.controller.Controller` (fresh memory) on the same cluster and Director.
"""

from __future__ import annotations

from unittest import mock

import pytest

from composer.model import annotations as ann
from composer.shell import timers
from composer.shell.kube import KubeError
from tests.composer.fakes import FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod
from tests.composer.test_controller import make, run

CM = "gpu-composer/gpu-composer-orphans"  # the default Lease's namespace and name, "-orphans"


def _world() -> FakeWorld:
    kube = FakeKube()
    kube.add_node(node("blade-slot-1"))
    kube.add_node(node("blade-slot-2"))
    return FakeWorld(kube, FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["blade-slot-1", "blade-slot-2"]))


def _composed(w: FakeWorld, ctrl) -> None:
    w.kube.add_pod(pod("a", 1, host="blade-slot-1"))
    run(ctrl)
    w.agent_step()
    run(ctrl)
    w.schedule()
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}


def test_the_orphan_grace_counts_from_the_first_leader_that_saw_the_orphan(clock):
    w = _world()
    first = make(w, clock, orphan_grace_seconds=120)
    _composed(w, first)
    del w.kube.pods["ml/a"]
    del w.kube.nodes["blade-slot-1"]  # the Node goes with the GPU attached
    run(first)
    seen = clock()
    assert timers.decode(w.kube.configmaps[CM][timers.ORPHAN_SINCE_KEY]) == {"gpu0": seen}
    clock.tick(60)
    run(first)
    first.close()  # the leader goes half way through the grace

    second = make(w, clock, orphan_grace_seconds=120)
    clock.tick(59)
    run(second)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}  # 119 s after the first sighting
    assert [e.reason for e in w.kube.events if e.kind == "Lease"] == ["OrphanedGpus"]  # not again
    clock.tick(1)
    run(second)
    assert w.fabric.attached() == {}
    assert clock() - seen == 120
    run(second)
    assert timers.decode(w.kube.configmaps[CM][timers.ORPHAN_SINCE_KEY]) == {}


def test_the_idle_timeout_counts_from_the_first_leader_that_saw_the_node_idle(clock):
    w = _world()
    first = make(w, clock)  # idle timeout 60 s
    _composed(w, first)
    w.finish("ml/a")
    run(first)
    idle = clock()
    assert w.kube.record("blade-slot-1").idle_since == idle
    assert w.kube.nodes["blade-slot-1"]["metadata"]["annotations"][ann.IDLE_SINCE] == f"{idle:.3f}"
    clock.tick(30)
    run(first)
    first.close()

    second = make(w, clock)
    clock.tick(29)
    run(second)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    clock.tick(1)
    run(second)
    assert w.fabric.attached() == {}
    assert clock() - idle == 60
    w.agent_step()
    run(second)
    assert ann.IDLE_SINCE not in w.kube.nodes["blade-slot-1"]["metadata"]["annotations"]


def test_an_idle_timer_is_written_once_and_removed_when_a_gpu_pod_arrives(clock):
    w = _world()
    ctrl = make(w, clock)
    _composed(w, ctrl)
    w.finish("ml/a")
    for _ in range(3):
        run(ctrl)
        clock.tick(10)
    writes = [c for _, n, c in w.kube.writes
              if n == "blade-slot-1" and isinstance(c, dict) and ann.IDLE_SINCE in c]
    assert len(writes) == 1
    w.kube.add_pod(pod("b", 1, host="blade-slot-1"))
    run(ctrl)
    assert w.kube.record("blade-slot-1").idle_since is None
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}  # the spare GPU serves b


class _Flaky(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.fail_reads = 1

    def read_configmap_data(self, namespace: str, name: str) -> dict[str, str] | None:
        if self.fail_reads:
            self.fail_reads -= 1
            raise KubeError("GET", f"{namespace}/configmaps/{name}", 503, "unavailable")
        return super().read_configmap_data(namespace, name)


def test_a_failed_load_is_tried_again_and_the_earlier_time_wins():
    kube = _Flaky()
    kube.configmaps[CM] = {timers.ORPHAN_SINCE_KEY: timers.encode({"gpu0": 100.0, "gpu1": 300.0})}
    t = timers.OrphanTimers(kube, "gpu-composer", "gpu-composer-orphans")
    since = {"gpu1": 200.0}
    t.load_into(since)
    assert not t.loaded and since == {"gpu1": 200.0}
    t.save({"gpu1": 200.0})  # not before the load: it would drop gpu0's time
    assert kube.writes == []
    t.load_into(since)
    assert since == {"gpu0": 100.0, "gpu1": 200.0}
    t.save(since)
    assert timers.decode(kube.configmaps[CM][timers.ORPHAN_SINCE_KEY]) == since
    t.save(dict(since))
    assert len(kube.writes) == 1  # unchanged: not written again


def test_a_refused_load_is_not_tried_again_every_round():
    kube = _Flaky()
    kube.read_configmap_data = mock.Mock(side_effect=KubeError("GET", "cm", 403, "forbidden"))  # type: ignore[method-assign]
    t = timers.OrphanTimers(kube, "gpu-composer", "gpu-composer-orphans")
    since: dict[str, float] = {"gpu0": 5.0}
    t.load_into(since)
    t.load_into(since)
    assert kube.read_configmap_data.call_count == 1 and since == {"gpu0": 5.0}


@pytest.mark.parametrize("value", [None, "", "[]", "{\"gpu0\": \"x\"}", "{\"gpu0\": NaN}", "nope"])
def test_malformed_orphan_timers_read_as_none(value):
    assert timers.decode(value) == {}
