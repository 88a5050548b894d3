"""Reclaim guards, out-of-band detaches and orphaned GPUs, over the in-memory fakes.

Rules (``docs/composer-reclaim.md``): ``do-not-reclaim`` on a node or a pod on it holds the
node's GPUs; a pool's budget bounds the nodes reclaiming at once; reclaims start only inside
the UTC windows; the autoscaler annotations are on a node exactly while it holds composer GPUs;
a managed GPU detached behind the composer's back is reported, not replaced; composer-tagged
GPUs on a machine without a Node go back to the free pool after the grace period.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import pytest
import yaml
from pydantic import ValidationError

from composer.decide import reclaim_guard as guard
from composer.model import annotations as ann
from composer.run.controller import Controller
from composer.shell.act import RECLAIM_TAINT
from composer.shell.config import Settings
from tests.composer.fakes import (
    Clock,
    FakeFabric,
    FakeGpu,
    FakeKube,
    FakeWorld,
    node,
    pod,
    probe_at_first_change,
)
from tests.composer.test_chart import CHART, helm, render
from tests.composer.test_controller import make as controller_for
from tests.composer.test_controller import run

HOLD_KEYS = (ann.AUTOSCALER_HOLD, *ann.AUTOSCALER_ANNOTATIONS)


def make(world: FakeWorld, clock: Clock, **policy) -> Controller:
    return controller_for(world, clock, **{"orphan_grace_seconds": 120, **policy})


def world(n: int = 3, *, labels: dict[str, str] | None = None) -> FakeWorld:
    kube = FakeKube()
    names = [f"blade-slot-{i + 1}" for i in range(n)]
    for name in names:
        kube.add_node(node(name, labels=labels))
    fabric = FakeFabric([FakeGpu(f"gpu{i}") for i in range(n)], names)
    return FakeWorld(kube, fabric)


def serve_and_finish(w: FakeWorld, ctrl: Controller, ns: dict[str, str] | None = None) -> None:
    """One 1-GPU pod per node (namespace ``ns[node]``, default ``ml``), composed, advertised,
    scheduled, then finished (the nodes are idle)."""
    ns = ns or {}
    for name in sorted(w.kube.nodes):
        w.kube.add_pod(pod(f"p-{name}", 1, host=name, ns=ns.get(name, "ml")))
    run(ctrl)
    w.agent_step()
    run(ctrl)
    w.schedule()
    run(ctrl)
    for name in sorted(w.kube.nodes):
        key = f"{ns.get(name, 'ml')}/p-{name}"
        assert w.kube.pods[key]["spec"]["nodeName"] == name
        w.finish(key)
    run(ctrl)


def tainted(w: FakeWorld) -> list[str]:
    return sorted(
        n
        for n, obj in w.kube.nodes.items()
        if any(t["key"] == ann.RECLAIM_TAINT_KEY for t in obj["spec"]["taints"])
    )


def held_messages(w: FakeWorld, name: str) -> list[str]:
    return [e.message for e in w.kube.events if e.name == name and e.reason == "ReclaimHeld"]


# -- pure rules ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "nodes", "allowed"),
    [("0", 10, 0), ("2", 10, 2), ("10%", 10, 1), ("10%", 11, 2), ("34%", 3, 2), ("100%", 3, 3), ("0%", 5, 0)],
)
def test_budget_counts_or_percentages_rounded_up(value, nodes, allowed):
    assert guard.parse_budget(value).allowed(nodes) == allowed


@pytest.mark.parametrize("bad", ["", "-1", "1.5", "101%", "ten", "5 %"])
def test_bad_budgets_are_refused_with_the_value(bad):
    with pytest.raises(ValueError, match="reclaim budget"):
        guard.parse_budget(bad)


def _at(hh: int, mm: int = 0) -> float:
    return datetime(2026, 12, 1, hh, mm, tzinfo=UTC).timestamp()


def test_windows_in_utc_and_across_midnight():
    night = guard.parse_window("22:00-06:00")
    day = guard.parse_window("09:30-17:00")
    assert [guard.in_windows(_at(h), [night]) for h in (21, 22, 23, 0, 5, 6, 12)] == [
        False, True, True, True, True, False, False,
    ]
    assert [guard.in_windows(_at(9, m), [day]) for m in (29, 30)] == [False, True]
    assert guard.in_windows(_at(3), [])  # no window: any time
    assert guard.in_windows(_at(23, 59), [guard.parse_window("00:00-24:00")])
    for bad in ("22-06", "25:00-01:00", "10:00-10:00", "10:00-24:30"):
        with pytest.raises(ValueError, match="reclaim window"):
            guard.parse_window(bad)


# -- autoscaler annotations ------------------------------------------------------------------
def test_autoscaler_annotations_are_set_before_the_attach_and_removed_after_the_reclaim(clock):
    w = world(1)
    ctrl = make(w, clock)
    seen = []

    def hold_annotations(machine: str) -> None:
        seen.append({k: w.kube.nodes[machine]["metadata"]["annotations"].get(k) for k in HOLD_KEYS})

    probe_at_first_change(w.fabric, hold_annotations)
    serve_and_finish(w, ctrl)
    assert seen == [dict.fromkeys(HOLD_KEYS, "true")]  # in the Composing write, before the Director call
    assert w.fabric.by("gpu0").owner_tag == "gpu-composer"  # the durable record of what the composer attached
    a = w.kube.nodes["blade-slot-1"]["metadata"]["annotations"]
    assert all(a.get(k) == "true" for k in HOLD_KEYS)
    clock.tick(61)
    run(ctrl)  # start: taint, decompose
    assert w.fabric.attached() == {}
    assert all(a.get(k) == "true" for k in HOLD_KEYS)  # still reclaiming: taint on
    w.agent_step()
    run(ctrl)  # finish
    assert tainted(w) == [] and not any(k in a for k in HOLD_KEYS)
    assert w.fabric.by("gpu0").owner_tag is None  # untagged once given back


def test_autoscaler_annotations_of_an_operator_without_the_marker_are_left_alone(clock):
    w = world(1)
    w.kube.nodes["blade-slot-1"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
    ctrl = make(w, clock)
    for _ in range(2):
        run(ctrl)
    assert w.kube.writes == []
    assert w.kube.nodes["blade-slot-1"]["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}


# -- do-not-reclaim ----------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["node", "pod"])
def test_do_not_reclaim_holds_the_node_until_removed(clock, where):
    w = world(1)
    ctrl = make(w, clock)
    serve_and_finish(w, ctrl)
    if where == "node":
        target = w.kube.nodes["blade-slot-1"]["metadata"]["annotations"]
    else:  # a non-GPU pod running there (e.g. a notebook about to use the GPU again)
        p = pod("keeper", 0, node_name="blade-slot-1", phase="Running")
        p["metadata"]["annotations"] = {}
        w.kube.add_pod(p)
        target = w.kube.pods["ml/keeper"]["metadata"]["annotations"]
    target[ann.DO_NOT_RECLAIM] = "true"
    for _ in range(3):
        clock.tick(100)
        run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]} and tainted(w) == []
    msgs = held_messages(w, "blade-slot-1")
    assert len(msgs) == 1 and "do-not-reclaim" in msgs[0] and (where in msgs[0])
    assert 'composer_reclaims_held{reason="do-not-reclaim"} 1.0' in ctrl.metrics.render().decode()
    del target[ann.DO_NOT_RECLAIM]
    run(ctrl)
    assert w.fabric.attached() == {}


def test_do_not_reclaim_set_while_tainted_aborts_the_reclaim(clock):
    w = world(1)
    ctrl = make(w, clock)
    serve_and_finish(w, ctrl)
    # what a composer killed right after the taint leaves: the reclaim record and the taint
    a = w.kube.nodes["blade-slot-1"]["metadata"]["annotations"]
    a[ann.RECLAIM] = ann.encode_reclaim(ann.Reclaim(("gpu0",), "Tainted", clock()))
    w.kube.set_taint("blade-slot-1", RECLAIM_TAINT, True)
    ctrl = make(w, clock)
    w.kube.nodes["blade-slot-1"]["metadata"]["annotations"][ann.DO_NOT_RECLAIM] = "true"
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    assert tainted(w) == [] and w.kube.record("blade-slot-1").reclaim is None
    assert "reclaim aborted" in held_messages(w, "blade-slot-1")[0]


# -- budgets -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("budget", "at_once"), [("1", 1), ("34%", 2), ("0", 0)])
def test_budget_bounds_the_nodes_of_a_pool_reclaiming_at_once(clock, budget, at_once):
    w = world(3)
    ctrl = make(w, clock, reclaim_budget=guard.parse_budget(budget))
    serve_and_finish(w, ctrl)
    clock.tick(61)
    run(ctrl)  # starts: taint + decompose on at most `at_once` nodes; they wait for the agent
    assert len(tainted(w)) == at_once
    assert len(w.fabric.attached()) == 3 - at_once
    held = [n for n in w.kube.nodes if held_messages(w, n)]
    assert len(held) == 3 - at_once and all("budget" in held_messages(w, n)[0] for n in held)
    if at_once:
        for _ in range(6):  # the agent advertises, the taints lift, the next nodes follow
            w.agent_step()
            run(ctrl)
            assert len(tainted(w)) <= at_once
        assert w.fabric.attached() == {}


def test_a_pools_own_budget_overrides_the_default_and_other_pools_are_apart(clock):
    w = world(2, labels={ann.POOL_LABEL: "red"})
    w.kube.add_node(node("blade-slot-3"))  # default pool
    w.fabric.machine_names.append("blade-slot-3")
    w.fabric.gpu_list.append(FakeGpu("gpu2"))
    w.kube.pools["red"] = "red"
    budgets = {"red": guard.parse_budget("1")}
    ctrl = make(w, clock, reclaim_budget=guard.parse_budget("0"), reclaim_budgets=budgets)
    serve_and_finish(w, ctrl, {"blade-slot-1": "red", "blade-slot-2": "red"})
    clock.tick(61)
    run(ctrl)
    assert len(tainted(w)) == 1 and tainted(w)[0] in ("blade-slot-1", "blade-slot-2")
    assert "blade-slot-3" in w.fabric.attached()  # budget 0 in the default pool


# -- windows ---------------------------------------------------------------------------------------
def test_reclaims_start_only_inside_the_window(clock):
    clock.t = _at(12)
    w = world(1)
    ctrl = make(w, clock, reclaim_windows=(guard.parse_window("22:00-06:00"),))
    serve_and_finish(w, ctrl)
    clock.tick(3600)
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    assert "window" in held_messages(w, "blade-slot-1")[0]
    clock.t = _at(22, 1)
    run(ctrl)
    assert w.fabric.attached() == {}


# -- out-of-band detach --------------------------------------------------------------------------
def test_a_gpu_detached_out_of_band_under_a_running_pod_is_reported_and_not_replaced(clock):
    w = world(2)
    ctrl = make(w, clock)
    w.kube.add_pod(pod("train", 1, host="blade-slot-1"))
    run(ctrl)
    w.agent_step()
    run(ctrl)
    w.schedule()
    run(ctrl)
    assert w.kube.pods["ml/train"]["status"]["phase"] == "Running"
    composes = len([c for c in w.fabric.calls if c[0] == "compose"])
    w.fabric.by("gpu0").machine = None  # someone detached it on the Director
    run(ctrl)
    w.agent_step()
    for _ in range(3):
        clock.tick(100)
        run(ctrl)
    pod_ev = [e for e in w.kube.events if e.name == "train" and e.reason == "GpuDetachedOutOfBand"]
    node_ev = [e for e in w.kube.events if e.name == "blade-slot-1" and e.reason == "GpuDetachedOutOfBand"]
    assert len(pod_ev) == 1 and len(node_ev) == 1
    assert pod_ev[0].type == node_ev[0].type == "Warning"
    assert "gpu0" in pod_ev[0].message and "Director does not show it attached" in pod_ev[0].message
    assert "ml/train" in node_ev[0].message
    assert len([c for c in w.fabric.calls if c[0] == "compose"]) == composes  # no replacement
    assert "composer_gpus_detached_out_of_band_total 1.0" in ctrl.metrics.render().decode()
    assert w.kube.record("blade-slot-1").devices == frozenset()


def test_a_reclaims_own_detach_is_not_reported_as_out_of_band(clock):
    w = world(1)
    ctrl = make(w, clock)
    serve_and_finish(w, ctrl)
    clock.tick(61)
    for _ in range(3):
        run(ctrl)
        w.agent_step()
    assert w.fabric.attached() == {}
    assert "GpuDetachedOutOfBand" not in w.kube.reasons("blade-slot-1")


# -- orphans -----------------------------------------------------------------------------------------
def _orphan_world(clock: Clock) -> tuple[FakeWorld, Controller]:
    w = world(2)
    ctrl = make(w, clock)
    w.kube.add_pod(pod("train", 1, host="blade-slot-1"))
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    del w.kube.nodes["blade-slot-1"]  # the Node is deleted with the GPU attached (scale-down)
    return w, ctrl


def test_gpus_of_a_deleted_node_go_back_after_the_grace_period(clock):
    w, ctrl = _orphan_world(clock)
    run(ctrl)
    lease = [e for e in w.kube.events if e.kind == "Lease"]
    assert [(e.reason, e.name) for e in lease] == [("OrphanedGpus", "gpu-composer")]
    clock.tick(119)
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}  # within the grace period
    clock.tick(1)
    run(ctrl)
    assert w.fabric.attached() == {}
    assert w.fabric.by("gpu0").owner_tag is None and "gpu0" in w.fabric.released
    assert [e.reason for e in w.kube.events if e.kind == "Lease"][-1] == "OrphanedGpusReclaimed"
    assert "composer_orphaned_gpus_reclaimed_total 1.0" in ctrl.metrics.render().decode()
    # the GPU is free for the next pod
    w.kube.add_pod(pod("next", 1, host="blade-slot-2"))
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-2": ["gpu0"]}


def test_a_node_that_comes_back_within_the_grace_period_keeps_its_gpus(clock):
    w, ctrl = _orphan_world(clock)
    run(ctrl)
    clock.tick(60)
    w.kube.add_node(node("blade-slot-1"))
    run(ctrl)
    clock.tick(600)
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    assert [c for c in w.fabric.calls if c[0] == "decompose"] == []


def test_gpus_not_tagged_by_this_composer_are_never_orphans(clock):
    w = world(1)
    w.fabric.machine_names.append("gone")
    w.fabric.gpu_list += [
        FakeGpu("gpu5", machine="gone", owner_tag="pulumi:estate"),  # static
        FakeGpu("gpu6", machine="gone"),  # untagged: someone else's
        FakeGpu("gpu7", machine="gone", owner_tag="other-composer"),
    ]
    ctrl = make(w, clock)
    for _ in range(3):
        run(ctrl)
        clock.tick(1000)
    assert [c for c in w.fabric.calls if c[0] == "decompose"] == []


def test_an_orphan_whose_node_exists_outside_the_selector_is_kept(clock):
    w, ctrl = _orphan_world(clock)
    w.kube.node_exists = lambda name: True  # the Node exists but is not listed (node selector)
    run(ctrl)
    clock.tick(121)
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}


# -- crashes around the owner tag ------------------------------------------------------------------
def test_a_crash_between_tag_and_attach_neither_leaks_nor_double_attaches(clock):
    w = world(1)
    w.kube.add_pod(pod("a", 1))
    # what a killed composer leaves: the Composing intent and the tag, nothing attached
    w.fabric.fail.clear()
    w.fabric.by("gpu0").owner_tag = "gpu-composer"
    intent = ann.Intent("ml/a", "nvidia.com/gpu", 1, "Tesla-T4", ("gpu0",), since=clock())
    a = w.kube.nodes["blade-slot-1"]["metadata"]["annotations"]
    a[ann.INTENTS] = ann.encode_intents({"uid-a": intent})
    ctrl = make(w, clock)  # the next leader
    for _ in range(3):
        run(ctrl)
        clock.tick(1)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    assert len([c for c in w.fabric.calls if c[0] == "compose"]) == 1


def test_a_crash_between_detach_and_untag_leaves_the_gpu_free_to_plan(clock):
    w = world(1)
    w.fabric.by("gpu0").owner_tag = "gpu-composer"  # detached, the tag not cleared yet
    ctrl = make(w, clock)
    w.kube.add_pod(pod("a", 1))
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}


# -- configuration ---------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make setup)")
def test_chart_guard_values_reach_the_controller_and_bad_ones_are_refused(monkeypatch):
    docs = render(
        "director.existingSecret=s",
        "composer.reclaimBudget=20%",
        "composer.reclaimWindowsUtc[0]=22:00-06:00",
        "composer.pools[0].name=red",
        "composer.pools[0].reclaimBudget=1",
        "composer.ownerTag=composer-east",
        "composer.orphanGraceSeconds=120",
    )
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "value" in e:
            monkeypatch.setenv(e["name"], e["value"])
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "from-secret")
    p = Settings().policy()
    assert p.reclaim_budget == guard.Budget(percent=20) and p.budget_of("red") == guard.Budget(count=1)
    assert p.reclaim_windows == (guard.Window(22 * 60, 6 * 60),)
    assert (p.owner_tag, p.orphan_grace_seconds) == ("composer-east", 120)
    for bad in (
        "composer.reclaimBudget=ten",
        "composer.reclaimWindowsUtc[0]=22-06",
        "composer.ownerTag=",
        "composer.orphanGraceSeconds=-1",
        "composer.pools[0].reclaimBudget=1.5",
    ):
        out = helm("template", "gpu", str(CHART), "--set", "director.existingSecret=s", "--set",
                   "composer.pools[0].name=red", "--set", bad, check=False)
        assert out.returncode != 0, bad


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make setup)")
@pytest.mark.parametrize("flag", ["--set", "--set-string"])
def test_a_chart_budget_of_zero_holds_every_reclaim(monkeypatch, flag):
    """``reclaimBudget: 0`` (a number, as YAML and ``--set`` give it) is the budget 0, not "unset"."""
    out = helm("template", "gpu", str(CHART), "--set", "director.existingSecret=s", flag,
               "composer.reclaimBudget=0")
    (dep,) = [d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["COMPOSER_RECLAIM_BUDGET"] == "0"
    monkeypatch.setenv("COMPOSER_RECLAIM_BUDGET", env["COMPOSER_RECLAIM_BUDGET"])
    policy = Settings(director_url="http://d", director_password="p").policy()
    assert policy.reclaim_budget == guard.Budget(count=0) and policy.reclaim_budget.allowed(10) == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"reclaim_budget": "101%"},
        {"reclaim_budget": "x"},
        {"reclaim_windows_utc": ["06:00-06:00"]},
        {"pools": [{"name": "red", "reclaimBudget": "200%"}]},
        {"owner_tag": "n/a"},
        {"orphan_grace_seconds": -1},
    ],
)
def test_settings_refuse_bad_guard_values_with_one_message_each(bad):
    with pytest.raises(ValidationError) as err:
        Settings(director_url="http://d", director_password="p", **bad)
    assert err.value.error_count() == 1


def test_a_stale_tag_on_a_free_gpu_is_cleared_after_the_grace_period_unless_planned(clock):
    w = world(2)
    w.fabric.by("gpu0").owner_tag = "gpu-composer"  # left by a crash between detach and untag
    w.fabric.by("gpu1").owner_tag = "gpu-composer"
    ctrl = make(w, clock)
    run(ctrl)
    clock.tick(121)
    w.kube.add_pod(pod("a", 1, host="blade-slot-1"))  # gpu0 is planned in the same round
    run(ctrl)
    assert w.fabric.attached() == {"blade-slot-1": ["gpu0"]}
    assert w.fabric.by("gpu0").owner_tag == "gpu-composer"  # attached: keeps the composer's tag
    assert w.fabric.by("gpu1").owner_tag is None
    assert ("untag", "gpu-composer", ("gpu1",)) in w.fabric.tag_calls


def test_gpus_whose_tag_is_being_cleared_are_not_planned_meanwhile():
    from composer.decide.decide import FREE_POOL, NodeJob, Snapshot
    from composer.model.annotations import NodeRecord
    from composer.model.fabric import FabricGpu, FabricView
    from composer.run.node_jobs import without_busy

    gpus = (FabricGpu("gpu0", "Tesla-T4", owner_tag="gpu-composer"), FabricGpu("gpu1", "Tesla-T4"))
    fabric = FabricView(gpus)
    snap = Snapshot(0.0, (), (), {}, fabric)
    busy = {FREE_POOL: NodeJob(FREE_POOL, NodeRecord(), NodeRecord(), untag=("gpu0",))}
    assert [g.name for g in without_busy(snap, busy).fabric.gpus] == ["gpu1"]
