"""One true Event per cause for GPU pods the composer cannot serve, over the in-memory fakes and
against a mocked API client.

For each such pod: exactly one Warning per distinct cause, its reason the cause
(``TooManyGpus``, ``ModelNotInPool``, ``UnknownHost``, ...), repeated (by a new leader, whose
memory is empty) only as the count of that one Event object; a gated pod's ungate is a Normal
``Ungated`` action, not a second Warning.
"""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from kubernetes.client.exceptions import ApiException

from composer.model.models import EventSpec
from composer.shell.kube import KubeApi, series_name
from tests.composer.fakes import FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod
from tests.composer.test_controller import make, run

T4, H100 = "Tesla-T4", "NVIDIA-H100-NVL"


def _world() -> FakeWorld:
    kube = FakeKube()
    kube.add_node(node("blade-slot-1"))
    kube.add_node(node("blade-slot-2"))
    return FakeWorld(kube, FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["blade-slot-1", "blade-slot-2"]))


def _unservable(w: FakeWorld, *, gated: bool) -> None:
    w.kube.add_pod(pod("big", 3, gated=gated))
    w.kube.add_pod(pod("h100", 1, product=H100, gated=gated))
    w.kube.add_pod(pod("lost", 1, host="no-such-node", gated=gated))


def _ungated(w: FakeWorld) -> None:
    """What the scheduler does with an ungated pod it cannot place: marks it unschedulable."""
    for p in w.kube.pods.values():
        if not p["spec"].get("schedulingGates") and not p["spec"].get("nodeName"):
            p["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            ]


def _warnings(w: FakeWorld, name: str) -> list[EventSpec]:
    return [e for e in w.kube.events if e.name == name and e.type == "Warning"]


@pytest.mark.parametrize("gated", [False, True])
def test_each_unservable_pod_gets_one_warning_naming_its_cause_over_rounds_and_a_new_leader(clock, gated):
    w = _world()
    first = make(w, clock)
    _unservable(w, gated=gated)
    for _ in range(5):
        run(first)
        _ungated(w)
        clock.tick(61)  # past the unserved wait
    first.close()
    second = make(w, clock)  # a new leader: its memory is empty
    for _ in range(3):
        run(second)
        clock.tick(61)
    normal = {"Gated", "Ungated"} if gated else set()
    for name, cause in (("big", "TooManyGpus"), ("h100", "ModelNotInPool"), ("lost", "UnknownHost")):
        assert set(w.kube.reasons(name)) == {cause} | normal, (name, w.kube.reasons(name))
        (warning,) = _warnings(w, name)
        assert warning.reason == cause and warning.series
        assert w.kube.event_count(warning) == 2  # the new leader's repeat: the same object's count
        if gated:
            assert [e.type for e in w.kube.events if e.name == name and e.reason == "Ungated"] == ["Normal"]
    big = _warnings(w, "big")[0].message
    assert "asks for 3 GPU(s)" in big and "has 2 free (Tesla-T4: 2 free)" in big
    assert "the most one host can take is 2" in big
    assert _warnings(w, "h100")[0].message == f"asks for {H100}; pool 'default' has Tesla-T4: 2 free"
    assert "no-such-node" in _warnings(w, "lost")[0].message
    assert w.fabric.calls == []


def test_a_changed_cause_is_a_second_warning_and_a_cause_that_comes_back_counts_on_the_first(clock):
    w = _world()
    w.fabric.gpu_list.append(FakeGpu("gpu2", machine="blade-slot-1"))  # static: serves no compose
    ctrl = make(w, clock)
    w.kube.add_pod(pod("p", 2, host="blade-slot-1"))
    run(ctrl)
    assert [e.reason for e in _warnings(w, "p")] == ["NoHostFits"]
    # the static GPU goes back to the free pool and the other two to blade-slot-2 (by hand):
    # the host could take a composition now, but one GPU is free for a pod of two
    w.fabric.by("gpu2").machine = None
    w.fabric.by("gpu0").machine = "blade-slot-2"
    w.fabric.by("gpu1").machine = "blade-slot-2"
    run(ctrl)
    assert [e.reason for e in _warnings(w, "p")] == ["NoHostFits", "NoFreeGpus"]
    w.fabric.by("gpu2").machine = "blade-slot-1"
    run(ctrl)
    first = _warnings(w, "p")
    assert [e.reason for e in first] == ["NoHostFits", "NoFreeGpus"]  # no third object
    assert w.kube.event_count(first[0]) == 2


def test_a_series_event_has_a_name_of_its_own_per_object_and_reason():
    ev = EventSpec("Pod", "ml", "big", "uid-1", "Warning", "TooManyGpus", "asks for 3", True)
    assert series_name(ev) == series_name(EventSpec("Pod", "ml", "big", "uid-1", "Warning", "TooManyGpus",
                                                    "another message", True))
    assert series_name(ev).startswith("big.")
    other = {series_name(EventSpec("Pod", "ml", "big", "uid-2", "Warning", "TooManyGpus", "", True)),
             series_name(EventSpec("Pod", "ml", "big", "uid-1", "Warning", "NoFreeGpus", "", True))}
    assert series_name(ev) not in other and len(other) == 2


class _Resp:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()


def _api() -> tuple[KubeApi, mock.MagicMock]:
    api = KubeApi.__new__(KubeApi)
    api.instance = "composer-0"
    api.core = core = mock.MagicMock()
    return api, core


def test_a_repeated_series_event_adds_to_the_count_of_the_one_object():
    api, core = _api()
    ev = EventSpec("Pod", "ml", "big", "uid-1", "Warning", "TooManyGpus", "asks for 3 GPU(s)", True)
    api.create_event(ev)
    (call,) = core.create_namespaced_event.call_args_list
    body = call.args[1]
    assert body["metadata"] == {"name": series_name(ev), "namespace": "ml"} and body["count"] == 1
    core.create_namespaced_event.side_effect = ApiException(status=409, reason="AlreadyExists")
    core.read_namespaced_event.return_value = _Resp({"count": 3, "metadata": {"resourceVersion": "7"}})
    core.patch_namespaced_event.return_value = _Resp({})
    api.create_event(EventSpec("Pod", "ml", "big", "uid-1", "Warning", "TooManyGpus", "asks for 4", True))
    (patch,) = core.patch_namespaced_event.call_args_list
    assert patch.args[:2] == (series_name(ev), "ml")
    assert patch.args[2]["count"] == 4 and patch.args[2]["message"] == "asks for 4"
    assert patch.args[2]["metadata"] == {"resourceVersion": "7"}


def test_an_event_that_is_no_series_is_made_anew_each_time():
    api, core = _api()
    api.create_event(EventSpec("Node", "default", "n1", "n1", "Normal", "Reclaimed", "gave gpu0 back"))
    body = core.create_namespaced_event.call_args.args[1]
    assert body["metadata"] == {"generateName": "n1.", "namespace": "default"}
    core.create_namespaced_event.side_effect = ApiException(status=409, reason="AlreadyExists")
    from composer.shell.kube import KubeError

    with pytest.raises(KubeError):
        api.create_event(EventSpec("Node", "default", "n1", "n1", "Normal", "Reclaimed", "again"))
    core.patch_namespaced_event.assert_not_called()
