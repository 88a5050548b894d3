"""Pure parsers and matchers: pods, nodes, annotations, scheduler filters."""

from __future__ import annotations

import pytest

from composer.decide.scheduling import requirement_matches, tolerates, toleration_matches
from composer.model import annotations as ann
from composer.model.models import (
    GPU_RESOURCE,
    MIXED_MODELS,
    LabelRequirement,
    Taint,
    Toleration,
    is_gpu_resource,
)
from composer.model.nodestate import NodeUsage, host_state, max_gpus_of, node_view, usage_by_node
from composer.model.podspec import InvalidRequest, constraints, effective_requests, gpu_request, pod_view
from tests.composer.fakes import node, pod

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-1g.5gb", True),
        ("nvidia.com/gpu-foo", False),
        ("nvidia.com/GA100_A100_PCIE_40GB", True),  # passthrough (sandbox device plugin)
        ("nvidia.com/GRID_T4-1Q", False),  # a vGPU type: the composer composes none for it
        ("amd.com/gpu", False),
        ("cpu", False),
    ],
)
def test_gpu_resource_names(name, gpu):
    assert is_gpu_resource(name) is gpu


def test_effective_requests_follow_the_scheduler():
    spec = {
        "containers": [
            {"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2"}}},
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "4"}}},
            {"restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    req = effective_requests(spec)
    # init container max(4, 1.5), sidecar memory added, overhead added
    assert float(req["cpu"]) == pytest.approx(4.1)
    assert int(req["memory"]) == 2 * 1024**3
    assert int(req["nvidia.com/gpu"]) == 2


def test_pod_view_reads_what_the_composer_needs():
    p = pod("train", 2, product=T4, host="blade-slot-2", cpu="1500m", memory="512Mi")
    p["spec"]["tolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    ]
    p["spec"]["priority"] = 100
    v = pod_view(p)
    assert v.key == "ml/train" and v.unschedulable and v.wants_gpu
    assert v.gpu == {"nvidia.com/gpu": 2}
    assert (v.cpu_millis, v.memory_bytes, v.priority) == (1500, 512 * 1024**2, 100)
    assert v.constraints.models == {T4} and v.constraints.hosts == {"blade-slot-2"}
    assert v.tolerations == (Toleration("dedicated", "Equal", "ml", "NoSchedule"),)
    assert v.created > 1.7e9


def test_bound_gated_and_scheduled_pods_are_not_unschedulable():
    assert not pod_view(pod("x", node_name="n1", phase="Running")).unschedulable
    gated = pod("g")
    gated["spec"]["schedulingGates"] = [{"name": "wait"}]
    assert not pod_view(gated).unschedulable
    assert not pod_view(pod("fresh", unschedulable=False)).unschedulable


def test_node_affinity_terms():
    spec = {
        "nodeSelector": {"zone": "z1"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "nvidia.com/gpu.product", "operator": "In", "values": [T4]},
                                {"key": "rack", "operator": "Exists"},
                            ]
                        },
                        {
                            "matchExpressions": [
                                {"key": "nvidia.com/gpu.product", "operator": "In", "values": [A100]},
                                {"key": "rack", "operator": "Exists"},
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["h1"]},
                            ]
                        },
                    ]
                }
            }
        },
    }
    c = constraints(spec)
    assert c.models == {T4, A100}
    assert c.hosts is None  # the first term allows any host
    assert set(c.requirements) == {
        LabelRequirement("zone", "In", ("z1",)),
        LabelRequirement("rack", "Exists"),
    }
    fields = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["h2"]}]}
                    ]
                }
            }
        }
    }
    assert constraints(fields).hosts == {"h2"}


def test_gpu_request_units_and_models():
    v = pod_view(pod("m", 3, resource="nvidia.com/mig-1g.5gb"))
    r = gpu_request(
        v,
        pool="p",
        units_per_gpu={"nvidia.com/mig-1g.5gb": 7},
        resource_models={"nvidia.com/mig-1g.5gb": frozenset({A100})},
    )
    assert (r.resource, r.units, r.units_per_gpu, r.gpus, r.models, r.pool) == (
        "nvidia.com/mig-1g.5gb",
        3,
        7,
        1,
        {A100},
        "p",
    )
    both = pod("two")
    both["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.shared"] = "1"
    with pytest.raises(InvalidRequest, match=r"several GPU resources \(nvidia.com/gpu, nvidia.com/gpu.sh"):
        gpu_request(pod_view(both), pool="p")


@pytest.mark.parametrize(
    ("tol", "taint", "ok"),
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "x", "NoSchedule"), Taint("k", "v", "NoSchedule"), False),
        (Toleration("k", "Exists"), Taint("k", "v", "NoExecute"), True),
        (Toleration("", "Exists"), Taint("any", "v", "NoSchedule"), True),
        (Toleration("k", "Exists", effect="NoExecute"), Taint("k", "v", "NoSchedule"), False),
    ],
)
def test_toleration_matching(tol, taint, ok):
    assert toleration_matches(tol, taint) is ok


def test_prefer_no_schedule_does_not_block():
    assert tolerates((), (Taint("soft", "", "PreferNoSchedule"),))
    assert not tolerates((), (Taint("hard", "", "NoSchedule"),))


@pytest.mark.parametrize(
    ("req", "ok"),
    [
        (LabelRequirement("a", "In", ("1", "2")), True),
        (LabelRequirement("a", "NotIn", ("1",)), False),
        (LabelRequirement("b", "NotIn", ("1",)), True),
        (LabelRequirement("a", "Exists"), True),
        (LabelRequirement("a", "DoesNotExist"), False),
        (LabelRequirement("n", "Gt", ("3",)), True),
        (LabelRequirement("n", "Lt", ("3",)), False),
        (LabelRequirement("a", "Gt", ("3",)), False),
        (LabelRequirement("a", "Weird", ("1",)), False),
    ],
)
def test_requirement_matching(req, ok):
    assert requirement_matches(req, {"a": "1", "n": "4"}) is ok


def test_annotations_round_trip_and_tolerate_garbage():
    it = ann.Intent("ml/a", GPU_RESOURCE, 2, T4, ("gpu0", "gpu1"), ann.IntentPhase.ATTACHED, 12.5, 0.0, 1)
    rc = ann.Reclaim(("gpu3",), "Decomposed", 99.0)
    encoded = {
        ann.DEVICES: ann.encode_devices({"gpu1", "gpu0"}),
        ann.INTENTS: ann.encode_intents({"u1": it}),
        ann.RECLAIM: ann.encode_reclaim(rc),
    }
    assert encoded[ann.DEVICES] == "gpu0,gpu1"
    rec = ann.decode(encoded)
    assert rec == ann.NodeRecord(frozenset({"gpu0", "gpu1"}), {"u1": it}, rc)
    assert ann.decode({ann.INTENTS: "{not json", ann.RECLAIM: "[]"}) == ann.NodeRecord()
    assert ann.encode_intents({}) is None and ann.encode_devices(frozenset()) is None


def test_node_view_and_host_state():
    n = node(
        "h1",
        cpu="8",
        memory="16Gi",
        gpus=2,
        labels={ann.MAX_GPUS_LABEL: "4"},
        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
    )
    v = node_view(n)
    assert (v.cpu_millis, v.memory_bytes, v.gpu_allocatable, v.advertised_gpus) == (
        8000,
        16 * 1024**3,
        {"nvidia.com/gpu": 2},
        2,
    )
    assert v.taints == (Taint("k", "v", "NoSchedule"),) and v.ready
    assert max_gpus_of(v, None) == 4
    pods = [
        pod_view(pod("run", 1, node_name="h1", phase="Running", cpu="2", memory="4Gi")),
        pod_view(pod("done", 1, node_name="h1", phase="Succeeded", cpu="2")),
    ]
    usage = usage_by_node(pods)
    assert usage["h1"] == NodeUsage(2000, 4 * 1024**3, {"nvidia.com/gpu": 1}, 1)
    pend = pod_view(pod("p", 1, cpu="1"))
    rec = ann.NodeRecord(
        frozenset({"gpu0", "gpu1", "gpu2"}),
        {pend.uid: ann.Intent("ml/p", GPU_RESOURCE, 1, T4, ("gpu2",), ann.IntentPhase.ATTACHED, 0.0)},
    )
    hs = host_state(
        v,
        record=rec,
        usage=usage["h1"],
        attached_models={"gpu0": T4, "gpu1": T4, "gpu2": T4},
        pending={pend.uid: pend},
        pool="default",
        max_gpus=4,
        units_per_gpu={},
    )
    assert hs.cpu_free_millis == 8000 - 2000 - 1000
    assert hs.model == T4 and hs.attached == 3
    # 2 advertised - 1 used + 1 in flight (gpu2, not advertised yet) - 1 for its pod
    assert hs.spare == {"nvidia.com/gpu": 1}
    mixed = host_state(
        v,
        record=ann.NodeRecord(),
        usage=NodeUsage(),
        attached_models={"g": T4, "h": A100},
        pending={},
        pool="default",
        max_gpus=None,
        units_per_gpu={},
    )
    assert mixed.model == MIXED_MODELS
    tainted = node("h2", taints=[{"key": ann.RECLAIM_TAINT_KEY, "value": "true", "effect": "NoSchedule"}])
    assert not host_state(
        node_view(tainted),
        record=ann.NodeRecord(),
        usage=NodeUsage(),
        attached_models={},
        pending={},
        pool="default",
        max_gpus=None,
        units_per_gpu={},
    ).schedulable
