"""The deployed dev stack moves into its split with ``python -m ops.estate migrate``, recreating nothing.

The real program (``main:`` is the checkout) deploys the dev stack, the whole dev estate in one stack
as ``tests/components/test_cli_e2e.py`` deploys it (a temporary file backend, the inventory copied
with the namespaces renamed, lab-workers reached through its kubeconfig Secret, the composer's Pods
on the kwok Nodes: no real kubelet), on the lab's API servers with the LIQID Director and Redfish BMC
simulators. Then, with the simulators' call logs as the witness of every write:

1. ``migrate --fleet dev`` moves its resources into ``dev-platform``, ``dev-hosts-lab-workers``,
   ``dev-tenant-alpha`` and ``dev-tenant-beta`` (``pulumi state move``);
2. ``preview --fleet dev`` previews every split stack: each shows nothing to create (but its own
   Estate component, which no provider backs), update (but the tenants' TenantCluster components,
   whose input ``hypervisor_cluster_in_stack`` turns False), replace or delete;
3. ``pulumi preview --json`` of each split stack gives the same per resource;

and neither the Director nor any BMC saw a write (a request other than GET, a Director digest
login or a Redfish session's login and logout) from the move on.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from lab.settings import DIRECTOR_PORT, DPU_BMC_PORTS, HOST_BMC_PORTS
from tests.components.test_cli_e2e import _edit, _run_names
from tests.pulumi_project import file_backend, local_project

ROOT = Path(__file__).resolve().parents[2]
DEV_PASSPHRASE = "dev-lab-only-passphrase"  # the dev stack's lab-only passphrase (Makefile)
SPLIT = ("dev-platform", "dev-hosts-lab-workers", "dev-tenant-alpha", "dev-tenant-beta")
#: Operations a preview may show after the move: nothing changes, other stacks' objects are read.
_UNCHANGED = {"same", "read"}
#: The one resource a split stack creates: its own Estate component (no provider behind it).
_ESTATE = "composable:infra:Estate"
#: A tenant's cluster component: its input ``hypervisor_cluster_in_stack`` turns False in the split.
_TENANT_CLUSTER = "composable:infra:TenantCluster"

pytestmark = [pytest.mark.lab, pytest.mark.cli, pytest.mark.slow]


def _director_calls() -> list[dict[str, Any]]:
    return requests.get(f"http://127.0.0.1:{DIRECTOR_PORT}/_sim/calls", timeout=10).json()


def _bmc_requests(ca: str) -> dict[str, list[dict[str, Any]]]:
    """Each BMC's request log (method, path, status), by its name."""
    ports = {**DPU_BMC_PORTS, **HOST_BMC_PORTS}
    state = {name: requests.get(f"https://127.0.0.1:{port}/_sim/state", verify=ca, timeout=10).json()
             for name, port in ports.items()}
    return {name: s["requests"] for name, s in state.items()}


def _director_writes(calls: list[dict[str, Any]]) -> list[str]:
    """The Director calls that change something: any but GET and the digest login (``POST digest/``)."""
    return [f"{c['method']} {c['path']}" for c in calls
            if c["method"] not in ("GET", "HEAD") and "digest" not in c["path"]]


def _bmc_writes(log: list[dict[str, Any]]) -> list[str]:
    """The BMC requests that change something: any but GET and a session's login and logout."""
    return [f"{r['method']} {r['path']}" for r in log
            if r["method"] not in ("GET", "HEAD") and "/SessionService/Sessions" not in r["path"]]


@pytest.fixture
def deployed(lab: Any, tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The dev stack ``dev`` deployed from a project in ``tmp_path``; the project and the environment
    of its commands. Destroyed after, from the split stacks (tenants first) and the monolith."""
    work = local_project(tmp_path)
    shutil.copy(ROOT / "Pulumi.dev.yaml", work / "Pulumi.dev.yaml")
    shutil.copytree(ROOT / "environments" / "dev", work / "environments" / "dev")
    run = f"mig-{secrets.token_hex(3)}"
    ca = str(lab.lab_dir / "sim-state" / "redfish" / "tls" / "ca.pem")
    _edit(work, "estate.yaml", lambda doc: doc["mothership"].update(kubeconfig=str(lab.kubeconfig)))
    _edit(work, "clusters.yaml", lambda doc: doc["hypervisor_clusters"][0].pop("kubeconfig", None))
    for name, change in _run_names(run, ca).items():
        _edit(work, name, change)
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_CONFIG_PASSPHRASE_FILE"}
    env.update({"PULUMI_BACKEND_URL": file_backend(work), "PULUMI_CONFIG_PASSPHRASE": DEV_PASSPHRASE,
                "PULUMI_SKIP_UPDATE_CHECK": "1", "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "1"})
    _pulumi(work, env, "stack", "init", "dev")
    _pulumi(work, env, "up", "--yes", "--stack", "dev", timeout=1800)
    yield work, env
    for stack in (*reversed(SPLIT), "dev"):
        subprocess.run(["pulumi", "destroy", "--yes", "--stack", stack, "--non-interactive"], cwd=work,
                       env=env, capture_output=True, text=True, timeout=1800, check=False)


def _changed_inputs(step: dict[str, Any]) -> set[str]:
    """The input keys an update step of ``pulumi preview --json`` changes."""
    old = (step.get("oldState") or {}).get("inputs") or {}
    new = (step.get("newState") or {}).get("inputs") or {}
    return {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}


def _pulumi(work: Path, env: dict[str, str], *args: str, timeout: float = 900) -> str:
    done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"pulumi {' '.join(args)}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def _estate(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ops.estate", *args, "--fleet", "dev", "--project", str(work)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)


def test_the_deployed_dev_stack_moves_into_its_split_without_a_write(
    lab: Any, deployed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    work, env = deployed
    ca = str(lab.lab_dir / "sim-state" / "redfish" / "tls" / "ca.pem")
    assert _director_calls(), "the dev stack's up read the Director: its call log is the witness"
    requests.delete(f"http://127.0.0.1:{DIRECTOR_PORT}/_sim/calls", timeout=10).raise_for_status()
    seen = {name: len(log) for name, log in _bmc_requests(ca).items()}

    migrated = _estate(work, env, "migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert [ln.split()[-1] for ln in migrated.stdout.splitlines() if ln.startswith("moved")] == list(SPLIT)

    preview = _estate(work, env, "preview", "--log-dir", str(tmp_path / "logs"))
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert preview.stdout.splitlines()[0] == "preview of 4 stacks: 4 ok, 0 failed, 0 skipped", preview.stdout

    changed: dict[str, set[tuple[str, str]]] = {}
    relabelled: dict[str, set[str]] = {}
    for stack in SPLIT:
        steps = json.loads(_pulumi(work, env, "preview", "--json", "--show-sames", "--stack", stack))["steps"]
        changed[stack] = set()
        for step in steps:
            typ = step["urn"].split("::")[2].rsplit("$", 1)[-1]
            if step["op"] in _UNCHANGED:
                continue
            if step["op"] == "update" and typ == _TENANT_CLUSTER:
                relabelled.setdefault(stack, set()).update(_changed_inputs(step))
                continue
            changed[stack].add((step["op"], typ))
        assert sum(1 for s in steps if s["op"] == "same") > 0, stack
        (tmp_path / f"steps-{stack}.json").write_text(json.dumps(
            [s for s in steps if s["op"] not in _UNCHANGED], indent=1))
    assert changed == {stack: {("create", _ESTATE)} for stack in SPLIT}, changed
    # The tenants' TenantCluster components learn that their hypervisor cluster is now another
    # stack's: a component's own input, nothing a provider applies.
    assert relabelled == {s: {"hypervisor_cluster_in_stack"} for s in SPLIT if "tenant" in s}, relabelled

    assert _director_writes(_director_calls()) == []
    logs = _bmc_requests(ca)
    assert {name: _bmc_writes(log[seen[name]:]) for name, log in logs.items()} == {name: [] for name in logs}
