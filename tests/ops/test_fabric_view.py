"""ops.fabric_view: the fabric at a glance joined from the Director's GPUs and the cluster's objects."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from composer.model.annotations import COMPONENT, Intent, IntentPhase, encode_idle_since, encode_intents
from domain.labels import DEVICES, DO_NOT_RECLAIM, GATE, GPU_RESOURCE, POOL_LABEL, RESERVATION
from dynamic_providers.director.models import Gpu
from ops.fabric_view import SYSTEM_POOL, build, render_text

NOW = 1_800_000_000.0


def gpu(
    name: str,
    machine: str | None = None,
    *,
    group: str | None = "gpu-pool",
    state: str = "active | online",
    tag: str | None = None,
) -> Gpu:
    return Gpu(
        name=name,
        dev_id=name,
        model="Tesla-T4",
        director_model="Tesla T4",
        vendor="NVIDIA",
        group=group,
        group_id=1 if group else None,
        machine=machine,
        machine_id=7 if machine else None,
        device_state=state,
        owner_tag=tag,
    )


def node(
    name: str, annotations: dict[str, str | None] | None = None, labels: dict[str, str] | None = None
) -> dict[str, object]:
    return {
        "metadata": {
            "name": name,
            "labels": labels or {},
            "annotations": {k: v for k, v in (annotations or {}).items() if v is not None},
        }
    }


def pod(
    name: str,
    *,
    node_name: str = "",
    gated: bool = False,
    phase: str = "Running",
    uid: str = "",
    annotations: dict[str, str] | None = None,
    gpus: int = 1,
) -> dict[str, object]:
    spec: dict[str, object] = {
        "containers": [{"name": "c", "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": uid or name,
            "annotations": annotations or {},
            "creationTimestamp": "2027-01-15T08:00:00Z",
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def event(
    kind: str,
    name: str,
    reason: str,
    message: str,
    *,
    type_: str = "Warning",
    at: float = NOW - 60,
    namespace: str | None = "team",
    component: str = COMPONENT,
    count: int = 1,
) -> dict[str, object]:
    stamp = f"{datetime.fromtimestamp(at, UTC):%Y-%m-%dT%H:%M:%SZ}"
    obj = {"kind": kind, "name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "metadata": {"name": f"{name}.1"},
        "involvedObject": obj,
        "reason": reason,
        "message": message,
        "type": type_,
        "reportingComponent": component,
        "lastTimestamp": stamp,
        "count": count,
    }


def test_a_composed_gpu_names_its_host_its_pod_and_the_composer() -> None:
    reservation = json.dumps(
        {"node": "blade-slot-1", "devices": ["gpu0", "gpu1"], "resource": GPU_RESOURCE, "units": 2}
    )
    s = build(
        director="http://d",
        cluster="https://k",
        read_at=NOW,
        gpus=[
            gpu("gpu0", "blade-slot-1", tag="gpu-composer"),
            gpu("gpu1", "blade-slot-1", tag="gpu-composer"),
            gpu("gpu2", group=None),
        ],
        machines=["blade-slot-1", "blade-slot-2"],
        nodes=[node("blade-slot-1", {DEVICES: "gpu0,gpu1"}, {POOL_LABEL: "default"}), node("blade-slot-2")],
        pods=[
            pod("trainer", node_name="blade-slot-1", annotations={RESERVATION: reservation}, gpus=2),
            pod("web", node_name="blade-slot-1", gpus=0),
        ],
        events=[],
        since=NOW - 3600,
    )
    rows = {g.name: g for g in s.gpus}
    assert rows["gpu0"].state == "composed" and rows["gpu0"].host == "blade-slot-1" and rows["gpu0"].managed
    assert rows["gpu0"].pods == ("team/trainer",) and rows["gpu0"].owner_tag == "gpu-composer"
    assert rows["gpu2"].state == "free" and rows["gpu2"].host is None and rows["gpu2"].pool == SYSTEM_POOL
    assert [(p.pool, p.total, p.free, p.composed) for p in s.pools] == [
        ("gpu-pool", 2, 0, 2),
        (SYSTEM_POOL, 1, 1, 0),
    ]
    hosts = {h.name: h for h in s.hosts}
    assert hosts["blade-slot-1"].composer_pool == "default" and hosts["blade-slot-1"].gpu_pods == (
        "team/trainer",
    )
    assert hosts["blade-slot-2"].gpus == () and hosts["blade-slot-2"].node
    text = render_text(s)
    assert re.search(r"gpu0 +Tesla-T4 +gpu-pool +composed +blade-slot-1 +composer +team/trainer", text)


def test_gpus_of_someone_else_and_unhealthy_ones_are_told_apart() -> None:
    s = build(
        director="d",
        cluster="k",
        read_at=NOW,
        gpus=[gpu("gpu0", "blade-slot-1"), gpu("gpu1", state="failed")],
        machines=["blade-slot-1"],
        nodes=[node("blade-slot-1")],
        pods=[pod("static", node_name="blade-slot-1")],
        events=[],
        since=0,
    )
    rows = {g.name: g for g in s.gpus}
    assert not rows["gpu0"].managed and rows["gpu0"].pods == ("team/static",)
    assert rows["gpu1"].state == "unhealthy" and s.pools[0].unhealthy == 1
    assert re.search(r"gpu0 .* composed +blade-slot-1 +other +team/static", render_text(s))


def test_idle_host_shows_its_timer_and_the_guard_holding_it() -> None:
    idle = {DEVICES: "gpu0", "composer.liqid.io/idle-since": encode_idle_since(NOW - 120)}
    held = event(
        "Node",
        "blade-slot-1",
        "ReclaimHeld",
        "idle GPUs gpu0 not reclaimed (window): outside the reclaim windows 22:00-06:00 UTC",
        type_="Normal",
        namespace="default",
        at=NOW - 100,
    )
    stale = event(
        "Node",
        "blade-slot-1",
        "ReclaimHeld",
        "idle GPUs gpu0 not reclaimed (budget): 1 of 1",
        type_="Normal",
        namespace="default",
        at=NOW - 900,
    )
    s = build(
        director="d",
        cluster="k",
        read_at=NOW,
        gpus=[gpu("gpu0", "blade-slot-1")],
        machines=["blade-slot-1"],
        nodes=[node("blade-slot-1", idle)],
        pods=[],
        events=[stale, held],
        since=0,
    )
    (g,) = s.gpus
    assert g.idle_since == NOW - 120 and g.held_by == "window: outside the reclaim windows 22:00-06:00 UTC"
    assert g.pods == ()
    # a stale Event from before this idle period does not hold it
    s2 = build(
        director="d",
        cluster="k",
        read_at=NOW,
        gpus=[gpu("gpu0", "blade-slot-1")],
        machines=["blade-slot-1"],
        nodes=[node("blade-slot-1", idle)],
        pods=[],
        events=[stale],
        since=0,
    )
    assert s2.gpus[0].held_by is None
    # the opt-out annotation on the Node, or on a pod bound to it, wins
    s3 = build(
        director="d",
        cluster="k",
        read_at=NOW,
        gpus=[gpu("gpu0", "blade-slot-1")],
        machines=["blade-slot-1"],
        nodes=[node("blade-slot-1", {**idle, DO_NOT_RECLAIM: "true"})],
        pods=[],
        events=[],
        since=0,
    )
    assert s3.gpus[0].held_by == "do-not-reclaim (node)"
    s4 = build(
        director="d",
        cluster="k",
        read_at=NOW,
        gpus=[gpu("gpu0", "blade-slot-1")],
        machines=["blade-slot-1"],
        nodes=[node("blade-slot-1", idle)],
        pods=[pod("keep", node_name="blade-slot-1", annotations={DO_NOT_RECLAIM: "true"})],
        events=[],
        since=0,
    )
    assert s4.gpus[0].held_by == "do-not-reclaim (pod team/keep)"


def test_gated_pods_say_why_and_failures_are_the_composers_recent_warnings() -> None:
    intents = encode_intents(
        {
            "u1": Intent(
                pod="team/a",
                resource=GPU_RESOURCE,
                units=2,
                model="Tesla-T4",
                devices=("gpu0", "gpu1"),
                phase=IntentPhase.COMPOSING,
                since=NOW - 5,
                until=NOW + 295,
            )
        }
    )
    evs = [
        event("Pod", "b", "NoFreeGpus", "no free Tesla-T4 in pool default", at=NOW - 30),
        event("Pod", "b", "Gated", "held until its GPUs are composed", type_="Normal", at=NOW - 40),
        event("Pod", "c", "ComposeFailed", "old", at=NOW - 7200),
        event("Pod", "x", "Failed", "someone else's", component="kubelet"),
        event("Pod", "b", "NoFreeGpus", "again", at=NOW - 10, count=3),
    ]
    s = build(
        director="d",
        cluster="k",
        read_at=NOW,
        gpus=[gpu("gpu0", "blade-slot-1"), gpu("gpu1", "blade-slot-1")],
        machines=["blade-slot-1"],
        nodes=[node("blade-slot-1", {"composer.liqid.io/intents": intents})],
        pods=[
            pod("a", gated=True, phase="Pending", uid="u1"),
            pod("b", gated=True, phase="Pending"),
            pod("c", gated=True, phase="Pending"),
            pod("done", gated=True, phase="Succeeded"),
        ],
        events=evs,
        since=NOW - 3600,
    )
    why = {g.pod: g.why for g in s.gated}
    assert set(why) == {"team/a", "team/b", "team/c"}
    assert why["team/a"].startswith("GPUs gpu0, gpu1 (Tesla-T4) reserved on blade-slot-1: Composing")
    assert why["team/b"] == "NoFreeGpus: again"
    assert why["team/c"] == "ComposeFailed: old"
    assert [(f.object, f.reason, f.count) for f in s.failures] == [
        ("team/b", "NoFreeGpus", 3),
        ("team/b", "NoFreeGpus", 1),
    ]
    assert {g.reserved_for for g in s.gpus} == {"team/a"}
    assert json.loads(json.dumps(s.to_json()))["gated"][0]["pod"] == "team/a"
    assert "NoFreeGpus (x3): again" in render_text(s)


@pytest.mark.parametrize("normal_listed_last", [True, False])
def test_a_gated_pods_why_is_its_warning_when_a_normal_event_has_the_same_second(
    normal_listed_last: bool,
) -> None:
    warning = event("Pod", "b", "NoFreeGpus", "needs 2 free GPU(s)", at=NOW - 2)
    normal = event("Pod", "b", "Gated", "held by the scheduling gate", type_="Normal", at=NOW - 2)
    s = build(
        director="d",
        cluster="k",
        read_at=NOW,
        gpus=[],
        machines=[],
        nodes=[],
        pods=[pod("b", gated=True, phase="Pending")],
        events=[warning, normal] if normal_listed_last else [normal, warning],
        since=NOW - 3600,
    )
    assert [g.why for g in s.gated] == ["NoFreeGpus: needs 2 free GPU(s)"]


def test_namespaces_limit_gated_pods_and_failures_but_not_the_hosts_events() -> None:
    evs = [
        event("Pod", "b", "NoFreeGpus", "no free GPU"),
        event("Node", "blade-slot-1", "ReclaimFailed", "decompose refused", namespace=None),
    ]
    kw = dict(
        director="d",
        cluster="k",
        read_at=NOW,
        gpus=[gpu("gpu0", "blade-slot-1")],
        machines=["blade-slot-1"],
        nodes=[node("blade-slot-1")],
        pods=[pod("b", gated=True, phase="Pending")],
        events=evs,
        since=0,
    )
    every = build(**kw)  # type: ignore[arg-type]
    assert [g.pod for g in every.gated] == ["team/b"] and len(every.failures) == 2
    other = build(**kw, namespaces=["other"])  # type: ignore[arg-type]
    assert other.gated == () and [f.reason for f in other.failures] == ["ReclaimFailed"]
    assert build(**kw, namespaces=["team"]).failures == every.failures  # type: ignore[arg-type]
