"""Known changes for the preview-summary tests, and their capture with the real CLI.

The fixture program (``programs/estate``) is deployed once with :data:`BASE`; each case then
changes the stack config and runs ``pulumi preview`` (streaming ``--json``, with the fixture
policy pack ``programs/estate-policy``). The engine events are stored under
``fixtures/preview/<case>.events.jsonl`` (``debug`` diagnostics dropped, nothing else
changed) next to the expected summary ``<case>.md``.

Re-capture after a Pulumi upgrade (then review the diff of the ``.md`` files by eye)::

    source lab/env.sh && python -m tests.ops.preview_fixtures            # events only
    source lab/env.sh && python -m tests.ops.preview_fixtures --expected # and the .md files
    python -m tests.ops.preview_fixtures --render-only   # .md files from the stored events
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ops.preview_report import PreviewRun, run_preview

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENV = ROOT / ".venv"
FIXTURES = HERE / "fixtures" / "preview"
PROJECT = "estate-fixture"
STACK = "dev"

BASE: dict[str, Any] = {
    "environment": "lab",
    "hosts": [
        {"name": "blade-slot-1", "boot_mac": "52:54:00:aa:bb:01", "gpus": 1, "model": "Tesla-T4",
         "dpu": {"mode": "DpuMode", "host_rshim": "Disabled"}},
        {"name": "blade-slot-2", "boot_mac": "52:54:00:aa:bb:02", "gpus": 1, "model": "Tesla-T4"},
    ],
    "tenants": [
        {"name": "acme", "gpu_quota": 2, "allowed_models": ["Tesla-T4"],
         "networks": [{"name": "net-a", "cidr": "10.10.0.0/24", "vxlan_id": 1001, "vlan_id": 101}]},
    ],
}


def _add_gpu(estate: dict) -> None:
    estate["hosts"][0]["gpus"] = 2


def _add_tenant(estate: dict) -> None:
    estate["tenants"].append(
        {"name": "globex", "gpu_quota": 1, "allowed_models": ["Tesla-T4"],
         "networks": [{"name": "net-b", "cidr": "10.20.0.0/24", "vxlan_id": 1002, "vlan_id": 102}]}
    )


def _hardware_replace(estate: dict) -> None:
    estate["hosts"][0]["boot_mac"] = "52:54:00:aa:bb:11"  # new NIC: the BareMetalHost is replaced
    estate["hosts"][0]["dpu"]["mode"] = "NicMode"  # DPU mode change: the posture is replaced
    del estate["hosts"][1]  # blade-slot-2 leaves: its GPUs are decomposed
    estate["tenants"][0]["networks"][0]["cidr"] = "10.10.0.0/23"


def _policy_violation(estate: dict) -> None:
    estate["hosts"][0]["gpus"] = 6  # over the mandatory cap of 4
    estate["hosts"][1]["model"] = "NVIDIA-A100-PCIE-40GB"  # model change: attachment replaced
    estate["tenants"][0]["networks"].append(  # VXLAN in the platform range: advisory
        {"name": "net-mgmt", "cidr": "10.99.0.0/24", "vxlan_id": 42, "vlan_id": 142}
    )


#: case name → change applied to a copy of :data:`BASE`.
CASES: dict[str, Callable[[dict], None]] = {
    "no-change": lambda estate: None,
    "add-gpu": _add_gpu,
    "add-tenant": _add_tenant,
    "hardware-replace": _hardware_replace,
    "policy-violation": _policy_violation,
}


def estate_for(case: str) -> dict[str, Any]:
    """The ``estate`` config of ``case``."""
    estate = copy.deepcopy(BASE)
    CASES[case](estate)
    return estate


@dataclass
class Workspace:
    """A deployed copy of the fixture program: project and policy-pack directories, and the
    environment (local file backend, isolated PULUMI_HOME, passphrase) for the CLI."""

    project: Path
    pack: Path
    env: dict[str, str]

    def pulumi(self, *args: str) -> subprocess.CompletedProcess:
        """Run ``pulumi <args>`` in the project; raises CalledProcessError with its output."""
        proc = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
        return proc

    def set_estate(self, estate: dict[str, Any]) -> None:
        """Replace the stack's config with ``estate`` (keeping the passphrase salt)."""
        stack_file = self.project / f"Pulumi.{STACK}.yaml"
        doc = yaml.safe_load(stack_file.read_text()) or {}
        doc["config"] = {f"{PROJECT}:estate": estate}
        stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))

    def preview(self, case: str, *, diff: bool = False) -> PreviewRun:
        """Set ``case``'s config and run the preview (read-only) with the fixture pack."""
        self.set_estate(estate_for(case))
        return run_preview(stack=STACK, cwd=self.project, policy_packs=[self.pack], env=self.env, diff=diff,
                           timeout_seconds=300)


def _runtime_yaml(header: str) -> str:
    return textwrap.dedent(f"""\
        {header}
        runtime:
          name: python
          options:
            virtualenv: {VENV}
        """)


def prepare(workdir: Path) -> Workspace:
    """Copy the fixture program and pack into ``workdir``, create stack ``dev`` on a local
    backend there and deploy :data:`BASE` (about 3 s)."""
    project, pack = workdir / "project", workdir / "policy"
    shutil.copytree(HERE / "programs" / "estate", project)
    shutil.copytree(HERE / "programs" / "estate-policy", pack)
    (project / "Pulumi.yaml").write_text(_runtime_yaml(f"name: {PROJECT}"))
    (pack / "PulumiPolicy.yaml").write_text(_runtime_yaml("description: preview-summary fixture pack"))
    (workdir / "state").mkdir()
    (workdir / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update({"PULUMI_BACKEND_URL": f"file://{workdir / 'state'}", "PULUMI_HOME": str(workdir / "home"),
                "PULUMI_CONFIG_PASSPHRASE": "fixture-only", "PULUMI_SKIP_UPDATE_CHECK": "1"})
    ws = Workspace(project=project, pack=pack, env=env)
    ws.pulumi("stack", "init", STACK)
    ws.set_estate(copy.deepcopy(BASE))
    ws.pulumi("up", "--yes", "--policy-pack", str(pack))
    return ws


def fixture_lines(run: PreviewRun) -> list[str]:
    """The events of a run as stored in a fixture: ``debug`` diagnostics dropped."""
    keep = []
    for line in run.events:
        event = json.loads(line)
        if event.get("diagnosticEvent", {}).get("severity") == "debug":
            continue
        keep.append(line)
    return keep


def main() -> None:
    """Re-capture every case's events (and, with ``--expected``, its expected Markdown)."""
    from ops.preview_events import parse_events
    from ops.preview_markdown import render_markdown

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--expected", action="store_true", help="also rewrite the expected .md files")
    parser.add_argument("--render-only", action="store_true",
                        help="only re-render the expected .md files from the stored events")
    args = parser.parse_args()
    if args.render_only:
        for case in CASES:
            lines = (FIXTURES / f"{case}.events.jsonl").read_text().splitlines()
            (FIXTURES / f"{case}.md").write_text(render_markdown(parse_events(lines)))
        return
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        ws = prepare(Path(tmp))
        for case in CASES:
            lines = fixture_lines(ws.preview(case))
            (FIXTURES / f"{case}.events.jsonl").write_text("".join(f"{line}\n" for line in lines))
            if args.expected:
                (FIXTURES / f"{case}.md").write_text(render_markdown(parse_events(lines)))
            print(f"captured {case}: {len(lines)} events")


if __name__ == "__main__":
    main()
