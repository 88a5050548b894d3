"""Typed models of a ``pulumi preview``'s engine events, and their parser (pure, no I/O).

Source of the shapes: the engine events that ``pulumi preview --json`` prints one per line
when ``PULUMI_ENABLE_STREAMING_JSON_PREVIEW=1`` is set (pulumi v3.260; the same
``apitype.EngineEvent`` JSON that the Automation API's event log carries). The non-streaming
``--json`` document has no policy results, which is why the streaming form is the input here.
Events used:

- ``resourcePreEvent.metadata`` — one per planned step: ``op`` (``same``, ``create``,
  ``update``, ``replace``, ``delete``, ``create-replacement``, ``delete-replaced``, ``read``,
  ``import``, ...), ``urn``, ``type``, ``old``/``new`` resource states (``type``, ``urn``,
  ``custom``, ``parent``, ``inputs``, ``outputs``), ``keys`` (properties forcing a replace),
  ``diffs`` (changed properties, when the provider says), ``detailedDiff``.
- ``policyEvent`` — one per violation: ``resourceUrn``, ``message`` (the policy description,
  a newline, then the violation text), ``policyName``, ``policyPackName``,
  ``policyPackVersion``, ``enforcementLevel`` (``advisory`` | ``mandatory`` | ``remediate``).
- ``policyAnalyzeSummaryEvent`` (per resource and pack) and ``policyAnalyzeStackSummaryEvent``
  (stack policies, per pack): ``passed``/``failed`` policy names.
- ``diagnosticEvent`` — ``severity`` (``debug`` events are dropped), ``message``, ``urn``.
- ``summaryEvent`` — ``resourceChanges`` (op → count), ``PolicyPacks``, ``result``.

Secret values arrive already masked (``{"4dabf18193072939515e22adb298388d": ..., "ciphertext":
"[secret]"}``) and values unknown until apply as the sentinel :data:`UNKNOWN`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: The engine's placeholder for an output not known until apply (pulumi ``plugin.UnknownStringValue``).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
#: Key marking a secret value in serialized property maps (pulumi ``sig.Secret``).
SECRET_SIG = "4dabf18193072939515e22adb298388d"
#: Input that every Python dynamic resource carries (the pickled provider); never a real change.
DYNAMIC_PROVIDER_KEY = "__provider"

#: Step ops that are bookkeeping halves of a ``replace`` step (shown as one ``replace``).
REPLACEMENT_HALVES = frozenset({"create-replacement", "delete-replaced", "discard-replaced",
                                "read-replacement", "import-replacement"})


class PreviewParseError(ValueError):
    """A line of the event stream is not JSON, or an event lacks a required field."""


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")


class ResourceState(_Model):
    """A resource as the engine sees it before (``old``) or after (``new``) a step."""

    type: str
    urn: str
    custom: bool = False
    parent: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)


class Step(_Model):
    """One planned step (``resourcePreEvent.metadata``).

    ``keys``: properties whose change forces a replacement; ``diffs``: changed properties as
    reported by the provider (may be absent, e.g. for components and dynamic resources);
    ``detailed_diff``: property path → ``{"kind": "add"|"update"|"delete"|...-replace}``.
    """

    op: str
    urn: str
    type: str
    old: ResourceState | None = None
    new: ResourceState | None = None
    keys: list[str] | None = None
    diffs: list[str] | None = None
    detailed_diff: dict[str, Any] | None = Field(default=None, alias="detailedDiff")

    @property
    def name(self) -> str:
        """The resource's logical name (the URN's last ``::`` segment)."""
        return self.urn.rsplit("::", 1)[-1]

    @property
    def parent(self) -> str | None:
        """URN of the parent resource (from the new state, else the old one)."""
        state = self.new or self.old
        return state.parent if state else None

    @property
    def changed_keys(self) -> list[str]:
        """Top-level properties that differ between old and new inputs, plus any the provider
        reported (``diffs``, ``keys``, ``detailedDiff`` paths), sorted; ``__provider`` excluded."""
        paths: set[str] = set(self.diffs or ()) | set(self.keys or ()) | set(self.detailed_diff or {})
        if self.old is not None and self.new is not None:
            old, new = self.old.inputs, self.new.inputs
            tops = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
            # a top-level key already covered by a finer path (``spec`` by ``spec.online``) is dropped
            roots = {_root(p) for p in paths if _root(p) != p}
            paths |= tops - roots
        return sorted(k for k in paths if _root(k) != DYNAMIC_PROVIDER_KEY)


def _root(path: str) -> str:
    """First segment of a property path: ``spec.online`` → ``spec``, ``a[0]`` → ``a``."""
    for i, char in enumerate(path):
        if char in ".[" and i:
            return path[:i]
    return path


class PolicyViolation(_Model):
    """A ``policyEvent``: one policy violated by one resource (or the whole stack)."""

    resource_urn: str | None = Field(default=None, alias="resourceUrn")
    message: str = ""
    policy_name: str = Field(alias="policyName")
    policy_pack_name: str = Field(alias="policyPackName")
    policy_pack_version: str = Field(default="", alias="policyPackVersion")
    enforcement_level: str = Field(alias="enforcementLevel")

    @property
    def description(self) -> str:
        """The policy's description (first line of ``message``)."""
        return self.message.strip().split("\n", 1)[0].strip()

    @property
    def detail(self) -> str:
        """The violation text (``message`` after the description), on one line; the
        description if the policy gave no text of its own."""
        lines = [line.strip() for line in self.message.strip().splitlines()[1:] if line.strip()]
        return " ".join(lines) or self.description


class Diagnostic(_Model):
    """A non-debug ``diagnosticEvent`` (warnings and errors from the engine or the program)."""

    severity: str
    message: str
    urn: str | None = None


class Preview(_Model):
    """Everything the Markdown summary needs from one preview run.

    ``steps``: one per resource in plan order (replacement halves folded into their
    ``replace`` step; ``same`` steps kept, for context such as the GPUs a host keeps);
    ``violations``; ``policy_packs`` (``name`` → version, of the packs that ran);
    ``policies_passed``/``policies_failed`` (``pack/policy`` names seen passing/failing on at
    least one resource); ``diagnostics``; ``change_counts`` (op → count, from the engine's
    summary when present); ``result`` (``succeeded``/``failed``/``None`` if the run ended
    before its summary).
    """

    steps: list[Step] = Field(default_factory=list)
    violations: list[PolicyViolation] = Field(default_factory=list)
    policy_packs: dict[str, str] = Field(default_factory=dict)
    policies_passed: frozenset[str] = frozenset()
    policies_failed: frozenset[str] = frozenset()
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    change_counts: dict[str, int] = Field(default_factory=dict)
    result: str | None = None

    @property
    def stack(self) -> str | None:
        """Stack name from the URNs (``urn:pulumi:<stack>::<project>::...``)."""
        for step in self.steps:
            return step.urn.split("::", 1)[0].removeprefix("urn:pulumi:")
        return None

    @property
    def project(self) -> str | None:
        """Project name from the URNs."""
        for step in self.steps:
            return step.urn.split("::")[1]
        return None


def parse_events(lines: Iterable[str]) -> Preview:
    """Parse the JSON-lines output of a streaming ``pulumi preview --json``.

    Blank lines are skipped and unknown event kinds ignored. Raises :class:`PreviewParseError`
    on a line that is not a JSON object, or on an event missing a required field.
    """
    steps: dict[str, Step] = {}
    violations: list[PolicyViolation] = []
    diagnostics: list[Diagnostic] = []
    packs: dict[str, str] = {}
    passed: set[str] = set()
    failed: set[str] = set()
    counts: dict[str, int] = {}
    result: str | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ValueError("not a JSON object")
            if "resourcePreEvent" in event:
                step = Step.model_validate(event["resourcePreEvent"]["metadata"])
                if step.op not in REPLACEMENT_HALVES or step.urn not in steps:
                    steps[step.urn] = step
            elif "policyEvent" in event:
                violations.append(PolicyViolation.model_validate(event["policyEvent"]))
            elif "policyAnalyzeSummaryEvent" in event or "policyAnalyzeStackSummaryEvent" in event:
                summary = event.get("policyAnalyzeSummaryEvent") or event["policyAnalyzeStackSummaryEvent"]
                pack = summary["policyPackName"]
                packs[pack] = summary.get("policyPackVersion", "")
                passed.update(f"{pack}/{name}" for name in summary.get("passed") or ())
                failed.update(f"{pack}/{name}" for name in summary.get("failed") or ())
            elif "diagnosticEvent" in event:
                diag = event["diagnosticEvent"]
                if diag.get("severity") != "debug":
                    diagnostics.append(Diagnostic.model_validate(diag))
            elif "summaryEvent" in event:
                summary = event["summaryEvent"]
                counts = {k: int(v) for k, v in (summary.get("resourceChanges") or {}).items()}
                result = summary.get("result")
        except (ValueError, KeyError, TypeError) as exc:
            raise PreviewParseError(f"event line {number}: {str(exc)[:300]}") from exc
    if not counts:
        for step in steps.values():
            counts[step.op] = counts.get(step.op, 0) + 1
    return Preview(
        steps=list(steps.values()),
        violations=violations,
        policy_packs=packs,
        policies_passed=frozenset(passed - failed),
        policies_failed=frozenset(failed),
        diagnostics=diagnostics,
        change_counts=counts,
        result=result,
    )
