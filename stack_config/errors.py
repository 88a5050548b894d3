"""Errors of the stack-config package.

``EstateConfigError`` is the only exception the package raises: the config could not be
accepted. It carries every problem found (structural and cross-field), each naming the key
path, e.g. ``tenants[1].networks[0].vxlan_id: 16777216 is outside 1..16777215``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class ConfigProblem:
    """One problem in the stack config.

    Attributes:
        path: key path inside ``composable-gpu:estate``, e.g. ``hosts[0].bmc.endpoint``
            (empty for the root object).
        message: what is wrong, quoting the offending value unless it is a secret.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class EstateConfigError(ValueError):
    """The stack config is invalid; raised before any resource is registered.

    Attributes:
        problems: every problem found, in config order.
    """

    def __init__(self, problems: Iterable[ConfigProblem], *, key: str = "composable-gpu:estate") -> None:
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        self.key = key
        lines = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(f"invalid stack config {key} ({count} problem{'s' if count != 1 else ''}):\n{lines}")
