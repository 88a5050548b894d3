"""Helpers shared by the components: type tokens, contract properties, published outputs, child
options, secrets, report rows."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol, get_origin, get_type_hints

import pulumi
import pulumi_kubernetes as k8s
from pydantic import SecretStr, TypeAdapter, ValidationError

from domain import contract


def token(kind: str) -> str:
    """``token("Host")`` -> ``composable:infra:Host`` (:data:`domain.contract.TOKEN_PREFIX`)."""
    return contract.TOKEN_PREFIX + kind


def contract_props(kind: str, props: dict[str, Any], config: object | None = None) -> dict[str, Any]:
    """``props`` of a ``kind`` component, checked against :data:`domain.contract.CONTRACT`: the
    keys, and the type of every value already known (not an ``Output``, nor holding one), in
    pydantic's strict mode (``True`` is no ``int``, ``"1"`` no ``int``).

    With ``config`` (the component's config model), every required key of the contract that
    ``props`` does not give is read from the attribute of the same name of ``config`` (a list or dict
    copied), so a property that is a config field as it stands is named once, in the contract;
    ``props`` gives the rest and the keys whose value is not the config field of that name. Returns
    ``props`` itself without ``config``, else a new dict.

    Raises:
        ValueError: a required property is missing (also from ``config``), one is not in the
            contract, or a known value has another type than the contract's (a programming error:
            the policy pack and the preview report read exactly the contract's keys and types).
    """
    tok = token(kind)
    if config is not None:
        props = {**_config_fields(config, contract.required_keys(tok) - set(props)), **props}
    missing, unexpected = contract.missing_and_unexpected(tok, set(props))
    if missing or unexpected:
        raise ValueError(f"{tok} props: missing {sorted(missing)}, unexpected {sorted(unexpected)}")
    for key, value in props.items():
        if _holds_output(value):
            continue
        try:
            _value_type(tok, key).validate_python(value, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in (key, *first["loc"]))
            raise ValueError(f"{tok} props: {where}: {first['msg']} (got {type(value).__name__})") from exc
    return props


def _config_fields(config: object, keys: Iterable[str]) -> dict[str, Any]:
    """``{key: config.<key>}`` for each key ``config`` has (lists and dicts copied)."""
    out: dict[str, Any] = {}
    for key in keys:
        if hasattr(config, key):
            value = getattr(config, key)
            out[key] = type(value)(value) if isinstance(value, list | dict) else value
    return out


@cache
def _value_type(tok: str, key: str) -> TypeAdapter[Any]:
    """The validator of property ``key`` of ``tok`` (``NotRequired`` stripped)."""
    return TypeAdapter(get_type_hints(contract.CONTRACT[tok])[key])


def _holds_output(value: Any) -> bool:
    """``value`` is or contains a ``pulumi.Output`` (its type is only known after resolution)."""
    if isinstance(value, pulumi.Output):
        return True
    if isinstance(value, list | tuple):
        return any(_holds_output(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_output(v) for v in value.values())
    return False


def publish_outputs(component: pulumi.ComponentResource, values: Mapping[str, Any]) -> None:
    """Set and register the outputs ``component``'s class declares: each attribute the class itself
    annotates as ``pulumi.Output[...]`` becomes ``pulumi.Output.from_input(values[<name>])``, and
    all of them are registered (``register_outputs``) under the same names.

    The annotations are the one list of a component's outputs; ``values`` may hold more keys than
    they name (typically the component's contract ``props`` and the outputs beyond them), so an
    output that mirrors a contract property is the property's value.

    Raises:
        ValueError: ``values`` lacks a declared output (a programming error).
    """
    names = _declared_outputs(type(component))
    missing = [n for n in names if n not in values]
    if missing:
        raise ValueError(f"{type(component).__name__} outputs: missing {missing}")
    outputs = {n: pulumi.Output.from_input(values[n]) for n in names}
    for name, output in outputs.items():
        setattr(component, name, output)
    component.register_outputs(outputs)


@cache
def _declared_outputs(cls: type) -> tuple[str, ...]:
    """Names of the attributes ``cls`` itself annotates as ``pulumi.Output`` (bare or subscripted),
    in declaration order; evaluated once per class (a large estate builds thousands of components)."""
    hints = inspect.get_annotations(cls, eval_str=True)
    return tuple(n for n, h in hints.items() if pulumi.Output in (h, get_origin(h)))


@dataclass(frozen=True)
class Mothership:
    """Where Kubernetes objects go: the explicit provider and the infrastructure namespace.

    Attributes:
        provider: pulumi-kubernetes provider built from the config's kubeconfig.
        namespace: name of the infrastructure namespace (BareMetalHosts, DPF objects, clusters).
        namespace_resource: the Namespace resource, so objects inside it depend on it (None when the
            namespace is managed elsewhere).
    """

    provider: k8s.Provider
    namespace: str
    namespace_resource: pulumi.Resource | None = None


def child_opts(
    parent: pulumi.Resource,
    *,
    provider: pulumi.ProviderResource | None = None,
    depends_on: Sequence[pulumi.Resource | None] = (),
    **kwargs: object,
) -> pulumi.ResourceOptions:
    """Options for a child resource: ``parent``, optional explicit provider and dependencies."""
    deps = [d for d in depends_on if d is not None]
    return pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=deps or None, **kwargs)  # type: ignore[arg-type]


def secret(value: SecretStr | str) -> pulumi.Output[str]:
    """A config secret as a Pulumi secret output (never a plain string in state or logs)."""
    raw = value.get_secret_value() if isinstance(value, SecretStr) else value
    return pulumi.Output.secret(raw)


class Login(Protocol):
    """A config block with credentials (``DirectorConfig``, ``BmcConfig``)."""

    @property
    def username(self) -> SecretStr | str: ...

    @property
    def password(self) -> SecretStr | str: ...


def secret_login(config: Login) -> dict[str, pulumi.Output[str]]:
    """``{"username": ..., "password": ...}`` of ``config``, each a Pulumi secret (:func:`secret`):
    the credential keyword arguments of a provider resource (``DpuPosture(..., **secret_login(bmc))``)."""
    return {"username": secret(config.username), "password": secret(config.password)}


def output_row(
    resource: object, fields: Sequence[str], extra: Mapping[str, Any] | None = None
) -> pulumi.Output[dict[str, Any]]:
    """One report row of ``resource``: ``{field: resource.<field>}`` for each name in ``fields``
    (attributes that are Outputs or plain values), then the ``extra`` entries, resolved together
    as one Output.

    Raises:
        AttributeError: ``resource`` has no attribute named by one of ``fields``.
    """
    return pulumi.Output.all(**{f: getattr(resource, f) for f in fields}, **(extra or {}))


def output_rows(resources: Iterable[object], fields: Sequence[str]) -> pulumi.Output[list[dict[str, Any]]]:
    """:func:`output_row` of each resource, in order, as one Output (``[]`` for none)."""
    rows = [output_row(r, fields) for r in resources]
    return pulumi.Output.all(*rows) if rows else pulumi.Output.from_input([])
