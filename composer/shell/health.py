"""HTTP endpoints for the kubelet and Prometheus: ``/healthz``, ``/readyz``, ``/metrics``.

- ``/healthz`` (liveness): 200 while the control loop thread is alive and has completed a
  loop iteration within ``stall_seconds``; 503 otherwise (the kubelet then restarts the pod).
- ``/readyz`` (readiness): 200 once this replica can do its job: it is the leader and a round
  has succeeded within ``stall_seconds``, or it is a standby that reaches the API server.
- ``/metrics``: Prometheus text format.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST


class Probes:
    """Shared state the endpoints report on (written by the loop, read by HTTP threads)."""

    def __init__(self, *, stall_seconds: float, clock: Callable[[], float]) -> None:
        self.stall_seconds = stall_seconds
        self.clock = clock
        self.heartbeat = clock()
        self.ready = False
        self.detail = "starting"

    def beat(self, *, ready: bool, detail: str) -> None:
        """Record one loop iteration and whether the replica is ready."""
        self.heartbeat = self.clock()
        self.ready = ready
        self.detail = detail

    def live(self) -> tuple[bool, str]:
        """(alive, reason)."""
        age = self.clock() - self.heartbeat
        return (age <= self.stall_seconds, f"last loop iteration {age:.1f} s ago")

    def readiness(self) -> tuple[bool, str]:
        """(ready, reason)."""
        alive, why = self.live()
        return (alive and self.ready, self.detail if alive else why)


def serve(
    address: str, port: int, probes: Probes, render_metrics: Callable[[], bytes]
) -> ThreadingHTTPServer:
    """Start the endpoints on a daemon thread; returns the server (``server_address`` has the port)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            if self.path == "/metrics":
                self._send(200, render_metrics(), CONTENT_TYPE_LATEST)
                return
            if self.path in ("/healthz", "/livez"):
                ok, why = probes.live()
            elif self.path == "/readyz":
                ok, why = probes.readiness()
            else:
                self._send(404, b"not found\n", "text/plain")
                return
            self._send(200 if ok else 503, f"{'ok' if ok else 'not ok'}: {why}\n".encode(), "text/plain")

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet access log
            return

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="composer-probes", daemon=True).start()
    return server
