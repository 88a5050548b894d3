"""Errors of the stack-config package.

``EstateConfigError`` is the only exception the package raises: the config could not be
accepted. It carries every problem found (structural and cross-field), each naming the key
path, e.g. ``tenants[1].networks[0].vxlan_id: 16777216 is outside 1..16777215``.

- ``StackFileError`` (an ``EstateConfigError``): a ``Pulumi.<stack>.yaml`` could not be read
  or is not a stack file (missing, not UTF-8, not YAML, not a mapping); nothing in it was checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from stack_config.hints import FULL_CONFIG_KEY


@dataclass(frozen=True, order=True)
class ConfigProblem:
    """One problem in the stack config.

    Attributes:
        path: key path inside ``composable-gpu:estate``, e.g. ``hosts[0].bmc.endpoint``
            (empty for the root object), or a whole config key of the project's namespace for a
            problem outside the estate, e.g. ``composable-gpu:idle_timeout``.
        message: what is wrong, quoting the offending value unless it is a secret, and what to
            do where that is known (a close spelling of an unknown key, the command that sets a
            missing secret).
        missing_secret: True when a required secret is absent: the message names the
            ``pulumi config set --secret`` command; ``python -m stack_config validate
            --allow-missing-secrets`` accepts the file without it.
        file: the inventory file the problem is in (``environments/dev/hosts/rack-a.yaml``), its
            ``path`` then a key path inside that file; None for the stack config.
    """

    path: str
    message: str
    missing_secret: bool = False
    file: str | None = None

    def __str__(self) -> str:
        return ": ".join(part for part in (self.file, self.path, self.message) if part)


class EstateConfigError(ValueError):
    """The stack config is invalid; raised before any resource is registered.

    Attributes:
        problems: every problem found, in config order.
    """

    def __init__(self, problems: Iterable[ConfigProblem], *, key: str = FULL_CONFIG_KEY) -> None:
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        self.key = key
        lines = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(f"invalid stack config {key} ({count} problem{'s' if count != 1 else ''}):\n{lines}")


class StackFileError(EstateConfigError):
    """A stack file cannot be read or is not a stack file; raised before any key of it is checked.

    ``str()`` is one line naming the file, e.g. ``Pulumi.prod.yaml: cannot read: No such file or
    directory`` or ``Pulumi.dev.yaml: not valid YAML: line 4, column 4: expected <block end>, ...``.

    Attributes:
        path: the file, as given.
        reason: what is wrong with it (one line).
    """

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__([ConfigProblem("", f"{path}: {reason}")])
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"
