"""One-line provider errors on the terminal, the traceback on request.

Pulumi's Python dynamic-provider server (``pulumi.dynamic.__main__``, the process the engine
starts for every dynamic provider) wraps each gRPC method in ``_abort_with_traceback`` and
answers any exception with ``traceback.format_exc()``, so a refused password reaches the
user as 25 to 100 lines of Python. Our providers raise typed errors whose message already
says what failed (resource, endpoint, method, status, vendor message, what to do).

``install()`` swaps the ``traceback`` module the server formats with for a proxy whose
``format_exc`` returns just that message for our typed errors, and sends the full traceback
to the engine's log at debug level (``pulumi up --debug``, or ``-v=9 --logflow`` with the
engine log). Any other exception (a bug) keeps its full traceback. The swap touches one
name in the SDK's server module; the SDK offers no hook for it. It is a no-op anywhere else
(the program process, tests), and idempotent.
"""

from __future__ import annotations

import re
import sys
import traceback
from types import ModuleType

from dynamic_providers.director.errors import DirectorError
from dynamic_providers.redfish.errors import RedfishError
from dynamic_providers.ssh.errors import SshError

#: Exception types whose message is the whole story for a user (one line, secrets excluded).
ONE_LINE_ERRORS: tuple[type[Exception], ...] = (DirectorError, RedfishError, SshError)

_ADDRESS = re.compile(r"^(127\.0\.0\.1|localhost|\[::1\]|[\w.-]+):\d+$")


def one_line(exc: BaseException) -> str | None:
    """The message to show for ``exc`` (``"<Type>: <message>"``, one line), or None when it
    is not one of ``ONE_LINE_ERRORS`` and must keep its traceback."""
    if not isinstance(exc, ONE_LINE_ERRORS):
        return None
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"


def _engine_address(argv: list[str]) -> str | None:
    """The engine's gRPC address: the engine passes it as the provider's last plain argument."""
    for arg in reversed(argv[1:]):
        if _ADDRESS.match(arg):
            return arg
    return None


def _log_debug(message: str) -> None:
    """Best effort: write ``message`` to the engine's log at debug severity."""
    address = _engine_address(sys.argv)
    if address is None:
        return
    try:
        import grpc
        from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc

        with grpc.insecure_channel(address) as channel:
            engine_pb2_grpc.EngineStub(channel).Log(
                engine_pb2.LogRequest(severity=engine_pb2.DEBUG, message=message), timeout=5)
    except Exception:  # noqa: BLE001 - the debug copy must never hide the error itself
        pass


class _TracebackProxy(ModuleType):
    """Stands in for the ``traceback`` module inside the dynamic-provider server."""

    def __init__(self) -> None:
        super().__init__("traceback")

    def __getattr__(self, name: str) -> object:
        return getattr(traceback, name)

    @staticmethod
    def format_exc(limit: int | None = None, chain: bool = True) -> str:
        exc = sys.exc_info()[1]
        full = traceback.format_exc(limit=limit, chain=chain)
        short = one_line(exc) if exc is not None else None
        if short is None:
            return full
        _log_debug(full)
        return short


def install() -> bool:
    """Report ``ONE_LINE_ERRORS`` as one line in this process's dynamic-provider server.

    Returns:
        True when the server module was found and patched (now or before), else False.
    """
    server = next((m for m in (sys.modules.get("__main__"), sys.modules.get("pulumi.dynamic.__main__"))
                   if m is not None and hasattr(m, "_abort_with_traceback")), None)
    if server is None:
        return False
    if not isinstance(getattr(server, "traceback", None), _TracebackProxy):
        server.traceback = _TracebackProxy()
    return True
