"""Wait for something to become ready: the one readiness wait of the lab, the tests and the bench.

A server that is starting fails in many ways before it answers: the port refuses connections,
the first request times out while the process is still importing, a proxy answers 5xx. None
of these is a verdict; only the deadline is. ``wait_until`` therefore treats every exception
and every falsy answer of its probe as "not yet", polls until a deadline, and on giving up
raises ``NotReadyError`` quoting the end of the server's log, so the failure says why.

``http_probe`` is the probe for HTTP servers: any answer below 500 is "ready" (a 401 or 404
proves the server is up), and the per-request timeout is generous, because a slow first
answer is exactly what a busy machine produces.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import requests

T = TypeVar("T")

#: Per-request timeouts of ``http_probe`` in seconds: (connect, read). The read timeout is long
#: on purpose; a request that times out only counts as "not yet".
HTTP_PROBE_TIMEOUT = (3.0, 10.0)


class NotReadyError(RuntimeError):
    """Raised by ``wait_until`` when the deadline passed or the watched process died.

    Attributes:
        what: the thing that was awaited, e.g. ``"moto server"``.
        last_error: the probe's last exception as text, or ``""`` if it only answered falsy.
    """

    def __init__(self, message: str, *, what: str, last_error: str) -> None:
        super().__init__(message)
        self.what = what
        self.last_error = last_error


def log_tail(path: Path | None, lines: int = 20) -> str:
    """The last ``lines`` lines of the log at ``path``, indented, or ``""`` if there is none."""
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n  " + "\n  ".join(text) + f"\n(full log: {path})"


def wait_until(
    probe: Callable[[], T],
    *,
    what: str,
    timeout_seconds: float,
    interval_seconds: float = 0.2,
    alive: Callable[[], bool] | None = None,
    log: Path | None = None,
) -> T:
    """Call ``probe`` until it returns something truthy, and return that value.

    Args:
        probe: called repeatedly; an exception or a falsy result means "not yet".
        what: a name for the messages, e.g. ``"kube-apiserver /readyz"``.
        timeout_seconds: give up after this long (seconds, from the call).
        interval_seconds: pause between two probes.
        alive: optional; when it returns False the awaited process has died and waiting stops
            at once (its log tail is in the error).
        log: optional log file of the awaited process, quoted in the error.

    Returns:
        The probe's first truthy result.

    Raises:
        NotReadyError: the deadline passed, or ``alive`` reported the process dead; the
            message names ``what``, the probe's last error and the log's tail.
    """
    deadline = time.monotonic() + timeout_seconds
    last_error = ""
    died = False
    while True:
        try:
            result = probe()
            if result:
                return result
            last_error = ""
        except Exception as exc:  # noqa: BLE001 - a starting server fails in many ways; all mean "not yet"
            last_error = f"{type(exc).__name__}: {exc}"
        if alive is not None and not alive():
            died = True
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_seconds)
    reason = "its process exited" if died else f"not ready after {timeout_seconds:.0f} s"
    detail = f" (last probe: {last_error})" if last_error else ""
    raise NotReadyError(f"{what}: {reason}{detail}{log_tail(log)}", what=what, last_error=last_error)


def http_probe(url: str, *, verify: bool | str = True,
               timeout: tuple[float, float] = HTTP_PROBE_TIMEOUT) -> Callable[[], bool]:
    """A probe for ``wait_until``: True once ``GET url`` answers with a status below 500.

    Connection errors, timeouts and 5xx answers raise or return False, i.e. "not yet".
    ``verify`` is passed to ``requests`` (a CA bundle path for TLS servers).
    """

    def probe() -> bool:
        return requests.get(url, timeout=timeout, verify=verify).status_code < 500

    return probe
