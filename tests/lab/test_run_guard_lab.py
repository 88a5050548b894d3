"""A test run stopped mid-test leaves no process behind: pytest on a lab test, stopped while the
lab's control plane, its simulators and a ``pulumi preview`` run, by SIGTERM (``timeout``), SIGINT
(Ctrl-C) or SIGKILL.

The run under test is ``pytest tests/lab/run_guard_target.py`` with a lab of its own
(``LAB_DIR`` in ``tmp_path``) in a network namespace of its own (``unshare --net``), because the
lab's ports are fixed and this run's lab may be up. The signal goes to the runner alone, the
hardest case: no other process of the run gets it from a terminal or ``timeout``. Every process
the runner started (its descendants when the signal is sent, and anything carrying this test's
environment mark) must be gone within 30 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from lab import processes, readiness, run_guard
from lab.settings import DIRECTOR_PORT

pytestmark = [pytest.mark.lab, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
GONE_WITHIN_SECONDS = 30.0
MARK = "RUN_GUARD_TEST_MARK"
NEEDED = ("etcd", "kube-apiserver", "kwok", "pulumi")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a process, None if it is gone."""
    try:
        rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return rest[0], int(rest[1]), int(rest[19])


def _pids() -> list[int]:
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()]


def _descendants(root: int) -> dict[int, int]:
    """Pid -> start time of every live descendant of ``root``."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for pid in _pids():
        if (st := _stat(pid)) is not None and st[0] not in ("Z", "X"):
            children.setdefault(st[1], []).append(pid)
            starts[pid] = st[2]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def _marked(mark: str) -> dict[int, int]:
    """Pid -> start time of every live process whose environment carries ``MARK=mark``."""
    needle = f"{MARK}={mark}".encode()
    found = {}
    for pid in _pids():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X") and needle in environ.split(b"\0"):
            found[pid] = st[2]
    return found


def _left(started: dict[int, int], mark: str) -> dict[int, int]:
    """Those of ``started`` still alive (same start time), and any live process with the mark."""
    alive = {}
    for pid, start in started.items():
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X") and st[2] == start:
            alive[pid] = start
    return {**alive, **_marked(mark)}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def _netns_prefix() -> list[str]:
    """The command prefix that runs the inner run in a network namespace of its own, or ``[]``
    when that is not possible but the lab's ports are free here; skips otherwise."""
    prefix = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    if shutil.which("unshare") and subprocess.run([*prefix, "true"], capture_output=True,
                                                  check=False).returncode == 0:
        return prefix
    if not processes.port_open(DIRECTOR_PORT):
        return []
    pytest.skip("cannot run a second lab: no network namespace (unshare --net needs root) and this lab is up")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_a_stopped_lab_test_run_leaves_no_process_it_started(tmp_path: Path, sig: signal.Signals) -> None:
    if not (ROOT / ".toolchain" / "bin" / "kube-apiserver").exists() or shutil.which("pulumi") is None:
        pytest.skip("lab binaries missing: run `make setup`")
    mark = uuid.uuid4().hex
    ready = tmp_path / "ready.json"
    lab_dir = tmp_path / "lab"
    env = {**os.environ, "LAB_DIR": str(lab_dir), "RUN_GUARD_READY": str(ready), MARK: mark}
    env.pop("KUBECONFIG", None)
    log = tmp_path / "runner.log"
    runner = subprocess.Popen(
        [*_netns_prefix(), sys.executable, "-m", "pytest", "-x", "-q", "tests/lab/run_guard_target.py"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    started: dict[int, int] = {}
    try:
        readiness.wait_until(ready.exists, what="the inner run's lab test", timeout_seconds=400,
                             interval_seconds=0.5, alive=lambda: runner.poll() is None, log=log)
        runner_stat = _stat(runner.pid)
        assert runner_stat is not None
        started = {runner.pid: runner_stat[2], **_descendants(runner.pid)}
        commands = [_cmdline(p) for p in started]
        for needed in (*NEEDED, "lab.director_sim", "lab.gpu_agent", "lab.redfish_sim"):
            assert any(needed in c for c in commands), f"{needed} is not running: {commands}"
        assert set(json.loads(ready.read_text()).values()) <= set(started)

        os.kill(runner.pid, sig)
        t0 = time.monotonic()
        while time.monotonic() - t0 < GONE_WITHIN_SECONDS and _left(started, mark):
            time.sleep(0.2)
        elapsed = time.monotonic() - t0
        left = _left(started, mark)

        guard_log = readiness.log_tail(processes.log_path(lab_dir, run_guard.LOG_NAME), lines=60)
        assert not left, (f"{sig.name}: still running {GONE_WITHIN_SECONDS:.0f} s after the signal: "
                          f"{[_cmdline(p) for p in left]}{guard_log}")
        print(f"{sig.name}: all {len(started)} processes gone {elapsed:.1f} s after the signal:",
              *sorted(c[:90] for c in commands), sep="\n  ")
        assert runner.wait(timeout=5) != 0
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        for pid in _left(started, mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
