"""Pure validation of the managed mlxconfig parameters (names, types, ranges, cross rules)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.mlxconfig import (
    MAX_TOTAL_VIRTIO_NET_VFS,
    MAX_VFS_WITH_HOTPLUG,
    PARAMETERS,
    MlxconfigValidationError,
    validate,
    violations,
)

SEED_002 = {  # a virtio-net emulation setup: 10 PFs, hot-plug on (NVIDIA virtio-net deployment guide)
    "VIRTIO_NET_EMULATION_ENABLE": 1,
    "VIRTIO_NET_EMULATION_NUM_PF": 10,
    "VIRTIO_NET_EMULATION_NUM_VF": 10,
    "PCI_SWITCH_EMULATION_ENABLE": 1,
    "PCI_SWITCH_EMULATION_NUM_PORT": 10,
}


def test_the_bluefield_emulation_settings_are_valid_and_normalised() -> None:
    assert validate(SEED_002) == SEED_002
    assert validate({"VIRTIO_NET_EMULATION_ENABLE": True, "PCI_SWITCH_EMULATION_ENABLE": "false",
                     "VIRTIO_NET_EMULATION_NUM_PF": "4"}) == {
        "VIRTIO_NET_EMULATION_ENABLE": 1, "PCI_SWITCH_EMULATION_ENABLE": 0, "VIRTIO_NET_EMULATION_NUM_PF": 4}
    # Pulumi delivers numbers as doubles.
    as_doubles = validate({k: float(v) for k, v in SEED_002.items()})
    assert as_doubles == SEED_002 and all(type(v) is int for v in as_doubles.values())


@pytest.mark.parametrize(("params", "parameter", "fragment"), [
    ({"VIRTIO_NET_EMULATION_NUM_PFS": 1}, "VIRTIO_NET_EMULATION_NUM_PFS",
     "did you mean VIRTIO_NET_EMULATION_NUM_PF"),
    ({"SRIOV_EN": 1}, "SRIOV_EN", "unknown mlxconfig parameter"),
    ({"VIRTIO_NET_EMULATION_NUM_PF": 32}, "VIRTIO_NET_EMULATION_NUM_PF", "out of range 0..31"),
    ({"PCI_SWITCH_EMULATION_NUM_PORT": 33}, "PCI_SWITCH_EMULATION_NUM_PORT", "out of range 0..32"),
    ({"VIRTIO_NET_EMULATION_NUM_VF": -1}, "VIRTIO_NET_EMULATION_NUM_VF", "out of range 0..504"),
    ({"VIRTIO_NET_EMULATION_ENABLE": 2}, "VIRTIO_NET_EMULATION_ENABLE", "out of range 0..1"),
    ({"VIRTIO_NET_EMULATION_ENABLE": "yes"}, "VIRTIO_NET_EMULATION_ENABLE", "not a boolean"),
    ({"VIRTIO_NET_EMULATION_NUM_PF": True}, "VIRTIO_NET_EMULATION_NUM_PF", "is a boolean"),
    ({"VIRTIO_NET_EMULATION_NUM_PF": "ten"}, "VIRTIO_NET_EMULATION_NUM_PF", "not an integer"),
    ({"VIRTIO_NET_EMULATION_NUM_PF": 2.5}, "VIRTIO_NET_EMULATION_NUM_PF", "not an integer"),
])
def test_each_bad_value_is_reported_with_its_parameter_name(params, parameter: str, fragment: str) -> None:
    found = violations(params)
    assert [v.parameter for v in found] == [parameter]
    assert found[0].reason.startswith(f"{parameter}: ")
    assert fragment in found[0].reason


def test_vf_total_limits() -> None:
    over = {"VIRTIO_NET_EMULATION_NUM_PF": 5, "VIRTIO_NET_EMULATION_NUM_VF": 101}  # 505
    assert "exceeds the device maximum of 504" in violations(over)[0].reason
    assert violations({"VIRTIO_NET_EMULATION_NUM_PF": 4, "VIRTIO_NET_EMULATION_NUM_VF": 126}) == []
    hotplug = {"PCI_SWITCH_EMULATION_ENABLE": 1, "VIRTIO_NET_EMULATION_NUM_PF": 2,
               "VIRTIO_NET_EMULATION_NUM_VF": 64}
    (v,) = violations(hotplug)
    assert "128" in v.reason and "PCI_SWITCH_EMULATION_ENABLE=1" in v.reason
    assert violations({**hotplug, "PCI_SWITCH_EMULATION_ENABLE": 0}) == []


def test_all_problems_are_reported_at_once_and_validate_raises() -> None:
    with pytest.raises(MlxconfigValidationError) as err:
        validate({"NOPE": 1, "VIRTIO_NET_EMULATION_NUM_PF": 99, "PCI_SWITCH_EMULATION_NUM_PORT": 99})
    assert [v.parameter for v in err.value.violations] == [
        "NOPE", "VIRTIO_NET_EMULATION_NUM_PF", "PCI_SWITCH_EMULATION_NUM_PORT"]
    assert "NOPE" in str(err.value) and "99" in str(err.value)


def test_empty_map_is_rejected() -> None:
    assert violations({})[0].parameter == "parameters"


@given(st.sampled_from(sorted(PARAMETERS)), st.integers(min_value=-10, max_value=600))
def test_single_values_are_accepted_exactly_inside_their_documented_range(name: str, value: int) -> None:
    rule = PARAMETERS[name]
    ok = rule.minimum <= value <= rule.maximum
    assert (violations({name: value}) == []) is ok
    if ok:
        assert validate({name: value}) == {name: value}


@given(st.integers(0, 31), st.integers(0, 504), st.sampled_from([0, 1]))
def test_pf_vf_product_rule_matches_the_documented_limits(pf: int, vf: int, hotplug: int) -> None:
    params = {"VIRTIO_NET_EMULATION_NUM_PF": pf, "VIRTIO_NET_EMULATION_NUM_VF": vf,
              "PCI_SWITCH_EMULATION_ENABLE": hotplug}
    limit = MAX_VFS_WITH_HOTPLUG if hotplug else MAX_TOTAL_VIRTIO_NET_VFS
    assert (violations(params) == []) is (pf * vf <= limit)
