"""Start, track and stop the lab's background processes.

Each process runs in its own session (process group) with stdout/stderr appended to
``<lab dir>/logs/<name>.log`` and its pid recorded in ``<lab dir>/pids/<name>.pid``.
``stop_all`` signals every recorded group (SIGTERM, then SIGKILL after a grace period), so
``lab down`` leaves no process behind even after a crash of the process that started them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from lab import readiness


class LabProcessError(RuntimeError):
    """A lab process failed to start or to become ready; the message names it and its log."""


def _pid_dir(lab_dir: Path) -> Path:
    d = lab_dir / "pids"
    d.mkdir(parents=True, exist_ok=True)
    return d


def log_path(lab_dir: Path, name: str) -> Path:
    """Path of the log file of process ``name``."""
    d = lab_dir / "logs"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{name}.log"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still "exists"; reap it if we can.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def recorded_pid(lab_dir: Path, name: str) -> int | None:
    """The pid in process ``name``'s pid file (alive or not), None without a readable one."""
    try:
        return int((_pid_dir(lab_dir) / f"{name}.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def running(lab_dir: Path, name: str) -> int | None:
    """Pid of process ``name`` if it is recorded and alive, else None."""
    pid = recorded_pid(lab_dir, name)
    return pid if pid and _alive(pid) else None


def command_line(pid: int) -> list[str] | None:
    """Process ``pid``'s argv as ``/proc/<pid>/cmdline`` holds it, None when it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]]


def rss_bytes(lab_dir: Path, name: str) -> int | None:
    """Resident memory (bytes) of process ``name`` and every process of its session (it is started
    as a session leader, so its sid is its pid), None when it is not running. Read from
    ``/proc/<pid>/stat`` (field 24, ``rss``, in pages; proc(5))."""
    pid = running(lab_dir, name)
    if pid is None:
        return None
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields[0] is field 3 (state): the session is field 6, rss field 24.
        if len(fields) > 21 and int(fields[3]) == pid:
            total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    return total


def start(
    lab_dir: Path,
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    ports: Sequence[int] = (),
    restart_if_changed: bool = False,
) -> int:
    """Start ``argv`` in the background as process ``name``; returns its pid.

    A process of that name that is already alive is left alone (its pid is returned); with
    ``restart_if_changed`` one running with another command line is stopped and started anew.
    Raises:
        LabProcessError: the executable cannot be started, or one of ``ports`` (the ones
            it will listen on) is already taken by a process this lab did not start.
    """
    pid = running(lab_dir, name)
    if pid and restart_if_changed and command_line(pid) not in (None, list(argv)):
        stop(lab_dir, name)
        pid = None
    if pid:
        return pid
    busy = [p for p in ports if port_open(p)]
    if busy:
        raise LabProcessError(
            f"{name}: 127.0.0.1 port(s) {busy} already in use by a process this lab ({lab_dir}) did not "
            "start, probably the lab of another checkout: stop it there with `make lab-down`"
        )
    log = log_path(lab_dir, name).open("ab")
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
        )
    except OSError as exc:
        raise LabProcessError(f"{name}: cannot start {argv[0]}: {exc}") from exc
    finally:
        log.close()
    (_pid_dir(lab_dir) / f"{name}.pid").write_text(str(proc.pid))
    return proc.pid


def stop(lab_dir: Path, name: str, *, grace_seconds: float = 10.0) -> bool:
    """Stop process ``name`` and its process group. Returns True if something was stopped."""
    pid = running(lab_dir, name)
    stopped = False
    if pid:
        for sig, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if not _alive(pid):
                break
        # The leader is gone; sweep any member of its group that ignored SIGTERM.
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        stopped = True
    forget(lab_dir, name)
    return stopped


def forget(lab_dir: Path, name: str) -> None:
    """Remove the pid file of process ``name`` (one that is gone), so the lab no longer counts it."""
    (_pid_dir(lab_dir) / f"{name}.pid").unlink(missing_ok=True)


def recorded(lab_dir: Path) -> list[str]:
    """Names of all processes with a pid file."""
    return sorted(p.stem for p in _pid_dir(lab_dir).glob("*.pid"))


def stop_all(lab_dir: Path, order: Sequence[str] = ()) -> list[str]:
    """Stop every recorded process, ``order`` first (e.g. clients before servers)."""
    names = [n for n in order if n in recorded(lab_dir)]
    names += [n for n in recorded(lab_dir) if n not in names]
    return [n for n in names if stop(lab_dir, n)]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """True if something accepts TCP connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_until(
    check: Callable[[], bool],
    *,
    what: str,
    timeout_seconds: float,
    lab_dir: Path | None = None,
    name: str | None = None,
    interval_seconds: float = 0.2,
) -> None:
    """``readiness.wait_until`` for a lab process: stops early if process ``name`` died.

    Raises:
        LabProcessError: on timeout, or when process ``name`` died meanwhile; the message
            quotes the end of its log.
    """
    alive: Callable[[], bool] | None = None
    log: Path | None = None
    if lab_dir is not None and name is not None:
        watched_dir, watched_name = lab_dir, name
        alive = lambda: running(watched_dir, watched_name) is not None  # noqa: E731
        log = log_path(lab_dir, name)
    try:
        readiness.wait_until(check, what=what, timeout_seconds=timeout_seconds,
                             interval_seconds=interval_seconds, alive=alive, log=log)
    except readiness.NotReadyError as exc:
        raise LabProcessError(str(exc)) from exc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
