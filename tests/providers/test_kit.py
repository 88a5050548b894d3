"""Pure tests of ``dynamic_providers.kit`` (no engine, no network)."""

from __future__ import annotations

from typing import Any, ClassVar

import pulumi
import pytest
from pulumi.dynamic import CreateResult, ResourceProvider, UpdateResult
from pulumi.output import Unknown
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pydantic import BaseModel, Field, ValidationError, model_validator

from dynamic_providers import kit, preflight
from dynamic_providers.director.destroy_guard import ComposerGpuGuard, ComposerGpuGuardProvider
from dynamic_providers.director.endpoint import DirectorEndpoint
from dynamic_providers.director.errors import DirectorAuthError, DirectorError
from dynamic_providers.director.provider import GpuComposition
from dynamic_providers.redfish.provider import BiosAttributes, DpuPosture
from dynamic_providers.ssh.provider import DpuMlxconfig, HostKernelPrep


@pytest.mark.parametrize("value", [
    rpc.UNKNOWN,
    Unknown(),
    [1, "a", rpc.UNKNOWN],
    ("x", [{"deep": [rpc.UNKNOWN]}]),
    {"a": {"b": {"c": Unknown()}}},
    rpc.wrap_rpc_secret(rpc.UNKNOWN),
    {"conn": rpc.wrap_rpc_secret({"key": rpc.UNKNOWN})},
])
def test_unknown_is_found_at_any_depth(value: object) -> None:
    assert kit.is_unknown(value)


@pytest.mark.parametrize("value", [
    None, "", "known", 0, 1.5, True, [], {}, ["a", {"b": [1, 2]}],
    rpc.wrap_rpc_secret("password"), {"a": rpc.wrap_rpc_secret(["x"])},
])
def test_known_values_are_not_unknown(value: object) -> None:
    assert not kit.is_unknown(value)


def test_plain_unwraps_secrets_at_any_depth() -> None:
    value = rpc.wrap_rpc_secret([rpc.wrap_rpc_secret("a"), "b", (rpc.wrap_rpc_secret("c"),)])
    assert kit.plain(value) == ["a", "b", ["c"]]
    assert kit.plain({"k": 1}) == {"k": 1}


class _Target(BaseModel):
    host: str = Field(min_length=1)
    port: int = Field(ge=1, le=65535)


class _Spec(BaseModel):
    kernel_args: list[str] = Field(default_factory=list)
    requested_device_names: list[str] = Field(default_factory=list)
    count: int | None = None
    target: _Target | None = None

    @model_validator(mode="after")
    def _one(self) -> _Spec:
        if self.count is None and not self.requested_device_names:
            raise ValueError("give count or device_names")
        return self


def _errors(model: type[BaseModel], data: object) -> ValidationError:
    with pytest.raises(ValidationError) as err:
        model.model_validate(data)
    return err.value


def test_pydantic_paths_become_failures_on_their_top_level_property() -> None:
    exc = _errors(_Spec, {"kernel_args": ["ok", 3], "count": 1, "target": {"host": "", "port": 0}})
    failures = kit.validation_failures(exc)
    assert [f.property for f in failures] == ["kernel_args", "target", "target"]
    assert failures[0].reason.startswith("kernel_args.1: ")
    assert failures[1].reason.startswith("target.host: ")
    assert failures[2].reason.startswith("target.port: ")


def test_prefix_rename_whole_and_skip() -> None:
    exc = _errors(_Target, {"host": "", "port": 70000})
    prefixed = kit.validation_failures(exc, prefix="connection")
    assert [(f.property, f.reason.split(":")[0]) for f in prefixed] == \
        [("connection", "connection.host"), ("connection", "connection.port")]
    assert [f.property for f in kit.validation_failures(exc, skip=["host"])] == ["port"]
    exc = _errors(_Spec, {"requested_device_names": [1]})
    (named,) = kit.validation_failures(exc, rename={"requested_device_names": "device_names"})
    assert (named.property, named.reason.split(":")[0]) == ("requested_device_names", "device_names.0")
    (whole,) = kit.validation_failures(_errors(_Spec, {}), whole="inputs")
    assert whole.property == "inputs" and whole.reason == "inputs: Value error, give count or device_names"


class _Inputs(BaseModel):
    host: str = Field(min_length=1)
    port: int = Field(default=22, ge=1, le=65535)
    password: str = Field(min_length=1)


def test_check_known_validates_known_inputs_and_leaves_unknown_ones_unjudged() -> None:
    ok = kit.check_known(_Inputs, {"host": "h", "password": rpc.wrap_rpc_secret("pw"), "port": None,
                                   "__provider": "x"})
    assert ok.spec == _Inputs(host="h", port=22, password="pw") and ok.failures == [] and not ok.unknown
    # An unknown required input is not "missing"; a known bad one still fails next to it.
    bad = kit.check_known(_Inputs, {"host": "", "port": 0, "password": rpc.wrap_rpc_secret(rpc.UNKNOWN)})
    assert bad.spec is None and bad.unknown == {"password"}
    assert [(f.property, f.reason) for f in bad.failures] == [
        ("host", "host: String should have at least 1 character"),
        ("port", "port: Input should be greater than or equal to 1")]
    # Only unknowns wrong: no failure, and the model is built with defaults where inputs are unknown.
    pending = kit.check_known(_Inputs, {"host": "h", "port": Unknown(), "password": "pw"})
    assert pending.failures == [] and pending.unknown == {"port"} and pending.spec is not None


def test_failures_never_carry_the_input_value() -> None:
    exc = _errors(_Target, {"host": "", "port": "s3cr3t-value"})
    assert all("s3cr3t" not in f.reason for f in kit.validation_failures(exc))


def test_explainer_takes_the_first_matching_rule_and_none_for_other_errors() -> None:
    explain = kit.explainer(
        (DirectorAuthError, lambda exc: kit.refused_credentials(str(exc), "Director account")),
        (DirectorError, lambda exc: f"probe failed: {exc}"),
    )
    auth = explain(DirectorAuthError("401"))
    assert auth is not None and auth.startswith("credentials refused (") and "Director account" in auth
    assert explain(DirectorError("boom")) == "probe failed: boom"
    assert explain(ValueError("bug")) is None
    assert preflight.PREFLIGHT_ENV in kit.unreachable("no answer", "timeout", "the endpoint")


class _Counter(kit.ConvergeProvider):
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def converge(self, props):
        self.calls.append(dict(props))
        return {**props, "applied": True}

    def new_id(self, props, outs):
        return kit.new_id(props["name"])


def test_converge_provider_creates_and_updates_through_converge() -> None:
    provider = _Counter()
    created = provider.create({"name": "host"})
    assert isinstance(created, CreateResult) and created.id.startswith("host-") and len(created.id) == 37
    assert created.outs == {"name": "host", "applied": True}
    updated = provider.update(created.id, created.outs, {"name": "host", "x": 1})
    assert isinstance(updated, UpdateResult) and updated.outs == {"name": "host", "x": 1, "applied": True}
    assert provider.calls == [{"name": "host"}, {"name": "host", "x": 1}]


class _Provider(ResourceProvider):
    """A provider the mock monitor never calls (registration only)."""


class _Base(kit.DynamicResource, module="kit", name="Base"):
    secret_inputs = ("password",)
    note: ClassVar[str] = "not an output"

    size: pulumi.Output[int]
    label: pulumi.Output[str]


class _Toy(_Base, module="kit", name="Toy"):
    extra: pulumi.Output[list[str]]
    size: pulumi.Output[int]  # declared again: still one output


def test_outputs_are_the_output_annotations_bases_first() -> None:
    assert kit.output_names(_Toy) == ["size", "label", "extra"]
    assert kit.output_names(_Base) == ["size", "label"]


class _Monitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.requests: list[Any] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        if request.type != "pulumi:pulumi:Stack":
            self.requests.append(request)
        return super().RegisterResource(request)


class _Echo(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        return f"{args.name}-id", {**args.inputs, "label": "from-provider"}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list | None]:
        return {}, None


def test_dynamic_resource_sends_secret_inputs_as_secrets_and_every_output() -> None:
    monitor = _Monitor(_Echo())
    pulumi.runtime.set_mocks(_Echo(), project="kit", stack="test", preview=False, monitor=monitor)

    @pulumi.runtime.test
    def register() -> pulumi.Output[Any]:
        toy = _Toy(_Provider(), "toy", {"password": "pw", "size": 3},
                   pulumi.ResourceOptions(additional_secret_outputs=["label"]))
        # Every declared output is an attribute (the engine fills it), not only those sent.
        return pulumi.Output.all(toy.size, toy.label, toy.extra).apply(
            lambda got: assert_equal(got, [3, "from-provider", None]))

    register()
    (request,) = monitor.requests
    assert request.type == "pulumi-python:dynamic/kit:Toy"
    inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
    assert rpc.is_rpc_secret(inputs["password"]) and rpc.unwrap_rpc_secret(inputs["password"]) == "pw"
    assert set(request.additionalSecretOutputs) == {"label", "password"}


def assert_equal(got: object, expected: object) -> None:
    assert got == expected


@pytest.mark.parametrize(("resource", "secrets", "outputs"), [
    (GpuComposition, {"username", "password"},
     {"device_names", "models", "fabric_ids", "switch_ids", "machine_id", "group_id", "group_name",
      "pool_moved_devices"}),
    (DpuPosture, {"username", "password"},
     {"mode", "host_privilege_level", "host_rshim", "reset_pending", "pending_attributes", "awaiting_reset",
      "drift", "privilege_attribute", "privilege_interface", "next_host_privilege", "firmware_version",
      "desired"}),
    (BiosAttributes, {"username", "password"},
     {"attributes", "desired_attributes", "reset_pending", "pending_attributes", "awaiting_reset", "drift",
      "bios_version", "firmware_version"}),
    (DirectorEndpoint, {"username", "password"}, {"endpoint"}),
    (ComposerGpuGuard, {"username", "password"}, {"owner_tag", "group"}),
    (HostKernelPrep, {"connection"},
     {"host_key_fingerprint", "changed", "configured_kernel_args", "missing_active_kernel_args",
      "loaded_blacklisted_modules", "reboot_pending", "rebooted"}),
    (DpuMlxconfig, {"connection"},
     {"host_key_fingerprint", "changed", "next_boot", "current", "pending_parameters", "reset_pending",
      "reset_performed"}),
])
def test_each_resource_keeps_its_credentials_secret_and_declares_its_outputs(
        resource: type[kit.DynamicResource], secrets: set[str], outputs: set[str]) -> None:
    assert set(resource.secret_inputs) == secrets
    assert set(kit.output_names(resource)) == outputs


def test_record_provider_records_inputs_and_updates_on_a_changed_or_unknown_input() -> None:
    class Recorder(kit.RecordProvider):
        inputs = ("endpoint", "password")

        def new_id(self, props: Any, outs: Any) -> str:
            return f"id-{props['endpoint']}"

    rec = Recorder()
    props = {"endpoint": "http://d:8080", "password": rpc.wrap_rpc_secret("s3cret"), "other": 1}
    created = rec.create(props)
    assert (created.id, created.outs) == ("id-http://d:8080", props)
    assert rec.update("id", props, {**props, "other": 2}).outs == {**props, "other": 2}
    # a secret compared by its value: the same password, plain or wrapped, is no change
    assert not rec.diff("id", props, {**props, "password": "s3cret", "other": 2}).changes
    assert rec.diff("id", props, {**props, "password": rpc.wrap_rpc_secret("other")}).changes
    assert rec.diff("id", props, {**props, "endpoint": rpc.UNKNOWN}).changes


def test_the_guard_checks_its_inputs_and_leaves_unknowns_unjudged() -> None:
    guard = ComposerGpuGuardProvider()
    good = {"endpoint": "http://d:8080", "username": "u", "password": "p", "verify_tls": True,
            "owner_tag": "gpu-composer", "group": "gpu-pool"}
    assert guard.check({}, good).failures == []
    bad = guard.check({}, {**good, "owner_tag": "", "endpoint": "d:8080"}).failures
    assert sorted(f.property for f in bad) == ["endpoint", "owner_tag"]
    assert guard.check({}, {**good, "owner_tag": rpc.UNKNOWN}).failures == []
