"""The adapter between pulumi-policy 1.21 and the rules, fed with pulumi-policy's own objects
(built by its deserializer from engine-shaped property maps), without the CLI."""

from __future__ import annotations

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY, deserialize_properties
from pulumi_policy.policy import PolicyCustomTimeouts
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policies.adapter import RECORDER_POLICY, InputRecorder, build_policies, plain_props
from policies.rules import RULES
from policies.rules.model import UNKNOWN

URN = "urn:pulumi:test::p::composable:infra:TenantNetwork::net-b"

# What the engine sends for a component's inputs (MarshalProperties with KeepUnknowns and
# KeepSecrets, pkg/resource/plugin/analyzer_plugin.go): numbers as floats, secrets as signed
# objects, unknowns as sentinel strings.
ENGINE_PROPS = {
    "tenant": "tenant-b",
    "name": "net-b",
    "cidr": "10.20.0.0/24",
    "vxlan_id": 5001.0,
    "ratio": 0.5,
    "kernel_args": ["intel_iommu=on", UNKNOWN_STRING_VALUE],
    "hosts": UNKNOWN_ARRAY_VALUE,
    "bmc_password": {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": "pw"},
    "nested": {
        "a": {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": {"b": 1.0}},
        "c": [{"d": UNKNOWN_STRING_VALUE}],
    },
}


def remediation_props() -> object:
    """``args.props`` as pulumi-policy builds it for Remediate (secrets kept)."""
    return unknown_checking_proxy(deserialize_properties(ENGINE_PROPS, True))


def validation_props() -> object:
    """``args.props`` as pulumi-policy builds it for Analyze/AnalyzeStack (secrets dropped)."""
    return unknown_checking_proxy(deserialize_properties(ENGINE_PROPS))


_OPTS = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def _args(props: object, urn: str = URN) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        urn.rsplit("::", 2)[1].split("$")[-1], props, urn, urn.rsplit("::", 1)[1], _OPTS, None
    )


EXPECTED = {
    "tenant": "tenant-b",
    "name": "net-b",
    "cidr": "10.20.0.0/24",
    "vxlan_id": 5001,
    "ratio": 0.5,
    "kernel_args": ["intel_iommu=on", UNKNOWN],
    "hosts": UNKNOWN,
    "bmc_password": "pw",
    "nested": {"a": {"b": 1}, "c": [{"d": UNKNOWN}]},
}


def test_remediation_props_keep_secret_paths_and_unknowns():
    props, secrets = plain_props(remediation_props(), observe_secrets=True)
    assert props == EXPECTED
    assert isinstance(props["vxlan_id"], int)
    assert secrets == {("bmc_password",), ("nested", "a")}


def test_validation_props_have_unknowns_but_no_secretness():
    props, secrets = plain_props(validation_props(), observe_secrets=False)
    assert props == EXPECTED
    assert secrets is None


def test_library_proxy_would_raise_on_unknowns_which_is_why_the_adapter_unwraps():
    from pulumi_policy.proxy import UnknownValueError

    with pytest.raises(UnknownValueError):
        validation_props()["hosts"]


def test_recorder_prefers_the_remediation_record():
    recorder = InputRecorder()
    recorder.remediate(_args(remediation_props()))
    recorder.validate(_args(validation_props()), lambda message, urn=None: None)
    [record] = recorder.records_for([_resource(URN, {})])
    assert record.secret_paths == {("bmc_password",), ("nested", "a")}
    assert (
        record.inputs_recorded and record.type == "composable:infra:TenantNetwork" and record.name == "net-b"
    )


def test_recorder_without_remediation_records_unobservable_secrets():
    recorder = InputRecorder()
    recorder.validate(_args(validation_props()), lambda message, urn=None: None)
    [record] = recorder.records_for([_resource(URN, {})])
    assert record.secret_paths is None and record.props["hosts"] is UNKNOWN


def _resource(urn: str, outputs: dict) -> PolicyResource:
    type_ = urn.rsplit("::", 2)[1].split("$")[-1]
    return PolicyResource(
        type_, unknown_checking_proxy(outputs), urn, urn.rsplit("::", 1)[1], _OPTS, None, None, [], {}
    )


def test_unrecorded_resources_fall_back_to_outputs_and_say_so():
    recorder = InputRecorder()
    recorder.remediate(_args(remediation_props()))
    other = "urn:pulumi:test::p::composable:infra:Tenant::t"
    records = recorder.records_for([_resource(other, {"gpu_quota": 2.0}), _resource(URN, {})])
    assert [r.urn for r in records] == sorted([URN, other])
    fallback = next(r for r in records if r.urn == other)
    assert (
        fallback.props == {"gpu_quota": 2} and not fallback.inputs_recorded and fallback.secret_paths is None
    )


def _policies() -> dict[str, object]:
    return {p.name: p for p in build_policies()}


def test_policy_set_levels_and_config_schemas():
    policies = _policies()
    assert list(policies) == [RECORDER_POLICY, *(r.name for r in RULES)]
    recorder = policies[RECORDER_POLICY]
    assert isinstance(recorder, ResourceValidationPolicy)
    assert recorder.enforcement_level is EnforcementLevel.REMEDIATE
    assert recorder.has_remediation() and recorder.has_validation()
    for rule in RULES:
        policy = policies[rule.name]
        assert isinstance(policy, StackValidationPolicy)
        expected = (
            EnforcementLevel.ADVISORY if rule.name == "bmc-tls-verification" else EnforcementLevel.MANDATORY
        )
        assert policy.enforcement_level is expected
    tls = policies["bmc-tls-verification"].config_schema
    assert set(tls.properties) == {"lab_environments", "stack_environment"}
    assert tls.properties["lab_environments"]["default"] == ["lab"]


def _run_stack(
    policies: dict,
    name: str,
    resources: list[PolicyResource],
    config: dict | None = None,
) -> list[tuple[str, str | None]]:
    reported: list[tuple[str, str | None]] = []
    args = StackValidationArgs(resources, config)
    policies[name].validate(args, lambda message, urn=None: reported.append((message, urn)))
    return reported


def test_stack_policy_reports_against_the_offending_urn():
    policies = _policies()
    recorder = policies[RECORDER_POLICY]
    other_urn = "urn:pulumi:test::p::composable:infra:TenantNetwork::net-a"
    other = dict(ENGINE_PROPS, tenant="tenant-a", name="net-a", cidr="10.10.0.0/24", bmc_password="x")
    recorder.remediate(_args(remediation_props()))
    recorder.remediate(_args(unknown_checking_proxy(deserialize_properties(other, True)), other_urn))
    reported = _run_stack(
        policies, "tenant-network-uniqueness", [_resource(URN, {}), _resource(other_urn, {})]
    )
    assert reported == [
        (
            "TenantNetwork 'net-b': VXLAN ID 5001 is also used by TenantNetwork 'net-a' "
            "(tenant 'tenant-b' vs tenant 'tenant-a': cross-tenant). "
            "Fix: give TenantNetwork 'net-b' a VXLAN ID no other tenant network uses.",
            URN,
        )
    ]
    [(message, urn)] = _run_stack(
        policies, "credentials-are-secrets", [_resource(URN, {}), _resource(other_urn, {})]
    )
    assert urn == other_urn and "bmc_password" in message


def test_stack_policy_without_recorded_inputs_fails_loudly():
    policies = _policies()
    [(message, urn)] = _run_stack(policies, "gpu-single-host", [_resource(URN, {})])
    assert urn is None and "no resource inputs were recorded" in message and RECORDER_POLICY in message


def test_stack_policy_reports_invalid_config():
    policies = _policies()
    policies[RECORDER_POLICY].remediate(_args(remediation_props()))
    [(message, urn)] = _run_stack(
        policies, "bmc-tls-verification", [_resource(URN, {})], {"lab_envs": ["lab"]}
    )
    assert urn is None and "policy config of 'bmc-tls-verification' is invalid" in message
