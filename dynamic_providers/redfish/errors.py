"""Exceptions raised by the Redfish client and providers.

Tree (every class is a :class:`RedfishError`)::

    RedfishError                  base; carries method, url, status and the BMC's messages
    ├── UnreachableError          no HTTP answer: refused, DNS, connect/read timeout (after retries)
    │   └── RedfishTimeoutError   the connect or read timeout expired
    ├── TlsError                  TLS handshake or certificate verification failed
    ├── AuthError                 401/403, wrong credentials, or re-authentication failed
    ├── NotFoundError             404: no such resource (system id, action, session)
    ├── ConflictError             409: the resource is in a state that refuses the change
    │   └── PreconditionFailedError  412: If-Match ETag no longer current (someone else wrote)
    ├── BadRequestError           400: the BMC rejected the request body
    │   └── UnknownAttributeError    a BIOS attribute the BMC does not have
    ├── ServerError               5xx that survived the retries
    ├── ProtocolError             the answer does not have the Redfish shape we rely on
    └── NotConvergedError         (providers) settings accepted but not observed afterwards

Messages are one readable line: ``METHOD URL -> STATUS: <most severe ExtendedInfo message>
(MessageId) Resolution: ...``. Request bodies are never included (the session request
carries the password) and response text is truncated to :data:`MAX_BODY_CHARS`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from dynamic_providers.redfish.models import RedfishMessage

#: Longest piece of a non-JSON response body quoted in an error message.
MAX_BODY_CHARS = 300

_SEVERITY_ORDER = {"Critical": 0, "Warning": 1, "OK": 2}


def most_severe(messages: Sequence[RedfishMessage]) -> RedfishMessage | None:
    """The first Critical message, else the first Warning, else the first; None if empty."""
    if not messages:
        return None
    return min(messages, key=lambda m: _SEVERITY_ORDER.get(m.severity or "", 3))


class RedfishError(Exception):
    """Base of every error from ``dynamic_providers.redfish``.

    Attributes:
        method: HTTP method (``GET``, ``PATCH`` ...) or ``None`` when no request was involved.
        url: full URL of the request, or ``None``.
        status: HTTP status, or ``None`` when there was no HTTP answer.
        messages: the response's ``error.@Message.ExtendedInfo`` entries, parsed.
        detail: short text: the most severe message, or a transport error's description.
        context: what the caller was doing (e.g. ``DpuPosture on https://bmc``), or None.
    """

    context: str | None = None

    def __init__(self, detail: str, *, method: str | None = None, url: str | None = None,
                 status: int | None = None, messages: Sequence[RedfishMessage] = ()) -> None:
        self.detail = detail
        self.method = method
        self.url = url
        self.status = status
        self.messages = list(messages)
        super().__init__(self._render())

    def with_context(self, context: str) -> Self:
        """A copy of this error (same class and fields) whose message starts with ``context``."""
        clone = copy.copy(self)
        clone.context = context
        clone.args = (clone._render(),)
        return clone

    def _render(self) -> str:
        where = " ".join(p for p in (self.method, self.url) if p)
        head = f"{where} -> {self.status}" if self.status is not None else where
        text = f"{head}: {self.detail}" if head else self.detail
        top = self.most_severe
        if top is not None:
            if top.message_id:
                text += f" ({top.message_id})"
            if top.resolution and top.resolution != "None.":
                text += f" Resolution: {top.resolution}"
            others = [m.message for m in self.messages if m is not top and m.message]
            if others:
                text += " Also: " + " | ".join(others)
        return f"{self.context}: {text}" if self.context else text

    @property
    def most_severe(self) -> RedfishMessage | None:
        """The first Critical message, else the first Warning, else the first message."""
        return most_severe(self.messages)

    @property
    def message_ids(self) -> list[str]:
        """MessageIds of all messages, e.g. ``["Base.1.16.0.PropertyUnknown"]``."""
        return [m.message_id for m in self.messages if m.message_id]


class UnreachableError(RedfishError):
    """No HTTP answer from the BMC (connection refused, DNS, network), after retries."""


class RedfishTimeoutError(UnreachableError):
    """The connect or read timeout expired (after retries for idempotent calls)."""


class TlsError(RedfishError):
    """TLS failed: usually the BMC's certificate is not signed by the configured CA bundle."""


class AuthError(RedfishError):
    """401/403: wrong credentials, a refused session, or re-authentication failed once more."""


class NotFoundError(RedfishError):
    """404: the resource (system, BIOS, OEM extension, session) does not exist on this BMC."""


class ConflictError(RedfishError):
    """409: the BMC refuses the change in its current state."""


class PreconditionFailedError(ConflictError):
    """412: the ``If-Match`` ETag is stale; someone changed the resource since we read it.

    Nothing was written. Read again and decide again (a provider run does this on the next
    ``pulumi up``)."""


class BadRequestError(RedfishError):
    """400: the BMC rejected the request (wrong property, value or type)."""


class UnknownAttributeError(BadRequestError):
    """A BIOS attribute the BMC does not have (400 ``PropertyUnknown``, or found missing
    before sending). ``attributes`` lists the offending names."""

    def __init__(self, detail: str, *, attributes: Sequence[str] = (), **kwargs: object) -> None:
        self.attributes = list(attributes)
        super().__init__(detail, **kwargs)  # type: ignore[arg-type]


class ServerError(RedfishError):
    """5xx from the BMC that was not cured by retries (or a non-idempotent call's 5xx)."""


class ProtocolError(RedfishError):
    """The BMC answered, but not with the Redfish shape the client relies on."""


class NotConvergedError(RedfishError):
    """The BMC accepted the settings, but reading back does not show them (or a reset did
    not apply them within the timeout)."""
