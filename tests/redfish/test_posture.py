"""Pure planning: what to write, what drifted, what awaits a reset (plain data, no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_providers.redfish import posture
from dynamic_providers.redfish.posture import DpuDesired, DpuObserved, DpuPlan


def observed(mode="DpuMode", priv="Privileged", rshim="Enabled", pending=None, key="HostPrivilegeLevel"):
    return DpuObserved(mode=mode, host_rshim=rshim, attributes={key: priv, "NicMode": mode},
                       pending=pending or {})


@pytest.mark.parametrize(("obs", "expected"), [
    (observed(), DpuPlan(bios_attributes={"HostPrivilegeLevel": "Restricted"}, host_rshim="Disabled")),
    (observed(key="Host Privilege Level"),
     DpuPlan(bios_attributes={"Host Privilege Level": "Restricted"}, host_rshim="Disabled")),
    (observed(mode="NicMode", priv="Restricted", rshim="Disabled"), DpuPlan(mode="DpuMode")),
    # already staged: nothing to write, but a reset is awaited
    (observed(mode="NicMode", rshim="Disabled",
              pending={"NicMode": "DpuMode", "HostPrivilegeLevel": "Restricted"}), DpuPlan()),
    # someone staged the opposite: undo it
    (observed(priv="Restricted", rshim="Disabled", pending={"HostPrivilegeLevel": "Privileged"}),
     DpuPlan(bios_attributes={"HostPrivilegeLevel": "Restricted"})),
    (observed(priv="Restricted", rshim="Disabled", pending={"NicMode": "NicMode"}), DpuPlan(mode="DpuMode")),
])
def test_plan_dpu_posture(obs, expected):
    assert posture.plan_dpu_posture(DpuDesired(), obs) == expected


def test_plan_settings_names_and_awaiting_reset():
    obs = observed(mode="NicMode", pending={"NicMode": "DpuMode"})
    plan = posture.plan_dpu_posture(DpuDesired(), obs)
    assert plan.settings == ["host_privilege", "host_rshim"]
    assert posture.dpu_awaiting_reset(DpuDesired(), obs) == ["mode"]
    assert DpuPlan().empty and not plan.empty


def test_no_privilege_attribute():
    obs = DpuObserved(mode="DpuMode", host_rshim="Disabled", attributes={"NicMode": "DpuMode"})
    with pytest.raises(posture.NoPrivilegeAttributeError, match="HostPrivilegeLevel"):
        posture.plan_dpu_posture(DpuDesired(), obs)


def test_plan_bios_uses_next_boot_values():
    effective = {"VTd": "Disabled", "IOMMU": "Disabled", "CeThreshold": 5000, "Flag": True}
    pending = {"IOMMU": "Enabled"}
    desired = {"VTd": "Enabled", "IOMMU": "Enabled", "CeThreshold": 5000, "Flag": 1, "Nope": "x"}
    assert posture.plan_bios(desired, effective, pending) == {"VTd": "Enabled", "Flag": 1, "Nope": "x"}
    assert posture.awaiting_reset(desired, effective, pending) == ["IOMMU"]


def test_normalise_value():
    assert posture.normalise_value(5000.0) == 5000 and type(posture.normalise_value(5000.0)) is int
    assert posture.normalise_value(0.5) == 0.5
    assert posture.normalise_value(True) is True


values = st.one_of(st.sampled_from(["Enabled", "Disabled", "Restricted"]), st.booleans(), st.integers(0, 3))
attr_maps = st.dictionaries(st.sampled_from(["A", "B", "C", "D"]), values, max_size=4)


@given(desired=attr_maps, effective=attr_maps, pending=attr_maps)
def test_staging_the_plan_then_resetting_converges(desired, effective, pending):
    """Property: write the plan into pending, reset (pending → effective): nothing is left to do."""
    writes = posture.plan_bios(desired, effective, pending)
    staged = {**pending, **writes}
    assert posture.plan_bios(desired, effective, staged) == {}
    after_reset = {**effective, **staged}
    assert posture.plan_bios(desired, after_reset, {}) == {}
    assert posture.awaiting_reset(desired, after_reset, {}) == []


@given(mode=st.sampled_from(posture.DPU_MODES), priv=st.sampled_from(posture.PRIVILEGE_LEVELS),
       rshim=st.sampled_from(posture.RSHIM_STATES), next_mode=st.sampled_from([None, *posture.DPU_MODES]),
       next_priv=st.sampled_from([None, *posture.PRIVILEGE_LEVELS]), want=st.sampled_from(posture.DPU_MODES))
def test_dpu_plan_applied_is_empty(mode, priv, rshim, next_mode, next_priv, want):
    pending = {}
    if next_mode:
        pending["NicMode"] = next_mode
    if next_priv:
        pending["HostPrivilegeLevel"] = next_priv
    desired = DpuDesired(mode=want)
    obs = observed(mode=mode, priv=priv, rshim=rshim, pending=pending)
    plan = posture.plan_dpu_posture(desired, obs)
    staged = {**pending, **plan.bios_attributes, **({"NicMode": plan.mode} if plan.mode else {})}
    after = observed(mode=mode, priv=priv, rshim=plan.host_rshim or rshim, pending=staged)
    assert posture.plan_dpu_posture(desired, after).empty
