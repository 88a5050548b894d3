"""Tenant-isolation rules: pure functions over plain resource records.

Each rule is ``check(resources, config) -> list[Violation]``, declared with
:func:`.model.rule` at the function that checks it (see :mod:`.model` for the record shape and the
handling of preview unknowns). :data:`RULES` lists them in the order the pack
registers them; :func:`evaluate` runs them all, which is what the tests and property tests use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from pydantic import BaseModel, ValidationError

from . import gpus, hosts, networks, security
from .model import UNKNOWN, ResourceRecord, Rule, Violation

RULES: tuple[Rule, ...] = (
    networks.tenant_network_uniqueness,
    networks.tenant_cluster_own_networks,
    networks.tenant_cluster_hosted_control_plane,
    hosts.tenant_host_dpu_zero_trust,
    hosts.gpu_host_iommu,
    hosts.host_single_cluster,
    gpus.gpu_single_host,
    gpus.static_gpus_outside_composer_pool,
    gpus.static_gpus_in_tenant_pool,
    gpus.gpu_sharing_tenant_isolation,
    gpus.tenant_gpu_quota,
    security.credentials_are_secrets,
    security.bmc_tls_verification,
    security.composer_not_cluster_admin,
)
RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}


class RuleConfigError(ValueError):
    """A rule's policy config does not match its schema; the message names the rule and key."""


def parse_config(rule: Rule, raw: Mapping[str, Any] | None) -> Any:
    """The rule's config model filled from ``raw`` (the policy's ``--policy-pack-config``
    entry, ``enforcementLevel`` removed), or ``None`` for rules without config.

    Raises:
        RuleConfigError: ``raw`` has unknown keys or values of the wrong type.
    """
    if rule.config_model is None:
        return None
    data = {k: v for k, v in (raw or {}).items() if k != "enforcementLevel"}
    try:
        return cast("type[BaseModel]", rule.config_model).model_validate(data)
    except ValidationError as exc:
        raise RuleConfigError(f"policy config of '{rule.name}' is invalid: {exc}") from exc


def run_rule(rule: Rule, resources: Sequence[ResourceRecord], raw_config: Mapping[str, Any] | None = None,
             ) -> list[Violation]:
    """Run one rule with its config parsed from ``raw_config``.

    Raises:
        RuleConfigError: the config is invalid.
    """
    return rule.check(resources, parse_config(rule, raw_config))


def evaluate(
    resources: Sequence[ResourceRecord],
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    rules: Sequence[Rule] = RULES,
) -> dict[str, list[Violation]]:
    """Run ``rules`` over ``resources``; returns rule name -> violations (empty list = passed).

    ``configs`` maps rule name -> raw policy config, as in a ``--policy-pack-config`` file.
    """
    configs = configs or {}
    return {rule.name: run_rule(rule, resources, configs.get(rule.name)) for rule in rules}


__all__ = [
    "RULES",
    "RULES_BY_NAME",
    "UNKNOWN",
    "ResourceRecord",
    "Rule",
    "RuleConfigError",
    "Violation",
    "evaluate",
    "parse_config",
    "run_rule",
]
