"""Payload fixtures parse into the client's models; simulator and fixtures agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynamic_providers.redfish import errors
from dynamic_providers.redfish.models import (
    Bios,
    BiosSettings,
    ComputerSystem,
    ErrorResponse,
    Manager,
    NvidiaSystem,
    RedfishMessage,
    ServiceRoot,
)
from dynamic_providers.redfish.posture import privilege_attribute_key
from lab.redfish_sim import fixtures as sim_fixtures

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "redfish"


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_service_root_links_sessions():
    root = ServiceRoot.model_validate(load("service_root.json"))
    assert root.sessions_path == "/redfish/v1/SessionService/Sessions"
    assert root.systems.odata_id == "/redfish/v1/Systems"
    # a root without Links.Sessions falls back to SessionService/Sessions; without both: None
    assert ServiceRoot.model_validate({"SessionService": {"@odata.id": "/redfish/v1/SessionService"}}
                                      ).sessions_path == "/redfish/v1/SessionService/Sessions"
    assert ServiceRoot.model_validate({"Systems": {"@odata.id": "/redfish/v1/Systems"}}).sessions_path is None


def test_bluefield_system_links():
    system = ComputerSystem.model_validate(load("system_bluefield.json"))
    assert system.bios.odata_id == "/redfish/v1/Systems/Bluefield/Bios"
    assert system.oem.nvidia.odata_id == "/redfish/v1/Systems/Bluefield/Oem/Nvidia"
    assert system.actions.reset.action_info == "/redfish/v1/Systems/Bluefield/ResetActionInfo"
    assert system.actions.reset.allowable_values is None
    host = ComputerSystem.model_validate(load("system_host.json"))
    assert "GracefulRestart" in host.actions.reset.allowable_values


@pytest.mark.parametrize(("name", "key"), [("bios_bluefield.json", "HostPrivilegeLevel"),
                                           ("bios_bluefield_legacy.json", "Host Privilege Level")])
def test_bios_fixtures_and_privilege_key(name, key):
    bios = Bios.model_validate(load(name))
    assert bios.settings_path == "/redfish/v1/Systems/Bluefield/Bios/Settings"
    assert privilege_attribute_key(bios.attributes) == key
    assert bios.attributes["NicMode"] == "DpuMode"
    smmu = "EnableSMMU" if "EnableSMMU" in bios.attributes else "Enable SMMU"
    assert isinstance(bios.attributes[smmu], bool)


def test_types_of_attribute_values_survive():
    bios = Bios.model_validate(load("bios_bluefield.json"))
    assert bios.attributes["CeThreshold"] == 5000 and type(bios.attributes["CeThreshold"]) is int
    assert bios.attributes["FieldMode"] is False


def test_settings_oem_manager():
    settings = BiosSettings.model_validate(load("bios_settings.json"))
    assert settings.attributes == {"HostPrivilegeLevel": "Restricted"}
    oem = NvidiaSystem.model_validate(load("oem_nvidia_system.json"))
    assert (oem.mode, oem.host_rshim) == ("DpuMode", "Enabled")
    assert oem.actions.mode_set.target.endswith("/Oem/Nvidia/Actions/Mode.Set")
    assert Manager.model_validate(load("manager_bluefield_bmc.json")).firmware_version == "BF-24.10-17"


def test_error_body_parsing_and_rendering():
    info = ErrorResponse.model_validate(load("error_precondition_failed.json")).error
    err = errors.PreconditionFailedError(info.message, method="PATCH", url="https://bmc/x", status=412,
                                         messages=info.extended_info)
    text = str(err)
    assert text.startswith("PATCH https://bmc/x -> 412: The ETag supplied did not match")
    assert "(Base.1.16.0.PreconditionFailed)" in text and "Resolution: Try the operation again" in text


def test_most_severe_message_and_legacy_severity():
    msgs = [RedfishMessage.model_validate({"MessageId": "A.1.0.W", "Message": "warn", "Severity": "Warning"}),
            RedfishMessage.model_validate({"MessageId": "A.1.0.C", "Message": "crit",
                                           "MessageSeverity": "Critical"})]
    assert msgs[0].severity == "Warning"
    assert errors.most_severe(msgs).message == "crit"
    err = errors.BadRequestError("x", messages=msgs)
    assert "Also: warn" in str(err) and err.message_ids == ["A.1.0.W", "A.1.0.C"]
    assert errors.most_severe([]) is None


@pytest.mark.parametrize(("fixture", "key", "args", "related"), [
    ("error_property_unknown.json", "PropertyUnknown", ["VirtualizationTech"],
     ["#/Attributes/VirtualizationTech"]),
    ("error_precondition_failed.json", "PreconditionFailed", [], None),
])
def test_simulator_renders_the_fixture_error_bodies(fixture, key, args, related):
    """The simulator's error bodies are exactly the published shape the client tests use."""
    rendered = sim_fixtures.error_body([sim_fixtures.message(key, *args, related=related)])
    assert rendered == load(fixture)


def test_with_context_keeps_class_and_fields():
    err = errors.UnknownAttributeError("The property X is unknown", attributes=["X"], method="PATCH",
                                       url="https://bmc/s", status=400)
    wrapped = err.with_context("BiosAttributes on https://bmc")
    assert type(wrapped) is errors.UnknownAttributeError and wrapped.attributes == ["X"]
    assert wrapped.status == 400 and str(wrapped).startswith("BiosAttributes on https://bmc: PATCH https://bmc/s")
    assert str(err).startswith("PATCH"), "the original is unchanged"
