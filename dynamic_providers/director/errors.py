"""Exceptions raised by the LIQID Director client and the GPU composition provider.

One base, subclasses by kind. Every instance carries what an operator needs to act: the HTTP
method and API path (relative to ``/liqid/api/v2/``), the HTTP status, the Director's own
error message (from the envelope's ``errors[].message``), and the machine and device the call
was about, when there is one.

::

    DirectorError                      base; never raised bare by the client
    ├── DirectorAuthError              401/403, or a re-authentication that failed again
    ├── DirectorNotFoundError          404, or a machine / group / device name that does not exist
    ├── DirectorConflictError          409: GPU held by another machine, fabric edit already open,
    │                                  relate without an open edit, device in another group's pool
    ├── DirectorRequestError           any other 4xx, or an envelope failure with no HTTP meaning
    ├── DirectorServerError            5xx (after the client's own retries), reprogram failure
    │   └── DirectorJobFailedError     an asynchronous job (HTTP 202) ended in ``FAILURE``
    ├── DirectorUnavailableError       connection refused / reset / DNS: the Director is down
    │   └── DirectorTimeoutError       connected but no answer in time (request or hot-plug)
    │       └── DirectorJobRunningError  an asynchronous job still runs after the wait: nothing
    │                                  may be cancelled until it ends (not transient)
    ├── DirectorProtocolError          a body that is not the documented envelope
    └── CompositionError               the request cannot be met from the inventory (pure planning)
        ├── UnknownModelError          no GPU of that model exists on the fabric
        └── InsufficientGpusError      fewer free GPUs of that model than requested

``DirectorServerError``, ``DirectorUnavailableError`` and ``DirectorTimeoutError`` are
*transient*: :attr:`DirectorError.transient` is ``True`` and the client's transactions retry them
after re-reading state. The others need a change of input or of the fabric.
:class:`DirectorJobRunningError` is not transient: the Director is still working on the call,
so the client neither retries nor cancels (LIQID's SDK waits for every job before its next
call, ``liqidinc/liqidsdk-java`` ``liqidsdk/src/com/liqid/sdk/LiqidClientBase.java:176-237``).

Source of the envelope shape: docs/domain.md "LIQID Director REST API" and the LIQID Go SDK
``ErrorMessage`` struct (``liqidinc/liqidsdk-go`` ``types.go``: ``code``, ``message``, ``type``).
"""

from __future__ import annotations

from collections.abc import Iterable

from domain.errortext import MAX_QUOTED_CHARS, DetailedError, clip

__all__ = [
    "CompositionError",
    "DirectorAuthError",
    "DirectorConflictError",
    "DirectorError",
    "DirectorJobFailedError",
    "DirectorJobRunningError",
    "DirectorNotFoundError",
    "DirectorProtocolError",
    "DirectorRequestError",
    "DirectorServerError",
    "DirectorTimeoutError",
    "DirectorUnavailableError",
    "InsufficientGpusError",
    "UnknownModelError",
    "name_list",
]

#: Most names an error message lists before "and N more" (a fabric holds thousands of GPUs).
MAX_NAMES_LISTED = 10


def name_list(names: Iterable[str], *, limit: int = MAX_NAMES_LISTED) -> str:
    """``"a, b, c"``, the first ``limit`` names then ``"… and N more"``, or ``"none"``.

    Keeps an operator-facing message readable on a fabric of 1,000 machines or GPUs.
    """
    items = list(names)
    if not items:
        return "none"
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} … and {len(items) - limit} more"

#: Longest Director message kept in an exception (bodies may echo request data).
MAX_MESSAGE_CHARS = MAX_QUOTED_CHARS


class DirectorError(DetailedError):
    """Base of every Director error.

    Attributes:
        summary: what went wrong, in one sentence.
        method: HTTP method (``POST``) or ``None`` when no request was involved.
        path: API path relative to ``/liqid/api/v2/`` (``fabric/reprogram``), or ``None``.
        status: HTTP status, or ``None`` (no response, or planning error).
        director_message: the Director's own ``errors[].message`` text, clipped to
            300 characters, or ``None``.
        machine: the machine (name or id) the call was about, or ``None``.
        device: the device name(s) the call was about (``gpu7`` or ``gpu6,gpu7``), or ``None``.
        job: the link of the call's asynchronous job (HTTP 202) when the client could not see
            it end (still running after the wait, or a poll of it failed), else ``None``.
    """

    job: str | None = None

    def __init__(
        self,
        summary: str,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
        director_message: str | None = None,
        machine: str | int | None = None,
        device: str | None = None,
    ) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.director_message = clip(director_message, MAX_MESSAGE_CHARS)
        self.machine = machine
        self.device = device
        super().__init__(summary)

    def _details(self) -> Iterable[str | None]:
        if self.method or self.path:
            call = f"{self.method or ''} {self.path or ''}".strip()
            yield f"[{call}" + (f" -> HTTP {self.status}]" if self.status is not None else "]")
        if self.machine is not None:
            yield f"machine={self.machine}"
        yield f"device={self.device}" if self.device else None
        yield f"director says: {self.director_message}" if self.director_message else None


class DirectorAuthError(DirectorError):
    """Credentials refused (HTTP 401/403), also after one re-authentication."""


class DirectorNotFoundError(DirectorError):
    """A machine, group or device that does not exist (HTTP 404 or a name lookup)."""


class DirectorConflictError(DirectorError):
    """The fabric refuses the change in its current state (HTTP 409 or its envelope twin).

    Raised for: a GPU held by another machine, a fabric edit already open on the machine,
    relate/unrelate without an open edit, a device in another group's pool.
    """


class DirectorRequestError(DirectorError):
    """The Director rejected the request for another reason (other 4xx, envelope failure)."""


class DirectorServerError(DirectorError):
    """The Director failed (HTTP 5xx after retries, or a reprogram that failed)."""

    transient = True


class DirectorUnavailableError(DirectorError):
    """No connection to the Director (refused, reset, DNS): it is down or unreachable."""

    transient = True


class DirectorTimeoutError(DirectorUnavailableError):
    """Connected, but no answer within the timeout (request timeout or hot-plug wait)."""


class DirectorJobFailedError(DirectorServerError):
    """An asynchronous job (an HTTP 202 answer) ended with ``command_execution_state``
    ``FAILURE`` (``LiqidClientBase.java:31``). The job is over: its edit may be cancelled."""


class DirectorJobRunningError(DirectorTimeoutError):
    """An asynchronous job (an HTTP 202 answer) was still ``Pending`` when the wait ran out.

    The Director is still applying the call; nothing may be cancelled or retried until the job
    ends. ``director_message`` names the job link.
    """

    transient = False


class DirectorProtocolError(DirectorError):
    """The response is not the documented ``{"response": {...}}`` envelope."""


class CompositionError(DirectorError):
    """A composition request cannot be met from the current inventory (no request sent)."""


class UnknownModelError(CompositionError):
    """No GPU of the requested model exists on the fabric at all."""


class InsufficientGpusError(CompositionError):
    """Fewer free GPUs of the requested model than the composition needs."""
