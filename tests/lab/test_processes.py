"""Lab process tracking: stop_all leaves no process behind, children included."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from lab import processes


def _alive(pid: int) -> bool:
    """True if pid exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_stop_all_kills_process_groups_including_children(tmp_path: Path) -> None:
    child_pid_file = tmp_path / "child.pid"
    # A parent that spawns a child ignoring SIGTERM, then waits: both must be gone.
    script = (
        "import os, signal, subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open({str(child_pid_file)!r}, 'w').write(str(c.pid))\n"
        "time.sleep(600)\n"
    )
    pid = processes.start(tmp_path, "parent", [sys.executable, "-c", script])
    processes.wait_until(child_pid_file.exists, what="child", timeout_seconds=10)
    child = int(child_pid_file.read_text())
    assert processes.running(tmp_path, "parent") == pid
    assert processes.start(tmp_path, "parent", [sys.executable, "-c", "pass"]) == pid  # idempotent

    stopped = processes.stop_all(tmp_path)
    assert stopped == ["parent"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_alive(pid) or _alive(child)):
        time.sleep(0.1)
    assert not _alive(child)
    assert processes.recorded(tmp_path) == []


def test_wait_until_reports_the_log_of_a_process_that_died(tmp_path: Path) -> None:
    crash = "print('bad flag --foo'); raise SystemExit(3)"
    processes.start(tmp_path, "crasher", [sys.executable, "-c", crash])
    try:
        processes.wait_until(lambda: False, what="crasher", timeout_seconds=10,
                             lab_dir=tmp_path, name="crasher")
    except processes.LabProcessError as exc:
        assert "bad flag --foo" in str(exc)
        assert "crasher.log" in str(exc)
    else:
        raise AssertionError("wait_until did not raise")


def test_start_refuses_a_port_taken_by_a_foreign_process(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        try:
            processes.start(tmp_path, "etcd", [sys.executable, "-c", "pass"], ports=[port])
        except processes.LabProcessError as exc:
            assert str(port) in str(exc) and "make lab-down" in str(exc)
        else:
            raise AssertionError("start did not refuse the busy port")
    assert processes.recorded(tmp_path) == []
