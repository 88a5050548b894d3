"""The pod-gating mutating admission webhook, served over HTTPS by the composer.

``POST /mutate-pods`` takes an ``admission.k8s.io/v1`` AdmissionReview and answers with the
decision of :func:`composer.decide.gating.admission_response` (always ``allowed``; a JSONPatch adding
the scheduling gate to new GPU pods of the served namespaces). Every replica serves it, leader
or not: admission needs no lease, and the gate only holds a pod until the leader releases it.

TLS: the serving certificate and key are PEM files (the chart mounts its Secret there). The
files are checked before each accepted connection (one ``stat`` each) and loaded again when
they changed, so a rotated certificate is served without a restart.

The API server only talks to the webhook over HTTPS (Kubernetes docs "Dynamic Admission
Control": "the webhook must be served over https").
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from composer.decide.gating import admission_response
from composer.shell.pod_steps import log_step

log = logging.getLogger(__name__)

PATH = "/mutate-pods"
#: Longest a client may take for the TLS handshake and each read (seconds).
HANDSHAKE_SECONDS = 5.0
#: Largest AdmissionReview body read (the API server's request size limit is 3 MiB).
MAX_BODY = 3 * 1024 * 1024


class _Certs:
    """A server-side SSLContext for a cert/key pair, rebuilt when either file changes."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = cert, key
        self._stamp: tuple[float, float] = (0.0, 0.0)
        self.context = self._load()

    def _load(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(self.cert), str(self.key))
        self._stamp = (os.stat(self.cert).st_mtime, os.stat(self.key).st_mtime)
        return ctx

    def fresh(self) -> ssl.SSLContext | None:
        """A new context when the files changed since the last load, else None."""
        try:
            stamp = (os.stat(self.cert).st_mtime, os.stat(self.key).st_mtime)
        except OSError:
            return None
        if stamp == self._stamp:
            return None
        try:
            self.context = self._load()
        except (OSError, ssl.SSLError) as exc:  # a half-written rotation: keep serving the old pair
            log.warning("webhook certificate not reloaded: %s", exc)
            return None
        log.info("webhook certificate reloaded from %s", self.cert)
        return self.context


class WebhookServer(ThreadingHTTPServer):
    """HTTPS server of the admission webhook (TLS handshake per connection, in its thread)."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], certs: _Certs, handler: type[BaseHTTPRequestHandler]
    ) -> None:
        self.certs = certs
        super().__init__(address, handler)

    def get_request(self) -> tuple[Any, Any]:
        """Accept, then wrap in TLS with the current certificate (reloaded if rotated)."""
        self.certs.fresh()
        sock, addr = self.socket.accept()
        sock.settimeout(HANDSHAKE_SECONDS)  # a stalled client cannot hold the accept loop for long
        try:
            return self.certs.context.wrap_socket(sock, server_side=True), addr
        except (ssl.SSLError, OSError):
            sock.close()
            raise


def _pod_key(review: dict[str, Any]) -> str:
    """``namespace/name`` of the pod in an AdmissionReview (``request.name`` is empty when the pod
    is created with ``generateName``; then the object's name, else "")"""
    req = review.get("request") or {}
    meta = (req.get("object") or {}).get("metadata") or {}
    namespace = req.get("namespace") or meta.get("namespace") or ""
    return f"{namespace}/{req.get('name') or meta.get('name') or ''}"


def serve_webhook(
    address: str,
    port: int,
    *,
    cert_file: Path,
    key_file: Path,
    namespaces: frozenset[str] = frozenset(),
    on_gated: Callable[[], None] = lambda: None,
) -> WebhookServer:
    """Start the webhook on a daemon thread; returns the server (``server_address`` has the port).

    Args:
        address / port: where to listen (port 0 = any free port).
        cert_file / key_file: PEM serving certificate and key.
        namespaces: namespaces served (empty = all).
        on_gated: called for each pod gated (metrics).

    Raises:
        OSError / ssl.SSLError: the port is taken or the certificate cannot be loaded.
    """
    certs = _Certs(cert_file, key_file)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            if self.path.split("?", 1)[0] != PATH:
                self._send(404, {"message": "not found"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 < length <= MAX_BODY:
                    raise ValueError(f"body of {length} bytes")
                review = json.loads(self.rfile.read(length))
                answer, verdict = admission_response(review, namespaces=namespaces)
            except (ValueError, TypeError) as exc:
                log.warning("webhook: bad AdmissionReview: %s", exc)
                self._send(400, {"message": f"bad AdmissionReview: {exc}"})
                return
            if verdict.gated:
                on_gated()
                log_step("admitted", _pod_key(review), time.time())
            log.debug("webhook: %s", verdict.why)
            self._send(200, answer)

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet access log
            return

    server = WebhookServer((address, port), certs, Handler)
    threading.Thread(target=server.serve_forever, name="composer-webhook", daemon=True).start()
    return server
