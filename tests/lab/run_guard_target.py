"""The lab test that ``test_run_guard_lab.py`` runs in a pytest of its own and stops mid-run.

Not collected by the suite (its name does not start with ``test_``). It holds what a lab test
holds at its busiest: the session's lab (control plane and simulators, from the ``lab``
fixture) and a ``pulumi preview`` with its language host and program, started in a session of
its own as a test's background CLI run would be. When all of it runs it writes their pids to
``$RUN_GUARD_READY`` and sleeps; nothing here cleans up, so only the run guard can.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from lab import readiness

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parents[2]


def test_holds_the_lab_and_a_pulumi_preview(lab: object, tmp_path: Path) -> None:
    program_pid = tmp_path / "program.pid"
    (tmp_path / "Pulumi.yaml").write_text(textwrap.dedent(f"""\
        name: run-guard-target
        runtime:
          name: python
          options:
            virtualenv: {ROOT / '.venv'}
        """))
    (tmp_path / "__main__.py").write_text(textwrap.dedent(f"""\
        import os, time
        open({str(program_pid)!r}, "w").write(str(os.getpid()))
        time.sleep(600)
        """))
    (tmp_path / "state").mkdir()
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
           "PULUMI_CONFIG_PASSPHRASE": "test-only"}
    subprocess.run(["pulumi", "stack", "init", "t", "--non-interactive"], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=120)
    preview = subprocess.Popen(["pulumi", "preview", "--stack", "t", "--non-interactive"], cwd=tmp_path,
                               env=env, stdout=(tmp_path / "preview.log").open("w"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    readiness.wait_until(lambda: program_pid.exists() and program_pid.read_text(), what="pulumi program",
                         timeout_seconds=120, alive=lambda: preview.poll() is None,
                         log=tmp_path / "preview.log")
    Path(os.environ["RUN_GUARD_READY"]).write_text(json.dumps(
        {"pulumi": preview.pid, "program": int(program_pid.read_text())}))
    time.sleep(600)
