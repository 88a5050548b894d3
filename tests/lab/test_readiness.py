"""lab.readiness: slowness and transient failures are "not yet"; only the deadline fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lab import readiness


class _SlowStart(BaseHTTPRequestHandler):
    """Answers its first request after ``first_delay`` seconds, then ``statuses`` in turn, then 200."""

    first_delay = 0.0
    statuses: list[int] = []
    seen: list[float] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        cls = type(self)
        cls.seen.append(time.monotonic())
        if len(cls.seen) == 1 and cls.first_delay:
            time.sleep(cls.first_delay)
        status = cls.statuses.pop(0) if cls.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[tuple[str, type[_SlowStart]]]:
    handler = type("Handler", (_SlowStart,), {"first_delay": 0.0, "statuses": [], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", handler
    server.shutdown()
    server.server_close()


def test_a_server_whose_first_answer_takes_3_s_is_ready_not_failed(slow_server) -> None:
    url, handler = slow_server
    handler.first_delay = 3.0
    # A probe whose read timeout (1 s) is shorter than the first answer: that request times out,
    # which must count as "not yet"; a later request is answered and the wait succeeds.
    probe = readiness.http_probe(url, timeout=(1.0, 1.0))
    with pytest.raises(Exception, match="Read timed out"):
        probe()  # the helper's probe does raise on the slow answer; the wait must absorb it
    handler.seen.clear()
    handler.first_delay = 3.0
    assert readiness.wait_until(probe, what="slow server", timeout_seconds=30, interval_seconds=0.1) is True
    assert len(handler.seen) >= 2


def test_the_default_probe_waits_out_a_3_s_first_answer_in_one_request(slow_server) -> None:
    url, handler = slow_server
    handler.first_delay = 3.0
    start = time.monotonic()
    assert readiness.wait_until(readiness.http_probe(url), what="slow server", timeout_seconds=30)
    assert len(handler.seen) == 1 and time.monotonic() - start >= 3.0


def test_5xx_answers_are_not_yet(slow_server) -> None:
    url, handler = slow_server
    handler.statuses = [503, 502, 500]
    assert readiness.wait_until(readiness.http_probe(url), what="proxy", timeout_seconds=30,
                                interval_seconds=0.05)
    assert len(handler.seen) == 4


def test_connection_refused_until_the_deadline_fails_with_the_last_error_and_the_log(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    log = tmp_path / "server.log"
    log.write_text("starting\nbind: address already in use\n")
    with pytest.raises(readiness.NotReadyError) as info:
        readiness.wait_until(readiness.http_probe(f"http://127.0.0.1:{port}/"), what="my server",
                             timeout_seconds=1, interval_seconds=0.1, log=log)
    message = str(info.value)
    assert message.startswith("my server: not ready after 1 s")
    assert "ConnectionError" in message and "address already in use" in message and str(log) in message


def test_a_dead_process_stops_the_wait_at_once(tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(readiness.NotReadyError, match="its process exited"):
        readiness.wait_until(lambda: False, what="crasher", timeout_seconds=60, alive=lambda: False)
    assert time.monotonic() - start < 30  # far below the deadline: it did not wait it out


def test_the_first_truthy_result_is_returned() -> None:
    answers = iter([None, {}, {"url": "http://x"}])
    assert readiness.wait_until(lambda: next(answers), what="file", timeout_seconds=10,
                                interval_seconds=0.01) == {"url": "http://x"}
