"""The run guard: what a test run starts ends with the run, however the runner ends.

The runners here are small Python programs that guard themselves like the pytest session does
(``lab.run_guard.guard_this_run``) and start processes the lab's way (``lab.processes.start``:
a session of their own, a pid file); ``test_run_guard_lab.py`` does it with pytest and the lab.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lab import processes, run_guard

ROOT = Path(__file__).resolve().parents[2]
#: The issue's bound: everything is gone this many seconds after the runner was stopped.
GONE_WITHIN_SECONDS = 30.0


def _alive(pid: int) -> bool:
    """True if pid exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_gone(pids: list[int], seconds: float) -> tuple[float, list[int]]:
    """Seconds until every pid was gone (or ``seconds``) and those still alive then."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return time.monotonic() - t0, [p for p in pids if _alive(p)]


def _sleeper(*, ignore_term: bool = False, child_file: Path | None = None) -> str:
    """A ``python -c`` program that sleeps; optionally ignores SIGTERM and first starts a child
    with an empty environment (writing its pid to ``child_file``)."""
    lines = ["import os, signal, subprocess, sys, time"]
    if ignore_term:
        lines.append("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    if child_file is not None:
        lines.append("c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
                     "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'], env={})")
        lines.append(f"open({str(child_file)!r}, 'w').write(str(c.pid))")
    lines.append("time.sleep(600)")
    return "\n".join(lines)


def test_sweep_stops_the_runs_processes_and_their_descendants_and_nothing_else(tmp_path: Path) -> None:
    token = "4242.feedf00d"
    runs = os.environ.get(run_guard.RUNS_ENV, "1.outer")  # this run's own tokens stay on both
    child_file = tmp_path / "child.pid"
    marked = processes.start(tmp_path, "marked", [sys.executable, "-c", _sleeper(
        ignore_term=True, child_file=child_file)], env={run_guard.RUNS_ENV: f"{runs}:{token}"})
    other = processes.start(tmp_path, "other", [sys.executable, "-c", _sleeper()],
                            env={run_guard.RUNS_ENV: f"{runs}:{token}x"})
    try:
        processes.wait_until(child_file.exists, what="child", timeout_seconds=20)
        child = int(child_file.read_text())
        assert run_guard.runs_of(child) == []  # it cleared its environment: found as a descendant

        swept = run_guard.sweep(token, term_seconds=1.0)

        assert {p.pid for p in swept} == {marked, child}
        assert _wait_gone([marked, child], 5)[1] == []
        assert _alive(other)
    finally:
        processes.stop_all(tmp_path)


RUNNER = """
import json, os, sys, time
from pathlib import Path
from lab import processes, run_guard

lab_dir, out, hang = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "hang"
guard = run_guard.guard_this_run(lab_dir, grace_seconds=2.0)
child_file = lab_dir / "grandchild.pid"
sim = processes.start(lab_dir, "sim", [sys.executable, "-c", {sleeper!r}])
plain = processes.start(lab_dir, "plain", [sys.executable, "-c", {plain!r}])
while not child_file.exists():
    time.sleep(0.05)
out.write_text(json.dumps({{"watchdog": guard.watchdog.pid, "sim": sim, "plain": plain,
                           "grandchild": int(child_file.read_text())}}))
try:
    time.sleep(600)
except KeyboardInterrupt:
    (lab_dir / "interrupted").write_text("yes")
    if hang:
        time.sleep(600)
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT", "SIGTERM-hung-teardown"])
def test_a_stopped_guarded_runner_leaves_no_process_it_started(tmp_path: Path, how: str) -> None:
    lab_dir = tmp_path / "lab"
    lab_dir.mkdir()
    out = tmp_path / "started.json"
    # Started by this test (so not by the runner below): must survive the runner's sweep, as a
    # lab started by `make lab-up` survives a test run that used it.
    bystander = subprocess.Popen([sys.executable, "-c", _sleeper()], start_new_session=True)
    script = RUNNER.format(sleeper=_sleeper(ignore_term=True, child_file=lab_dir / "grandchild.pid"),
                           plain=_sleeper())
    runner = subprocess.Popen([sys.executable, "-c", script, str(lab_dir), str(out),
                               "hang" if "hung" in how else "-"], cwd=ROOT, start_new_session=True)
    try:
        processes.wait_until(lambda: out.exists() or runner.poll() is not None, what="runner",
                             timeout_seconds=60)
        assert runner.poll() is None, "the runner exited early"
        started = json.loads(out.read_text())
        assert all(_alive(p) for p in started.values())
        assert set(processes.recorded(lab_dir)) == {"sim", "plain"}

        runner.send_signal(getattr(signal, how.split("-")[0]))
        elapsed, left = _wait_gone([runner.pid, *started.values()], GONE_WITHIN_SECONDS)

        assert left == [], f"{how}: still running after {GONE_WITHIN_SECONDS:.0f} s: {left}"
        print(f"{how}: everything gone {elapsed:.1f} s after the signal")
        assert _alive(bystander.pid)
        assert processes.recorded(lab_dir) == []  # the watchdog removed their pid files
        # SIGTERM and SIGINT reach the runner as KeyboardInterrupt: pytest tears down.
        assert (lab_dir / "interrupted").exists() == (how != "SIGKILL")
        log = processes.log_path(lab_dir, run_guard.LOG_NAME).read_text()
        assert f"stopped pid {started['sim']} " in log, log
        if "hung" in how:
            assert "still runs after its stop signal: killing it" in log, log
    finally:
        runner.kill()
        runner.wait()
        bystander.kill()
        bystander.wait()
        for pid in json.loads(out.read_text()).values() if out.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_runner_that_ends_normally_has_its_leftovers_stopped_before_close_returns(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        from lab import processes, run_guard

        lab_dir = Path(sys.argv[1])
        guard = run_guard.guard_this_run(lab_dir)
        pid = processes.start(lab_dir, "leak", [sys.executable, "-c", "import time; time.sleep(600)"])
        guard.close()
        print(pid, guard.watchdog.returncode)
    """)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    leaked, watchdog_rc = (int(x) for x in done.stdout.split())
    assert not _alive(leaked)
    assert watchdog_rc == 0
