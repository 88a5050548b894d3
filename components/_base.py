"""Helpers shared by the components: type tokens, child options, secrets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pydantic import SecretStr

from domain import contract


def token(kind: str) -> str:
    """``token("Host")`` -> ``composable:infra:Host`` (:data:`domain.contract.TOKEN_PREFIX`)."""
    return contract.TOKEN_PREFIX + kind


def contract_props(kind: str, props: dict[str, Any]) -> dict[str, Any]:
    """``props`` of a ``kind`` component, checked against :data:`domain.contract.CONTRACT`.

    Raises:
        ValueError: a required property is missing or one is not in the contract (a programming
            error: the policy pack and the preview report read exactly the contract's keys).
    """
    missing, unexpected = contract.missing_and_unexpected(token(kind), set(props))
    if missing or unexpected:
        raise ValueError(f"{token(kind)} props: missing {sorted(missing)}, unexpected {sorted(unexpected)}")
    return props


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
