"""Host-privilege interfaces per BlueField BMC firmware generation: the pure rules, the client's
probing (against the simulator) and the simulator's answers to bad requests."""

from __future__ import annotations

import pytest
import requests

from dynamic_providers.redfish import client as client_mod
from dynamic_providers.redfish import errors, privilege
from dynamic_providers.redfish.client import RedfishClient
from dynamic_providers.redfish.posture import DpuDesired, DpuObserved, DpuPlan, plan_dpu_posture

# --- pure ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("firmware", "generation", "order"), [
    ("BF-24.04-5", "bios", ["bios", "config", "external"]),
    ("BF-24.07-3", "bios", ["bios", "config", "external"]),
    ("BF-24.10-17", "external", ["external", "config", "bios"]),
    ("BF-25.07-2", "external", ["external", "config", "bios"]),
    ("BF-25.10-4", "config", ["config", "external", "bios"]),
    ("26.01-LTS", "config", ["config", "external", "bios"]),
    ("1.0.0", None, ["config", "external", "bios"]),
    (None, None, ["config", "external", "bios"]),
])
def test_generation_and_probe_order(firmware, generation, order):
    assert privilege.generation_for(firmware) == generation
    assert privilege.probe_order(firmware) == order


def test_external_levels_and_values():
    restricted = privilege.external_values("Restricted")
    assert sorted(restricted) == sorted(privilege.EXTERNAL_PROPERTIES)
    assert set(restricted.values()) == {"Disabled"}
    assert privilege.level_from_external(restricted) == "Restricted"
    assert privilege.level_from_external(privilege.external_values("Privileged")) == "Privileged"
    factory = dict.fromkeys(privilege.EXTERNAL_PROPERTIES, "Default")
    assert privilege.level_from_external(factory) == "Privileged"
    assert privilege.level_from_external({**restricted, "HostPrivNvPort": "Default"}) == "Custom"
    assert privilege.level_from_external({}) is None
    with pytest.raises(ValueError, match="Custom"):
        privilege.external_values("Custom")


def test_config_mode_of_presets():
    for name, preset in privilege.CONFIG_PRESETS.items():
        assert privilege.mode_of(preset) == name
    assert privilege.mode_of({**privilege.CONFIG_PRESETS["Restricted"], "TracerEnabled": True}) == "Custom"
    # JSON booleans are not the strings of the other settings
    assert privilege.mode_of({**privilege.CONFIG_PRESETS["Restricted"], "TracerEnabled": 0}) == "Custom"


@pytest.mark.parametrize("interface", ["external", "config"])
def test_plan_through_newer_interfaces(interface):
    obs = DpuObserved(mode="DpuMode", host_rshim="Disabled", interface=interface,
                      privilege_now="Privileged", privilege_next="Privileged")
    assert plan_dpu_posture(DpuDesired(), obs) == DpuPlan(privilege="Restricted")
    assert plan_dpu_posture(DpuDesired(), obs).settings == ["host_privilege"]
    staged = DpuObserved(mode="DpuMode", host_rshim="Disabled", interface=interface,
                         privilege_now="Privileged", privilege_next="Restricted")
    assert plan_dpu_posture(DpuDesired(), staged).empty, "already staged: nothing to write"
    # no BIOS attribute needed on these generations
    assert staged.privilege_key in ("HostPriv*", "PrivilegeMode")


# --- client probing against the simulator ----------------------------------------------------


@pytest.fixture
def no_cache(monkeypatch):
    monkeypatch.setattr(client_mod, "_INTERFACE_CACHE", {})


def bmc(sim, name: str) -> RedfishClient:
    return RedfishClient(sim.url(name), username=sim.username, password=sim.password,
                         ca_bundle=sim.ca_bundle if name.endswith("-tls") else None)


@pytest.mark.parametrize(("name", "interface"), [("dpu-legacy", "bios"), ("dpu", "external"),
                                                 ("dpu-2510", "config"), ("dpu-2601", "config")])
def test_client_detects_the_interface_once_per_bmc(sim, no_cache, name, interface):
    with bmc(sim, name) as c:
        assert c.privilege_interface() == interface
        before = len(sim.state(name)["requests"])
        assert c.privilege_interface() == interface
        gets = [r["path"] for r in sim.state(name)["requests"][before:]]
    assert not [p for p in gets if "HostPrivilege" in p or "Bios" in p], "cached: no second probe"


def test_probing_ignores_a_misleading_firmware_version(sim, no_cache):
    """The version is a hint; the resources decide (a 26.01 version string on a BIOS-only BMC)."""
    with bmc(sim, "dpu-legacy") as c:
        assert c.privilege_interface(firmware="BF-26.01-2") == "bios"
    probes = sim.requests_to("dpu-legacy", "GET", privilege.CONFIG_PATH)
    assert [r["status"] for r in probes] == [404]


def test_host_bmc_offers_no_privilege_interface(sim, no_cache):
    with bmc(sim, "host") as c, pytest.raises(errors.NotFoundError, match="no host-privilege interface"):
        c.privilege_interface()


def test_config_stale_etag_is_precondition_failed_and_stages_nothing(sim):
    with bmc(sim, "dpu-2601") as c:
        etag = c.host_privilege_config_settings().etag
        sim.drift("dpu-2601", privilege_pending_mode="Restricted")  # another client staged a change
        with pytest.raises(errors.PreconditionFailedError):
            c.set_host_privilege_mode("Privileged", etag=etag)
        assert c.host_privilege_config_settings().mode == "Restricted", "the other client's value stays"
        assert c.host_privilege_config().mode == "Privileged", "staged only, until reset"


def test_external_write_is_stored_for_the_next_reset(sim):
    with bmc(sim, "dpu") as c:
        got = c.set_external_host_privileges(privilege.external_values("Restricted"))
        assert privilege.level_from_external(got.privileges) == "Restricted"
    assert sim.host_privilege("dpu") == "Privileged"
    with bmc(sim, "dpu") as c:
        c.reset_system("Bluefield")
    assert sim.host_privilege("dpu") == "Restricted"


# --- the simulator's refusals (checked with plain HTTP, not through our client) ---------------


def _call(sim, name, method, path, body):
    return requests.request(method, sim.url(name) + path, json=body, auth=(sim.username, sim.password),
                            timeout=10)


@pytest.mark.parametrize(("name", "method", "path", "body", "message"), [
    ("dpu", "POST", privilege.EXTERNAL_PATH, {"HostPrivFwUpdate": "Off"}, "PropertyValueNotInList"),
    ("dpu", "POST", privilege.EXTERNAL_PATH, {"HostPrivTeleport": "Disabled"}, "PropertyUnknown"),
    ("dpu", "POST", privilege.EXTERNAL_PATH, {}, "PropertyMissing"),
    ("dpu-2601", "PATCH", privilege.CONFIG_PATH + "/Settings", {"PrivilegeMode": "Custom"},
     "PropertyValueNotInList"),
    ("dpu-2601", "PATCH", privilege.CONFIG_PATH + "/Settings",
     {"PrivilegeSettings": {"TracerEnabled": "Disabled"}}, "PropertyValueNotInList"),
    ("dpu-2601", "PATCH", privilege.CONFIG_PATH + "/Settings", {"PrivilegeSettings": {"Teleport": True}},
     "PropertyUnknown"),
])
def test_simulator_refuses_bad_privilege_writes(sim, name, method, path, body, message):
    before = sim.state(name)
    resp = _call(sim, name, method, path, body)
    assert resp.status_code == 400
    assert message in resp.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"]
    after = sim.state(name)
    assert (after["external_privileges"], after["privilege_settings_pending"]) == \
        (before["external_privileges"], before["privilege_settings_pending"]), "nothing stored"


@pytest.mark.parametrize(("name", "path"), [("dpu-legacy", privilege.EXTERNAL_PATH),
                                            ("dpu-legacy", privilege.CONFIG_PATH),
                                            ("dpu", privilege.CONFIG_PATH),
                                            ("dpu-2601", privilege.EXTERNAL_PATH)])
def test_other_generations_resources_are_absent(sim, name, path):
    assert _call(sim, name, "GET", path, None).status_code == 404


def test_single_settings_on_top_of_a_preset_read_as_custom(sim):
    resp = _call(sim, "dpu-2601", "PATCH", privilege.CONFIG_PATH + "/Settings",
                 {"PrivilegeMode": "Restricted", "PrivilegeSettings": {"ReadCountersEnabled": True}})
    assert resp.status_code == 200
    staged = _call(sim, "dpu-2601", "GET", privilege.CONFIG_PATH + "/Settings", None).json()
    assert staged["PrivilegeMode"] == "Custom"
    assert staged["PrivilegeSettings"]["ReadCountersEnabled"] is True
    assert staged["PrivilegeSettings"]["FirmwareUpdate"] == "Disabled"


def test_product_presets_match_the_vendor_table_fixture():
    """The client's preset table and the fixture transcribed from the 26.01 page agree."""
    import json
    from pathlib import Path

    table = json.loads((Path(__file__).parents[1] / "fixtures" / "redfish" / "host_privilege_presets.json")
                       .read_text())
    assert table == privilege.CONFIG_PRESETS
