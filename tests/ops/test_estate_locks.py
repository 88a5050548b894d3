"""Per-stack locks of a split estate on an S3 backend (a moto server), through the real pulumi CLI.

``python -m ops.estate up`` runs the stacks of two tenants at the same time: each ``pulumi up``
takes its own stack's lock, written by Pulumi's DIY backend under
``.pulumi/locks/<organization>/<project>/<stack>/<lock id>.json`` (pulumi/pulumi
``pkg/backend/diy/lock.go``, ``stackLockDir`` and ``lockPath``, v3.260.0; ``Update``, ``Refresh`` and
``Destroy`` in ``pkg/backend/diy/backend.go`` take it, ``CreateStack`` briefly, a preview not), so
the two run side by side while a second update of the same stack is refused by the lock.

The stacks run ``tests/ops/programs/slice-held`` (one dynamic resource per stack, held while a
file exists), not this repository's program: an ``up`` of the dev estate's tenant stacks creates
namespaces and networks on the mothership's API server, which only the lab provides. The fleet,
its split and its stack files are the dev estate's, as ``ops.estate`` computes them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ops.s3_backend import S3Backend, StateLock, list_locks

from .conftest import dev_fleet_project, kill_tree

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "composable-gpu"
ALPHA, BETA = "fleet-tenant-alpha", "fleet-tenant-beta"

pytestmark = pytest.mark.cli


@pytest.fixture
def fleet(tmp_path: Path, s3_backend: S3Backend) -> tuple[Path, dict[str, str]]:
    """A project running the slice-held program whose fleet ``fleet`` is the dev estate; the
    environment of its commands (the S3 backend, an isolated PULUMI_HOME, the hold folder)."""
    work, env = dev_fleet_project(tmp_path, "slice-held", backend_url=s3_backend.url)
    (tmp_path / "hold").mkdir()
    env["SLICE_HOLD_DIR"] = str(tmp_path / "hold")
    return work, env


def _estate(work: Path, env: dict[str, str], *args: str, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "ops.estate", *args, "--fleet", "fleet", "--project", str(work)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _both_locked(backend: S3Backend, started: subprocess.Popen, log: Path) -> dict[str, StateLock]:
    """Wait (at most 120 s) until both tenant stacks hold a lock at the same moment."""
    client = backend.client()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        held = {s: list_locks(client, backend, project=PROJECT, stack=s) for s in (ALPHA, BETA)}
        if all(held.values()):
            return {s: locks[0] for s, locks in held.items()}
        if started.poll() is not None:
            pytest.fail(f"the estate command ended before both stacks were locked:\n{log.read_text()}")
        time.sleep(0.1)
    pytest.fail(f"the two tenant stacks were never locked at once:\n{log.read_text()}")


def test_two_tenants_update_at_once_and_a_second_update_of_one_is_refused_by_its_lock(
    fleet: tuple[Path, dict[str, str]], s3_backend: S3Backend, tmp_path: Path
) -> None:
    work, env = fleet
    hold = Path(env["SLICE_HOLD_DIR"])
    for stack in (ALPHA, BETA):
        (hold / stack).touch()
    first_log = tmp_path / "first.log"
    first = _estate(work, env, "up", "--stack", "tenant:alpha", "--stack", "tenant:beta", "--parallel", "2",
                    log=first_log)
    try:
        locks = _both_locked(s3_backend, first, first_log)
        # one lock per stack, each under its own stack's folder, taken by two different pulumi processes
        for stack, lock in locks.items():
            assert lock.key.startswith(f".pulumi/locks/organization/{PROJECT}/{stack}/"), lock.key
            assert lock.key.endswith(".json")
        assert locks[ALPHA].pid != locks[BETA].pid

        # a second update of the same stack while its first runs: refused by Pulumi's lock, reported
        # by the estate command as that stack's failure
        second_log = tmp_path / "second.log"
        second = _estate(work, env, "up", "--stack", "tenant:alpha", log=second_log)
        assert second.wait(timeout=180) == 1, second_log.read_text()
        out = second_log.read_text()
        assert "up of 1 stack: 0 ok, 1 failed, 0 skipped" in out, out
        refused = next(ln for ln in out.splitlines() if ALPHA in ln)
        assert refused.split()[0] == "failed"
        assert "error: the stack is currently locked by 1 lock(s)" in refused, refused
        # the running updates still hold their locks
        assert list_locks(s3_backend.client(), s3_backend, project=PROJECT, stack=ALPHA) == [locks[ALPHA]]
    finally:
        for stack in (ALPHA, BETA):
            (hold / stack).unlink(missing_ok=True)
    try:
        assert first.wait(timeout=180) == 0, first_log.read_text()
    finally:
        if first.poll() is None:
            kill_tree(first)
    summary = first_log.read_text()
    assert "up of 2 stacks: 2 ok, 0 failed, 0 skipped" in summary, summary
    for stack in (ALPHA, BETA):
        assert list_locks(s3_backend.client(), s3_backend, project=PROJECT, stack=stack) == []

    # the two creates overlapped in time: each started before the other ended (the engine's outputs)
    times = {}
    for stack in (ALPHA, BETA):
        out = subprocess.run(["pulumi", "stack", "output", "--json", "--stack", stack, "--cwd", str(work)],
                             env=env, capture_output=True, text=True, check=True).stdout
        times[stack] = json.loads(out)
    alpha, beta = times[ALPHA], times[BETA]
    assert alpha["started"] < beta["ended"] and beta["started"] < alpha["ended"], times
