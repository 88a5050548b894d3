"""Run the Director simulator (hardware stand-in) in a background thread, on a free port.

For tests and embedding::

    with SimulatorServer(app) as sim:
        client = DirectorClient(sim.url, ...)
"""

from __future__ import annotations

import threading

from flask import Flask
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

__all__ = ["SimulatorServer"]


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class SimulatorServer:
    """A threaded WSGI server for a simulator app.

    Args:
        app: the Flask app (``create_app``).
        host: bind address (``127.0.0.1``).
        port: TCP port; ``0`` picks a free one (see :attr:`port`).
        quiet: do not log each request (tests).
    """

    def __init__(self, app: Flask, *, host: str = "127.0.0.1", port: int = 0, quiet: bool = False) -> None:
        self.app = app
        handler = _QuietHandler if quiet else WSGIRequestHandler
        self._server: BaseWSGIServer = make_server(host, port, app, threaded=True, request_handler=handler)
        self.host = host
        self.port: int = self._server.server_port
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"director-sim:{self.port}",
            daemon=True,
        )

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> SimulatorServer:
        """Start serving in the background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
