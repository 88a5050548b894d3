"""No GPU is time-shared between two tenants' pods: a host whose GPUs a tenant time-slices (or
shares by MPS) serves only pods of that tenant's namespaces (``composer.sharing[].namespaces``,
the tenant of a pod being its namespace's); MIG instances are isolated and carry no such limit.

With the namespace check switched off (``HostSharing.admits`` not consulted by the planner's
``units_on``) all but the MIG test fail: tenant B's pod takes a spare replica of tenant A's GPU,
or gets a GPU composed onto A's time-sliced host.
"""

from __future__ import annotations

from typing import Any

from composer.decide.planner import plan
from composer.decide.round_types import Policy
from composer.model.models import FreeGpu, GpuRequest, HostSharing, HostState, Reason
from composer.model.podspec import gpu_request, pod_view
from domain.gpu_sharing import Offer
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod
from tests.composer.test_controller import make, run

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
GIB = 1 << 30
A_TIME_SLICED = HostSharing(
    "a-gpu-sharing", "time-slicing", {T4: (Offer("nvidia.com/gpu", 4, "Tesla-T4-SHARED"),)},
    tenant="a", namespaces=frozenset({"tenant-a"}),
)
A_MIG = HostSharing(
    "a-gpu-sharing", "mig", {A100: (Offer("nvidia.com/gpu", 7, "NVIDIA-A100-PCIE-40GB-MIG-1g.5gb"),)},
    tenant="a",
)


def _host(name: str, sharing: HostSharing | None = None, **kw: Any) -> HostState:
    return HostState(name, cpu_free_millis=64_000, memory_free_bytes=512 * GIB, sharing=sharing, **kw)


def _request(ns: str, product: str = "Tesla-T4-SHARED", host: str | None = None) -> GpuRequest:
    policy = Policy(sharing={"bm-1": A_TIME_SLICED})
    p = pod_view(pod(f"p-{ns}", 1, ns=ns, product=product, host=host))
    return gpu_request(p, pool="default", sharing_only=policy.sharing_only, most_units=policy.most_units)


#: bm-1 carries one T4 of tenant A with three replicas no pod uses; bm-0 shares nothing
SPARE = [_host("bm-0"), _host("bm-1", A_TIME_SLICED, model=T4, attached=1, spare={"nvidia.com/gpu": 3})]


def test_a_spare_replica_of_tenant_as_gpu_goes_to_tenant_a_only() -> None:
    p = plan([_request("tenant-a")], SPARE, [FreeGpu("gpu1", T4, "sw0")])
    assert [(x.host, x.devices, x.spare_units) for x in p.placements] == [("bm-1", (), 1)]
    # tenant B's pod, selecting the plain product, gets a whole GPU of its own on bm-0
    p = plan([_request("tenant-b", product=T4)], SPARE, [FreeGpu("gpu1", T4, "sw0")])
    assert [(x.host, x.devices) for x in p.placements] == [("bm-0", ("gpu1",))]
    # and selecting the shared label, nothing: only tenant A's host would carry it
    p = plan([_request("tenant-b")], SPARE, [FreeGpu("gpu1", T4, "sw0")])
    assert p.placements == () and p.refusals[0].reason == Reason.NO_HOST_FITS


def test_tenant_bs_pod_pinned_to_tenant_as_time_sliced_host_is_refused_with_the_reason() -> None:
    hosts = [_host("bm-1", A_TIME_SLICED)]
    p = plan([_request("tenant-b", host="bm-1")], hosts, [FreeGpu("gpu1", T4, "sw0")])
    assert p.placements == ()
    (refusal,) = p.refusals
    assert refusal.reason == Reason.NO_HOST_FITS
    assert refusal.message == (
        "host bm-1 time-shares its GPUs by time-slicing (a-gpu-sharing) between pods of tenant 'a' "
        "(tenant-a); a pod of namespace 'tenant-b' may not share them"
    )
    p = plan([_request("tenant-a", host="bm-1")], hosts, [FreeGpu("gpu1", T4, "sw0")])
    assert [(x.host, x.devices) for x in p.placements] == [("bm-1", ("gpu1",))]


def test_mig_instances_serve_any_tenant() -> None:
    policy = Policy(sharing={"bm-2": A_MIG})
    p = pod_view(pod("m", 1, ns="tenant-b", product="NVIDIA-A100-PCIE-40GB-MIG-1g.5gb"))
    r = gpu_request(p, pool="default", sharing_only=policy.sharing_only, most_units=policy.most_units)
    plan_ = plan([r], [_host("bm-2", A_MIG)], [FreeGpu("gpu9", A100, "sw0")])
    assert [(x.host, x.devices) for x in plan_.placements] == [("bm-2", ("gpu9",))]


def test_the_composer_tells_tenant_b_why_and_composes_nothing(clock: Clock) -> None:
    kube = FakeKube()
    kube.add_node(node("bm-1"))
    world = FakeWorld(kube, FakeFabric([FakeGpu("gpu0")], ["bm-1"]))
    ctrl = make(world, clock, sharing={"bm-1": A_TIME_SLICED})
    kube.add_pod(pod("b", 1, ns="tenant-b", host="bm-1"))
    run(ctrl)
    assert world.fabric.attached() == {} and world.fabric.calls == []
    (event,) = [e for e in kube.events if e.name == "b"]
    assert event.reason == "NoHostFits"
    assert "a pod of namespace 'tenant-b' may not share them" in event.message
