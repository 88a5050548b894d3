"""What every dynamic provider here does the same way: unknowns, secrets, check failures,
probe refusals and converging create/update.

- ``is_unknown``: a value the engine does not know during ``pulumi preview``. The engine's
  provider server deserializes inputs with ``keep_unknowns=True``
  (``pulumi/dynamic/__main__.py``: ``rpc.deserialize_properties(request.news, True)``), which
  turns an unknown into the string ``rpc.UNKNOWN``; the program side carries
  ``pulumi.output.Unknown`` objects. Either may sit at any depth of a list or map, and inside
  a secret envelope.
- ``plain``: the value with RPC secret envelopes (``rpc.wrap_rpc_secret``) removed, at any depth.
- ``validation_failures``: a pydantic ``ValidationError`` as one ``CheckFailure`` per error,
  on the top-level property its location starts with, without the input value (it may be a
  password or a private key).
- ``explainer``: one function from a preview probe's exception to the one line
  ``preflight.endpoint_failure`` prints, built from ``(exception type, text)`` rules.
- ``ConvergeProvider``: create and update are the same "read the device, change what differs"
  call; a provider gives ``converge`` and ``new_id``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pulumi.dynamic import CheckFailure, CreateResult, ResourceProvider, UpdateResult
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pydantic import ValidationError

from dynamic_providers import preflight

__all__ = [
    "ConvergeProvider",
    "explainer",
    "is_unknown",
    "new_id",
    "plain",
    "refused_credentials",
    "unreachable",
    "validation_failures",
]


def is_unknown(value: object) -> bool:
    """True when ``value`` is, or contains at any depth, a value unknown during preview.

    Args:
        value: an input as the engine hands it to a provider (str, number, bool, None, list,
            tuple, map, secret envelope) or a program-side ``pulumi.output.Unknown``.

    Returns:
        True for ``rpc.UNKNOWN`` or an ``Unknown`` anywhere inside lists, tuples, maps and
        secret envelopes; False otherwise.
    """
    if isinstance(value, Unknown):
        return True
    if isinstance(value, str):
        return value == rpc.UNKNOWN
    if isinstance(value, Mapping):
        if rpc.is_rpc_secret(value):
            return is_unknown(rpc.unwrap_rpc_secret(value))
        return any(is_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(is_unknown(v) for v in value)
    return False


def plain(value: Any) -> Any:
    """``value`` with RPC secret envelopes unwrapped, recursively (lists and tuples become lists).

    Maps other than secret envelopes are returned as they are.
    """
    if rpc.is_rpc_secret(value):
        return plain(rpc.unwrap_rpc_secret(value))
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def validation_failures(exc: ValidationError, *, prefix: str = "", rename: Mapping[str, str] | None = None,
                        whole: str = "value", skip: Iterable[str] = ()) -> list[CheckFailure]:
    """One ``CheckFailure`` per pydantic error, on the property its location starts with.

    Args:
        exc: the error of ``Model.model_validate(inputs)``.
        prefix: a property the model validated as a whole (``"connection"``): every failure is
            on that property and its reason's path starts with it.
        rename: model field name -> name the user wrote (``requested_device_names`` ->
            ``device_names``), used in the reason's path only.
        whole: property (and path) for an error with an empty location (a model validator).
        skip: properties whose errors are dropped (their value is unknown at preview).

    Returns:
        Failures in pydantic's order: property = ``prefix`` or the first location element
        (``whole`` when empty); reason = ``"<path>: <message>"`` with the dotted path
        (``kernel_args.0: ...``). The input value is never included.
    """
    names = rename or {}
    skipped = set(skip)
    out: list[CheckFailure] = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = [str(p) for p in err["loc"]]
        prop = loc[0] if loc else whole
        if prop in skipped:
            continue
        shown = [names.get(loc[0], loc[0]), *loc[1:]] if loc else [whole]
        path = ".".join([prefix, *shown] if prefix else shown)
        out.append(CheckFailure(prefix or prop, f"{path}: {err['msg']}"))
    return out


#: One rule of an ``explainer``: an exception type and the text for an exception of that type.
Rule = tuple[type[Exception], Callable[[Any], str]]


def explainer(*rules: Rule) -> Callable[[Exception], str | None]:
    """A ``preflight.endpoint_failure`` ``explain`` function from ordered rules.

    Args:
        rules: ``(exception type, text of the exception)`` pairs; the first type that matches
            gives the line, so list subclasses before their base.

    Returns:
        A function returning that line, or None for any other exception (a bug: the caller
        re-raises it).
    """

    def explain(exc: Exception) -> str | None:
        for kind, text in rules:
            if isinstance(exc, kind):
                return text(exc)
        return None

    return explain


def refused_credentials(detail: str, account: str) -> str:
    """``credentials refused (<detail>): set the <account> with `pulumi config set --secret` ...``."""
    return (f"credentials refused ({detail}): set the {account} with `pulumi config set --secret` "
            "and preview again")


def unreachable(lead: str, detail: str, check: str) -> str:
    """``<lead> (<detail>): check <check> from here (air-gapped preview: <env>=off)``."""
    return f"{lead} ({detail}): check {check} from here (air-gapped preview: {preflight.PREFLIGHT_ENV}=off)"


def new_id(prefix: str) -> str:
    """A fresh resource id ``<prefix>-<32 hex digits>`` (uuid4)."""
    return f"{prefix}-{uuid.uuid4().hex}"


class ConvergeProvider(ResourceProvider):
    """A provider whose create and update both converge the device to the inputs.

    Subclasses give ``converge(props) -> outputs`` (observe, plan, apply what differs; it
    raises the provider's typed error when the device refuses) and ``new_id(props, outs)``.
    """

    def converge(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Bring the device to ``props``; returns every output. Subclasses implement it."""
        raise NotImplementedError

    def new_id(self, props: Mapping[str, Any], outs: Mapping[str, Any]) -> str:
        """The id of a resource just created from ``props`` with outputs ``outs``."""
        raise NotImplementedError

    def create(self, props: dict[str, Any]) -> CreateResult:
        """Converge to ``props``; the id comes from ``new_id``."""
        outs = self.converge(props)
        return CreateResult(self.new_id(props, outs), outs)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Same as create, for the new inputs."""
        return UpdateResult(self.converge(news))
