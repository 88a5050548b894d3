"""The DRA driver's claim side over the in-memory fakes (composer.run.dra): allocation ->
compose -> binding conditions, compose failure -> failure condition and a tainted device, a
cleared allocation -> idle GPU -> reclaim with the device tainted in the slice before the
decompose, then the GPU back in the published pool; per GPU, while another claim's pod runs on
the same node."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from composer.decide.round_types import Policy
from composer.dra.slices import ATTACH_FAILED, ATTACHED, DRIVER, POOL, TAINT_KEY, VISIBLE_ON_NODE
from composer.run.dra import DraDriver, DraRound
from composer.shell.act import Executor
from composer.shell.kube import KubeError
from composer.shell.metrics import Metrics
from dynamic_providers.director.errors import DirectorError
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what the API server applies for merge-patch+json)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@dataclass
class FakeDraKube(FakeKube):
    """FakeKube plus resource.k8s.io/v1 claims and slices; ``fabric`` to stamp slice writes with
    the Director calls made before them."""

    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    slices: dict[str, dict[str, Any]] = field(default_factory=dict)
    slice_writes: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    status_writes: list[str] = field(default_factory=list)
    fabric: FakeFabric | None = None

    def list_resource_claims(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(c) for c in self.claims.values()]

    def patch_resource_claim_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        key = f"{namespace}/{name}"
        stored = self.claims[key]
        want = (patch.get("metadata") or {}).get("resourceVersion")
        if want and want != stored["metadata"]["resourceVersion"]:
            where = f"{namespace}/resourceclaims/{name}/status"
            raise KubeError("PATCH", where, 409, "the object has been modified")
        new = merge_patch(stored, {"status": patch["status"]})
        new["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        self.claims[key] = new
        self.status_writes.append(key)
        return copy.deepcopy(new)

    def list_resource_slices(self, driver: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(s) for s in self.slices.values() if s["spec"]["driver"] == driver]

    def apply_resource_slice(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.slices[body["metadata"]["name"]] = copy.deepcopy(dict(body))
        self.slice_writes.append((len(self.fabric.calls) if self.fabric else 0, copy.deepcopy(dict(body))))
        return copy.deepcopy(dict(body))

    def delete_resource_slice(self, name: str) -> None:
        self.slices.pop(name, None)

    # what tests read
    def published(self) -> dict[str, tuple[list[str], list[dict[str, str]]]]:
        out = {}
        for s in self.slices.values():
            (term,) = s["spec"]["nodeSelector"]["nodeSelectorTerms"]
            hosts = [name for name in sorted(self.nodes) if all(
                self.node_labels(name).get(e["key"]) in e["values"] for e in term["matchExpressions"])]
            for d in s["spec"]["devices"]:
                out[d["name"]] = (hosts, d.get("taints", []))
        return out

    def node_labels(self, name: str) -> dict[str, str]:
        """The node's labels as the scheduler matches them (with its hostname label)."""
        return {"kubernetes.io/hostname": name, **(self.nodes[name]["metadata"].get("labels") or {})}

    def conditions(self, key: str, device: str) -> dict[str, tuple[str, str]]:
        for e in (self.claims[key].get("status") or {}).get("devices") or ():
            if (e["driver"], e["pool"], e["device"]) == (DRIVER, POOL, device):
                return {c["type"]: (c["status"], c["reason"]) for c in e["conditions"]}
        return {}


def allocate(kube: FakeDraKube, name: str, device: str, node_name: str) -> str:
    key = f"ml/{name}"
    kube.claims[key] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}", "generation": 1,
                     "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [
                    {"request": "gpu", "driver": DRIVER, "pool": POOL, "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]},
            }
        },
    }
    return key


def deallocate(kube: FakeDraKube, key: str) -> None:
    """The scheduler clears the allocation (bindingTimeout, a failure condition, pod deleted)."""
    claim = kube.claims[key]
    claim["status"] = {}
    claim["metadata"]["resourceVersion"] = str(int(claim["metadata"]["resourceVersion"]) + 1)


def setup(**policy: Any) -> tuple[FakeWorld, FakeDraKube, DraDriver, Clock]:
    kube = FakeDraKube()
    for name in ("blade-1", "blade-2"):
        kube.add_node(node(name))
    fabric = FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["blade-1", "blade-2"])
    kube.fabric = fabric
    clock = Clock()
    pol = Policy(**{"idle_timeout_seconds": 60, **policy})
    ex = Executor(kube, lambda: fabric, pol, Metrics(), clock=clock)
    driver = DraDriver(kube, ex, pol, clock=clock, failure_hold_seconds=120)
    return FakeWorld(kube, fabric), kube, driver, clock


def run(driver: DraDriver) -> DraRound:
    """One round, then wait until the node jobs it submitted have ended (the next round
    collects their results)."""
    out = driver.round()
    assert driver.wait_idle(10)
    return out


def test_allocation_composes_that_gpu_to_that_node_then_sets_the_binding_conditions_true():
    w, kube, driver, clock = setup()
    run(driver)
    both = ["blade-1", "blade-2"]
    assert kube.published() == {"gpu0": (both, []), "gpu1": (both, [])}
    key = allocate(kube, "c1", "gpu0", "blade-1")
    out = run(driver)
    assert w.fabric.calls == [("compose", "blade-1", ("gpu0",))]
    assert w.fabric.by("gpu0").owner_tag == "gpu-composer"
    assert kube.record("blade-1").devices == frozenset({"gpu0"})
    assert [(e.kind, e.name, e.reason) for e in kube.events] == [("ResourceClaim", "c1", "Composed")]
    assert out.statuses == ()  # conditions follow the Director's truth, next round
    clock.tick(1)
    run(driver)
    assert kube.conditions(key, "gpu0") == {ATTACHED: ("True", "Composed"),
                                             VISIBLE_ON_NODE: ("False", "WaitingForNode")}
    assert "gpu0" not in kube.published()  # on a claim: offered to nobody
    w.agent_step()  # the node sees it (GFD's nvidia.com/gpu.count)
    run(driver)
    assert kube.conditions(key, "gpu0") == {ATTACHED: ("True", "Composed"),
                                             VISIBLE_ON_NODE: ("True", "VisibleOnNode")}
    writes = len(kube.status_writes)
    run(driver)
    assert len(kube.status_writes) == writes  # nothing changed: nothing written
    assert w.fabric.calls == [("compose", "blade-1", ("gpu0",))]  # composed once


def test_a_failed_compose_sets_the_failure_condition_and_taints_the_device_until_healed():
    w, kube, driver, clock = setup()
    w.fabric.fail["compose"] = [DirectorError("fabric busy")]
    key = allocate(kube, "c1", "gpu1", "blade-2")
    run(driver)
    assert [(e.kind, e.reason) for e in kube.events] == [("ResourceClaim", "ComposeGaveUp")]
    assert w.fabric.attached() == {}
    run(driver)
    assert kube.conditions(key, "gpu1") == {ATTACH_FAILED: ("True", "ComposeFailed")}
    hosts, taints = kube.published()["gpu1"]
    assert taints == [{"key": TAINT_KEY, "value": "ComposeFailed", "effect": "NoSchedule"}]
    deallocate(kube, key)  # the scheduler gives up on it and picks again
    clock.tick(119)
    run(driver)
    assert kube.published()["gpu1"][1] != []  # still held
    clock.tick(1)
    run(driver)
    assert kube.published()["gpu1"] == (["blade-1", "blade-2"], [])
    assert [c for c in w.fabric.calls if c[0] == "compose"] == [("compose", "blade-2", ("gpu1",))]


def test_a_cleared_allocation_leaves_an_idle_gpu_reclaimed_tainted_first_then_published_again():
    w, kube, driver, clock = setup()
    key = allocate(kube, "c1", "gpu0", "blade-1")
    run(driver)
    w.agent_step()
    run(driver)
    deallocate(kube, key)
    clock.tick(1)
    run(driver)
    assert kube.published()["gpu0"] == (["blade-1"], [])  # idle: offered to its own node only
    clock.tick(61)
    writes = len(kube.slice_writes)
    out = run(driver)
    (job,) = [j for j in out.decision.decision.jobs if j.reclaim is not None]
    assert job.node == "blade-1"
    assert ("decompose", "blade-1", ("gpu0",)) in w.fabric.calls
    decomposed_at = w.fabric.calls.index(("decompose", "blade-1", ("gpu0",)))
    tainted = [
        calls for calls, body in kube.slice_writes[writes:]
        if any(d["name"] == "gpu0" and d.get("taints") for d in body["spec"]["devices"])
    ]
    assert tainted and tainted[0] <= decomposed_at  # the slice said NoSchedule before the decompose
    w.agent_step()
    clock.tick(1)
    run(driver)
    assert kube.published()["gpu0"] == (["blade-1", "blade-2"], [])  # back in the free pool
    assert kube.record("blade-1").devices == frozenset()


def test_a_claim_holding_a_gpu_keeps_its_node_from_the_reclaim():
    w, kube, driver, clock = setup()
    allocate(kube, "c1", "gpu0", "blade-1")
    run(driver)
    w.agent_step()
    for _ in range(3):
        clock.tick(61)
        run(driver)
    assert w.fabric.attached() == {"blade-1": ["gpu0"]}
    assert not any(c[0] == "decompose" for c in w.fabric.calls)


def test_a_gpu_whose_claim_is_gone_goes_back_alone_while_another_claims_pod_runs_on_its_node():
    w, kube, driver, clock = setup()
    c0 = allocate(kube, "c0", "gpu0", "blade-1")
    c1 = allocate(kube, "c1", "gpu1", "blade-1")
    kube.add_pod(pod("uses-c1", node_name="blade-1", phase="Running"))  # nvidia.com/gpu: 1, served by c1
    run(driver)
    w.agent_step()
    run(driver)
    assert kube.conditions(c1, "gpu1")[VISIBLE_ON_NODE] == ("True", "VisibleOnNode")
    deallocate(kube, c0)
    clock.tick(1)
    run(driver)
    assert kube.published() == {"gpu0": (["blade-1"], [])}  # idle, for its node; gpu1 on its claim
    clock.tick(59)
    run(driver)
    assert w.fabric.attached() == {"blade-1": ["gpu0", "gpu1"]}  # 59 s idle: kept
    clock.tick(1)
    writes, taints = len(kube.slice_writes), len([x for x in kube.writes if x[0] == "taint"])
    run(driver)
    assert w.fabric.attached() == {"blade-1": ["gpu1"]}
    reclaiming = {"key": TAINT_KEY, "value": "Reclaiming", "effect": "NoSchedule"}
    decomposed_at = w.fabric.calls.index(("decompose", "blade-1", ("gpu0",)))
    tainted = [
        calls for calls, body in kube.slice_writes[writes:]
        if any(d["name"] == "gpu0" and d.get("taints") == [reclaiming] for d in body["spec"]["devices"])
    ]
    assert tainted and tainted[0] <= decomposed_at  # the slice said NoSchedule before the decompose
    assert len([x for x in kube.writes if x[0] == "taint"]) == taints  # the node itself is not tainted
    assert (kube.nodes["blade-1"]["spec"].get("taints") or []) == []
    assert "Reclaimed" in kube.reasons("blade-1")
    clock.tick(1)
    w.agent_step()
    run(driver)
    assert kube.published() == {"gpu0": (["blade-1", "blade-2"], [])}  # back in the free pool, untainted
    assert kube.record("blade-1").devices == frozenset({"gpu1"})
    assert kube.record("blade-1").reclaim is None
    assert kube.conditions(c1, "gpu1")[VISIBLE_ON_NODE] == ("True", "VisibleOnNode")


def test_a_status_write_that_conflicts_is_tried_again_next_round():
    w, kube, driver, clock = setup()
    key = allocate(kube, "c1", "gpu0", "blade-1")
    run(driver)
    real = kube.patch_resource_claim_status
    calls = []

    def racing(namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        calls.append(name)
        if len(calls) == 1:  # the scheduler wrote the claim between our read and our write
            kube.claims[key]["metadata"]["resourceVersion"] = "99"
        return real(namespace, name, patch)

    kube.patch_resource_claim_status = racing  # type: ignore[method-assign]
    out = run(driver)
    assert out.statuses == () and kube.conditions(key, "gpu0") == {}
    out = run(driver)
    assert out.statuses == (key,)
    assert kube.conditions(key, "gpu0")[ATTACHED] == ("True", "Composed")


def devices(kube: FakeDraKube) -> dict[str, dict[str, Any]]:
    """Published device name -> device entry."""
    return {d["name"]: d for s in kube.slices.values() for d in s["spec"]["devices"]}


def test_a_published_device_carries_the_directors_model_memory_and_fabric():
    w, kube, driver, clock = setup()
    gpu0, gpu1 = w.fabric.gpu_list
    gpu0.director_model, gpu0.memory_mib, gpu0.fabr_id, gpu0.swit_gid = "Tesla T4", 15360, 3, "0x00020000"
    gpu1.fabr_id = 3  # no device/info/gpu record: no model string, no memory
    run(driver)
    got = devices(kube)
    assert got["gpu0"]["attributes"] == {
        "productName": {"string": "Tesla-T4"},
        "model": {"string": "Tesla T4"},
        "pcieSwitch": {"string": "0x00020000"},
        "pool": {"string": ""},
        "directorName": {"string": "gpu0"},
        "fabric": {"int": 3},
    }
    assert got["gpu0"]["capacity"] == {"memory": {"value": "15Gi"}}
    assert "model" not in got["gpu1"]["attributes"] and "capacity" not in got["gpu1"]
    assert got["gpu1"]["attributes"]["fabric"] == {"int": 3}
    assert got["gpu1"]["attributes"]["productName"] == {"string": "Tesla-T4"}


def test_the_facts_come_with_the_rounds_one_director_read_and_rewrite_nothing_unchanged():
    w, kube, driver, clock = setup()
    for g in w.fabric.gpu_list:
        g.director_model, g.memory_mib, g.fabr_id = "Tesla T4", 15360, 3
    real, reads = w.fabric.gpus, []
    w.fabric.gpus = lambda: (reads.append(1), real())[1]  # type: ignore[method-assign]
    run(driver)
    writes = len(kube.slice_writes)
    for _ in range(3):
        clock.tick(1)
        run(driver)
    assert len(reads) == 4  # one GPU read per round, the facts' included
    assert len(kube.slice_writes) == writes  # the same facts every round: the pool is not rewritten
    assert devices(kube)["gpu1"]["capacity"] == {"memory": {"value": "15Gi"}}


def test_nodes_the_driver_no_longer_serves_lose_its_labels_so_no_slice_offers_them_a_gpu():
    """A node an earlier run labelled (reaches the fabric) but this driver does not serve, and a
    served node that leaves the node selector while it runs: both lose the driver's labels, so
    the slices' label selectors stop offering them GPUs; the served nodes keep theirs."""
    from composer.dra.slices import DRIVER_LABELS, REACH_LABEL

    _, kube, driver, _ = setup()
    for name in ("blade-1", "blade-2"):
        kube.nodes[name]["metadata"].setdefault("labels", {})["composer"] = "yes"
    kube.add_node(node("blade-3", labels={REACH_LABEL: "true", "team": "a"}))  # an earlier run's
    driver.node_selector = "composer=yes"
    run(driver)
    assert {n: bool(set(DRIVER_LABELS) & kube.node_labels(n).keys()) for n in kube.nodes} == {
        "blade-1": True, "blade-2": True, "blade-3": False}
    assert kube.node_labels("blade-3")["team"] == "a"  # only the driver's labels go

    kube.nodes["blade-2"]["metadata"]["labels"]["composer"] = "no"  # leaves the served set
    run(driver)
    assert REACH_LABEL in kube.node_labels("blade-1")
    assert not set(DRIVER_LABELS) & kube.node_labels("blade-2").keys()
