"""Adapter from pulumi-policy's objects to the plain records the rules read.

Why the pack is shaped the way it is (pulumi-policy 1.21.0, engine 3.260.0):

- The contract puts the domain facts in each ComponentResource's *inputs* (its ``props``).
  The engine passes a resource's inputs to ``Analyze``/``Remediate`` (one resource at a time),
  but passes *outputs* to ``AnalyzeStack`` (``step_generator.go``: "AnalyzeStack is called on the
  final outputs of each resource"); a component's outputs are only what it registers. The
  cross-resource rules therefore run as stack policies over inputs recorded per URN by the
  ``record-resource-inputs`` policy while the engine registers each resource (remediations and
  analyses of every resource happen before ``AnalyzeStack``, in the same plugin process).
- pulumi-policy drops the engine's secret markings before ``validate`` sees the properties
  (pulumi/pulumi-policy#241); it keeps them only for remediations, where secret values arrive
  wrapped in :class:`pulumi_policy.Secret`. ``record-resource-inputs`` is thus a remediation
  (enforcement level ``remediate``) that records the inputs with their secret paths and
  returns ``None`` (changes nothing). At any other level it records through ``validate``
  without secret paths, and ``credentials-are-secrets`` then fails as unprovable.
- pulumi-policy's property proxies raise ``UnknownValueError`` on unknown values, which the
  library reports as an *advisory* "can't run policy during preview" - a mandatory rule would
  silently pass. The adapter reads the proxies' underlying containers (``proxy["__target"]``,
  the library's own unwrapping protocol in ``deserialize.serialize_properties``) and turns
  unknown sentinels into :data:`policies.rules.model.UNKNOWN`, which each rule reports as a
  violation at its own level ("cannot be proven during preview").
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Secret,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
)

from .rules import RULES, RuleConfigError, run_rule
from .rules.model import UNKNOWN, Path, ResourceRecord, Rule

PACK_NAME = "composable-gpu-tenant-isolation"
RECORDER_POLICY = "record-resource-inputs"
_SENTINELS = frozenset({
    UNKNOWN_ARCHIVE_VALUE, UNKNOWN_ARRAY_VALUE, UNKNOWN_ASSET_VALUE, UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE, UNKNOWN_OBJECT_VALUE, UNKNOWN_STRING_VALUE,
})
_LEVELS = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY}


def _unwrap(obj: Any) -> Any:
    """The plain ``dict``/``list`` behind one of pulumi-policy's proxies (or ``obj`` itself)."""
    if isinstance(obj, (dict, list)):
        return obj
    try:
        return obj["__target"]
    except (KeyError, IndexError, TypeError):
        return dict(obj) if isinstance(obj, Mapping) else list(obj)


def _plain(value: Any, path: Path, secrets: set[Path]) -> Any:
    if isinstance(value, Secret):
        secrets.add(path)
        return _plain(value.value, path, secrets)
    if isinstance(value, str):
        return UNKNOWN if value in _SENTINELS else value
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        raw = _unwrap(value)
        return {k: _plain(raw[k], (*path, k), secrets) for k in raw}
    if isinstance(value, Sequence):
        raw = _unwrap(value)
        return [_plain(e, (*path, i), secrets) for i, e in enumerate(raw)]
    return repr(value)  # assets and archives: no rule reads them


def plain_props(
    props: Mapping[str, Any], *, observe_secrets: bool
) -> tuple[dict[str, Any], frozenset[Path] | None]:
    """Convert pulumi-policy properties to plain data.

    Args:
        props: ``args.props`` of a validation, remediation or stack resource (proxied).
        observe_secrets: ``True`` for a remediation's props, where secrets are still wrapped in
            :class:`pulumi_policy.Secret`; ``False`` elsewhere (markings already dropped).

    Returns:
        ``(props, secret_paths)``: plain data with :data:`UNKNOWN` for unknown values, and the
        secret paths, or ``None`` when secretness was not observable.
    """
    secrets: set[Path] = set()
    raw = _unwrap(props)
    plain = {k: _plain(raw[k], (k,), secrets) for k in raw}
    return plain, (frozenset(secrets) if observe_secrets else None)


class InputRecorder:
    """Records each resource's inputs by URN while the engine registers resources.

    Thread-safe: pulumi-policy serves the engine from a thread pool.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, ResourceRecord] = {}

    def remediate(self, args: ResourceValidationArgs) -> None:
        """Remediation hook: record inputs with secret paths; return ``None`` (no change)."""
        props, secrets = plain_props(args.props, observe_secrets=True)
        record = ResourceRecord(args.resource_type, args.name, args.urn, props, secrets)
        with self._lock:
            self._records[args.urn] = record

    def validate(self, args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        """Validation hook: record inputs (no secret paths) unless the remediation already did."""
        with self._lock:
            if args.urn in self._records:
                return
        props, secrets = plain_props(args.props, observe_secrets=False)
        record = ResourceRecord(args.resource_type, args.name, args.urn, props, secrets)
        with self._lock:
            self._records.setdefault(args.urn, record)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def records_for(self, resources: Iterable[PolicyResource]) -> list[ResourceRecord]:
        """Records for the stack's resources, sorted by URN: recorded inputs, else the outputs the
        engine sent."""
        out = []
        with self._lock:
            recorded = dict(self._records)
        for res in resources:
            rec = recorded.get(res.urn)
            if rec is None:
                props, _ = plain_props(res.props, observe_secrets=False)
                rec = ResourceRecord(res.resource_type, res.name, res.urn, props, None, inputs_recorded=False)
            out.append(rec)
        return sorted(out, key=lambda r: r.urn)  # the engine's order varies; messages should not


def config_schema(rule: Rule) -> PolicyConfigSchema | None:
    """The rule's pydantic config model as pulumi-policy's JSON-schema config (or ``None``)."""
    if rule.config_model is None:
        return None
    schema = rule.config_model.model_json_schema()
    return PolicyConfigSchema(properties=schema.get("properties", {}),
                              required=schema.get("required") or None)


def stack_policy(rule: Rule, recorder: InputRecorder) -> StackValidationPolicy:
    """Wrap a pure rule as a stack policy reporting each violation against its resource's URN."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        records = recorder.records_for(args.resources)
        if len(recorder) == 0 and any(r.type != "pulumi:pulumi:Stack" for r in records):
            report_violation(
                f"no resource inputs were recorded, so '{rule.name}' cannot be proven. Fix: keep the "
                f"pack's '{RECORDER_POLICY}' policy enabled at enforcement level 'remediate'.", None)
            return
        try:
            violations = run_rule(rule, records, args.get_config())
        except RuleConfigError as exc:
            report_violation(f"{exc}. Fix: correct the --policy-pack-config entry of '{rule.name}'.", None)
            return
        for violation in violations:
            report_violation(violation.message, violation.urn)

    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=_LEVELS[rule.enforcement],
        config_schema=config_schema(rule),
        severity=Severity.HIGH if rule.enforcement == "mandatory" else Severity.MEDIUM,
    )


def build_policies(rules: Sequence[Rule] = RULES) -> list[Policy]:
    """The pack's policies: the input recorder first, then one stack policy per rule."""
    recorder = InputRecorder()
    recorder_policy = ResourceValidationPolicy(
        name=RECORDER_POLICY,
        description="Records each resource's inputs and secret markings for the stack rules; changes and "
        "reports nothing. Keep at 'remediate'.",
        validate=recorder.validate,
        remediate=recorder.remediate,
        enforcement_level=EnforcementLevel.REMEDIATE,
    )
    return [recorder_policy, *(stack_policy(rule, recorder) for rule in rules)]
