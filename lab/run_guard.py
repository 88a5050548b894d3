"""Tie every process a test run starts to that run: when the runner ends, however it ends, they end.

The lab's processes run in sessions of their own (``lab.processes``), so that a lab started by
``make lab-up`` outlives the command that started it. Processes a test run starts must not: a
runner stopped by ``timeout`` (SIGTERM), by Ctrl-C (SIGINT) or killed outright (SIGKILL) would
leave the simulators, the control plane, ``pulumi`` and its plugins running, holding the lab's
fixed ports for the next run. A parent-death signal does not reach them (it is delivered to
direct children only, and when the thread that started them ends), so a watchdog does it:

- :func:`guard_this_run` (called by the pytest session first thing) appends a fresh token to
  ``$COMPOSABLE_GPU_TEST_RUNS`` in the runner's environment. Every process started from then on,
  in whatever session, inherits it; the kernel keeps it in ``/proc/<pid>/environ`` even after the
  process's parent has died. A run started inside another run carries both tokens.
- It starts the watchdog, ``python -m lab.run_guard``, in a session of its own, reading a pipe
  from the runner. The runner's end closes when the runner exits or is killed; the watchdog also
  notices when its parent (the runner) is gone. Then it stops every process that carries the
  token, and every descendant of one (a container's processes, the children of a program that
  cleared its environment): SIGTERM, then SIGKILL after :data:`TERM_SECONDS`. It removes the lab's
  pid files of what it stopped, unmounts the real node's volumes when it stopped its containerd
  (``lab.node.stop``), logs one line per process to ``<lab dir>/logs/run-guard.log`` and exits.
- SIGTERM and SIGINT in the runner become ``KeyboardInterrupt``, so pytest still tears down and
  prints its summary, and tell the watchdog: the runner gets :data:`STOP_GRACE_SECONDS` to finish
  (a second signal: none); a runner still there then is killed, and the sweep follows.

Everything is gone :data:`STOP_GRACE_SECONDS` + :data:`TERM_SECONDS` + :data:`KILL_SECONDS` (at most
about 20 s) after the first signal, and about 0.5 s + :data:`TERM_SECONDS` after a SIGKILL of the
runner. Processes that do not carry the token (a lab started by ``make lab-up`` and reused by the
run) are not touched.
"""

from __future__ import annotations

import argparse
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from lab import processes
from lab.settings import HYPERVISOR_CLUSTER

ROOT = Path(__file__).resolve().parent.parent
#: ``:``-separated tokens of the test runs a process belongs to (outermost first).
RUNS_ENV = "COMPOSABLE_GPU_TEST_RUNS"
#: Seconds a runner has after its first SIGTERM/SIGINT before the watchdog kills it.
STOP_GRACE_SECONDS = 10.0
#: Seconds between the sweep's SIGTERM and its SIGKILL.
TERM_SECONDS = 5.0
#: Seconds the sweep waits for SIGKILLed processes to disappear.
KILL_SECONDS = 5.0
#: How often (seconds) the watchdog checks that the runner is still its parent.
POLL_SECONDS = 0.5
#: What the runner writes to the watchdog's pipe on SIGTERM/SIGINT.
STOP_MESSAGE = b"s"
LOG_NAME = "run-guard"


# --------------------------------------------------------------------------- /proc


@dataclass(frozen=True)
class Proc:
    """A process as ``/proc`` shows it.

    Attributes:
        pid: its pid.
        start: its start time (clock ticks after boot), which tells it from a later process
            that got the same pid.
        ppid: its parent's pid.
        name: its command name (``comm``, at most 15 characters).
    """

    pid: int
    start: int
    ppid: int
    name: str


def read_proc(pid: int) -> Proc | None:
    """The live process ``pid``, or None if it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
    # rest[0] is field 3 of proc(5) (state), rest[1] field 4 (ppid), rest[19] field 22 (starttime).
    if rest[0] in ("Z", "X"):
        return None
    return Proc(pid=pid, start=int(rest[19]), ppid=int(rest[1]), name=name)


def alive(proc: Proc) -> bool:
    """True while ``proc`` (that pid with that start time) runs and is no zombie."""
    now = read_proc(proc.pid)
    return now is not None and now.start == proc.start


def runs_of(pid: int) -> list[str]:
    """The test-run tokens in process ``pid``'s environment (empty if none or unreadable)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return []
    prefix = RUNS_ENV.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return [t for t in entry[len(prefix):].decode(errors="replace").split(":") if t]
    return []


def _all_procs() -> list[Proc]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (p := read_proc(int(d.name))) is not None:
            found.append(p)
    return found


def processes_of_run(token: str, *, exclude: Iterable[int] = ()) -> list[Proc]:
    """Live processes that carry ``token`` in their environment, and all their descendants.

    Args:
        token: a run's token (see :func:`guard_this_run`).
        exclude: pids never returned (the watchdog, the runner); their descendants are
            returned only through a marked process.

    Returns:
        Those processes, in ``/proc`` order.
    """
    skip = set(exclude)
    procs = [p for p in _all_procs() if p.pid not in skip]
    chosen = {p.pid for p in procs if token in runs_of(p.pid)}
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    todo = list(chosen)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in chosen:
                chosen.add(child)
                todo.append(child)
    return [p for p in procs if p.pid in chosen]


def _signal(proc: Proc, sig: signal.Signals) -> None:
    if alive(proc):
        try:
            os.kill(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def sweep(token: str, *, exclude: Iterable[int] = (), term_seconds: float = TERM_SECONDS,
          kill_seconds: float = KILL_SECONDS) -> list[Proc]:
    """Stop every process of run ``token`` (see :func:`processes_of_run`).

    Each one gets SIGTERM; what is still alive ``term_seconds`` later gets SIGKILL. Processes that
    appear meanwhile (a parent starting one more) are found on the next scan and treated alike; a
    process found once stays watched after its parent died and its ancestry is lost.

    Returns:
        Every process that was signalled (empty when the run left nothing behind). Raises nothing
        for processes that vanished on their own.
    """
    seen: dict[tuple[int, int], Proc] = {}
    for sig, wait in ((signal.SIGTERM, term_seconds), (signal.SIGKILL, kill_seconds)):
        signalled: set[tuple[int, int]] = set()
        deadline = time.monotonic() + wait
        while True:
            for p in processes_of_run(token, exclude=exclude):
                seen.setdefault((p.pid, p.start), p)
            left = [p for key, p in seen.items() if alive(p)]
            for p in left:
                if (p.pid, p.start) not in signalled:
                    _signal(p, sig)
                    signalled.add((p.pid, p.start))
            if not left:
                return list(seen.values())
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
    return list(seen.values())


# --------------------------------------------------------------------------- the watchdog


def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)


def _forget_lab_processes(lab_dir: Path, swept: list[Proc]) -> None:
    """Remove the lab's pid files of swept processes; after the real node's containerd, unmount
    what its kubelet and containers mounted (``lab.node.stop``, with nothing left to stop)."""
    pids = {p.pid for p in swept}
    names = [n for n in processes.recorded(lab_dir) if processes.recorded_pid(lab_dir, n) in pids]
    for name in names:
        processes.forget(lab_dir, name)
    second = lab_dir / HYPERVISOR_CLUSTER  # the second control plane's pid files
    for name in processes.recorded(second) if second.is_dir() else []:
        if processes.recorded_pid(second, name) in pids:
            processes.forget(second, name)
    if "containerd" in names:
        from lab import node
        from lab.controlplane import LabConfig

        node.stop(LabConfig(lab_dir=lab_dir))


def watch(runner: int, token: str, lab_dir: Path, *, pipe: int = 0,
          grace_seconds: float = STOP_GRACE_SECONDS) -> list[Proc]:
    """The watchdog's loop: wait until runner ``runner`` (this process's parent) is gone, then sweep.

    Args:
        runner: pid of the test runner.
        token: its run token.
        lab_dir: the lab directory of the run (pid files, logs).
        pipe: file descriptor of the pipe from the runner: EOF means the runner ended,
            :data:`STOP_MESSAGE` that it got SIGTERM/SIGINT.
        grace_seconds: how long a runner that got a stop message may still run.

    Returns:
        The processes the sweep signalled.
    """
    deadline: float | None = None
    while True:
        wait = POLL_SECONDS if deadline is None else max(0.0, min(POLL_SECONDS, deadline - time.monotonic()))
        ready, _, _ = select.select([pipe], [], [], wait)
        if ready:
            data = os.read(pipe, 64)
            if not data:
                _log(f"run {token}: the runner (pid {runner}) ended")
                break
            now = time.monotonic()
            for _ in range(data.count(STOP_MESSAGE)):
                # The first stop signal starts the grace; a second one ends it.
                deadline = now + grace_seconds if deadline is None else now
            if deadline is not None:
                _log(f"run {token}: the runner got a stop signal; it may run {deadline - now:.0f} s more")
        if os.getppid() != runner:
            _log(f"run {token}: the runner (pid {runner}) is gone")
            break
        if deadline is not None and time.monotonic() >= deadline:
            _log(f"run {token}: the runner (pid {runner}) still runs after its stop signal: killing it")
            try:
                os.kill(runner, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
    swept = sweep(token, exclude=(os.getpid(), runner))
    for p in swept:
        _log(f"run {token}: stopped pid {p.pid} ({p.name})")
    _log(f"run {token}: {len(swept)} process(es) stopped" if swept else f"run {token}: nothing left running")
    _forget_lab_processes(lab_dir, swept)
    return swept


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.run_guard --runner PID --token T --lab-dir DIR`` (started by
    :func:`guard_this_run`, its pipe on stdin); returns the exit code."""
    ap = argparse.ArgumentParser(prog="python -m lab.run_guard", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", type=int, required=True, help="pid of the test runner (the parent)")
    ap.add_argument("--token", required=True, help="the run's token in $" + RUNS_ENV)
    ap.add_argument("--lab-dir", type=Path, required=True, help="the run's lab directory")
    ap.add_argument("--grace", type=float, default=STOP_GRACE_SECONDS,
                    help="seconds a runner may run on after SIGTERM/SIGINT")
    args = ap.parse_args(argv)
    # A terminal's Ctrl-C or hang-up is for the runner; this process outlives it on purpose.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    watch(args.runner, args.token, args.lab_dir, grace_seconds=args.grace)
    return 0


# --------------------------------------------------------------------------- the runner's side


@dataclass
class Guard:
    """The runner's handle on its watchdog.

    Attributes:
        token: the run's token (the last one in ``$COMPOSABLE_GPU_TEST_RUNS``).
        watchdog: the watchdog process; its stdin is the pipe.
    """

    token: str
    watchdog: subprocess.Popen[bytes]

    def stopping(self) -> None:
        """Tell the watchdog the runner got a stop signal (safe in a signal handler)."""
        try:
            if self.watchdog.stdin is not None:
                os.write(self.watchdog.stdin.fileno(), STOP_MESSAGE)
        except (OSError, ValueError):
            pass  # the pipe is already closed: the sweep has begun

    def close(self, *, timeout_seconds: float = 30.0) -> None:
        """The run ended: close the pipe and wait (at most ``timeout_seconds``) for the sweep."""
        if self.watchdog.stdin is not None and not self.watchdog.stdin.closed:
            self.watchdog.stdin.close()
        try:
            self.watchdog.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            pass


def _stop_handler(guard: Guard,
                  previous: Callable[[int, FrameType | None], object] | int | None) -> Callable[..., None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        guard.stopping()
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, frame)
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    return handler


def guard_this_run(lab_dir: Path, *, grace_seconds: float = STOP_GRACE_SECONDS) -> Guard:
    """Make this process a guarded test runner (call once, from the main thread, before it starts
    anything): mark its environment, start the watchdog, handle SIGTERM and SIGINT.

    Args:
        lab_dir: the run's lab directory (``$LAB_DIR``); the watchdog logs to
            ``<lab_dir>/logs/run-guard.log`` and cleans its pid files.
        grace_seconds: seconds the runner may run on after SIGTERM/SIGINT before it is killed.

    Returns:
        The :class:`Guard`; call its ``close`` when the run ends.

    Raises:
        OSError: the watchdog cannot be started.
    """
    token = f"{os.getpid()}.{secrets.token_hex(4)}"
    log = processes.log_path(lab_dir, LOG_NAME).open("ab")
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-m", "lab.run_guard", "--runner", str(os.getpid()), "--token", token,
             "--lab-dir", str(lab_dir), "--grace", str(grace_seconds)],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    finally:
        log.close()
    # Set after the watchdog started, so it does not carry its own run's token.
    os.environ[RUNS_ENV] = ":".join([*filter(None, os.environ.get(RUNS_ENV, "").split(":")), token])
    guard = Guard(token=token, watchdog=watchdog)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop_handler(guard, signal.getsignal(sig)))
    return guard


if __name__ == "__main__":
    sys.exit(main())
