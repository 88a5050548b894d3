"""The composer counts shared and MIG units by what one GPU yields on each host (``composer.sharing``):
a time-sliced replica or a MIG device is a fraction of a GPU, not a GPU; a host serves only the
resources and models its sharing setting offers; a host without one serves whole GPUs and none of
the resources only sharing settings offer.

With the hosts' sharing settings ignored (the planner's ``units_on`` and ``host_state`` counting
every unit as a whole GPU, as the composer did before the program wrote ``composer.sharing``)
every test here fails.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from composer.decide.planner import plan
from composer.decide.round_types import NO_USAGE, Policy
from composer.model import annotations as ann
from composer.model.models import FreeGpu, HostSharing, HostState, Reason
from composer.model.nodestate import host_state, node_view
from composer.model.podspec import gpu_request, pod_view
from domain.gpu_sharing import Offer
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod
from tests.composer.test_controller import make, run

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
GIB = 1 << 30

#: time-slicing, 4 replicas, not renamed (GFD: Tesla-T4-SHARED)
TIME_SLICED = HostSharing(
    "blue-gpu-sharing", "time-slicing", {T4: (Offer("nvidia.com/gpu", 4, "Tesla-T4-SHARED"),)}
)
#: time-slicing, 4 replicas, renamed
RENAMED = HostSharing("red-gpu-sharing", "time-slicing", {T4: (Offer("nvidia.com/gpu.shared", 4, T4),)})
#: MIG mixed, all-balanced on an A100 40GB; a T4 is not offered (mig-parted cannot lay it out)
MIG_MIXED = HostSharing("green-gpu-sharing", "mig", {A100: (
    Offer("nvidia.com/mig-1g.5gb", 2, A100), Offer("nvidia.com/mig-2g.10gb", 1, A100),
    Offer("nvidia.com/mig-3g.20gb", 1, A100),
)})


def _host(name: str, sharing: HostSharing | None = None, **kw: Any) -> HostState:
    return HostState(name, cpu_free_millis=64_000, memory_free_bytes=512 * GIB, sharing=sharing, **kw)


def _request(policy: Policy, units: int, resource: str = "nvidia.com/gpu", **selector: str) -> Any:
    p = pod_view(
        pod("p", units, resource=resource, product=selector.get("product"), host=selector.get("host"))
    )
    return gpu_request(
        p, pool="default", units_per_gpu=policy.units_per_gpu, resource_models=policy.resource_models,
        sharing_only=policy.sharing_only, most_units=policy.most_units,
    )


def _free(model: str, n: int) -> list[FreeGpu]:
    return [FreeGpu(f"gpu{i}", model, "sw0") for i in range(n)]


def test_four_time_sliced_replicas_take_one_gpu_not_four() -> None:
    policy = Policy(sharing={"bm-1": TIME_SLICED})
    r = _request(policy, 4, host="bm-1")
    assert r.gpus == 1  # the fewest GPUs any host needs: the capacity checks count so
    p = plan([r], [_host("bm-1", TIME_SLICED)], _free(T4, 4))
    assert [(x.host, x.devices) for x in p.placements] == [("bm-1", ("gpu0",))]
    # the same pod on a host that shares nothing takes four whole GPUs
    p = plan([_request(policy, 4, host="bm-2")], [_host("bm-2")], _free(T4, 4))
    assert [len(x.devices) for x in p.placements] == [4]


def test_mig_units_take_gpus_of_a_model_the_host_can_lay_out() -> None:
    policy = Policy(sharing={"bm-2": MIG_MIXED})
    free = [*_free(T4, 3), FreeGpu("gpu8", A100, "sw1"), FreeGpu("gpu9", A100, "sw1")]  # more T4s free
    p = plan([_request(policy, 2, resource="nvidia.com/mig-1g.5gb")], [_host("bm-2", MIG_MIXED)], free)
    assert [(x.model, x.devices) for x in p.placements] == [(A100, ("gpu8",))]
    p = plan([_request(policy, 3, resource="nvidia.com/mig-1g.5gb")], [_host("bm-2", MIG_MIXED)], free)
    assert [(x.model, len(x.devices)) for x in p.placements] == [(A100, 2)]  # 2 per GPU: 3 -> 2 GPUs
    assert p.refusals == ()
    one = _request(policy, 1, resource="nvidia.com/mig-1g.5gb")
    p = plan([one], [_host("bm-2", MIG_MIXED)], _free(T4, 3))
    assert [x.reason for x in p.refusals] == [Reason.NO_HOST_FITS]
    assert "offers nvidia.com/mig-1g.5gb for a model with free GPUs (Tesla-T4)" in p.refusals[0].message
    pinned = _request(policy, 1, resource="nvidia.com/mig-1g.5gb", host="bm-2")
    p = plan([pinned], [_host("bm-2", MIG_MIXED)], _free(T4, 3))
    assert "host bm-2 shares its GPUs by mig (green-gpu-sharing) and offers no nvidia.com/mig-1g.5gb " \
        "for Tesla-T4" in p.refusals[0].message


def test_pods_of_two_mig_profiles_in_one_round_share_the_a100_composed_for_the_first() -> None:
    """MIG mixed, all-balanced: one A100 yields 2 x 1g.5gb and 1 x 3g.20gb, so a pod asking two of the
    one and a pod asking one of the other, planned in the same round, take one A100, not two."""
    policy = Policy(sharing={"bm-2": MIG_MIXED})
    small = _request(policy, 2, resource="nvidia.com/mig-1g.5gb")
    large = _request(policy, 1, resource="nvidia.com/mig-3g.20gb")
    large = replace(large, key="ml/q", uid="q")
    free = [FreeGpu("gpu8", A100, "sw1"), FreeGpu("gpu9", A100, "sw1")]
    p = plan([small, large], [_host("bm-2", MIG_MIXED)], free)
    assert sorted(x.key for x in p.placements) == ["ml/p", "ml/q"]
    assert {x.host for x in p.placements} == {"bm-2"}
    # whichever is planned second is served by the A100 composed for the other
    assert sorted(len(x.devices) for x in p.placements) == [0, 1]
    assert p.refusals == ()


def test_a_resource_only_sharing_offers_is_never_composed_for_on_a_host_that_shares_nothing() -> None:
    policy = Policy(sharing={"bm-1": RENAMED})
    assert policy.sharing_only == {"nvidia.com/gpu.shared"}
    r = _request(policy, 2, resource="nvidia.com/gpu.shared")
    p = plan([r], [_host("bm-0"), _host("bm-1", RENAMED)], _free(T4, 2))
    assert [(x.host, len(x.devices)) for x in p.placements] == [("bm-1", 1)]
    pinned = _request(policy, 2, resource="nvidia.com/gpu.shared", host="bm-0")
    p = plan([pinned], [_host("bm-0")], _free(T4, 2))
    assert p.refusals[0].reason == Reason.NO_HOST_FITS
    assert "host bm-0 shares no GPUs, so it never advertises nvidia.com/gpu.shared" in p.refusals[0].message
    # whole GPUs still go to hosts that share nothing
    p = plan([_request(policy, 1)], [_host("bm-0"), _host("bm-1", RENAMED)], _free(T4, 1))
    assert [x.host for x in p.placements] == ["bm-0"]


def test_units_of_a_gpu_composed_but_not_yet_advertised_count_as_what_they_yield() -> None:
    """A T4 attached to a time-sliced host for a one-replica pod brings 4 replicas: 3 are spare
    before the device plugin advertises any, so the next pod needs no second GPU."""
    n = node_view(node("bm-1"))
    record = ann.NodeRecord(devices=frozenset({"gpu0"}))
    state = host_state(
        n, record=record, usage=NO_USAGE, attached_models={"gpu0": T4}, pending={}, pool="default",
        max_gpus=None, units_per_gpu={}, sharing=TIME_SLICED,
    )
    assert state.spare == {"nvidia.com/gpu": 4} and state.model == T4
    plain = host_state(
        n, record=record, usage=NO_USAGE, attached_models={"gpu0": T4}, pending={}, pool="default",
        max_gpus=None, units_per_gpu={},
    )
    assert plain.spare == {"nvidia.com/gpu": 1}


def test_a_gpu_being_composed_for_one_mig_profile_brings_the_others_as_spare() -> None:
    """MIG mixed, all-balanced: an A100 being composed for a pod asking two 1g.5gb brings one 2g.10gb
    and one 3g.20gb too, spare before it is even attached, so the next round's pod asking a
    3g.20gb needs no second A100."""
    record = ann.NodeRecord(intents={"u1": ann.Intent("ml/p", "nvidia.com/mig-1g.5gb", 2, A100, ("gpu8",))})
    state = host_state(
        node_view(node("bm-2")), record=record, usage=NO_USAGE, attached_models={}, pending={},
        pool="default", max_gpus=None, units_per_gpu={}, sharing=MIG_MIXED,
    )
    assert state.spare == {"nvidia.com/mig-2g.10gb": 1, "nvidia.com/mig-3g.20gb": 1}
    assert state.attached == 1


def _advertise(world: FakeWorld, sharing: dict[str, HostSharing]) -> None:
    """The GPU Operator's part on a node: what its sharing offers for the attached GPUs (whole GPUs
    without a setting), with GFD's product label."""
    att = world.fabric.attached()
    for name, n in world.kube.nodes.items():
        gpus = att.get(name, [])
        model = world.fabric.by(gpus[0]).model if gpus else None
        hs = sharing.get(name)
        offers = (hs.offers.get(model, ()) if hs else (Offer("nvidia.com/gpu", 1, model),)) if model else ()
        for key in ("allocatable", "capacity"):
            for r in [k for k in n["status"][key] if k.startswith("nvidia.com/")]:
                del n["status"][key][r]
            for o in offers:
                n["status"][key][o.resource] = str(len(gpus) * o.units)
        labels = n["metadata"]["labels"]
        if offers:
            labels["nvidia.com/gpu.product"] = offers[0].product
        else:
            labels.pop("nvidia.com/gpu.product", None)


def test_two_one_replica_pods_share_one_composed_gpu(clock: Clock) -> None:
    kube = FakeKube()
    kube.add_node(node("bm-1"))
    world = FakeWorld(kube, FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["bm-1"]))
    ctrl = make(world, clock, sharing={"bm-1": TIME_SLICED})
    kube.add_pod(pod("a", 1, host="bm-1"))
    kube.add_pod(pod("b", 1, host="bm-1"))
    run(ctrl)
    assert world.fabric.attached() == {"bm-1": ["gpu0"]}  # one GPU, four replicas, two pods
    _advertise(world, {"bm-1": TIME_SLICED})
    run(ctrl)
    records = kube.record("bm-1").intents
    assert {it.phase for it in records.values()} == {ann.IntentPhase.ADVERTISED} and len(records) == 2
    assert kube.nodes["bm-1"]["metadata"]["labels"]["nvidia.com/gpu.product"] == "Tesla-T4-SHARED"
    assert world.fabric.calls == [("compose", "bm-1", ("gpu0",))]
