"""GPU sharing, one source of truth (``domain.gpu_sharing``): the device-plugin config a sharing
setting gives the GPU Operator and what one composed GPU yields on its hosts, per mode, with
the MIG layouts of the GPU catalogue.

Expected values are NVIDIA's (k8s-device-plugin v0.17.1, the version GPU Operator v25.3.0 runs):
``-SHARED`` appended to the product label of a shared resource that is not renamed
(``internal/lm/resource.go``), ``.shared`` appended to a renamed one (``api/config/v1/consts.go``),
``-MIG-<profile>`` under MIG ``single`` and ``nvidia.com/mig-<profile>`` under ``mixed``
(``internal/lm/mig-strategy.go``), ``+`` spelt ``.`` (``internal/resource/nvml-mig-device.go``);
MIG device counts from the GPU Operator's ``default-mig-parted-config``.
"""

from __future__ import annotations

import pytest

from domain.gpu_sharing import Offer, SharingError, SharingSpec, mig_resource, passthrough_offer
from stack_config import load_estate
from stack_config.gpus import BUILTIN_GPU_PRODUCTS
from stack_config.models import GpuSharingConfig
from tests.config.factories import valid_estate

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
CATALOGUE = BUILTIN_GPU_PRODUCTS


def _sharing(**kw: object) -> GpuSharingConfig:
    return GpuSharingConfig.model_validate({"hosts": ["h"], **kw})


@pytest.mark.parametrize(
    ("setting", "config", "offers"),
    [
        (
            {"strategy": "time-slicing", "replicas": 4},
            {"version": "v1", "sharing": {"timeSlicing": {
                "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
                "renameByDefault": False, "failRequestsGreaterThanOne": True}}},
            (Offer("nvidia.com/gpu", 4, "Tesla-T4-SHARED"),),
        ),
        (
            {"strategy": "time-slicing", "replicas": 3, "rename_by_default": True},
            {"version": "v1", "sharing": {"timeSlicing": {
                "resources": [{"name": "nvidia.com/gpu", "replicas": 3}],
                "renameByDefault": True, "failRequestsGreaterThanOne": True}}},
            (Offer("nvidia.com/gpu.shared", 3, "Tesla-T4"),),
        ),
        (
            {"strategy": "mps", "replicas": 2},
            {"version": "v1", "sharing": {"mps": {
                "resources": [{"name": "nvidia.com/gpu", "replicas": 2}], "renameByDefault": False}}},
            (Offer("nvidia.com/gpu", 2, "Tesla-T4-SHARED"),),
        ),
        (
            {"strategy": "mps", "replicas": 5, "rename_by_default": True},
            {"version": "v1", "sharing": {"mps": {
                "resources": [{"name": "nvidia.com/gpu", "replicas": 5}], "renameByDefault": True}}},
            (Offer("nvidia.com/gpu.shared", 5, "Tesla-T4"),),
        ),
    ],
    ids=["time-slicing", "time-slicing-renamed", "mps", "mps-renamed"],
)
def test_time_sharing_gives_the_device_plugin_config_and_the_composers_count(
    setting: dict, config: dict, offers: tuple[Offer, ...]
) -> None:
    s = _sharing(**setting)
    assert s.spec().device_plugin_config() == config
    assert s.offers(T4, CATALOGUE) == offers


def test_mig_single_counts_the_instances_of_the_config_and_labels_the_profile() -> None:
    s = _sharing(strategy="mig", mig_config="all-1g.10gb")
    assert s.spec().device_plugin_config() == {"version": "v1", "flags": {"migStrategy": "single"}}
    # 4 x 1g.10gb on an A100 40GB (0x20F110DE entry of all-1g.10gb), 7 on an A100 80GB
    assert s.offers(A100, CATALOGUE) == (Offer("nvidia.com/gpu", 4, "NVIDIA-A100-PCIE-40GB-MIG-1g.10gb"),)
    assert s.offers("NVIDIA-A100-80GB-PCIe", CATALOGUE) == (
        Offer("nvidia.com/gpu", 7, "NVIDIA-A100-80GB-PCIe-MIG-1g.10gb"),
    )


def test_mig_profile_with_plus_is_spelt_with_a_dot() -> None:
    s = _sharing(strategy="mig", mig_config="all-1g.5gb.me")
    assert s.offers(A100, CATALOGUE) == (Offer("nvidia.com/gpu", 1, "NVIDIA-A100-PCIE-40GB-MIG-1g.5gb.me"),)
    assert mig_resource("1g.5gb+me") == "nvidia.com/mig-1g.5gb.me"


def test_mig_mixed_offers_one_resource_per_profile_and_keeps_the_product() -> None:
    s = _sharing(strategy="mig", mig_config="all-balanced", mig_strategy="mixed")
    assert s.spec().device_plugin_config() == {"version": "v1", "flags": {"migStrategy": "mixed"}}
    assert s.offers(A100, CATALOGUE) == (
        Offer("nvidia.com/mig-1g.5gb", 2, A100),
        Offer("nvidia.com/mig-2g.10gb", 1, A100),
        Offer("nvidia.com/mig-3g.20gb", 1, A100),
    )


def test_mig_refuses_what_gfd_or_mig_parted_would_not_serve() -> None:
    with pytest.raises(SharingError, match="MIG-INVALID"):
        _sharing(strategy="mig", mig_config="all-balanced").offers(A100, CATALOGUE)
    with pytest.raises(SharingError, match="no MIG layout"):
        _sharing(strategy="mig", mig_config="all-1g.5gb").offers(T4, CATALOGUE)  # no MIG on a T4
    with pytest.raises(SharingError, match="no MIG layout"):
        SharingSpec("mig", mig_config="all-1g.5gb").offers(A100, {})


def test_every_mig_capable_builtin_product_has_the_layout_of_each_single_profile_config() -> None:
    for p in CATALOGUE.values():
        for profile in p.mig_profiles:
            config = f"all-{profile.replace('+me', '.me')}"
            layout = p.mig_layout(config)
            assert layout is not None and set(layout) == {profile}, (p.product, config)
        for config in p.mig_extra_configs:
            assert p.mig_layout(config), (p.product, config)


def test_a_layout_names_only_the_products_configs_and_profiles() -> None:
    a100 = CATALOGUE[A100].model_dump()
    with pytest.raises(ValueError, match="not a MIG config"):
        type(CATALOGUE[A100]).model_validate({**a100, "mig_layouts": {"all-1g.12gb": {"1g.12gb": 7}}})
    with pytest.raises(ValueError, match="not in mig_profiles"):
        type(CATALOGUE[A100]).model_validate({**a100, "mig_layouts": {"all-balanced": {"1g.12gb": 2}}})


def test_the_estates_sharing_settings_derive_both_sides() -> None:
    estate = load_estate(valid_estate())
    blue, green = (t.gpu_sharing for t in estate.tenants[1:])
    assert blue is not None and green is not None
    catalogue = estate.gpu_catalogue()
    assert blue.spec().device_plugin_config()["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 4
    assert blue.offers(T4, catalogue) == (Offer("nvidia.com/gpu", 4, "Tesla-T4-SHARED"),)
    assert green.offers(A100, catalogue) == (Offer("nvidia.com/gpu", 7, "NVIDIA-A100-PCIE-40GB-MIG-1g.5gb"),)


def test_a_passthrough_gpu_yields_one_unit_of_its_passthrough_resource() -> None:
    a100 = BUILTIN_GPU_PRODUCTS["NVIDIA-A100-PCIE-40GB"]
    assert passthrough_offer(a100.product, a100.passthrough_resource) == Offer(
        "nvidia.com/GA100_A100_PCIE_40GB", 1, "NVIDIA-A100-PCIE-40GB"
    )
    for resource in ("nvidia.com/gpu", "example.com/GA100_A100_PCIE_40GB"):
        with pytest.raises(SharingError, match="not a passthrough resource"):
            passthrough_offer(a100.product, resource)
