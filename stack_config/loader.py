"""Turn the raw ``composable-gpu:estate`` object into a validated :class:`EstateConfig`.

Pure: no Pulumi, no I/O except :func:`load_stack_file` (reads one YAML file). The program
(``__main__.py``) calls :func:`load_estate` before it registers any resource, so an invalid
config stops ``pulumi preview``/``up`` with one line per problem.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from stack_config.errors import ConfigProblem, EstateConfigError
from stack_config.models import EstateConfig
from stack_config.rules import check_rules, plaintext_private_keys

#: Pulumi config key (``<project>:<key>``) that holds the estate.
CONFIG_NAMESPACE = "composable-gpu"
CONFIG_KEY = "estate"
FULL_CONFIG_KEY = f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"

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


def _problem_from_pydantic(err: Mapping[str, Any]) -> ConfigProblem:
    loc = tuple(err.get("loc", ()))
    path = format_path(loc)
    kind = err.get("type", "")
    secret = any(isinstance(p, str) and p in _SECRET_FIELDS for p in loc)
    if kind == "missing":
        return ConfigProblem(path, "required key is missing")
    if kind == "extra_forbidden":
        return ConfigProblem(path, "unknown key")
    msg = str(err.get("msg", "invalid value"))
    if kind.startswith(
        ("dns_label", "range", "http_url", "cidr", "mac", "mlxconfig_key", "kernel_arg", "empty")
        + ("gfd_product", "reclaim_budget", "reclaim_window", "owner_tag")
    ):
        return ConfigProblem(path, msg)  # our own messages already quote the value
    if secret or "input" not in err:
        return ConfigProblem(path, msg)
    return ConfigProblem(path, f"{msg} (got {err['input']!r})")


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
        raise EstateConfigError([_problem_from_pydantic(e) for e in exc.errors()]) from None
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


def fill_missing_secrets(model: type[BaseModel], data: Any) -> Any:
    """Copy of ``data`` with every absent secret field of ``model`` (recursively) set to a placeholder.

    Lets CI validate a stack file whose secrets are set per deployment (``pulumi config set
    --secret``) rather than committed. Non-mapping data is returned unchanged.
    """
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    for name, field in model.model_fields.items():
        if _is_secret(field.annotation):
            out.setdefault(name, SECRET_PLACEHOLDER)
            continue
        sub = _model_of(field.annotation)
        if sub is None or out.get(name) is None:
            continue
        cls, many = sub
        value = out[name]
        out[name] = (
            [fill_missing_secrets(cls, v) for v in value]
            if many and isinstance(value, list)
            else fill_missing_secrets(cls, value)
        )
    return out


def load_stack_file(path: Path, *, require_secrets: bool = True) -> EstateConfig:
    """Validate the estate in a ``Pulumi.<stack>.yaml`` file without Pulumi (CI, editors).

    Encrypted leaves (``{secure: v1:...}``) are replaced by a placeholder string, so only their
    presence is checked; with ``require_secrets=False`` absent secrets are filled in too (stacks
    whose secrets are set at deployment time, like the production example).

    Raises:
        EstateConfigError: the key is missing or the estate is invalid.
        OSError, yaml.YAMLError: the file cannot be read or parsed.
    """
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    config = doc.get("config") or {}
    if FULL_CONFIG_KEY not in config:
        raise EstateConfigError([ConfigProblem("", f"{path.name} has no config key {FULL_CONFIG_KEY}")])
    plaintext = plaintext_secrets_in_stack_file(path)
    raw = _strip_secure(config[FULL_CONFIG_KEY])
    if not require_secrets:
        raw = fill_missing_secrets(EstateConfig, raw)
    try:
        estate = load_estate(raw)
    except EstateConfigError as exc:
        raise EstateConfigError([*plaintext, *exc.problems]) from None
    if plaintext:
        raise EstateConfigError(plaintext)
    return estate


def plaintext_secrets_in_stack_file(path: Path) -> list[ConfigProblem]:
    """Problems for SSH private keys written in plain text in a ``Pulumi.<stack>.yaml``.

    Run on the raw file, before decryption (afterwards an encrypted key and a plain one look
    alike). A missing file or estate key yields no problem. Raises ``yaml.YAMLError`` on a
    malformed file.
    """
    if not path.exists():
        return []
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    raw = (doc.get("config") or {}).get(FULL_CONFIG_KEY)
    return plaintext_private_keys(raw) if raw is not None else []


def resolve_path(path: str, root: Path) -> Path:
    """Resolve a config path (kubeconfig, CA bundle, chart): absolute stays, relative joins ``root``.

    ``~`` expands to the user's home directory.
    """
    p = Path(path).expanduser()
    return p if p.is_absolute() else (root / p)
