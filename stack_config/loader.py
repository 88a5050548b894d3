"""Turn the raw estate object into a validated :class:`EstateConfig`, and read stack files.

Pure: no Pulumi, no I/O except :func:`read_stack_config` (reads one YAML file). The checks of a
whole stack file (:func:`stack_config.stack_file.load_stack_file`) build on this module and on
:mod:`stack_config.inventory`. The program (``__main__.py``) calls :func:`unknown_config_keys`,
:func:`stack_config.stack_file.plaintext_secrets_in_stack_file` and
:func:`stack_config.inventory.estate_from_config` (the inventory folder, or an inline
``composable-gpu:estate`` through :func:`load_estate`) before it registers any resource, so an
invalid config stops ``pulumi preview``/``up`` with one line per problem.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, SecretStr, ValidationError, WithJsonSchema
from pydantic.fields import FieldInfo

from stack_config.errors import ConfigProblem, EstateConfigError, StackFileError
from stack_config.hints import (
    CONFIG_NAMESPACE,
    CREDENTIALS_KEY,
    PROGRAM_CONFIG_KEYS,
    close_spelling,
    set_credential_command,
    set_secret_command,
)
from stack_config.models import EstateConfig
from stack_config.rules import check_rules
from stack_config.types import ENCRYPTED_SECRET_JSON_SCHEMA

#: Field names whose offending input is never echoed in messages.
_SECRET_FIELDS = frozenset({"password", "private_key"})
#: Placeholder used for ``{secure: ...}`` leaves when validating a stack file offline.
SECRET_PLACEHOLDER = "<encrypted>"


def format_path(loc: Sequence[str | int]) -> str:
    """Render a pydantic error location as a key path.

    ``("tenants", 1, "networks", 0, "vxlan_id")`` -> ``tenants[1].networks[0].vxlan_id``; a dict
    key error location (``(..., "mlxconfig", "bad", "[key]")``) renders as ``...mlxconfig.bad``.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_of(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """``(model class, is_list)`` when ``annotation`` is a model, ``list[model]`` or ``model | None``."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _model_of(arg)
            if found:
                return found
        return None
    if origin is list:
        inner = _model_of(get_args(annotation)[0])
        return (inner[0], True) if inner else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None


def _is_secret(annotation: Any) -> bool:
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_is_secret(a) for a in get_args(annotation))
    return isinstance(annotation, type) and issubclass(annotation, SecretStr)


def _is_key_file(field: FieldInfo) -> bool:
    """True for an :data:`~stack_config.types.EncryptedSecret` (SSH private keys): a multi-line
    secret that the stack file may hold only encrypted, set from a file."""
    schemas = (m.json_schema for m in field.metadata if isinstance(m, WithJsonSchema))
    return any(schema == ENCRYPTED_SECRET_JSON_SCHEMA for schema in schemas)


def _input_key(name: str, field: FieldInfo) -> str:
    """The key a user writes for the field ``name``: its validation alias or alias, else its name."""
    if isinstance(field.validation_alias, str):
        return field.validation_alias
    return field.alias or name


def _fields_by_key(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """``model``'s fields by the key a user writes for each (see :func:`_input_key`)."""
    return {_input_key(name, field): field for name, field in model.model_fields.items()}


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the object at ``loc`` below ``root``, or None.

    ``loc`` is a pydantic error location (``("hosts", 0, "bmc")`` -> ``BmcConfig`` for
    :class:`EstateConfig`); list indexes step into the list's item model. None where the
    location leaves the models (a dict's keys, a scalar, a key no model declares).
    """
    current = root
    for part in loc:
        if isinstance(part, int):
            continue  # an index into list[Model]: _model_of already stepped into Model
        field = _fields_by_key(current).get(part)
        found = _model_of(field.annotation) if field is not None else None
        if found is None:
            return None
        current = found[0]
    return current


def _field_at(
    root: type[BaseModel], loc: Sequence[str | int]
) -> tuple[type[BaseModel], FieldInfo | None] | None:
    """``(model holding the last key of loc, its field or None if undeclared)``, or None."""
    if not loc or not isinstance(loc[-1], str):
        return None
    parent = _model_at(root, loc[:-1])
    return (parent, _fields_by_key(parent).get(loc[-1])) if parent is not None else None


def _problem_from_pydantic(err: Mapping[str, Any], root: type[BaseModel]) -> ConfigProblem:
    loc = tuple(err.get("loc", ()))
    path = format_path(loc)
    kind = err.get("type", "")
    secret = any(isinstance(p, str) and p in _SECRET_FIELDS for p in loc)
    if kind == "missing":
        found = _field_at(root, loc)
        if found is not None and found[1] is not None and _is_secret(found[1].annotation):
            hint = f"a secret; set it with: {set_secret_command(path, from_file=_is_key_file(found[1]))}"
            return ConfigProblem(path, f"required key is missing ({hint})", missing_secret=True)
        return ConfigProblem(path, "required key is missing")
    if kind == "extra_forbidden":
        found = _field_at(root, loc)
        close = close_spelling(str(loc[-1]), _fields_by_key(found[0])) if found is not None else None
        return ConfigProblem(path, f"unknown key (did you mean {close!r}?)" if close else "unknown key")
    msg = str(err.get("msg", "invalid value"))
    if kind.startswith(
        ("dns_label", "range", "http_url", "cidr", "mac", "mlxconfig_key", "kernel_arg", "empty")
        + ("gfd_product", "reclaim_budget", "reclaim_window", "owner_tag")
    ):
        return ConfigProblem(path, msg)  # our own messages already quote the value
    if secret or "input" not in err or _holds_secret(err["input"]):
        return ConfigProblem(path, msg)
    return ConfigProblem(path, f"{msg} (got {err['input']!r})")


def _holds_secret(value: Any) -> bool:
    """True when ``value`` (an input a message would quote) holds a secret field at any depth, e.g.
    a mapping whose model validator failed above a password: such input is never echoed."""
    if isinstance(value, Mapping):
        return any(k in _SECRET_FIELDS or _holds_secret(v) for k, v in value.items())
    return isinstance(value, list) and any(_holds_secret(v) for v in value)


def load_estate(raw: Any) -> EstateConfig:
    """Validate the raw estate object and return it typed.

    Args:
        raw: the decoded value of ``composable-gpu:estate`` (a mapping; secrets already
            decrypted by Pulumi, or placeholders when validating offline).

    Returns:
        The validated, frozen :class:`EstateConfig`.

    Raises:
        EstateConfigError: with every structural problem (types, ranges, unknown keys) or, when
            the structure is valid, every cross-field problem from :mod:`stack_config.rules`.
    """
    if not isinstance(raw, Mapping):
        raise EstateConfigError([ConfigProblem("", f"expected an object, got {type(raw).__name__}")])
    try:
        estate = EstateConfig.model_validate(dict(raw))
    except ValidationError as exc:
        raise EstateConfigError([_problem_from_pydantic(e, EstateConfig) for e in exc.errors()]) from None
    problems = check_rules(estate)
    if problems:
        raise EstateConfigError(problems)
    return estate


def _strip_secure(value: Any) -> Any:
    if isinstance(value, Mapping):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER
        return {k: _strip_secure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_secure(v) for v in value]
    return value


def _secret_fields(
    model: type[BaseModel], data: Any, where: str = ""
) -> Iterator[tuple[Mapping[str, Any], str, FieldInfo, str]]:
    """Every secret field of ``model`` in ``data``, through nested models and lists of them, as
    ``(the mapping that holds it or would, its key, its field, its key path)``, in the models'
    field order (``("fabric.director", ...)`` -> path ``fabric.director.password``). Only mappings
    and lists of ``data`` are entered; other shapes are left to the models to report."""
    if not isinstance(data, Mapping):
        return
    for key, field in _fields_by_key(model).items():
        path = f"{where}.{key}" if where else key
        if _is_secret(field.annotation):
            yield data, key, field, path
            continue
        sub = _model_of(field.annotation)
        value = data.get(key)
        if sub is None or value is None:
            continue
        cls, many = sub
        if not many:
            yield from _secret_fields(cls, value, path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from _secret_fields(cls, item, f"{path}[{i}]")


def fill_missing_secrets(model: type[BaseModel], data: Any) -> Any:
    """Copy of ``data`` with every absent secret field of ``model`` (recursively) set to a placeholder.

    Lets CI validate a stack file whose secrets are set per deployment (``pulumi config set
    --secret``) rather than committed. Non-mapping data is returned unchanged.
    """
    if not isinstance(data, Mapping):
        return data
    out = copy.deepcopy(dict(data))
    for holder, key, _field, _path in _secret_fields(model, out):
        if isinstance(holder, dict):  # a copy made above: YAML mappings load as dicts
            holder.setdefault(key, SECRET_PLACEHOLDER)
    return out


def read_stack_config(path: Path) -> Mapping[str, Any]:
    """The ``config`` mapping of a ``Pulumi.<stack>.yaml`` file (empty when the file has none).

    Raises:
        StackFileError: the file cannot be read (missing, a directory, not UTF-8), is not YAML
            (the reason names the line and column of the YAML error, counted from 1), or is not
            a mapping whose ``config`` is a mapping.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StackFileError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise StackFileError(path, "cannot read: not UTF-8 text") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise StackFileError(path, f"not valid YAML: {_yaml_error_summary(exc)}") from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise StackFileError(
            path, f"not a stack file: expected a mapping with a config key, got {type(doc).__name__}"
        )
    config = doc.get("config")
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        kind = type(config).__name__
        raise StackFileError(path, f"not a stack file: config is a {kind}, expected a mapping")
    return config


def _yaml_error_summary(exc: yaml.YAMLError) -> str:
    """One line for a PyYAML error: ``line L, column C: <problem>`` (PyYAML counts from 0; this
    counts from 1, as editors do), or the error's own text on one line when it has no position."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is not None and problem:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return " ".join(str(exc).split())


def unknown_config_keys(keys: Iterable[Any]) -> list[ConfigProblem]:
    """Problems for config keys of :data:`CONFIG_NAMESPACE` that the program does not read.

    Args:
        keys: full config keys (``<namespace>:<name>``), in the order to report them, e.g. the keys
            of a stack file's ``config`` or of the configuration Pulumi hands the program.

    Returns:
        One problem per ``composable-gpu:<name>`` whose name is not in :data:`PROGRAM_CONFIG_KEYS`,
        its path the whole key, its message naming a close spelling, e.g.
        ``composable-gpu:estates: unknown config key (did you mean 'composable-gpu:estate'?)``, or
        else the keys that are read. Keys of other namespaces (``aws:region``, ``pulumi:tags``)
        belong to other programs and providers and yield nothing.
    """
    problems: list[ConfigProblem] = []
    allowed = [f"{CONFIG_NAMESPACE}:{name}" for name in PROGRAM_CONFIG_KEYS]
    for key in (str(k) for k in keys):
        namespace, _, name = key.partition(":")
        if namespace != CONFIG_NAMESPACE or name in PROGRAM_CONFIG_KEYS:
            continue
        close = close_spelling(name, PROGRAM_CONFIG_KEYS)
        hint = (
            f"did you mean '{CONFIG_NAMESPACE}:{close}'?"
            if close
            else f"{CONFIG_NAMESPACE} reads only {', '.join(repr(k) for k in allowed)}"
        )
        problems.append(ConfigProblem(key, f"unknown config key ({hint})"))
    return problems


def _is_plain_text(value: Any) -> bool:
    """True for a secret leaf written as a value (string, number) rather than Pulumi's encrypted
    ``{secure: ...}``. Absent (None) and other shapes (mappings, lists) are left to the models."""
    return value is not None and not isinstance(value, (Mapping, list))


def plaintext_secrets(raw: Any, *, file_name: str) -> list[ConfigProblem]:
    """Secrets of the estate written in plain text in a stack file (each must be ``{secure: ...}``).

    Runs on the *raw* estate as read from ``Pulumi.<stack>.yaml``, before encrypted leaves are
    replaced: once Pulumi has decrypted the config for the program, an encrypted value and a plain
    one look alike. Every secret field of :class:`EstateConfig` is checked (the ``SecretStr`` ones:
    Director and BMC passwords, SSH private keys), wherever the models nest it. Pure; malformed
    input (not a mapping, hosts not a list) yields no problem here (the models report it).

    Args:
        raw: the value of ``composable-gpu:estate`` in the stack file.
        file_name: the stack file's name, for the message (``Pulumi.dev.yaml``).

    Returns:
        One problem per plain-text secret, in the models' field order, naming its key path and the
        ``pulumi config set --secret`` command that stores it encrypted, e.g.
        ``fabric.director.password: is in plain text in Pulumi.dev.yaml; store it encrypted:
        pulumi config set --secret --path 'estate.fabric.director.password'``. The message never
        quotes the value.
    """
    return [
        ConfigProblem(path, f"is in plain text in {file_name}; store it encrypted: "
                      f"{set_secret_command(path, from_file=_is_key_file(field))}")
        for holder, key, field, path in _secret_fields(EstateConfig, raw)
        if _is_plain_text(holder.get(key))
    ]


def plaintext_credentials(raw: Any, *, file_name: str) -> list[ConfigProblem]:
    """Secrets of ``composable-gpu:credentials`` written in plain text in a stack file (pure).

    Args:
        raw: the value of ``composable-gpu:credentials`` in the stack file (set name -> set).
        file_name: the stack file's name, for the message.

    Returns:
        One problem per ``password``/``private_key`` of a set that is not ``{secure: ...}``, its path
        ``credentials.<name>.<key>``, naming the command that stores it encrypted, never the value.
        Other shapes yield nothing (:func:`stack_config.inventory.parse_credentials` reports them).
    """
    if not isinstance(raw, Mapping):
        return []
    return [
        ConfigProblem(f"{CREDENTIALS_KEY}.{name}.{key}", f"is in plain text in {file_name}; store it "
                      f"encrypted: {set_credential_command(str(name), key)}")
        for name, cred in raw.items() if isinstance(cred, Mapping)
        for key in ("password", "private_key") if _is_plain_text(cred.get(key))
    ]


def resolve_path(path: str, root: Path) -> Path:
    """Resolve a config path (kubeconfig, CA bundle, chart): absolute stays, relative joins ``root``.

    ``~`` expands to the user's home directory.
    """
    p = Path(path).expanduser()
    return p if p.is_absolute() else (root / p)
