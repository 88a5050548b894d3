"""DpuPosture / BiosAttributes providers (their CRUD methods) against the simulator."""

from __future__ import annotations

import pickle

import pytest
from pulumi.runtime import rpc

from dynamic_providers import preflight
from dynamic_providers.redfish import errors
from dynamic_providers.redfish.provider import BiosAttributesProvider, DpuPostureProvider

UNKNOWN = rpc.UNKNOWN


def dpu_props(sim, name="dpu", **kw):
    props = {"bmc_endpoint": sim.url(name), "username": sim.username, "password": sim.password,
             "verify_tls": True, "ca_bundle": sim.ca_bundle if name.endswith("-tls") else None,
             "mode": "DpuMode", "host_privilege": "Restricted", "host_rshim": "Disabled",
             "apply_reset": False, "reset_timeout_seconds": 5.0}
    props.update(kw)
    return props


def bios_props(sim, **kw):
    props = {"bmc_endpoint": sim.url("host"), "username": sim.username, "password": sim.password,
             "attributes": {"ProcVirtualization": "Enabled", "IOMMU": "Enabled",
                            "SriovGlobalEnable": "Enabled"},
             "system_id": "1", "verify_tls": True, "ca_bundle": None, "apply_reset": False,
             "reset_timeout_seconds": 5.0}
    props.update(kw)
    return props


P = DpuPostureProvider()
B = BiosAttributesProvider()


# --- DPU posture ----------------------------------------------------------------------------


#: One simulated BMC per host-privilege generation (see conftest): name, interface, the
#: property the output names, what a create stages for ``host_privilege`` (besides the mode).
GENERATIONS = [
    ("dpu-legacy", "bios", "Host Privilege Level", {"Host Privilege Level": "Restricted"}),
    ("dpu", "external", "HostPriv*", {}),
    ("dpu-tls", "external", "HostPriv*", {}),
    ("dpu-2510", "config", "PrivilegeMode", {"PrivilegeMode": "Restricted"}),
    ("dpu-2601", "config", "PrivilegeMode", {"PrivilegeMode": "Restricted"}),
]
NAMES = [g[0] for g in GENERATIONS]


@pytest.mark.parametrize(("name", "interface", "key", "staged"), GENERATIONS)
def test_create_stages_posture_without_reset(sim, name, interface, key, staged):
    sim.drift(name, mode="NicMode")
    res = P.create(dpu_props(sim, name))
    outs = res.outs
    assert res.id == f"{sim.url(name)}/redfish/v1/Systems/Bluefield"
    assert outs["host_rshim"] == "Disabled", "rshim is immediate"
    assert outs["mode"] == "NicMode", "effective until reset"
    assert outs["privilege_interface"] == interface and outs["privilege_attribute"] == key
    assert outs["reset_pending"] is True
    assert outs["pending_attributes"] == {**staged, "NicMode": "DpuMode"}
    assert outs["next_host_privilege"] == "Restricted" and outs["drift"] == []
    if interface == "external":
        # the resource shows the stored NV configuration only: no pending/effective split
        assert outs["host_privilege_level"] == "Restricted" and outs["awaiting_reset"] == ["mode"]
        assert set(sim.state(name)["external_privileges"].values()) == {"Disabled"}
    else:
        assert outs["host_privilege_level"] == "Privileged"
        assert outs["awaiting_reset"] == ["mode", "host_privilege"]
    assert outs["firmware_version"] == sim.endpoints[name]["firmware"]
    st = sim.state(name)
    assert st["reset_count"] == 0 and st["sessions_active"] == 0
    assert sim.host_privilege(name) == "Privileged", "nothing applies before a reset"


@pytest.mark.parametrize("name", NAMES)
def test_create_with_apply_reset_applies_and_reports_nothing_pending(sim, name):
    sim.drift(name, mode="NicMode")
    outs = P.create(dpu_props(sim, name, apply_reset=True)).outs
    posture = (outs["mode"], outs["host_privilege_level"], outs["host_rshim"])
    assert posture == ("DpuMode", "Restricted", "Disabled")
    assert outs["reset_pending"] is False and outs["awaiting_reset"] == []
    assert outs["pending_attributes"] == {}
    assert sim.state(name)["reset_count"] == 1 and sim.host_privilege(name) == "Restricted"
    resets = sim.requests_to(name, "POST", "/redfish/v1/Systems/Bluefield/Actions/ComputerSystem.Reset")
    assert len(resets) == 1


def test_external_privileges_alone_still_get_their_reset(sim):
    """ExternalHostPrivileges never shows a pending value, so a write there is reset for at once."""
    outs = P.create(dpu_props(sim, "dpu", apply_reset=True)).outs
    assert outs["awaiting_reset"] == [] and sim.state("dpu")["reset_count"] == 1
    assert sim.host_privilege("dpu") == "Restricted"


@pytest.mark.parametrize("name", NAMES)
def test_converged_dpu_is_not_written_or_reset_again(sim, name):
    first = P.create(dpu_props(sim, name, apply_reset=True)).outs
    before = len(sim.state(name)["requests"])
    assert P.diff("id", first, dpu_props(sim, name, apply_reset=True)).changes is False
    again = P.update("id", first, dpu_props(sim, name, apply_reset=True)).outs
    new = sim.state(name)["requests"][before:]
    assert not [r for r in new if r["method"] in ("PATCH", "POST") and "Sessions" not in r["path"]]
    assert again["drift"] == [] and sim.state(name)["reset_count"] == 1


#: The eight ExternalHostPrivileges properties (NVIDIA BlueField BMC 24.10-LTS ... 25.07 pages).
HOST_PRIVS = ("HostPrivFlashAccess", "HostPrivFwUpdate", "HostPrivNicReset", "HostPrivNvGlobal",
              "HostPrivNvHost", "HostPrivNvInternalCpu", "HostPrivNvPort", "HostPrivPccUpdate")
#: Out-of-band loosening of the host privilege, per generation.
LOOSEN = {
    "dpu-legacy": ({"attributes": {"Host Privilege Level": "Privileged"}}, "Privileged"),
    "dpu": ({"external_privileges": {"HostPrivFwUpdate": "Enabled"}}, "Custom"),
    "dpu-tls": ({"external_privileges": dict.fromkeys(HOST_PRIVS, "Default")}, "Privileged"),
    "dpu-2510": ({"privilege_settings": {"FirmwareUpdate": "Enabled"}}, "Custom"),
    "dpu-2601": ({"privilege_mode": "Privileged"}, "Privileged"),
}


@pytest.mark.parametrize("name", NAMES)
def test_refresh_reports_out_of_band_drift_and_update_repairs_it(sim, name):
    outs = P.create(dpu_props(sim, name, apply_reset=True)).outs
    change, seen = LOOSEN[name]
    sim.drift(name, mode="NicMode", host_rshim="Enabled", **change)
    read = P.read("id", outs)
    assert read.id == "id"
    assert (read.outs["mode"], read.outs["host_rshim"], read.outs["host_privilege_level"]) == \
        ("NicMode", "Enabled", seen)
    assert read.outs["drift"] == ["mode", "host_privilege", "host_rshim"]
    assert (read.inputs["mode"], read.inputs["host_rshim"], read.inputs["host_privilege"]) == \
        ("NicMode", "Enabled", seen), "refreshed inputs make the next preview show the correction"
    assert read.inputs["password"] == sim.password
    diff = P.diff("id", read.outs, dpu_props(sim, name, apply_reset=True))
    assert diff.changes is True and not diff.replaces
    repaired = P.update("id", read.outs, dpu_props(sim, name, apply_reset=True)).outs
    assert repaired["drift"] == [] and repaired["mode"] == "DpuMode"
    assert repaired["host_privilege_level"] == "Restricted" and sim.host_privilege(name) == "Restricted"


#: Out-of-band tightening to Restricted, per generation (a DPU someone already locked down).
TIGHTEN = {
    "dpu-legacy": {"attributes": {"Host Privilege Level": "Restricted"}},
    "dpu": {"external_privileges": dict.fromkeys(HOST_PRIVS, "Disabled")},
    "dpu-tls": {"external_privileges": dict.fromkeys(HOST_PRIVS, "Disabled")},
    "dpu-2510": {"privilege_mode": "Restricted"},
    "dpu-2601": {"privilege_mode": "Restricted"},
}


@pytest.mark.parametrize("name", NAMES)
def test_create_adopts_an_already_restricted_dpu_without_writing(sim, name):
    """An estate prepared by hand is adopted by ``up`` as it is: read, nothing written, no reset."""
    sim.drift(name, host_rshim="Disabled", **TIGHTEN[name])
    before = len(sim.state(name)["requests"])
    outs = P.create(dpu_props(sim, name, apply_reset=True)).outs
    assert outs["drift"] == [] and outs["host_privilege_level"] == "Restricted"
    writes = [r for r in sim.state(name)["requests"][before:]
              if r["method"] in ("PATCH", "POST") and "Sessions" not in r["path"]]
    assert writes == [] and sim.state(name)["reset_count"] == 0


def test_a_staged_loosening_on_hostprivilegeconfig_is_drift_and_undone(sim):
    """Someone else staged Privileged in HostPrivilegeConfig/Settings: refresh shows it, up undoes it."""
    outs = P.create(dpu_props(sim, "dpu-2601", apply_reset=True)).outs
    sim.drift("dpu-2601", privilege_pending_mode="Privileged")
    read = P.read("id", outs)
    assert read.outs["host_privilege_level"] == "Restricted"
    assert read.outs["next_host_privilege"] == "Privileged"
    assert read.outs["drift"] == ["host_privilege"] and read.inputs["host_privilege"] == "Privileged"
    assert read.outs["pending_attributes"] == {"PrivilegeMode": "Privileged"}
    fixed = P.update("id", read.outs, dpu_props(sim, "dpu-2601")).outs
    assert fixed["drift"] == [] and fixed["pending_attributes"] == {} and fixed["reset_pending"] is False
    assert sim.state("dpu-2601")["privilege_settings_pending"] is None


def test_etag_conflict_during_create_fails_and_writes_nothing(sim):
    key = "Host Privilege Level"
    sim.concurrent_write("dpu-legacy", {key: "Privileged"})
    with pytest.raises(errors.PreconditionFailedError) as info:
        P.create(dpu_props(sim, "dpu-legacy"))
    assert str(info.value).startswith(f"DpuPosture on {sim.url('dpu-legacy')}: PATCH")
    assert "did not match" in str(info.value) and info.value.status == 412
    st = sim.state("dpu-legacy")
    assert st["pending"] == {key: "Privileged"}, "only the concurrent writer's value"
    assert st["host_rshim"] == "Enabled", "no later step ran"
    assert st["sessions_active"] == 0, "session closed on error"


def test_wrong_credentials(sim):
    with pytest.raises(errors.AuthError, match="login refused") as info:
        P.create(dpu_props(sim, password="not-it"))
    assert "not-it" not in str(info.value)
    assert sim.state("dpu")["pending"] == {}


def test_unreachable_bmc(sim, free_port):
    with pytest.raises(errors.UnreachableError, match=f"127.0.0.1:{free_port}"):
        P.create(dpu_props(sim, bmc_endpoint=f"http://127.0.0.1:{free_port}"))


def test_host_bmc_is_not_a_dpu(sim):
    with pytest.raises(errors.NotFoundError):
        P.create(dpu_props(sim, "host"))


def test_https_without_bundle_is_tls_error(sim):
    with pytest.raises(errors.TlsError):
        P.create(dpu_props(sim, "dpu-tls", ca_bundle=None))


def test_reset_that_does_not_apply_is_not_converged(sim, monkeypatch):
    from dynamic_providers.redfish import provider as mod

    monkeypatch.setattr(mod, "_POLL_SECONDS", 0.05)
    # the BMC acknowledges the reset (204) but the DPU never applies the pending settings
    sim.fault("dpu-legacy", method="POST", path="/redfish/v1/Systems/Bluefield/Actions/ComputerSystem.Reset",
              status=204, count=1)
    with pytest.raises(errors.NotConvergedError, match="not observed within 0.3 s"):
        P.create(dpu_props(sim, "dpu-legacy", apply_reset=True, reset_timeout_seconds=0.3))
    st = sim.state("dpu-legacy")
    assert st["reset_count"] == 0 and st["pending"] == {"Host Privilege Level": "Restricted"}


def test_check_validates_locally_and_passes_unknowns(sim):
    bad = P.check({}, dpu_props(sim, mode="Turbo", host_rshim="Off", bmc_endpoint="https://u:p@bmc",
                                reset_timeout_seconds=0, password=""))
    assert sorted(f.property for f in bad.failures) == ["bmc_endpoint", "host_rshim", "mode", "password",
                                                        "reset_timeout_seconds"]
    assert P.check({}, dpu_props(sim, bmc_endpoint=UNKNOWN, mode=UNKNOWN, password=UNKNOWN)).failures == []


@pytest.fixture
def fresh_preflight(monkeypatch):
    """Preflight on, with no verdict cached from an earlier test."""
    monkeypatch.delenv(preflight.PREFLIGHT_ENV, raising=False)
    preflight.forget()
    yield
    preflight.forget()


def test_check_refuses_a_wrong_password_in_one_line_naming_the_endpoint(sim, fresh_preflight):
    res = P.check({}, dpu_props(sim, password="definitely-wrong"))
    assert [f.property for f in res.failures] == ["bmc_endpoint"]
    reason = res.failures[0].reason
    assert reason.startswith(f"BMC {sim.url('dpu')}: credentials refused")
    assert "pulumi config set --secret" in reason and "\n" not in reason
    assert "definitely-wrong" not in reason
    assert sim.state("dpu")["sessions_active"] == 0  # nothing left open, nothing changed


def test_check_reports_an_unreachable_bmc_and_can_be_switched_off(sim, free_port, fresh_preflight,
                                                                  monkeypatch):
    dead = f"http://127.0.0.1:{free_port}"
    res = B.check({}, bios_props(sim, bmc_endpoint=dead))
    assert [f.property for f in res.failures] == ["bmc_endpoint"]
    assert res.failures[0].reason.startswith(f"BMC {dead}: no answer")
    assert f"{preflight.PREFLIGHT_ENV}=off" in res.failures[0].reason
    monkeypatch.setenv(preflight.PREFLIGHT_ENV, "off")
    assert B.check({}, bios_props(sim, bmc_endpoint=dead)).failures == []


def test_check_names_a_missing_ca_bundle_instead_of_failing_inside_requests(sim, fresh_preflight, tmp_path):
    missing = str(tmp_path / "no-such-ca.pem")
    res = P.check({}, dpu_props(sim, "dpu-tls", ca_bundle=missing))
    assert [(f.property, f.reason) for f in res.failures] == [
        ("ca_bundle", f"no such file: {missing} (the PEM file of the BMC's CA)")]


def test_check_probes_each_bmc_once_per_run(sim, fresh_preflight):
    before = len(sim.requests_to("host", "GET", "/redfish/v1/Systems"))
    for _ in range(3):
        assert B.check({}, bios_props(sim)).failures == []
    assert len(sim.requests_to("host", "GET", "/redfish/v1/Systems")) == before + 1
    # A different password is a different verdict: probed again, and refused.
    assert B.check({}, bios_props(sim, password="other")).failures


def test_diff_is_pure_and_handles_unknowns(sim, free_port):
    dead = f"http://127.0.0.1:{free_port}"
    olds = {**dpu_props(sim, bmc_endpoint=dead), "mode": "DpuMode", "host_rshim": "Disabled",
            "host_privilege_level": "Restricted", "privilege_attribute": "HostPrivilegeLevel",
            "pending_attributes": {}}
    news = dpu_props(sim, bmc_endpoint=dead)
    assert P.diff("id", olds, news).changes is False, "diff makes no BMC call (endpoint is dead)"
    assert P.diff("id", olds, {**news, "mode": UNKNOWN}).changes is True
    rep = P.diff("id", olds, {**news, "bmc_endpoint": UNKNOWN})
    assert rep.replaces == ["bmc_endpoint"]
    assert P.diff("id", olds, {**news, "bmc_endpoint": sim.url("dpu")}).replaces == ["bmc_endpoint"]
    assert P.diff("id", olds, {**news, "password": "rotated"}).changes is True
    assert P.diff("id", olds, {**news, "host_privilege": "Privileged"}).changes is True
    staged = {**olds, "mode": "NicMode", "pending_attributes": {"NicMode": "DpuMode"}}
    assert P.diff("id", staged, news).changes is False, "staged, no reset wanted"
    assert P.diff("id", staged, {**news, "apply_reset": True}).changes is True, "reset now wanted"


@pytest.mark.parametrize(("interface", "key"), [("external", "HostPriv*"), ("config", "PrivilegeMode")])
def test_diff_on_newer_interfaces_uses_the_recorded_next_level(sim, free_port, interface, key):
    dead = f"http://127.0.0.1:{free_port}"
    olds = {**dpu_props(sim, bmc_endpoint=dead), "mode": "DpuMode", "host_rshim": "Disabled",
            "host_privilege_level": "Privileged", "next_host_privilege": "Restricted",
            "privilege_attribute": key, "privilege_interface": interface,
            "pending_attributes": {"PrivilegeMode": "Restricted"} if interface == "config" else {}}
    news = dpu_props(sim, bmc_endpoint=dead)
    assert P.diff("id", olds, news).changes is False, "Restricted is staged: nothing to write"
    assert P.diff("id", olds, {**news, "apply_reset": True}).changes is True, "a reset would apply it"
    loosened = {**olds, "host_privilege_level": "Restricted", "next_host_privilege": "Custom"}
    assert P.diff("id", loosened, news).changes is True


def test_providers_pickle_without_state():
    for provider in (P, B):
        blob = pickle.dumps(provider)
        assert len(blob) < 200 and vars(pickle.loads(blob)) == {}


# --- BIOS attributes ------------------------------------------------------------------------


def test_bios_attributes_stage_then_apply(sim):
    outs = B.create(bios_props(sim)).outs
    assert outs["attributes"] == {"ProcVirtualization": "Disabled", "IOMMU": "Disabled",
                                  "SriovGlobalEnable": "Disabled"}
    assert outs["reset_pending"] is True and outs["drift"] == []
    assert outs["awaiting_reset"] == ["IOMMU", "ProcVirtualization", "SriovGlobalEnable"]
    assert outs["bios_version"] == "2.19.1" and outs["firmware_version"] == "1.0.0"
    assert B.diff("id", outs, bios_props(sim)).changes is False
    assert B.diff("id", outs, bios_props(sim, apply_reset=True)).changes is True
    applied = B.update("id", outs, bios_props(sim, apply_reset=True)).outs
    assert applied["attributes"] == {"ProcVirtualization": "Enabled", "IOMMU": "Enabled",
                                     "SriovGlobalEnable": "Enabled"}
    assert applied["reset_pending"] is False and sim.state("host")["reset_count"] == 1


def test_bios_unknown_attribute_is_rejected_and_nothing_staged(sim):
    with pytest.raises(errors.UnknownAttributeError) as info:
        B.create(bios_props(sim, attributes={"VMXEnabled": "Enabled", "IOMMU": "Enabled"}))
    assert info.value.attributes == ["VMXEnabled"]
    assert "BiosAttributes (Systems/1) on" in str(info.value) and "PropertyUnknown" in str(info.value)
    assert sim.state("host")["pending"] == {}


def test_bios_drift_and_refresh(sim):
    outs = B.create(bios_props(sim, apply_reset=True)).outs
    sim.drift("host", attributes={"IOMMU": "Disabled"})
    read = B.read("id", outs)
    assert read.outs["attributes"]["IOMMU"] == "Disabled" and read.outs["drift"] == ["IOMMU"]
    assert read.inputs["attributes"] == {"ProcVirtualization": "Enabled", "IOMMU": "Disabled",
                                         "SriovGlobalEnable": "Enabled"}
    assert B.diff("id", read.outs, bios_props(sim, apply_reset=True)).changes is True


def test_bios_check_normalises_numbers_and_rejects_bad_input(sim):
    res = B.check({}, bios_props(sim, attributes={"CeThreshold": 5000.0}))
    assert res.failures == [] and type(res.inputs["attributes"]["CeThreshold"]) is int
    bad = B.check({}, bios_props(sim, attributes={}, system_id="1/2", verify_tls="yes"))
    assert sorted(f.property for f in bad.failures) == ["attributes", "system_id", "verify_tls"]
    assert B.check({}, bios_props(sim, attributes={"A": UNKNOWN}, system_id=UNKNOWN)).failures == []
    assert B.diff("id", {**bios_props(sim), "attributes": {}}, bios_props(sim, system_id="2")).replaces == \
        ["system_id"]


def test_bios_values_wrong_type_is_bad_request(sim):
    with pytest.raises(errors.BadRequestError, match="PropertyValueNotInList"):
        B.create(bios_props(sim, attributes={"IOMMU": "Maybe"}))


def test_refresh_errors_are_raised_with_context(sim):
    outs = P.create(dpu_props(sim)).outs
    sim.drift("dpu", password="rotated")
    with pytest.raises(errors.AuthError, match=f"^DpuPosture refresh on {sim.url('dpu')}: POST"):
        P.read("id", outs)
    bios_outs = {**bios_props(sim), "attributes": {"IOMMU": "Disabled"}}
    with pytest.raises(errors.AuthError, match=r"^BiosAttributes \(Systems/1\) refresh on"):
        B.read("id", {**bios_outs, "password": "nope"})
