"""The demo's dashboard step (``lab.demo.draw_dashboard``): with the lab's Prometheus running it
queries it with the dashboard's PromQL for the estate's composer namespace over the scenario's
window and writes ``<lab_dir>/composer-dashboard.png``; without it, or when a query fails, it says
so in one line and draws nothing. Prometheus is a stub on an ephemeral port."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from lab import demo, processes, settings

NS = "gpu-composer-demo"


class _Prometheus(BaseHTTPRequestHandler):
    asked: list[dict[str, str]] = []
    answer: tuple[int, dict[str, Any]] = (200, {})

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        type(self).asked.append({"path": url.path, **q})
        code, body = type(self).answer
        if code == 200 and "composer_free_gpus" in q.get("query", ""):
            body = {"status": "success", "data": {"resultType": "matrix", "result": [
                {"metric": {"pool": "gpu-pool", "model": "Tesla-T4"},
                 "values": [[float(q["start"]), "2"], [float(q["end"]), "0"]]}]}}
        self.send_response(code)
        self.end_headers()  # HTTP/1.0: the body ends with the connection
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[str]:
    _Prometheus.asked = []
    _Prometheus.answer = (200, {"status": "success", "data": {"resultType": "matrix", "result": []}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_png_is_drawn_from_prometheus_for_the_estates_namespace(
    stub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = settings.LabConfig(lab_dir=tmp_path)
    monkeypatch.setattr(processes, "running",
                        lambda lab_dir, name: os.getpid() if name == "prometheus" else None)
    start, end = 1_800_000_000.0, 1_800_000_300.0
    line = demo.draw_dashboard(cfg, NS, start, end, prometheus_url=stub)
    png = tmp_path / demo.DASHBOARD_PNG
    assert line == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _Prometheus.asked and all(a["path"] == "/api/v1/query_range" for a in _Prometheus.asked)
    assert all(f'namespace="{NS}"' in a["query"] for a in _Prometheus.asked)
    assert {(float(a["start"]), float(a["end"])) for a in _Prometheus.asked} == {(start, end)}


def test_no_png_and_one_line_without_prometheus_or_when_a_query_fails(
    stub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = settings.LabConfig(lab_dir=tmp_path)
    monkeypatch.setattr(processes, "running", lambda lab_dir, name: None)
    assert demo.draw_dashboard(cfg, NS, 0, 300, prometheus_url=stub) == (
        "not drawn: the lab's Prometheus is not running (make lab-up says why)"
    )
    assert _Prometheus.asked == []

    monkeypatch.setattr(processes, "running", lambda lab_dir, name: os.getpid())
    _Prometheus.answer = (400, {"status": "error", "errorType": "bad_data", "error": "parse error"})
    line = demo.draw_dashboard(cfg, NS, 0, 300, prometheus_url=stub)
    assert line.startswith(f"not drawn: {stub}: ") and "\n" not in line, line
    assert not (tmp_path / demo.DASHBOARD_PNG).exists()
