"""The GPU catalogue: built-in facts, products declared in config, GFD names, and the MIG / vGPU
rules that read the catalogue."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from stack_config import EstateConfigError, load_estate
from stack_config.gpus import BUILTIN_GPU_PRODUCTS, GpuProduct, gfd_name_problem
from tests.config.factories import A30, valid_estate

#: PCIe products a composable fabric carries in 2026, plus the two the seed article names.
REQUIRED = (
    "NVIDIA-L4",
    "NVIDIA-L40S",
    "NVIDIA-A100-80GB-PCIe",
    "NVIDIA-H100-NVL",
    "NVIDIA-H200-NVL",
    "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
    "Tesla-T4",
    "NVIDIA-A100-PCIE-40GB",
)


def _problems(raw: dict) -> list[str]:
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    return [str(p) for p in err.value.problems]


@pytest.mark.parametrize("name", REQUIRED)
def test_builtin_product_has_every_fact_with_a_source(name: str) -> None:
    p = BUILTIN_GPU_PRODUCTS[name]
    assert p.product == name and gfd_name_problem(name) is None
    assert p.pci_id.startswith("10de:") and p.memory_mib > 0 and p.vgpu_types
    facts = {"pci_device_id", "memory_mib", "vgpu_types", "passthrough_resource"}
    if p.mig_capable:
        facts.add("mig_profiles")
    assert facts <= set(p.sources), f"{name}: facts without a source: {facts - set(p.sources)}"


def test_pci_ids_are_unique() -> None:
    ids = [p.pci_id for p in BUILTIN_GPU_PRODUCTS.values()]
    assert len(ids) == len(set(ids))


def test_mig_configs_follow_mig_parted_names() -> None:
    h100 = BUILTIN_GPU_PRODUCTS["NVIDIA-H100-NVL"]
    assert h100.mig_configs[:2] == ("all-disabled", "all-enabled")
    assert {"all-1g.12gb", "all-1g.12gb.me", "all-7g.94gb", "all-balanced"} <= set(h100.mig_configs)
    assert BUILTIN_GPU_PRODUCTS["NVIDIA-L40S"].mig_configs == ()


def test_name_with_blanks_gets_the_gfd_name_as_hint() -> None:
    raw = valid_estate()
    raw["fabric"]["pools"][0]["models"] = ["Tesla-T4", "NVIDIA-A100-PCIE-40GB", "NVIDIA H100 NVL"]
    msgs = _problems(raw)
    assert msgs == [
        "fabric.pools[0].models[2]: 'NVIDIA H100 NVL' is not a GFD product name; write it as GFD "
        "labels nodes: 'NVIDIA-H100-NVL'"
    ]


@pytest.mark.parametrize("where", ["allowed_models", "gpu_model"])
def test_blank_names_are_rejected_in_every_model_field(where: str) -> None:
    raw = valid_estate()
    if where == "allowed_models":
        raw["tenants"][0]["allowed_models"] = ["NVIDIA A100-PCIE-40GB"]
        path = "tenants[0].allowed_models[0]"
    else:
        raw["tenants"][0]["clusters"][0]["gpu_model"] = "NVIDIA A100-PCIE-40GB"
        path = "tenants[0].clusters[0].gpu_model"
    assert f"{path}: 'NVIDIA A100-PCIE-40GB' is not a GFD product name; write it as GFD labels nodes: " \
        "'NVIDIA-A100-PCIE-40GB'" in _problems(raw)


def test_near_miss_suggests_the_known_name() -> None:
    raw = valid_estate()
    raw["fabric"]["pools"][0]["models"] = ["Tesla-T4", "NVIDIA-A100-PCIE-40GB", "NVIDIA-H100-NVl"]
    assert _problems(raw) == [
        "fabric.pools[0].models[2]: unknown GPU model 'NVIDIA-H100-NVl'; did you mean 'NVIDIA-H100-NVL'?"
    ]


def _with_a30(raw: dict) -> dict:
    raw["gpu_products"] = [copy.deepcopy(A30)]
    raw["fabric"]["pools"][0]["models"].append("NVIDIA-A30")
    green = raw["tenants"][2]
    green["allowed_models"] = ["NVIDIA-A30"]
    green["gpu_sharing"]["mig_config"] = "all-2g.12gb"
    return raw


def test_product_declared_in_config_is_usable() -> None:
    estate = load_estate(_with_a30(valid_estate()))
    a30 = estate.gpu_catalogue()["NVIDIA-A30"]
    assert a30.pci_id == "10de:20b7" and "all-2g.12gb" in a30.mig_configs
    assert set(BUILTIN_GPU_PRODUCTS) < set(estate.gpu_catalogue())


def test_unknown_product_without_declaration_is_rejected() -> None:
    raw = _with_a30(valid_estate())
    del raw["gpu_products"]
    msgs = _problems(raw)
    assert msgs[0].startswith("fabric.pools[0].models[2]: unknown GPU model 'NVIDIA-A30'")


def test_declared_product_fields_are_validated() -> None:
    raw = _with_a30(valid_estate())
    raw["gpu_products"][0].update(pci_device_id="20B7X", mig_profiles=["1g.6gb", "big"], product="NVIDIA A30")
    msgs = _problems(raw)
    assert any(m.startswith("gpu_products[0].pci_device_id:") for m in msgs)
    assert any(m.startswith("gpu_products[0].mig_profiles[1]:") for m in msgs)
    assert "gpu_products[0].product: 'NVIDIA A30' is not a GFD product name; write it as GFD labels " \
        "nodes: 'NVIDIA-A30'" in msgs


def test_duplicate_declared_product_is_rejected() -> None:
    raw = _with_a30(valid_estate())
    raw["gpu_products"].append(copy.deepcopy(A30))
    assert _problems(raw) == [
        "gpu_products[1].product: duplicate GPU product 'NVIDIA-A30' (first at gpu_products[0])"
    ]


def test_mig_profile_the_product_lacks_names_the_valid_ones() -> None:
    raw = _with_a30(valid_estate())
    raw["tenants"][2]["gpu_sharing"]["mig_config"] = "all-1g.5gb"
    a30 = GpuProduct.model_validate(A30)
    assert _problems(raw) == [
        f"tenants[2].gpu_sharing.mig_config: 'all-1g.5gb' is not a MIG config of NVIDIA-A30 "
        f"(valid: {', '.join(a30.mig_configs)})"
    ]


def test_mig_config_must_suit_every_mig_capable_model_of_the_tenant() -> None:
    raw = valid_estate()
    raw["fabric"]["pools"][0]["models"].append("NVIDIA-H100-NVL")
    raw["tenants"][2]["allowed_models"] = ["NVIDIA-A100-PCIE-40GB", "NVIDIA-H100-NVL"]
    msgs = _problems(raw)  # all-1g.5gb is an A100 40GB config only
    assert len(msgs) == 1 and msgs[0].startswith(
        "tenants[2].gpu_sharing.mig_config: 'all-1g.5gb' is not a MIG config of NVIDIA-H100-NVL (valid: "
    )
    # all-balanced suits both, as several profiles: GFD's single strategy would label the node
    # <product>-MIG-INVALID, so only the mixed strategy serves it
    raw["tenants"][2]["gpu_sharing"].update(mig_config="all-balanced", mig_strategy="mixed")
    load_estate(raw)


def test_vgpu_type_of_a_declared_product() -> None:
    raw = _with_a30(valid_estate())
    raw["tenants"][0]["allowed_models"].append("NVIDIA-A30")
    cluster = raw["tenants"][0]["clusters"][0]
    raw["hypervisor_clusters"][0]["gpu_workload_mode"] = "vm-vgpu"
    raw["hypervisor_clusters"][0]["vgpu_manager"] = {"repository": "r.example/nvidia", "version": "580.82.07"}
    cluster.update(gpu_mode="vgpu", gpu_model="NVIDIA-A30", vgpu_type="NVIDIA A30-8C")
    msgs = _problems(raw)
    assert "tenants[0].clusters[0].vgpu_type: 'NVIDIA A30-8C' is not a vGPU type of NVIDIA-A30 " \
        "(NVIDIA A30-4C, NVIDIA A30-24C)" in msgs
    cluster["vgpu_type"] = None  # default: the product's first vGPU type in the catalogue
    estate = load_estate(raw)
    assert estate.tenants[0].clusters[0].effective_vgpu_type(estate.gpu_catalogue()) == "NVIDIA A30-4C"


def test_gpu_product_model_rejects_unknown_keys() -> None:
    with pytest.raises(ValidationError):
        GpuProduct.model_validate({**A30, "colour": "green"})


def test_director_simulator_agrees_with_the_catalogue() -> None:
    """The Director simulator keeps its own table of simulated hardware (a simulator does not import
    product code); where both know a product, PCI ID and memory agree."""
    from dynamic_providers.director.models import gfd_product_name
    from lab.director_sim.inventory import MODEL_CATALOGUE

    shared = 0
    for model, (pci, _family, memory_mib, _kind, _cores) in MODEL_CATALOGUE.items():
        product = BUILTIN_GPU_PRODUCTS.get(gfd_product_name(model))
        if product is None:
            continue
        shared += 1
        assert (f"0x{product.pci_device_id}", product.memory_mib) == (pci, memory_mib), model
    assert shared >= 3
