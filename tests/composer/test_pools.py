"""Pool membership from the composer's configuration, and static GPUs in the planner's host view."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from composer.decide.decide import Memory, Policy, Snapshot, decide
from composer.decide.pools import PoolMap, node_with_pool
from composer.model import annotations as ann
from composer.model.fabric import FabricGpu, FabricView
from composer.model.models import Reason
from composer.model.nodestate import NodeUsage, NodeView, host_state, node_view
from composer.model.podspec import pod_view
from composer.shell.config import Settings
from tests.composer import fakes


def _settings(**kw) -> Settings:
    return Settings(director_url="http://d", director_password="pw", **kw)


def test_configured_pools_become_the_policy_map() -> None:
    s = _settings(
        pools=[
            {"name": "alpha", "quotaGpus": 2, "hosts": ["blade-slot-1"], "namespaces": ["tenant-alpha"]},
            {"name": "beta", "hosts": ["blade-slot-2"], "namespaces": ["tenant-beta", "beta-ci"]},
        ]
    )
    pm = s.policy().pool_map
    assert pm.hosts == {"blade-slot-1": "alpha", "blade-slot-2": "beta"}
    assert pm.namespaces == {"tenant-alpha": "alpha", "tenant-beta": "beta", "beta-ci": "beta"}


def test_a_host_in_two_pools_is_refused() -> None:
    with pytest.raises(ValidationError, match="blade-slot-1 listed in the hosts of more than one pool"):
        _settings(pools=[{"name": "a", "hosts": ["blade-slot-1"]}, {"name": "b", "hosts": ["blade-slot-1"]}])


def test_configured_pool_wins_over_the_label() -> None:
    labelled = NodeView("n1", labels={ann.POOL_LABEL: "other", "zone": "z"})
    assert node_with_pool(labelled, {"n1": "alpha"}).labels == {ann.POOL_LABEL: "alpha", "zone": "z"}
    assert node_with_pool(labelled, {}).labels[ann.POOL_LABEL] == "other"  # not named: the label
    nodes = (labelled, NodeView("n2"))
    snap = Snapshot(0.0, (), nodes, {"ns": "other"}, FabricView(), hidden=(NodeView("n3"),))
    out = snap.with_pools(PoolMap({"n2": "beta", "n3": "beta"}, {"tenant-beta": "beta"}))
    assert [n.labels.get(ann.POOL_LABEL) for n in (*out.nodes, *out.hidden)] == ["other", "beta", "beta"]
    assert out.namespace_pools == {"ns": "other", "tenant-beta": "beta"}


def test_decide_plans_a_pod_of_a_configured_namespace_on_its_pools_host_only() -> None:
    """No pool label anywhere: the configured map alone puts tenant-alpha's pod on blade-slot-2 (its
    pool's host, not the first by name) and refuses tenant-beta's (no host in its pool)."""
    nodes = tuple(node_view(fakes.node(n)) for n in ("blade-slot-1", "blade-slot-2"))
    fabric = FabricView(
        gpus=(FabricGpu("gpu0", "Tesla-T4", "sw0"), FabricGpu("gpu1", "Tesla-T4", "sw0")),
        machines=frozenset({"blade-slot-1", "blade-slot-2"}),
    )
    pods = tuple(
        pod_view(fakes.pod(name, 1, ns=ns)) for name, ns in (("a", "tenant-alpha"), ("b", "tenant-beta"))
    )
    pm = PoolMap({"blade-slot-2": "alpha"}, {"tenant-alpha": "alpha", "tenant-beta": "beta"})
    d = decide(Snapshot(2e9, pods, nodes, {}, fabric), Memory(), Policy(pool_map=pm))
    assert [(p.key, p.host) for p in d.plan.placements] == [("tenant-alpha/a", "blade-slot-2")]
    assert [(r.key, r.reason) for r in d.plan.refusals] == [("tenant-beta/b", Reason.NO_HOST_FITS)]
    assert "no schedulable host of pool 'beta'" in d.plan.refusals[0].message


def test_gpus_the_composer_did_not_attach_count_as_static() -> None:
    record = ann.NodeRecord(devices=frozenset({"gpu6"}))
    hs = host_state(
        NodeView("s4", gpu_allocatable={"nvidia.com/gpu": 2}),
        record=record,
        usage=NodeUsage(),
        attached_models={"gpu6": "A100", "gpu7": "A100"},
        pending={},
        pool="default",
        max_gpus=None,
        units_per_gpu={},
    )
    assert hs.static_gpus == 1 and hs.attached == 2


def test_the_controller_writes_the_configured_pool_label_once(clock) -> None:
    from composer.run.controller import Controller
    from composer.shell.act import Executor
    from composer.shell.metrics import Metrics

    kube = fakes.FakeKube()
    for name in ("blade-slot-1", "blade-slot-2", "blade-slot-3"):
        kube.add_node(fakes.node(name, labels={ann.POOL_LABEL: "old"} if name == "blade-slot-3" else None))
    fabric = fakes.FakeFabric([fakes.FakeGpu("gpu0")], ["blade-slot-1", "blade-slot-2", "blade-slot-3"])
    policy = Policy(pool_map=PoolMap({"blade-slot-2": "alpha", "blade-slot-3": "beta"}))
    metrics = Metrics()
    ctrl = Controller(kube, lambda: fabric, policy, metrics, Executor(kube, lambda: fabric, policy, metrics,
                      clock=clock), clock=clock, workers=1)
    ctrl.round()
    assert ctrl.wait_idle(10)
    labels = {n: kube.nodes[n]["metadata"]["labels"].get(ann.POOL_LABEL) for n in kube.nodes}
    assert labels == {"blade-slot-1": None, "blade-slot-2": "alpha", "blade-slot-3": "beta"}
    ctrl.round()
    assert [w for w in kube.writes if w[0] == "labels"] == [
        ("labels", "blade-slot-2", {ann.POOL_LABEL: "alpha"}),
        ("labels", "blade-slot-3", {ann.POOL_LABEL: "beta"}),
    ]
