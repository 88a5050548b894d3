"""Check a whole ``Pulumi.<stack>.yaml`` without Pulumi: its estate (inline or an inventory folder),
its plain-text secrets and its unknown keys.

Builds on :mod:`stack_config.loader` (raw config -> :class:`EstateConfig`, reading one stack file)
and :mod:`stack_config.inventory` (the estate's folder). I/O: reads the stack file and the
inventory files it names; no Pulumi.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from stack_config.errors import ConfigProblem, EstateConfigError, StackFileError
from stack_config.hints import (
    CONFIG_KEY,
    CONFIG_NAMESPACE,
    FULL_CONFIG_KEY,
    FULL_CREDENTIALS_KEY,
    FULL_INVENTORY_KEY,
    close_spelling,
)
from stack_config.inventory import estate_from_config
from stack_config.loader import (
    _strip_secure,
    plaintext_credentials,
    plaintext_secrets,
    read_stack_config,
    unknown_config_keys,
)
from stack_config.models import EstateConfig


def load_stack_file(path: Path, *, require_secrets: bool = True) -> EstateConfig:
    """Validate the estate of a ``Pulumi.<stack>.yaml`` file without Pulumi (CI, editors).

    The estate is the stack's inventory folder (``composable-gpu:inventory``, relative to the stack
    file's folder) with its credential sets (``composable-gpu:credentials``), or an inline
    ``composable-gpu:estate`` (:func:`stack_config.inventory.estate_from_config`). Encrypted leaves
    (``{secure: v1:...}``) are replaced by a placeholder string, so only their presence is checked;
    with ``require_secrets=False`` absent secrets are filled in too (stacks whose secrets are set at
    deployment time, like the production example). A secret in plain text
    (:func:`plaintext_secrets`, :func:`plaintext_credentials`) and a ``composable-gpu:*`` key the
    program does not read (:func:`unknown_config_keys`) are problems too, reported before those of
    the estate.

    Raises:
        StackFileError: the file cannot be read or is not a stack file (:func:`read_stack_config`).
        EstateConfigError: no estate key, or any problem above or in the estate.
    """
    config = read_stack_config(path)
    if FULL_CONFIG_KEY not in config and FULL_INVENTORY_KEY not in config:
        raise EstateConfigError([no_estate_key(path.name, config)])
    found = [*unknown_config_keys(config), *stack_file_plaintext(config, file_name=path.name)]
    values = {
        key.partition(":")[2]: _strip_secure(value)
        for key, value in config.items() if str(key).startswith(f"{CONFIG_NAMESPACE}:")
    }
    try:
        estate = estate_from_config(values, root=path.parent, fill_missing_secrets=not require_secrets)
    except StackFileError:
        raise
    except EstateConfigError as exc:
        raise EstateConfigError([*found, *exc.problems], key=exc.key) from None
    if found:
        raise EstateConfigError(found)
    return estate


def stack_file_plaintext(config: Mapping[str, Any], *, file_name: str) -> list[ConfigProblem]:
    """Every secret in plain text in a stack file's ``config``: the inline estate's
    (:func:`plaintext_secrets`) and the credential sets' (:func:`plaintext_credentials`)."""
    found: list[ConfigProblem] = []
    if config.get(FULL_CONFIG_KEY) is not None:
        found += plaintext_secrets(config[FULL_CONFIG_KEY], file_name=file_name)
    if config.get(FULL_CREDENTIALS_KEY) is not None:
        found += plaintext_credentials(config[FULL_CREDENTIALS_KEY], file_name=file_name)
    return found


def is_close_to_estate_key(key: str) -> bool:
    """True when ``key`` is a close spelling of :data:`FULL_CONFIG_KEY`, part by part: its name close
    to ``estate`` and its namespace close to ``composable-gpu`` or absent (``composable-gpu:estat``,
    ``composible-gpu:estate``, ``estate``; not ``composable-gpu:region`` nor ``aws:estate``)."""
    namespace, _, name = key.rpartition(":")
    return close_spelling(name, [CONFIG_KEY]) is not None and (
        not namespace or close_spelling(namespace, [CONFIG_NAMESPACE]) is not None
    )


def no_estate_key(file_name: str, keys: Iterable[Any]) -> ConfigProblem:
    """The problem for a stack file whose ``config`` lacks :data:`FULL_CONFIG_KEY`.

    Names the file's other ``composable-gpu:*`` keys and a close spelling of the estate key
    (see :func:`is_close_to_estate_key`), e.g. ``Pulumi.x.yaml has no config key
    composable-gpu:estate (it has 'composable-gpu:estat'; rename 'composable-gpu:estat' to
    'composable-gpu:estate'?)``.
    """
    names = [str(k) for k in keys]
    close = next((k for k in names if is_close_to_estate_key(k)), None)
    shown = [k for k in names if k.startswith(f"{CONFIG_NAMESPACE}:") or k == close]
    message = (f"{file_name} has no config key {FULL_INVENTORY_KEY} (the estate's folder) "
               f"nor {FULL_CONFIG_KEY}")
    if not shown:
        return ConfigProblem("", message)
    rename = f"; rename {close!r} to {FULL_CONFIG_KEY!r}?" if close else ""
    return ConfigProblem("", f"{message} (it has {', '.join(repr(k) for k in shown)}{rename})")


def plaintext_secrets_in_stack_file(path: Path) -> list[ConfigProblem]:
    """:func:`stack_file_plaintext` of a ``Pulumi.<stack>.yaml`` (for the program): the inline estate's
    secrets and the credential sets' written in plain text.

    Run on the raw file, before decryption (afterwards an encrypted secret and a plain one look
    alike). A missing file, or one without those keys, yields no problem.

    Raises:
        StackFileError: the file exists but cannot be read or is not a stack file.
    """
    if not path.exists():
        return []
    return stack_file_plaintext(read_stack_config(path), file_name=path.name)
