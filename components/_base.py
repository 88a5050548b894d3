"""Helpers shared by the components: type tokens, child options, secrets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol, get_type_hints

import pulumi
import pulumi_kubernetes as k8s
from pydantic import SecretStr, TypeAdapter, ValidationError

from domain import contract


def token(kind: str) -> str:
    """``token("Host")`` -> ``composable:infra:Host`` (:data:`domain.contract.TOKEN_PREFIX`)."""
    return contract.TOKEN_PREFIX + kind


def contract_props(kind: str, props: dict[str, Any]) -> dict[str, Any]:
    """``props`` of a ``kind`` component, checked against :data:`domain.contract.CONTRACT`: the
    keys, and the type of every value already known (not an ``Output``, nor holding one), in
    pydantic's strict mode (``True`` is no ``int``, ``"1"`` no ``int``).

    Raises:
        ValueError: a required property is missing, one is not in the contract, or a known value
            has another type than the contract's (a programming error: the policy pack and the
            preview report read exactly the contract's keys and types).
    """
    tok = token(kind)
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
