"""GPU Feature Discovery's product labels as they are on shared nodes: a pod selecting
``nvidia.com/gpu.product: Tesla-T4-SHARED`` gets a Tesla T4 composed onto a node that time-slices,
one selecting ``NVIDIA-A100-PCIE-40GB-MIG-1g.10gb`` an A100 40GB on a node of MIG ``single``
strategy with 1g.10gb devices; a pod selecting the plain product never lands on such a node (its
label will not match).

GFD's label forms (k8s-device-plugin v0.17.1 ``internal/lm/resource.go`` ``getProductName``): the
product, ``-MIG-<profile>`` under MIG ``single``, ``-SHARED`` for a shared resource not renamed,
``+`` of a profile spelt ``.``. With the labels read as model names (the composer before this
change) the pods selecting a suffixed label are refused ``ModelNotInPool`` and never get a GPU,
and with the host's label not compared a plain-product pod is composed for on a shared node.
"""

from __future__ import annotations

import pytest

from composer.decide.round_types import Policy
from composer.model.models import HostSharing
from composer.model.podspec import gpu_request, pod_view
from domain.gpu_sharing import Offer, ProductLabel, parse_product_label
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod
from tests.composer.test_controller import make, run
from tests.composer.test_sharing import TIME_SLICED, _advertise

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
MIG_SINGLE = HostSharing(
    "green-gpu-sharing", "mig", {A100: (Offer("nvidia.com/gpu", 4, "NVIDIA-A100-PCIE-40GB-MIG-1g.10gb"),)}
)


@pytest.mark.parametrize(
    ("label", "parsed"),
    [
        ("Tesla-T4", ProductLabel("Tesla-T4")),
        ("Tesla-T4-SHARED", ProductLabel("Tesla-T4", shared=True)),
        ("NVIDIA-A100-PCIE-40GB-MIG-1g.10gb", ProductLabel(A100, mig="1g.10gb")),
        ("NVIDIA-A100-PCIE-40GB-MIG-1g.5gb.me", ProductLabel(A100, mig="1g.5gb.me")),
        # README "Shared Access to GPUs": A100-SXM4-40GB-MIG-1g.5gb-SHARED
        ("A100-SXM4-40GB-MIG-1g.5gb-SHARED", ProductLabel("A100-SXM4-40GB", shared=True, mig="1g.5gb")),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition-MIG-1g.24gb-me",
         ProductLabel("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", mig="1g.24gb-me")),
    ],
)
def test_gfd_product_labels_are_taken_apart(label: str, parsed: ProductLabel) -> None:
    assert parse_product_label(label) == parsed
    assert parsed.plain == (label == parsed.base)


def test_a_pod_selecting_a_suffixed_label_asks_for_the_gpu_behind_it() -> None:
    r = gpu_request(pod_view(pod("p", 1, product="Tesla-T4-SHARED")), pool="default")
    assert (r.models, r.products) == (frozenset({T4}), frozenset({"Tesla-T4-SHARED"}))


def _world(clock: Clock, sharing: dict[str, HostSharing], model: str) -> tuple[FakeWorld, object]:
    kube = FakeKube()
    for name in ("bm-0", "bm-1"):
        kube.add_node(node(name))
    fabric = FakeFabric([FakeGpu("gpu0", model), FakeGpu("gpu1", model)], ["bm-0", "bm-1"])
    world = FakeWorld(kube, fabric)
    return world, make(world, clock, sharing=sharing)


def _serve(world: FakeWorld, ctrl: object, sharing: dict[str, HostSharing]) -> None:
    run(ctrl)
    _advertise(world, sharing)
    run(ctrl)
    world.schedule()


def test_a_pod_selecting_a_shared_t4_gets_a_t4_on_the_time_sliced_node(clock: Clock) -> None:
    sharing = {"bm-1": TIME_SLICED}
    world, ctrl = _world(clock, sharing, T4)
    world.kube.add_pod(pod("shared", 1, product="Tesla-T4-SHARED"))
    _serve(world, ctrl, sharing)
    assert world.fabric.attached() == {"bm-1": ["gpu0"]}
    assert world.kube.pods["ml/shared"]["spec"]["nodeName"] == "bm-1"
    # a pod selecting the plain product goes to the node that shares nothing
    world.kube.add_pod(pod("whole", 1, product=T4))
    _serve(world, ctrl, sharing)
    assert world.fabric.attached() == {"bm-0": ["gpu1"], "bm-1": ["gpu0"]}
    assert world.kube.pods["ml/whole"]["spec"]["nodeName"] == "bm-0"


def test_a_pod_selecting_a_mig_profile_gets_an_a100_on_the_mig_node(clock: Clock) -> None:
    sharing = {"bm-1": MIG_SINGLE}
    world, ctrl = _world(clock, sharing, A100)
    world.kube.add_pod(pod("mig", 2, product="NVIDIA-A100-PCIE-40GB-MIG-1g.10gb"))
    _serve(world, ctrl, sharing)
    assert world.fabric.attached() == {"bm-1": ["gpu0"]}  # 4 x 1g.10gb per A100: one GPU for two
    assert world.kube.pods["ml/mig"]["spec"]["nodeName"] == "bm-1"
    # once attached, the MIG node's mig-manager is restarted so that it partitions the new A100
    assert world.kube.reasons("mig") == ["Composed", "MigReconfigure"]


def test_a_pod_pinned_to_a_shared_node_with_the_plain_product_is_told_why(clock: Clock) -> None:
    world, ctrl = _world(clock, {"bm-1": TIME_SLICED}, T4)
    world.kube.add_pod(pod("p", 1, product=T4, host="bm-1"))
    run(ctrl)
    assert world.fabric.attached() == {}
    (event,) = [e for e in world.kube.events if e.name == "p"]
    assert event.reason == "NoHostFits"
    assert "GFD labels them Tesla-T4-SHARED; the pod selects nvidia.com/gpu.product Tesla-T4" in event.message


def test_policy_without_sharing_keeps_the_plain_behaviour() -> None:
    r = gpu_request(pod_view(pod("p", 1, product=T4)), pool="default")
    assert r.models == r.products == frozenset({T4}) and Policy().sharing == {}
