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
- ``check_known``: ``check``'s local half: the inputs known at preview validated with a pydantic
  model, failures on unknown inputs dropped.
- ``explainer``: one function from a preview probe's exception to the one line
  ``preflight.endpoint_failure`` prints, built from ``(exception type, text)`` rules.
- ``DynamicResource``: the program side of a resource: its outputs are the class's
  ``pulumi.Output`` annotations (each given as a None property, so the resource object has an
  Output attribute for it that the provider's outputs resolve), its secret inputs are wrapped as
  secrets and listed in ``additional_secret_outputs``.
- ``ConvergeProvider``: create and update are the same "read the device, change what differs"
  call; a provider gives ``converge`` and ``new_id``.
- ``RecordProvider``: a resource that changes no device (a check, a guard on delete): create and
  update record the inputs, and a change of any of its ``inputs`` is an in-place update.
"""

from __future__ import annotations

import inspect
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import pulumi
from pulumi.dynamic import CheckFailure, CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pydantic import BaseModel, ValidationError

from dynamic_providers import preflight

__all__ = [
    "Checked",
    "ConvergeProvider",
    "DynamicResource",
    "RecordProvider",
    "check_known",
    "explainer",
    "is_unknown",
    "new_id",
    "output_names",
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


ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class Checked(Generic[ModelT]):
    """What ``check_known`` found.

    Attributes:
        spec: the model built from the known inputs (a field whose input is unknown holds its
            default: see ``unknown``), or None when validation failed.
        failures: one per problem with a known input (``validation_failures``).
        unknown: names of the model's inputs that are unknown at preview.
    """

    spec: ModelT | None
    failures: list[CheckFailure]
    unknown: frozenset[str]


def check_known(model: type[ModelT], news: Mapping[str, Any], *, rename: Mapping[str, str] | None = None,
                whole: str = "value") -> Checked[ModelT]:
    """Validate the inputs of ``news`` that are known, as ``model``; unknown ones are not judged.

    Args:
        model: the pydantic model of the resource's inputs (its field names are the input names).
        news: the inputs as the engine hands them to ``check`` (secret envelopes and unknowns at
            any depth allowed); inputs that are None or not fields of ``model`` are left out.
        rename, whole: as for ``validation_failures``.

    Returns:
        ``Checked``: the model built from the known inputs (secrets unwrapped), or None with the
        failures of the known inputs. An unknown input's own errors (its ``Field required``
        included) are dropped, so a model that failed only for unknowns has no failures.
    """
    fields = [k for k in model.model_fields if news.get(k) is not None]
    unknown = frozenset(k for k in fields if is_unknown(news[k]))
    known = {k: plain(news[k]) for k in fields if k not in unknown}
    try:
        spec = model.model_validate(known)
    except ValidationError as exc:
        return Checked(None, validation_failures(exc, rename=rename, whole=whole, skip=unknown), unknown)
    return Checked(spec, [], unknown)


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


class RecordProvider(ConvergeProvider):
    """A provider whose resource changes nothing on any device: ``create`` and ``update`` record
    the (checked) inputs as the outputs, ``diff`` reports an in-place update when any input named
    in ``inputs`` differs (secret envelopes compared by their values). Subclasses give ``check``,
    ``new_id`` and, where the resource acts on delete, ``delete``."""

    #: The inputs whose change is an update.
    inputs: ClassVar[tuple[str, ...]] = ()

    def converge(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """The inputs, unchanged: nothing is written anywhere."""
        return dict(props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """An in-place update when an input of ``inputs`` changed (or is unknown at preview)."""
        return DiffResult(changes=any(is_unknown(news.get(k)) or plain(olds.get(k)) != plain(news.get(k))
                                      for k in self.inputs))


def output_names(cls: type) -> list[str]:
    """The outputs a ``DynamicResource`` subclass declares: its ``pulumi.Output[...]``
    annotations and those of its bases below ``DynamicResource``, bases first, in declaration order."""
    names: list[str] = []
    for klass in reversed(cls.__mro__[:cls.__mro__.index(DynamicResource)]):
        for name, hint in inspect.get_annotations(klass, eval_str=True).items():
            origin: object = typing.get_origin(hint)
            if origin is pulumi.Output and name not in names:
                names.append(name)
    return names


class DynamicResource(Resource):
    """A dynamic resource whose outputs are its ``pulumi.Output`` annotations.

    Subclasses declare each output once, as an annotation (``device_names:
    pulumi.Output[list[str]]``), name their secret inputs in ``secret_inputs`` and pass their
    inputs to ``__init__``; the type token comes from ``module``/``name`` as for
    ``pulumi.dynamic.Resource``.
    """

    #: Inputs sent as secrets and kept secret in the outputs (``additional_secret_outputs``).
    secret_inputs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, provider: ResourceProvider, name: str, inputs: Mapping[str, Any],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        """Register the resource.

        Args:
            provider: the resource's provider (pickled into the state by the engine).
            name: the Pulumi resource name.
            inputs: input name -> value (``pulumi.Input``); those in ``secret_inputs`` are wrapped
                with ``pulumi.Output.secret``.
            opts: resource options; ``additional_secret_outputs`` gains ``secret_inputs``.
        """
        props: dict[str, Any] = {k: pulumi.Output.secret(v) if k in self.secret_inputs else v
                                 for k, v in inputs.items()}
        props.update({k: None for k in output_names(type(self)) if k not in props})
        secret = pulumi.ResourceOptions(additional_secret_outputs=list(self.secret_inputs))
        super().__init__(provider, name, props, pulumi.ResourceOptions.merge(opts, secret))
