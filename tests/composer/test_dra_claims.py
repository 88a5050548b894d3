"""ResourceClaims read, binding plan and device status written by the DRA driver, on plain data
(composer.dra.claims, composer.dra.binding)."""

from __future__ import annotations

import pytest

from composer.dra import binding, claims
from composer.dra.claims import Condition
from composer.dra.slices import ATTACH_FAILED, ATTACHED, DRIVER, POOL, VISIBLE_ON_NODE
from composer.model.fabric import FabricGpu, FabricView

NOW = 1_800_000_000.0


def selector(key: str, values: list[str], *, op: str = "In", fields: bool = True) -> dict:
    """A one-term node selector with one requirement (``matchFields`` or ``matchExpressions``)."""
    kind = "matchFields" if fields else "matchExpressions"
    return {"nodeSelectorTerms": [{kind: [{"key": key, "operator": op, "values": values}]}]}


def claim(
    name: str = "c1",
    *,
    node: str | None = "blade-1",
    devices: tuple[str, ...] = ("gpu0",),
    status_devices: list[dict] | None = None,
    generation: int = 2,
    node_selector: dict | None = None,
    other: tuple[tuple[str, str, str], ...] = (),
) -> dict:
    results = [{"request": "gpu", "driver": DRIVER, "pool": POOL, "device": d} for d in devices]
    results += [{"request": "nic", "driver": drv, "pool": pool, "device": d} for drv, pool, d in other]
    status: dict = {}
    if node is not None or node_selector is not None:
        status["allocation"] = {
            "devices": {"results": results},
            "nodeSelector": node_selector or selector("metadata.name", [str(node)]),
        }
    if status_devices is not None:
        status["devices"] = status_devices
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}", "generation": generation,
                     "resourceVersion": "41"},
        "status": status,
    }


def view(*gpus: FabricGpu, machines: tuple[str, ...] = ("blade-1", "blade-2")) -> FabricView:
    return FabricView(gpus, frozenset(machines), {m: "1" for m in machines})


def plan(cs: list[dict], v: FabricView, **kw) -> binding.BindingPlan:
    kw.setdefault("visible", {})
    kw.setdefault("failures", {})
    return binding.plan_binding([claims.claim_view(c) for c in cs], v, **kw)


# -- reading claims ------------------------------------------------------------------------

def test_the_node_comes_from_the_allocations_node_selector():
    fields = selector("metadata.name", ["n1"])
    host = selector("kubernetes.io/hostname", ["n2"], fields=False)
    assert claims.allocation_node(fields) == "n1"
    assert claims.allocation_node(host) == "n2"
    two_values = selector("metadata.name", ["n1", "n2"])
    two_terms = {"nodeSelectorTerms": [fields["nodeSelectorTerms"][0], host["nodeSelectorTerms"][0]]}
    wrong_key = selector("metadata.uid", ["n1"])
    not_in = selector("metadata.name", ["n1"], op="NotIn")
    both = {"nodeSelectorTerms": [{**fields["nodeSelectorTerms"][0], **host["nodeSelectorTerms"][0]}]}
    for sel in (two_values, two_terms, both, wrong_key, not_in, None, {}):
        assert claims.allocation_node(sel) is None


def test_claim_view_keeps_this_drivers_devices_and_conditions_only():
    c = claim(
        devices=("gpu0", "gpu1"),
        other=(("nic.example.com", "p", "eth0"), (DRIVER, "other-pool", "gpu9")),
        status_devices=[
            {"driver": DRIVER, "pool": POOL, "device": "gpu0", "conditions": [
                {"type": ATTACHED, "status": "True", "reason": "Composed", "message": "m",
                 "lastTransitionTime": "2026-12-04T16:00:00Z", "observedGeneration": 2}]},
            {"driver": "nic.example.com", "pool": "p", "device": "eth0", "conditions": []},
        ],
    )
    cv = claims.claim_view(c)
    got = (cv.key, cv.uid, cv.generation, cv.resource_version, cv.node)
    assert got == ("ml/c1", "uid-c1", 2, "41", "blade-1")
    assert cv.devices == ("gpu0", "gpu1")
    stored = Condition(ATTACHED, "True", "Composed", "m", 2, "2026-12-04T16:00:00Z")
    assert cv.conditions == {"gpu0": (stored,)}
    assert claims.claim_view(claim(node=None)).node is None
    assert claims.claim_view(claim(node=None)).devices == ()


def test_claim_view_reads_devices_from_every_pool_of_the_driver_and_the_patch_names_each_pool():
    c = claim(devices=())
    c["status"]["allocation"]["devices"]["results"] = [
        {"request": "gpu", "driver": DRIVER, "pool": "fabric/shared/b3", "device": "gpu0"},
        {"request": "gpu", "driver": DRIVER, "pool": "fabric/node/blade-1", "device": "gpu1"},
        {"request": "gpu", "driver": DRIVER, "pool": "fabricated", "device": "gpu2"},
    ]
    cv = claims.claim_view(c)
    assert cv.devices == ("gpu0", "gpu1")
    assert cv.pools == {"gpu0": "fabric/shared/b3", "gpu1": "fabric/node/blade-1"}
    want = {d: (Condition(ATTACHED, "True", "Composed", "attached", 2),) for d in cv.devices}
    patch = claims.status_patch(cv, want, now=NOW)
    assert patch is not None
    assert [(e["pool"], e["device"]) for e in patch["status"]["devices"]] == [
        ("fabric/shared/b3", "gpu0"), ("fabric/node/blade-1", "gpu1")]


# -- writing device status -----------------------------------------------------------------

def test_status_patch_sets_conditions_and_keeps_other_drivers_entries():
    other = {"driver": "nic.example.com", "pool": "p", "device": "eth0", "conditions": [], "data": {"x": 1}}
    cv = claims.claim_view(claim(other=(("nic.example.com", "p", "eth0"),), status_devices=[other]))
    want = {"gpu0": (Condition(ATTACHED, "True", "Composed", "attached", 2),)}
    patch = claims.status_patch(cv, want, now=NOW)
    assert patch is not None
    assert patch["metadata"] == {"resourceVersion": "41"}
    entries = patch["status"]["devices"]
    assert entries[0] == other
    assert entries[1] == {
        "driver": DRIVER, "pool": POOL, "device": "gpu0",
        "conditions": [{"type": ATTACHED, "status": "True", "reason": "Composed", "message": "attached",
                        "lastTransitionTime": "2027-01-15T08:00:00Z", "observedGeneration": 2}],
    }


def test_status_patch_is_none_when_nothing_changes_and_keeps_transition_time_while_status_stays():
    stored = [{"driver": DRIVER, "pool": POOL, "device": "gpu0", "conditions": [
        {"type": VISIBLE_ON_NODE, "status": "False", "reason": "WaitingForNode", "message": "m",
         "lastTransitionTime": "2026-12-04T16:00:00Z", "observedGeneration": 2}]}]
    cv = claims.claim_view(claim(status_devices=stored))
    same = {"gpu0": (Condition(VISIBLE_ON_NODE, "False", "WaitingForNode", "m", 2),)}
    assert claims.status_patch(cv, same, now=NOW) is None
    reworded = {"gpu0": (Condition(VISIBLE_ON_NODE, "False", "WaitingForNode", "still waiting", 2),)}
    patch = claims.status_patch(cv, reworded, now=NOW)
    assert patch is not None
    (cond,) = patch["status"]["devices"][0]["conditions"]
    assert cond["lastTransitionTime"] == "2026-12-04T16:00:00Z"
    flipped = {"gpu0": (Condition(VISIBLE_ON_NODE, "True", "VisibleOnNode", "seen", 2),)}
    patch = claims.status_patch(cv, flipped, now=NOW)
    assert patch is not None
    assert patch["status"]["devices"][0]["conditions"][0]["lastTransitionTime"] == claims.rfc3339(NOW)


def test_status_patch_refuses_a_device_not_allocated_and_too_many_conditions():
    cv = claims.claim_view(claim())
    with pytest.raises(ValueError, match=r"\['gpu7'\] are not allocated"):
        claims.status_patch(cv, {"gpu7": (Condition(ATTACHED, "True", "Composed"),)}, now=NOW)
    many = tuple(Condition(f"C{i}", "True", "R") for i in range(claims.MAX_CONDITIONS + 1))
    with pytest.raises(ValueError, match="at most 8 conditions"):
        claims.status_patch(cv, {"gpu0": many}, now=NOW)


# -- the binding plan ----------------------------------------------------------------------

def test_an_allocated_free_gpu_is_composed_to_the_allocated_node_and_no_condition_is_written_yet():
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1"), FabricGpu("gpu1", "Tesla-T4", "sw2"))
    p = plan([claim(devices=("gpu0", "gpu1"))], v)
    (pl,) = p.composes["blade-1"]
    assert (pl.key, pl.uid, pl.host) == ("ml/c1", "uid-c1", "blade-1")
    assert (pl.devices, pl.switches) == (("gpu0", "gpu1"), ("sw1", "sw2"))
    assert p.conditions == {}
    assert p.claimed == {"blade-1": frozenset({"gpu0", "gpu1"})}


def test_a_compose_running_is_not_started_again_but_the_node_stays_busy():
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1"))
    p = plan([claim()], v, in_flight=frozenset({"gpu0"}))
    assert p.composes == {}
    assert p.claimed == {"blade-1": frozenset({"gpu0"})}


def test_attached_then_visible_sets_both_binding_conditions_true():
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1", machine="blade-1"))
    waiting = plan([claim()], v, visible={"blade-1": 0}).conditions[("ml", "c1")]["gpu0"]
    assert [(c.type, c.status, c.reason) for c in waiting] == [
        (ATTACHED, "True", "Composed"), (VISIBLE_ON_NODE, "False", "WaitingForNode")]
    seen = plan([claim()], v, visible={"blade-1": 1})
    assert [(c.type, c.status, c.observed_generation) for c in seen.conditions[("ml", "c1")]["gpu0"]] == [
        (ATTACHED, "True", 2), (VISIBLE_ON_NODE, "True", 2)]
    assert seen.composes == {}
    assert seen.claimed == {"blade-1": frozenset({"gpu0"})}


def test_visible_counts_every_gpu_attached_to_the_node():
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1", machine="blade-1"),
             FabricGpu("gpu1", "Tesla-T4", "sw1", machine="blade-1"))
    p = plan([claim()], v, visible={"blade-1": 1})  # one of two seen: the new one may be the unseen one
    assert p.conditions[("ml", "c1")]["gpu0"][1].status == "False"


def test_visible_stays_true_when_another_gpu_is_composed_onto_the_same_node():
    """gpu1 composed for another claim raises the node's attached count before its GFD count
    follows: c1's gpu0, already seen, keeps VisibleOnNode True (a withdrawn condition makes the
    scheduler's PreBind poll miss and wait 5 s more)."""
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1", machine="blade-1"),
             FabricGpu("gpu1", "Tesla-T4", "sw1", machine="blade-1"))
    was = [{"driver": DRIVER, "pool": POOL, "device": "gpu0",
            "conditions": [{"type": VISIBLE_ON_NODE, "status": "True", "reason": "VisibleOnNode",
                            "message": "seen", "observedGeneration": 2,
                            "lastTransitionTime": "2026-12-05T07:00:00Z"}]}]
    p = plan([claim(status_devices=was)], v, visible={"blade-1": 1})
    assert p.conditions[("ml", "c1")]["gpu0"][1].status == "True"


def test_a_failed_compose_sets_the_failure_condition_and_taints_the_gpu():
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1"))
    failures = {"gpu0": binding.Failure("ComposeFailed", "Director said no", NOW)}
    p = plan([claim()], v, failures=failures)
    assert p.composes == {}  # not composed again
    (cond,) = p.conditions[("ml", "c1")]["gpu0"]
    assert (cond.type, cond.status, cond.reason, cond.message) == (ATTACH_FAILED, "True", "ComposeFailed",
                                                                   "Director said no")
    assert p.tainted == {"gpu0": "ComposeFailed"}
    assert p.claimed == {}


@pytest.mark.parametrize(
    ("gpu", "node", "reason"),
    [
        (FabricGpu("gpu0", "Tesla-T4", "sw1", machine="blade-2"), "blade-1", "AttachedElsewhere"),
        (FabricGpu("gpu0", "Tesla-T4", "sw1", healthy=False), "blade-1", "Unhealthy"),
        (FabricGpu("gpu0", "Tesla-T4", "sw1"), "not-a-machine", "NodeNotOnFabric"),
        (FabricGpu("gpu9", "Tesla-T4", "sw1"), "blade-1", "UnknownDevice"),
    ],
)
def test_what_cannot_be_composed_gets_the_failure_condition_at_once(gpu, node, reason):
    p = plan([claim(node=node)], view(gpu))
    assert p.composes == {}
    assert [(c.type, c.reason) for c in p.conditions[("ml", "c1")]["gpu0"]] == [(ATTACH_FAILED, reason)]


def test_a_gpu_in_two_claims_is_composed_for_the_first_only():
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1"))
    p = plan([claim("c2", node="blade-2"), claim("c1")], v)
    assert [pl.key for pls in p.composes.values() for pl in pls] == ["ml/c1"]
    assert p.conditions[("ml", "c2")]["gpu0"][0].reason == "AllocatedTwice"


def test_a_gpu_attached_for_one_claim_and_allocated_to_another_stays_the_first_ones():
    """One GPU in two claims on the same node (allocated from two pools while it moved between
    them): the claim it was composed for keeps it whatever the names' order, the other fails."""
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1", machine="blade-1"))
    attached = [{"driver": DRIVER, "pool": POOL, "device": "gpu0",
                 "conditions": [{"type": ATTACHED, "status": "True", "reason": "Composed", "message": "m",
                                 "observedGeneration": 2, "lastTransitionTime": "2026-12-05T07:00:00Z"}]}]
    p = plan([claim("a-new"), claim("b-old", status_devices=attached)], v, visible={"blade-1": 1})
    assert p.conditions[("ml", "a-new")]["gpu0"][0].reason == "AllocatedTwice"
    assert [c.type for c in p.conditions[("ml", "b-old")]["gpu0"]] == [ATTACHED, VISIBLE_ON_NODE]
    assert p.claimed == {"blade-1": frozenset({"gpu0"})}


def test_a_cleared_allocation_holds_no_gpu():
    v = view(FabricGpu("gpu0", "Tesla-T4", "sw1", machine="blade-1"))
    p = plan([claim(node=None)], v)
    assert p == binding.BindingPlan()


def test_a_failure_is_held_until_the_hold_passed_and_the_gpu_is_healthy_and_free():
    failures = {"gpu0": binding.Failure("ComposeFailed", "m", NOW)}
    free = view(FabricGpu("gpu0", "Tesla-T4", "sw1"))
    assert binding.healed(failures, free, now=NOW + 59, hold_seconds=60) == failures
    assert binding.healed(failures, free, now=NOW + 60, hold_seconds=60) == {}
    sick = view(FabricGpu("gpu0", "Tesla-T4", "sw1", healthy=False))
    assert binding.healed(failures, sick, now=NOW + 600, hold_seconds=60) == failures
    stuck = view(FabricGpu("gpu0", "Tesla-T4", "sw1", machine="blade-2"))
    assert binding.healed(failures, stuck, now=NOW + 600, hold_seconds=60) == failures
    assert binding.healed(failures, view(), now=NOW, hold_seconds=60) == {}  # gone from the Director
