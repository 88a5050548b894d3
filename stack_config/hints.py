"""The estate's config key and the remedies that error messages name.

Pure (no I/O). Used by :mod:`stack_config.loader` and :mod:`stack_config.rules`, so that a
message tells the operator what to do in one wording:

- :func:`set_secret_command`: the ``pulumi config set --secret --path`` command for a key path;
- :func:`close_spelling`: the allowed name a misspelt one was probably meant to be.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: Pulumi config key (``<project>:<key>``) that holds the estate.
CONFIG_NAMESPACE = "composable-gpu"
CONFIG_KEY = "estate"
FULL_CONFIG_KEY = f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"
#: The stack's inventory folder (the estate in files, :mod:`stack_config.inventory`), a path relative
#: to the folder of ``Pulumi.yaml``, and the credential sets its files name.
INVENTORY_KEY = "inventory"
FULL_INVENTORY_KEY = f"{CONFIG_NAMESPACE}:{INVENTORY_KEY}"
CREDENTIALS_KEY = "credentials"
FULL_CREDENTIALS_KEY = f"{CONFIG_NAMESPACE}:{CREDENTIALS_KEY}"
#: The stack's role in the estate's split (:mod:`stack_config.fleet`): ``platform``,
#: ``hosts:<group>`` or ``tenant:<name>``; absent (or ``estate``) for the whole estate.
ROLE_KEY = "role"
FULL_ROLE_KEY = f"{CONFIG_NAMESPACE}:{ROLE_KEY}"
#: Every key of :data:`CONFIG_NAMESPACE` the program reads: the inline estate, or the inventory
#: folder and its credential sets, and the stack's role; a stack holding any other
#: ``composable-gpu:<key>`` is refused.
PROGRAM_CONFIG_KEYS: tuple[str, ...] = (CONFIG_KEY, INVENTORY_KEY, CREDENTIALS_KEY, ROLE_KEY)


def set_secret_command(path: str, *, from_file: bool = False) -> str:
    """The command that stores the secret at ``path`` (inside the estate) encrypted in the stack file.

    ``"fabric.director.password"`` -> ``pulumi config set --secret --path
    'estate.fabric.director.password'``; with ``from_file`` (multi-line values such as SSH
    private keys) `` < <key file>`` is appended. The key is given without the project namespace,
    which Pulumi takes from ``Pulumi.yaml``. With no value on the command line the CLI prompts for
    it, so a password stays out of shell history; multi-line values are piped from a file.
    Source: the ``pulumi config set`` reference (``--path``, ``--secret``, prompt, standard input),
    https://www.pulumi.com/docs/iac/cli/commands/pulumi_config_set/
    """
    command = f"pulumi config set --secret --path '{CONFIG_KEY}.{path}'"
    return f"{command} < <key file>" if from_file else command


def set_credential_command(name: str, field: str) -> str:
    """The command that stores ``field`` of the credential set ``name`` in the stack config.

    ``("rack-a-bmc", "password")`` -> ``pulumi config set --secret --path
    'credentials.rack-a-bmc.password'`` (it prompts for the value); ``private_key`` is piped from a
    file (`` < <key file>``) and ``username`` is not a secret: ``pulumi config set --path
    'credentials.rack-a-bmc.username' <user>``.
    """
    if field == "username":
        return f"pulumi config set --path '{CREDENTIALS_KEY}.{name}.username' <user>"
    command = f"pulumi config set --secret --path '{CREDENTIALS_KEY}.{name}.{field}'"
    return f"{command} < <key file>" if field == "private_key" else command


def close_spelling(word: str, allowed: Iterable[str]) -> str | None:
    """The one name of ``allowed`` closest to ``word``, or None when none is close.

    "Close" is :func:`difflib.get_close_matches` with its default cutoff (similarity ratio
    >= 0.6): ``close_spelling("directr", ["director", "pools"]) == "director"``;
    ``close_spelling("zzz", ["director"]) is None``.
    """
    found = difflib.get_close_matches(word, list(allowed), n=1)
    return found[0] if found else None
