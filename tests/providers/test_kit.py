"""Pure tests of ``dynamic_providers.kit`` (no engine, no network)."""

from __future__ import annotations

import pytest
from pulumi.dynamic import CreateResult, UpdateResult
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pydantic import BaseModel, Field, ValidationError, model_validator

from dynamic_providers import kit, preflight
from dynamic_providers.director.errors import DirectorAuthError, DirectorError


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
