"""Fault injection for the Director simulator (hardware stand-in), driven by ``/_sim/faults``.

Kinds:
    ``error``: answer matching calls with an error envelope (``status``; ``http_status`` 200 for
        an envelope-only failure).
    ``delay``: sleep ``delay_seconds`` before handling (``after: false``) or after handling but
        before answering (``after: true``: the change happens, the answer comes late).
    ``reprogram_half``: the next reprogram applies half of the pending relations, then fails.
    ``async``: answer matching changes with HTTP 202 and a job that ends ``delay_seconds`` later
        (``fail: true``: it ends in ``FAILURE``); see :mod:`.jobs`.
A rule matches ``method`` (or any) and ``path`` relative to ``/liqid/api/v2/`` (exact, or a
prefix ending in ``*``), and fires ``times`` times (``null`` = forever).
"""

from __future__ import annotations

import threading
from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["FaultRule", "Faults"]


class FaultRule(BaseModel):
    """One injected fault."""

    kind: Literal["error", "delay", "reprogram_half", "async"]
    method: str | None = None
    path: str | None = None
    status: int = Field(default=500, ge=400, le=599)
    http_status: int | None = Field(default=None, ge=200, le=599)
    message: str = "injected fault"
    type: str = "InjectedFault"
    delay_seconds: float = Field(default=0.0, ge=0, le=600)
    after: bool = False
    fail: bool = False
    times: int | None = Field(default=1, ge=1)

    def matches(self, method: str, path: str) -> bool:
        """True when the rule applies to this call."""
        if self.method and self.method.upper() != method.upper():
            return False
        if self.path is None:
            return True
        if self.path.endswith("*"):
            return path.startswith(self.path[:-1])
        return path == self.path


class Faults:
    """Thread-safe list of active fault rules."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def add(self, rule: FaultRule) -> None:
        """Activate a rule."""
        with self._lock:
            self._rules.append(rule)

    def clear(self) -> None:
        """Drop every rule."""
        with self._lock:
            self._rules.clear()

    def list(self) -> list[FaultRule]:
        """The active rules."""
        with self._lock:
            return list(self._rules)

    def take(self, kinds: tuple[str, ...], method: str, path: str) -> FaultRule | None:
        """Consume and return the first active rule of ``kinds`` matching the call."""
        with self._lock:
            for rule in self._rules:
                if rule.kind in kinds and rule.matches(method, path):
                    if rule.times is not None:
                        rule.times -= 1
                        if rule.times <= 0:
                            self._rules.remove(rule)
                    return rule
        return None
