"""Exceptions raised by the SSH runner and the host/DPU preparation providers.

One base, subclasses by kind. Every instance names the target (``user@host:port``) and,
for command failures, the program that failed, its exit status and the first 300
characters of its stderr. No instance ever carries key material: the runner builds the
messages itself and never includes the private key, and command output is clipped.

::

    SshError                      base; never raised bare
    ├── SshAuthError              the server refused our key (publickey auth failed)
    ├── SshHostKeyError           the server's host key is not the pinned one (or none pinned)
    ├── SshUnavailableError       connection refused / reset / no route: the host is down
    │   └── SshTimeoutError       connected (or connecting) but no answer in time
    ├── SshCommandError           a remote command exited non-zero
    └── ToolOutputError           a tool's output is not in the documented format
                                  (e.g. ``mlxconfig query`` rows missing a parameter)

``SshUnavailableError`` and ``SshTimeoutError`` are *transient*
(:attr:`SshError.transient`); the runner retries connecting on them, e.g. while a host
reboots. The others need a change of input or of the target.
"""

from __future__ import annotations

from collections.abc import Iterable

from domain.errortext import MAX_QUOTED_CHARS, DetailedError, clip

__all__ = [
    "SshAuthError",
    "SshCommandError",
    "SshError",
    "SshHostKeyError",
    "SshTimeoutError",
    "SshUnavailableError",
    "ToolOutputError",
]

#: Longest piece of remote output kept in an exception.
MAX_OUTPUT_CHARS = MAX_QUOTED_CHARS


class SshError(DetailedError):
    """Base of every SSH-preparation error.

    Attributes:
        summary: what went wrong, in one sentence.
        target: ``user@host:port`` or ``None``.
        command: the program that ran (``mlxconfig set``), or ``None``.
        exit_status: the remote exit status, or ``None``.
        stderr: the remote stderr (or stdout when stderr was empty), clipped, or ``None``.
    """

    def __init__(
        self,
        summary: str,
        *,
        target: str | None = None,
        command: str | None = None,
        exit_status: int | None = None,
        stderr: str | None = None,
    ) -> None:
        self.target = target
        self.command = command
        self.exit_status = exit_status
        self.stderr = clip(stderr, MAX_OUTPUT_CHARS)
        super().__init__(summary)

    def _details(self) -> Iterable[str | None]:
        yield f"[{self.target}]" if self.target else None
        yield f"command={self.command}" if self.command else None
        yield f"exit={self.exit_status}" if self.exit_status is not None else None
        yield f"output: {self.stderr}" if self.stderr else None


class SshAuthError(SshError):
    """The server refused public-key authentication for the user with the given key."""


class SshHostKeyError(SshError):
    """The server presented a host key other than the pinned one; nothing was sent."""


class SshUnavailableError(SshError):
    """No SSH connection could be made (refused, reset, unreachable)."""

    transient = True


class SshTimeoutError(SshUnavailableError):
    """Connecting, authenticating or a command took longer than its timeout."""


class SshCommandError(SshError):
    """A remote command exited with a non-zero status."""


class ToolOutputError(SshError):
    """A remote tool answered, but not in the documented format."""
