"""Plain data the rules read and report, and how a rule is declared.

Nothing here imports ``pulumi`` or ``pulumi_policy``: the adapter (``policies/adapter.py``)
turns what the engine sends into :class:`ResourceRecord` objects, and the rules are pure
functions ``check(resources, config) -> list[Violation]`` over those records, each declared
where it is written with the :func:`rule` decorator. How a rule reads a record's properties is
:mod:`.reading`.

Shapes:

- ``ResourceRecord.props`` is the resource's *inputs* as plain JSON-like data: ``dict``,
  ``list``, ``str``, ``int`` (integral numbers; the engine sends every number as a float and
  the adapter narrows integral ones), ``float``, ``bool``. A property that is ``None`` in the
  program is absent (the engine drops nulls), so "absent" and "null" are the same thing.
- A value that is not known during ``pulumi preview`` (it depends on another resource's
  output) is the singleton :data:`UNKNOWN`, at any depth. ``UNKNOWN`` refuses ``bool()`` so a
  rule cannot silently treat it as true or false.
- ``ResourceRecord.secret_paths`` holds the paths (tuples of keys and list indices) that the
  engine marked as Pulumi secrets; a path is secret when it or one of its ancestors is listed.
  ``None`` means secretness could not be observed (see ``policies/README.md``).

Unknown values (the policy-pack failure mode named in the project brief: "reading an unknown
value during preview turns a mandatory check into an advisory one unless handled"): every rule
that needs a value it cannot see reports a violation saying the property *cannot be proven
during preview*, at the rule's own enforcement level. A rule passes over an unknown only when
its outcome cannot depend on it (for example an unknown extra kernel argument when the
required ones are all present and known).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

Path = tuple[str | int, ...]


class Unknown:
    """The value of a property that is not known during preview (singleton :data:`UNKNOWN`)."""

    _instance: Unknown | None = None

    def __new__(cls) -> Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown during preview>"

    def __bool__(self) -> bool:
        raise TypeError("an unknown preview value has no truth value; check `is UNKNOWN` first")

    def __reduce__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = Unknown()


@dataclass(frozen=True)
class ResourceRecord:
    """One resource of the stack as the rules see it.

    Attributes:
        type: Pulumi type token, e.g. ``composable:infra:Host``.
        name: Pulumi resource name (the last part of the URN).
        urn: the resource's URN; violations are reported against it.
        props: the resource's inputs as plain data (see the module docstring).
        secret_paths: property paths the engine marked secret; ``None`` when secretness was
            not observable for this resource.
        inputs_recorded: ``False`` when ``props`` are the resource's outputs because its
            inputs were not seen in this run (for example a resource left out by ``--target``).
    """

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    secret_paths: frozenset[Path] | None = frozenset()
    inputs_recorded: bool = True

    @property
    def kind(self) -> str:
        """The last part of the type token, e.g. ``Host``."""
        return self.type.rsplit(":", 1)[-1]

    @property
    def label(self) -> str:
        """How messages name the resource, e.g. ``Host 'gpu-node-01'``."""
        return f"{self.kind} '{self.name}'"

    @property
    def ancestor_types(self) -> tuple[str, ...]:
        """Type tokens of the resource's parents, outermost first, read from the URN.

        URN shape (Pulumi docs, "Resource names"): ``urn:pulumi:<stack>::<project>::
        <parent-type>$<child-type>::<name>``.
        """
        parts = self.urn.split("::")
        if len(parts) < 4:
            return ()
        return tuple(parts[2].split("$")[:-1])

    def is_secret(self, path: Path) -> bool | None:
        """Whether ``path`` (or one of its ancestors) is a Pulumi secret; ``None`` if unobservable."""
        if self.secret_paths is None:
            return None
        return any(path[:i] in self.secret_paths for i in range(len(path) + 1))


@dataclass(frozen=True)
class Violation:
    """One finding: ``message`` names the offending resources and the fix; ``urn`` is the one
    the engine shows it against (``None`` = the stack as a whole)."""

    rule: str
    urn: str | None
    message: str


class Findings:
    """Collects the violations of one rule run, in the shared message format.

    Every message reads ``<Kind> '<name>': <problem> Fix: <fix>``.
    """

    def __init__(self, rule: str) -> None:
        self.rule = rule
        self.violations: list[Violation] = []

    def add(self, rec: ResourceRecord | None, problem: str, fix: str) -> None:
        """Record a violation against ``rec`` (``None``: the stack)."""
        subject = f"{rec.label}: " if rec is not None else ""
        message = f"{subject}{problem.rstrip('.')}. Fix: {fix.rstrip('.')}."
        self.violations.append(Violation(self.rule, rec.urn if rec is not None else None, message))

    def unprovable(self, rec: ResourceRecord, prop: str, why: str = "") -> None:
        """Record that ``rec.<prop>`` is unknown during preview, so the rule cannot be proven."""
        reason = f" ({why})" if why else ""
        self.add(
            rec,
            f"{prop} is not known during preview, so this rule cannot be proven{reason}; "
            "an unprovable mandatory rule fails rather than passing silently",
            f"give {rec.kind}.{prop} a value known at preview time (from stack config, "
            "not from another resource's output)",
        )

    def missing(self, rec: ResourceRecord, prop: str) -> None:
        """Record that ``rec`` lacks the contract property ``prop``."""
        where = "" if rec.inputs_recorded else (
            " (its inputs were not seen in this run, e.g. it was left out by --target, so only "
            "its outputs were checked)"
        )
        self.add(
            rec,
            f"has no '{prop}' property{where}, so this rule cannot be checked",
            f"pass '{prop}' as a component property, as docs/architecture.md's component contract "
            "requires",
        )


@dataclass(frozen=True)
class Rule:
    """One policy of the pack.

    Attributes:
        name: the policy name the CLI prints (kebab-case, unique in the pack).
        description: one line; the CLI prints it above every message of the rule.
        check: ``check(resources, config) -> list[Violation]``; ``config`` is an instance of
            ``config_model`` (defaults applied).
        config_model: pydantic model of the rule's policy config (``--policy-pack-config``
            keys besides ``enforcementLevel``), or ``None``.
        enforcement: default level, ``"mandatory"`` or ``"advisory"``.
    """

    name: str
    description: str
    check: Callable[[Sequence[ResourceRecord], Any], list[Violation]]
    config_model: type | None = None
    enforcement: str = "mandatory"


#: What :func:`rule` decorates: ``body(resources, config, found)`` records the rule's violations in
#: ``found`` (a :class:`Findings` named after the rule) and returns nothing.
RuleBody = Callable[[Sequence[ResourceRecord], Any, Findings], None]


def rule(
    name: str, description: str, *, config_model: type | None = None, enforcement: str = "mandatory"
) -> Callable[[RuleBody], Rule]:
    """Declare a policy at the function that checks it.

    ``@rule("gpu-single-host", "A GPU is composed to at most one host.")`` above
    ``def gpu_single_host(resources, config, found) -> None`` binds ``gpu_single_host`` to the
    :class:`Rule` of that name and description, whose ``check(resources, config)`` runs the function
    with a fresh ``Findings(name)`` and returns its violations.

    Args:
        name: the policy name (see :class:`Rule`).
        description: the policy's one-line description.
        config_model: pydantic model of the policy's config, or ``None``.
        enforcement: default level, ``"mandatory"`` or ``"advisory"``.

    Returns:
        A decorator turning a :data:`RuleBody` into its :class:`Rule`.
    """

    def declare(body: RuleBody) -> Rule:
        @functools.wraps(body)
        def check(resources: Sequence[ResourceRecord], config: Any) -> list[Violation]:
            found = Findings(name)
            body(resources, config, found)
            return found.violations

        return Rule(name=name, description=description, check=check, config_model=config_model,
                    enforcement=enforcement)

    return declare
