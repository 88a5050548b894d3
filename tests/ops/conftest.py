"""Fixtures for the ops tests: a moto S3 server on 127.0.0.1, an isolated Pulumi CLI
environment, and helpers to run (and kill) real ``pulumi`` processes.

Every process started here is stopped by the fixture that started it; a Pulumi update that a
test kills is stopped together with its language host and provider plugins (found through
/proc before the kill, since they re-parent to init once the CLI dies).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lab import readiness
from ops.s3_backend import S3Backend

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
PROGRAMS = Path(__file__).resolve().parent / "programs"
#: Dummy credentials: moto accepts any; the AWS SDKs only need them to be present.
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class MotoServer:
    """A running ``python -m moto.server`` (S3, KMS, ... on one port)."""

    port: int
    process: subprocess.Popen

    @property
    def endpoint(self) -> str:
        """Endpoint URL by host name, so that only path-style addressing can reach a bucket."""
        return f"http://localhost:{self.port}"


def _start_moto(log: Path) -> MotoServer:
    """Start ``python -m moto.server`` on a free port and wait until it answers HTTP.

    A slow first answer (cold imports on a busy machine) is "not yet", never a failure; only
    the deadline or the process exiting is (then the message quotes moto's log). A port taken
    between ``free_port`` and the bind makes the process exit: that is retried on a new port.
    """
    failure: readiness.NotReadyError | None = None
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [str(VENV / "bin" / "python"), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log.open("ab"), stderr=subprocess.STDOUT, env={**os.environ, **AWS_ENV},
        )
        try:
            readiness.wait_until(readiness.http_probe(f"http://127.0.0.1:{port}/"), what="moto server",
                                 timeout_seconds=120, alive=lambda p=proc: p.poll() is None, log=log)
            return MotoServer(port, proc)
        except readiness.NotReadyError as exc:
            failure = exc
            proc.kill()
            proc.wait()
    pytest.fail(str(failure))


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """One moto server for the ops tests (each test uses its own bucket)."""
    server = _start_moto(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture
def s3_backend(moto_server: MotoServer) -> S3Backend:
    """A fresh, empty bucket on the moto server, described as a Pulumi backend."""
    backend = S3Backend(bucket=f"state-{uuid.uuid4().hex[:12]}", endpoint=moto_server.endpoint)
    client = backend.client()
    client.create_bucket(Bucket=backend.bucket)
    return backend


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)


def descendants(pid: int) -> list[int]:
    """PIDs of every live descendant of ``pid`` (read from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a process and all its descendants, by PID; reap the process."""
    pids = [proc.pid, *descendants(proc.pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)


@dataclass
class Pulumi:
    """The real ``pulumi`` CLI run in one project directory with an isolated PULUMI_HOME.

    ``env`` is the full environment of every command (no PULUMI_BACKEND_URL: commands use
    the backend that ``pulumi login`` stored in PULUMI_HOME, unless a test adds one).
    """

    cwd: Path
    env: dict[str, str]
    started: list[subprocess.Popen] = field(default_factory=list)

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``pulumi <args> --non-interactive``; on ``check`` fail the test with its output."""
        proc = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            pytest.fail(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                        f"{proc.stderr[-3000:]}")
        return proc

    def start(self, *args: str, log: Path) -> subprocess.Popen:
        """Start ``pulumi <args> --non-interactive`` in the background (output to ``log``)."""
        proc = subprocess.Popen(["pulumi", *args, "--non-interactive"], cwd=self.cwd, env=self.env,
                                stdout=log.open("w"), stderr=subprocess.STDOUT)
        self.started.append(proc)
        return proc


def write_project(dest: Path, program: str, *, name: str) -> Path:
    """Copy ``tests/ops/programs/<program>`` to ``dest`` with a Pulumi.yaml using the venv."""
    shutil.copytree(PROGRAMS / program, dest, dirs_exist_ok=True)
    (dest / "Pulumi.yaml").write_text(textwrap.dedent(f"""\
        name: {name}
        runtime:
          name: python
          options:
            virtualenv: {VENV}
        """))
    return dest


@pytest.fixture
def pulumi_cli(tmp_path: Path) -> Iterator[Pulumi]:
    """A :class:`Pulumi` for the ``held`` test program, in ``tmp_path/project``."""
    home = tmp_path / "pulumi-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k != "PULUMI_BACKEND_URL" and not k.startswith("PULUMI_CONFIG")}
    env.update(AWS_ENV)
    env.update({"PULUMI_HOME": str(home), "PULUMI_SKIP_UPDATE_CHECK": "1",
                "PULUMI_CONFIG_PASSPHRASE": "test-only-pass"})
    cli = Pulumi(cwd=write_project(tmp_path / "project", "held", name="shared-state"), env=env)
    yield cli
    for proc in cli.started:
        if proc.poll() is None:
            kill_tree(proc)



#: The passphrase of the dev stack's secrets (the Makefile's lab-only passphrase).
DEV_PASSPHRASE = "dev-lab-only-passphrase"


def dev_fleet_project(tmp_path: Path, program: str, *, backend_url: str) -> tuple[Path, dict[str, str]]:
    """``tmp_path/project``: a project named ``composable-gpu`` running ``tests/ops/programs/<program>``
    whose fleet ``fleet`` (``Pulumi.fleet.yaml``) is the dev estate (``Pulumi.dev.yaml`` with the
    inventory folder's absolute path); returns it with the environment of its commands (backend
    ``backend_url``, the dev passphrase, an isolated PULUMI_HOME sharing the installed plugins, this
    repository on PYTHONPATH)."""
    work = write_project(tmp_path / "project", program, name="composable-gpu")
    dev = (ROOT / "Pulumi.dev.yaml").read_text()
    inventory = f"inventory: {ROOT / 'environments' / 'dev'}"
    (work / "Pulumi.fleet.yaml").write_text(dev.replace("inventory: environments/dev", inventory))
    (tmp_path / "home").mkdir()
    shared = Path(os.environ.get("PULUMI_HOME", Path.home() / ".pulumi")) / "plugins"
    if shared.is_dir():  # the plugins make setup installed (pulumi-kubernetes), never downloaded here
        (tmp_path / "home" / "plugins").symlink_to(shared)
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_CONFIG_PASSPHRASE_FILE"}
    env.update(AWS_ENV)
    env.update({"PULUMI_BACKEND_URL": backend_url, "PULUMI_CONFIG_PASSPHRASE": DEV_PASSPHRASE,
                "PULUMI_HOME": str(tmp_path / "home"), "PULUMI_SKIP_UPDATE_CHECK": "1",
                "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "1", "PYTHONPATH": str(ROOT)})
    return work, env
