"""Part 2 in DRA mode, its pure pieces (bench/dra_times.py and their use in bench/reaction.py):
what is read of claims, Events and Nodes, the PreBind poll grid and the per-pod and per-run
derivations."""

from __future__ import annotations

from typing import Any

import pytest

from bench import dra_times as dt
from bench.pod_times import PodTimes
from bench.reaction import (
    MODES,
    ReactionConfig,
    _Observed,
    controller_argv,
    derive,
    match_director,
    run,
    stuck,
)
from composer.dra.claims import claim_view
from domain.composer_mode import DRA_DRIVER


def _claim(conditions: dict[str, str] | None, *, devices: tuple[str, ...] = ("gpu3",)) -> dict[str, Any]:
    """A ResourceClaim as the API server serves it: owned by Pod p0, ``devices`` of the driver
    allocated, each with ``conditions`` (type -> status) in ``status.devices``."""
    status: dict[str, Any] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRA_DRIVER, "pool": "fabric", "device": d} for d in devices
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            },
        }
    }
    if conditions is not None:
        status["devices"] = [
            {
                "driver": DRA_DRIVER,
                "pool": "fabric",
                "device": d,
                "conditions": [{"type": t, "status": s, "reason": "r"} for t, s in conditions.items()],
            }
            for d in devices
        ]
    return {
        "metadata": {
            "name": "p0-gpu-abcde",
            "namespace": "ns",
            "uid": "c0",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p0", "uid": "u0"}],
        },
        "status": status,
    }


def test_api_times_are_read_with_their_microseconds():
    assert dt.parse_time("2026-12-05T10:00:01.250000Z") == pytest.approx(1796464801.25)
    assert dt.parse_time("2026-12-05T10:00:01Z") == pytest.approx(1796464801.0)
    assert dt.parse_time("") is None and dt.parse_time(None) is None and dt.parse_time("soon") is None


def test_a_claim_belongs_to_the_pod_that_owns_it():
    assert dt.claim_owner(_claim(None)) == "p0"
    assert dt.claim_owner({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "x"}]}}) is None
    assert dt.claim_owner({}) is None


def test_a_claim_is_ready_only_with_every_binding_condition_true_and_no_failure():
    both = {"Attached": "True", "VisibleOnNode": "True"}
    assert dt.binding_ready(claim_view(_claim(both)))
    assert not dt.binding_ready(claim_view(_claim({"Attached": "True", "VisibleOnNode": "False"})))
    assert not dt.binding_ready(claim_view(_claim({"Attached": "True"})))
    assert not dt.binding_ready(claim_view(_claim(both | {"AttachFailed": "True"})))
    assert not dt.binding_ready(claim_view(_claim(None)))  # allocated, no status yet
    assert not dt.binding_ready(claim_view(_claim(both, devices=())))  # nothing of the driver


def test_a_ready_claim_no_longer_ready_before_its_pod_is_bound_is_withdrawn():
    ready = claim_view(_claim({"Attached": "True", "VisibleOnNode": "True"}))
    waiting = claim_view(_claim({"Attached": "True", "VisibleOnNode": "False"}))
    seen = PodTimes("p0", visible=103.2)
    assert dt.visibility_withdrawn(seen, waiting)
    assert not dt.visibility_withdrawn(seen, ready)
    assert not dt.visibility_withdrawn(PodTimes("p0"), waiting)  # never ready yet: still waiting
    assert not dt.visibility_withdrawn(PodTimes("p0", visible=103.2, bound=105.0), waiting)
    released = claim_view(_claim(None, devices=()))
    assert not dt.visibility_withdrawn(seen, released)  # allocation cleared: not a withdrawal


def test_prebind_starts_come_from_the_schedulers_binding_conditions_pending_events():
    event = {
        "reason": "BindingConditionsPending",
        "regarding": {"kind": "Pod", "name": "p0"},
        "eventTime": "2026-12-05T10:00:01.250000Z",
    }
    assert dt.prebind_starts(event) == ("p0", [pytest.approx(1796464801.25)])
    again = event | {"series": {"count": 2, "lastObservedTime": "2026-12-05T10:00:20.500000Z"}}
    assert dt.prebind_starts(again)[1] == [pytest.approx(1796464801.25), pytest.approx(1796464820.5)]
    assert dt.prebind_starts(event | {"reason": "Scheduled"}) == (None, [])
    assert dt.prebind_starts(event | {"regarding": {"kind": "Node", "name": "n1"}}) == (None, [])


def test_the_prebind_wait_that_saw_the_gpu_visible_is_the_latest_one_started_before():
    assert dt.prebind_for([100.0, 130.0, 160.0], 140.0) == 130.0
    assert dt.prebind_for([130.0, 100.0], None) == 130.0
    assert dt.prebind_for([130.0], 120.0) == 130.0  # visible before any wait: the first wait
    assert dt.prebind_for([], 120.0) is None


def test_the_next_poll_is_on_the_5_s_grid_from_the_prebind_start():
    assert dt.next_poll(100.0, 103.2) == pytest.approx(105.0)
    assert dt.next_poll(100.0, 105.0) == pytest.approx(105.0)  # a poll at the very moment sees it
    assert dt.next_poll(100.0, 105.01) == pytest.approx(110.0)
    assert dt.next_poll(100.0, 99.0) == 100.0  # visible before the wait: its first poll


def test_a_dra_pods_overhead_is_split_into_the_poll_wait_and_what_is_beyond_it():
    cfg = ReactionConfig(nodes=1, pods=1, hotplug_latency=2.0, advertise_delay=1.0, dra=True)
    seen = {"submitted": 99.9, "allocated": 99.95, "prebind": 100.0, "advertised": 103.0, "visible": 103.2}
    p = PodTimes("p0", bound=105.05, running=105.1, **seen)
    d = derive(p, cfg)
    assert d["overhead"] == pytest.approx(2.2)  # 5.2 s to Running - L - D
    assert d["to_allocated"] == pytest.approx(0.05)
    assert d["visible_lag"] == pytest.approx(0.2)
    assert d["prebind_wait"] == pytest.approx(1.85)
    assert d["poll_wait"] == pytest.approx(1.8)  # visible at 103.2, the poll at 105.0
    assert d["after_poll"] == pytest.approx(0.05)
    assert d["overhead_beyond_poll"] == pytest.approx(0.4)
    first = PodTimes("q", submitted=99.0, prebind=100.0, visible=99.5, bound=100.1, running=100.2)
    early = derive(first, cfg)
    assert early["poll_wait"] == 0.0  # the first poll came after the GPU was visible: no grid wait
    unseen = derive(PodTimes("r", submitted=99.0, prebind=100.0, running=104.0), cfg)
    assert unseen["poll_wait"] is None and unseen["overhead_beyond_poll"] is None
    assert "poll_wait" not in derive(p, ReactionConfig(nodes=1, pods=1))  # device-plugin mode


def test_a_run_gives_the_polls_share_of_the_overhead_and_the_missed_polls():
    derived = [
        {"poll_wait": 1.5, "overhead": 2.0, "after_poll": 0.1},
        {"poll_wait": 0.5, "overhead": 2.0, "after_poll": 5.1},
        {"poll_wait": None, "overhead": 9.0, "after_poll": None},  # never visible: left out
    ]
    assert dt.poll_share(derived) == 0.5
    assert dt.poll_share([{"poll_wait": None, "overhead": 1.0}]) is None
    assert dt.missed_polls(derived) == 1


def test_a_gpu_composed_for_one_claim_and_held_by_another_is_taken():
    assert dt.taken_by_another({"gpu1": "a"}, {"a": ("gpu1",)}) == 0
    assert dt.taken_by_another({"gpu1": "a", "gpu2": "a"}, {"a": ("gpu2",), "b": ("gpu1",)}) == 1
    assert dt.taken_by_another({"gpu1": "a"}, {"a": ()}) == 0  # released, held by nobody
    assert dt.taken_by_another({"GPU_7": "a"}, {"b": ("gpu-7",)}) == 1  # Director name -> device name


def test_in_dra_mode_a_node_advertises_through_gfds_count_label():
    node = {"metadata": {"labels": {"nvidia.com/gpu.count": "2"}}, "status": {"allocatable": {"cpu": "8"}}}
    assert dt.advertised_count(node, dra=True) == 2
    assert dt.advertised_count(node, dra=False) == 0
    plugin = {"status": {"allocatable": {"nvidia.com/gpu": "3"}}}
    assert dt.advertised_count(plugin, dra=False) == 3 and dt.advertised_count(plugin, dra=True) == 0


def test_in_dra_mode_a_pod_is_matched_to_its_claims_intent_and_its_prebind_start():
    obs = _Observed()
    obs.pods["p0"] = PodTimes("p0", uid="u0", claim="c0", submitted=99.9, visible=103.2, bound=105.05)
    obs.intents = {"c0": (100.05, "n1")}  # the composer keys intents by claim UID in DRA mode
    obs.prebind_starts = {"p0": [100.0, 90.0, 110.0]}
    obs.alloc = {"n1": [(103.15, 1)]}
    tap = [
        {"t0": 100.1, "t1": 100.11, "path": "fabric/edit", "mach_id": 1},
        {"t0": 100.12, "t1": 102.1, "path": "fabric/reprogram", "mach_id": 1},
    ]
    match_director(obs, tap, {1: "n1"})
    p = obs.pods["p0"]
    assert (p.node, p.issued, p.attached, p.advertised, p.prebind) == ("n1", 100.1, 102.1, 103.15, 100.0)


def test_a_pod_not_running_is_reported_with_its_claims_intent_in_dra_mode():
    intents = {"c0": {"node": "n1", "phase": "Composing"}, "u1": {"node": "n2", "phase": "Advertised"}}
    pods = [
        {"name": "p0", "uid": "u0", "claim": "c0", "running": None},
        {"name": "p1", "uid": "u1", "claim": "", "running": None},
        {"name": "p2", "uid": "u2", "claim": "c2", "running": 5.0},
    ]
    assert stuck(pods, intents) == [
        {"pod": "p0", "last_intent": {"node": "n1", "phase": "Composing"}},
        {"pod": "p1", "last_intent": {"node": "n2", "phase": "Advertised"}},
    ]


def test_dra_mode_runs_the_composer_as_the_driver_without_a_webhook():
    kw: dict[str, Any] = dict(director_url="http://x", kubeconfig="k", ns="ns", plugin_ns="gpu", probe_port=1)
    plain = controller_argv("composer", cfg=ReactionConfig(nodes=1, pods=1), **kw)
    dra = controller_argv("composer", cfg=ReactionConfig(nodes=1, pods=1, dra=True), **kw)
    assert dra == [*plain, "--mode", "dra"]
    with pytest.raises(ValueError, match="without the webhook"):
        controller_argv(
            "composer", cfg=ReactionConfig(nodes=1, pods=1, dra=True), webhook=(1, "c", "k"), **kw
        )
    with pytest.raises(ValueError, match="composer mode"):
        controller_argv("baseline", cfg=ReactionConfig(nodes=1, pods=1, dra=True), **kw)


def test_dra_mode_runs_after_device_plugin_modes_and_unknown_modes_are_refused(tmp_path):
    assert MODES.index("dra") > MODES.index("gating") > MODES.index("plain")
    with pytest.raises(ValueError, match="unknown reaction mode"):
        run(sizes=(1,), modes=("gating", "dri"), work_dir=tmp_path)
    assert not list(tmp_path.iterdir())  # refused before anything started
