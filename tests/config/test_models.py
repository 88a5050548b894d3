"""Structural validation of the estate config: one test per field-level rule, with the message."""

from __future__ import annotations

from typing import Any

import pytest

from stack_config import EstateConfigError, load_estate
from stack_config.models import DEFAULT_KERNEL_ARGS, DEFAULT_MLXCONFIG, EstateConfig
from tests.config.factories import DIRECTOR_PASSWORD, valid_estate


def problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    return [str(p) for p in err.value.problems]


def test_valid_estate_loads_with_defaults() -> None:
    estate = load_estate(valid_estate())
    hv1 = estate.host("hv-1")
    assert hv1 is not None
    assert hv1.kernel_args == list(DEFAULT_KERNEL_ARGS)
    assert hv1.blacklisted_modules == ["nouveau"]
    assert hv1.dpu is not None and hv1.dpu.mlxconfig == DEFAULT_MLXCONFIG
    assert hv1.dpu_name == "dpu-hv-1"
    assert estate.tenant("red").namespace_name == "tenant-red"  # type: ignore[union-attr]
    assert estate.fabric.director.password.get_secret_value() == DIRECTOR_PASSWORD
    assert DIRECTOR_PASSWORD not in repr(estate)


def test_vxlan_id_range_message_names_the_key_path() -> None:
    raw = valid_estate()
    raw["tenants"][1]["networks"][0]["vxlan_id"] = 16777216
    assert problems(raw) == ["tenants[1].networks[0].vxlan_id: 16777216 is outside 1..16777215"]


def test_vxlan_id_zero_is_rejected() -> None:
    raw = valid_estate()
    raw["tenants"][0]["networks"][0]["vxlan_id"] = 0
    assert problems(raw) == ["tenants[0].networks[0].vxlan_id: 0 is outside 1..16777215"]


def test_vlan_id_range() -> None:
    raw = valid_estate()
    raw["tenants"][0]["networks"][0]["vlan_id"] = 4095
    assert problems(raw) == ["tenants[0].networks[0].vlan_id: 4095 is outside 1..4094"]


def test_cidr_must_be_a_network_address() -> None:
    raw = valid_estate()
    raw["tenants"][0]["networks"][0]["cidr"] = "10.1.0.7/24"
    (msg,) = problems(raw)
    assert msg.startswith("tenants[0].networks[0].cidr: '10.1.0.7/24' is not a valid CIDR")


def test_cidr_garbage() -> None:
    raw = valid_estate()
    raw["tenants"][0]["networks"][0]["cidr"] = "ten-dot-one"
    (msg,) = problems(raw)
    assert msg.startswith("tenants[0].networks[0].cidr: 'ten-dot-one' is not a valid CIDR")


def test_names_are_dns_labels() -> None:
    raw = valid_estate()
    raw["hosts"][0]["name"] = "Blade_1"
    msgs = problems(raw)
    assert msgs[0].startswith("hosts[0].name: 'Blade_1' is not a DNS label")


def test_boot_mac_format() -> None:
    raw = valid_estate()
    raw["hosts"][1]["boot_mac"] = "52:54:00:zz:00:01"
    assert problems(raw) == [
        "hosts[1].boot_mac: '52:54:00:zz:00:01' is not a MAC address like 52:54:00:aa:bb:01"
    ]


def test_endpoint_must_be_http_url() -> None:
    raw = valid_estate()
    raw["fabric"]["director"]["endpoint"] = "ftp://director"
    assert problems(raw) == ["fabric.director.endpoint: 'ftp://director' is not an http:// or https:// URL"]


def test_role_is_one_of_three() -> None:
    raw = valid_estate()
    raw["hosts"][0]["role"] = "storage"
    (msg,) = problems(raw)
    assert msg.startswith(
        "hosts[0].role: Input should be 'hypervisor', 'baremetal-worker' or 'dpu-cluster-host'"
    )


def test_unknown_keys_are_rejected() -> None:
    raw = valid_estate()
    raw["tenants"][0]["netwrks"] = []
    raw["tenants"][0]["zzz"] = 1
    assert problems(raw) == [
        "tenants[0].netwrks: unknown key (did you mean 'networks'?)",
        "tenants[0].zzz: unknown key",
    ]


def test_missing_required_key() -> None:
    raw = valid_estate()
    del raw["hosts"][2]["bmc"]["username"]
    assert problems(raw) == ["hosts[2].bmc.username: required key is missing"]


def test_secret_values_are_never_echoed() -> None:
    raw = valid_estate()
    raw["fabric"]["director"]["password"] = ["not-a-string-but-secret-xyz"]
    msgs = problems(raw)
    assert msgs and msgs[0].startswith("fabric.director.password:")
    assert not any("secret-xyz" in m for m in msgs)


def test_mlxconfig_keys_are_parameter_names() -> None:
    raw = valid_estate()
    raw["hosts"][0]["dpu"]["mlxconfig"] = {"virtio-net": 1}
    assert problems(raw) == [
        "hosts[0].dpu.mlxconfig.virtio-net: 'virtio-net' is not an mlxconfig parameter name (A-Z, 0-9, _)"
    ]


def test_kernel_args_are_single_words() -> None:
    raw = valid_estate()
    raw["hosts"][0]["kernel_args"] = ["intel_iommu=on iommu=pt"]
    assert problems(raw) == [
        "hosts[0].kernel_args[0]: 'intel_iommu=on iommu=pt' is not a single kernel argument (no spaces)"
    ]


@pytest.mark.parametrize("value", [0, 604801])
def test_idle_timeout_bounds(value: int) -> None:
    """The chart's bounds (domain.settings): more than 0, at most a week."""
    raw = valid_estate()
    raw["composer"]["idle_timeout_seconds"] = value
    assert problems(raw) == [f"composer.idle_timeout_seconds: {value} is outside 1..604800"]


def test_idle_timeout_default_is_the_charts() -> None:
    raw = valid_estate()
    del raw["composer"]["idle_timeout_seconds"]
    assert EstateConfig.model_validate(raw).composer.idle_timeout_seconds == 600


def test_gpu_quota_not_negative() -> None:
    raw = valid_estate()
    raw["tenants"][0]["gpu_quota"] = -1
    assert problems(raw) == ["tenants[0].gpu_quota: -1 is less than 0"]


def test_every_structural_problem_is_reported_at_once() -> None:
    raw = valid_estate()
    raw["tenants"][0]["networks"][0]["vlan_id"] = 0
    raw["hosts"][0]["boot_mac"] = "x"
    raw["environment"] = "prod"
    paths = [m.split(":")[0] for m in problems(raw)]
    assert paths == ["environment", "hosts[0].boot_mac", "tenants[0].networks[0].vlan_id"]


def test_root_must_be_an_object() -> None:
    assert problems([1, 2]) == ["expected an object, got list"]  # type: ignore[arg-type]
