"""Redfish providers' ``check`` on its own (no BMC: the read-only probe is switched off):
one failure per broken rule, on the property, naming the rule and never a credential."""

from __future__ import annotations

import pytest
from pulumi.runtime import rpc

from dynamic_providers import preflight
from dynamic_providers.redfish.provider import BiosAttributesProvider, DpuPostureProvider

SECRET = "s3cr3t-pw"
CONNECTION = {"bmc_endpoint": "https://bmc.example:8443", "username": "root", "password": SECRET,
              "verify_tls": True, "ca_bundle": None, "apply_reset": False, "reset_timeout_seconds": 5.0}
DPU = {**CONNECTION, "mode": "DpuMode", "host_privilege": "Restricted", "host_rshim": "Disabled"}
BIOS = {**CONNECTION, "attributes": {"IOMMU": "Enabled"}, "system_id": "1"}


@pytest.fixture(autouse=True)
def _no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(preflight.PREFLIGHT_ENV, "off")


def _failures(provider: DpuPostureProvider | BiosAttributesProvider, props: dict) -> list[tuple[str, str]]:
    return [(f.property, f.reason) for f in provider.check({}, props).failures]


CREDENTIALS = "must not carry credentials (user@ or user:password@); use username/password"


@pytest.mark.parametrize(("prop", "value", "rule"), [
    ("bmc_endpoint", "bmc.example", "must be https://host[:port], got 'bmc.example'"),
    ("bmc_endpoint", f"https://root:{SECRET}@bmc", CREDENTIALS),
    ("bmc_endpoint", f"root:{SECRET}@bmc", CREDENTIALS),
    ("bmc_endpoint", "https://bmc/redfish/v1", "must have no path (the client adds /redfish/v1)"),
    ("username", "", "String should have at least 1 character"),
    ("password", "", "String should have at least 1 character"),
    ("password", 1234, "Input should be a valid string"),
    ("verify_tls", "yes", "Input should be a valid boolean"),
    ("apply_reset", 1, "Input should be a valid boolean"),
    ("ca_bundle", 3, "must be a path to a PEM file or null"),
    ("reset_timeout_seconds", 0, "Input should be greater than 0"),
    ("reset_timeout_seconds", 3601, "Input should be less than or equal to 3600"),
    ("reset_timeout_seconds", True, "Input should be a valid number"),
    ("mode", "Turbo", "Input should be 'DpuMode' or 'NicMode'"),
    ("host_privilege", "Root", "Input should be 'Privileged' or 'Restricted'"),
    ("host_rshim", "Off", "Input should be 'Enabled' or 'Disabled'"),
])
def test_dpu_check_names_the_property_and_the_rule(prop: str, value: object, rule: str) -> None:
    assert _failures(DpuPostureProvider(), {**DPU, prop: value}) == [(prop, f"{prop}: {rule}")]


@pytest.mark.parametrize(("prop", "value", "rule"), [
    ("attributes", {}, "must be a non-empty map of attribute to value"),
    ("attributes", ["IOMMU"], "must be a non-empty map of attribute to value"),
    ("attributes", {"A": None, "B": [1], "C": 1}, "values must be string/number/bool: ['A', 'B']"),
    ("system_id", "1/2", "must be a system id such as '1', got '1/2'"),
    ("system_id", "", "must be a system id such as '1', got ''"),
])
def test_bios_check_names_the_property_and_the_rule(prop: str, value: object, rule: str) -> None:
    assert _failures(BiosAttributesProvider(), {**BIOS, prop: value}) == [(prop, f"{prop}: {rule}")]


def test_every_broken_input_is_its_own_failure_and_no_credential_is_shown() -> None:
    bad = {**DPU, "bmc_endpoint": f"https://root:{SECRET}@bmc", "username": rpc.wrap_rpc_secret(""),
           "password": 42, "mode": "Turbo", "reset_timeout_seconds": -1}
    failures = _failures(DpuPostureProvider(), bad)
    assert [p for p, _ in failures] == ["bmc_endpoint", "username", "password", "reset_timeout_seconds",
                                        "mode"]
    assert not any(SECRET in reason or "42" in reason for _, reason in failures)


def test_unknown_inputs_are_not_judged() -> None:
    unknown = dict.fromkeys(["bmc_endpoint", "username", "password", "mode", "verify_tls"], rpc.UNKNOWN)
    assert _failures(DpuPostureProvider(), {**DPU, **unknown}) == []
    res = BiosAttributesProvider().check({}, {**BIOS, "attributes": {"A": rpc.UNKNOWN},
                                              "system_id": rpc.UNKNOWN})
    assert res.failures == [] and res.inputs["attributes"] == {"A": rpc.UNKNOWN}
    # A known input still fails while another is unknown.
    assert _failures(DpuPostureProvider(), {**DPU, "password": rpc.UNKNOWN, "mode": "Turbo"}) == [
        ("mode", "mode: Input should be 'DpuMode' or 'NicMode'")]


def test_bios_check_makes_integral_numbers_ints_and_keeps_secrets_as_given() -> None:
    wrapped = rpc.wrap_rpc_secret(SECRET)
    attributes = {"CeThreshold": 5000.0, "Ratio": 0.5, "On": True}
    res = BiosAttributesProvider().check({}, {**BIOS, "password": wrapped, "attributes": attributes})
    assert res.failures == []
    assert res.inputs["attributes"] == {"CeThreshold": 5000, "Ratio": 0.5, "On": True}
    assert type(res.inputs["attributes"]["CeThreshold"]) is int and res.inputs["attributes"]["On"] is True
    assert res.inputs["password"] is wrapped
