"""Part 5: a change to one tenant of a split estate, previewed through ``python -m ops.estate``.

One generated estate (:func:`bench.fleet_estate.split_fleet`: 1,000 hosts in racks of 32, 100
tenants, a file per rack and per tenant; 20 hosts in racks of 8 and 4 tenants with ``--quick``)
is previewed four ways, one after the other, in a temporary copy of the program
(:func:`bench.preview.make_project_copy`) that is also a git repository, with its own file
backend, against the benchmark's own control plane (the composer's chart needs a reachable API
server; the BMC and Director probes are off, ``COMPOSABLE_GPU_PREFLIGHT=off``, so no simulator is
needed), every preview with the policy pack (lab config):

1. ``setup``: ``python -m ops.estate preview --stack tenant:<last tenant>``, the first run of the
   command on the fleet: it writes the stack files of that tenant and of the stacks it reads
   (platform, its cluster's host group) and creates those stacks, then previews the tenant's (a
   stack no other reads), the one the change below touches, so that run finds its stacks;
2. ``monolith``: ``pulumi preview`` of the fleet's own stack file, the whole estate in one stack
   (:func:`bench.preview.run_preview`, with the program's own cost measured inside the run);
3. ``one_tenant``: that tenant's file changed and committed on a branch, then
   ``python -m ops.estate preview --changed-since <base>``: git's diff, the split, one listing of
   the backend's stacks, the stacks it selects (that tenant's alone) and their previews;
4. ``full``: ``python -m ops.estate preview --parallel N``, every stack of the fleet (it creates the
   stacks the setup did not).

Figures per estate-command run: ``wall_seconds`` (start to exit of the command, its own planning
included), ``peak_tree_rss_mib`` (the highest summed RSS of the command and every process under
it, sampled from ``/proc`` every 50 ms by :class:`bench.preview.TreeSampler`), ``load`` (the
1-minute load average while it ran, :class:`bench.machine.LoadSampler`), ``stacks``, each stack's
status, seconds and planned changes as the command's summary prints them, and ``stacks_created``,
how many stacks the backend held after the run that it did not before (:func:`backend_stacks`).

Every stack starts from an empty state (nothing is deployed: the hosts and the Director are not
real), so each preview plans creates; a stack previewed after a change on a deployed estate would
diff the same resources instead.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fleet_estate import CLUSTER_KUBECONFIG, change_tenant, split_fleet, tenant_name
from bench.machine import LoadSampler, commit
from bench.preview import (
    POLICY_ARGS,
    PREVIEW_PATHS,
    RACK_SIZE,
    ROOT,
    _env,
    make_project_copy,
    run_preview,
    run_sampled,
)
from stack_config.fleet import TENANT_PREFIX, stack_name

#: The code this part measures: the program, its policy pack, the estate command and the benchmark.
FLEET_PATHS = (*PREVIEW_PATHS, "ops")
#: Sizes of a full run and of ``--quick``: (hosts, tenants, hosts per rack).
FULL_SIZE = (1_000, 100, RACK_SIZE)
QUICK_SIZE = (20, 4, 8)
#: The goal this part checks: a one-tenant change previewed in under a minute at 1,000 hosts.
GOAL_SECONDS = 60.0
#: A line of :func:`ops.estate_plan.render_summary` for one stack.
_SUMMARY_LINE = re.compile(r"^\s+(ok|failed|skipped)\s+(\S+)\s+([0-9.]+) s\s*(.*)$")
_GIT_ID = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]


def parse_summary(text: str) -> list[dict[str, Any]]:
    """The per-stack lines of the estate command's summary (:func:`ops.estate_plan.render_summary`)
    as ``[{"stack", "status", "seconds", "changes": {op: count}, "detail"}]``; ``detail`` is the
    text after the seconds of a stack that did not succeed (empty for one that did). Other lines
    are ignored."""
    rows = []
    for line in text.splitlines():
        m = _SUMMARY_LINE.match(line)
        if m is None:
            continue
        status, stack, seconds, rest = m.groups()
        changes: dict[str, int] = {}
        if status == "ok":
            for part in filter(None, (p.strip() for p in rest.split(","))):
                op, _, count = part.rpartition(" ")
                if op and count.isdigit():
                    changes[op] = int(count)
        rows.append({"stack": stack, "status": status, "seconds": float(seconds), "changes": changes,
                     "detail": "" if status == "ok" else rest})
    return rows


def _git(project: Path, *args: str) -> str:
    out = subprocess.run(["git", *_GIT_ID, *args], cwd=project, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def init_repo(project: Path, fleet: str) -> str:
    """Make ``project`` a git repository holding the program and the estate, committed; the role
    stack files the estate command writes and the benchmark's own files are ignored. Returns the
    commit's sha."""
    (project / ".gitignore").write_text(f"Pulumi.{fleet}-*.yaml\n.bench*\n__pycache__/\n")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "the estate")
    return _git(project, "rev-parse", "HEAD")


def backend_stacks(backend: Path) -> int:
    """How many stacks the file backend in ``backend`` holds: its checkpoint files
    ``.pulumi/stacks/<project>/<stack>.json`` (the layout of pulumi's DIY backend, v3.260.0)."""
    return sum(1 for _ in (backend / ".pulumi" / "stacks").glob("*/*.json"))


def estate_command(
    project: Path, backend: Path, fleet: str, args: list[str], *, log_dir: Path, timeout: float = 3600
) -> dict[str, Any]:
    """Run ``python -m ops.estate preview --project <project> --fleet <fleet> <args>`` with the policy
    pack, as a separate process in the repository's folder, and measure it (module doc).

    Returns ``{"argv", "wall_seconds", "peak_tree_rss_mib", "peak_rss_by_process_mib", "load",
    "exit_code", "ok", "stacks": parse_summary(...), "stacks_created", "summary" (its first line),
    "tail" (on failure: the end of its output)}``.
    """
    argv = [sys.executable, "-m", "ops.estate", "preview", "--project", str(project), "--fleet", fleet,
            *args, *POLICY_ARGS, "--log-dir", str(log_dir)]
    before = backend_stacks(backend)
    with LoadSampler() as load:
        run = run_sampled(argv, cwd=ROOT, env=_env(project, backend), timeout=timeout)
    result: dict[str, Any] = {
        "argv": ["python", "-m", "ops.estate", "preview", "--fleet", fleet, *args],
        "wall_seconds": round(run.wall_seconds, 3),
        "peak_tree_rss_mib": round(run.sampler.peak_mib, 1),
        "peak_rss_by_process_mib": run.peaks_by_process(),
        "load": load.summary(),
        "exit_code": run.returncode,
        "ok": run.returncode == 0,
        "stacks": parse_summary(run.out),
        "stacks_created": backend_stacks(backend) - before,
        "summary": run.out.splitlines()[0] if run.out.strip() else "",
    }
    if run.returncode != 0:
        result["tail"] = (run.err or run.out)[-2000:]
    return result


def run(
    *,
    quick: bool = False,
    kubeconfig: Path,
    ca_pem: Path,
    hosts: int | None = None,
    tenants: int | None = None,
    rack_size: int | None = None,
    parallel: int = 2,
    work_dir: Path | None = None,
) -> dict[str, Any]:
    """Run part 5 (module doc) against the control plane of ``kubeconfig``; sizes default to
    :data:`FULL_SIZE` (:data:`QUICK_SIZE` with ``quick``).

    Returns ``{"part": "fleet", "commit" (bench.machine.commit), "estate": {"name", "hosts",
    "tenants", "racks", "files", "stacks", "validate_seconds", "changed_file", "changed_stack"},
    "parallel", "goal_seconds", "runs": {"setup", "monolith", "one_tenant", "full"}, "command"}``;
    ``monolith`` is :func:`bench.preview.run_preview`'s result with ``load``, the others
    :func:`estate_command`'s.
    """
    from ops.estate import load_fleet
    from stack_config.stack_file import load_stack_file

    measured = commit(FLEET_PATHS)  # before the runs: the code that is measured
    size = QUICK_SIZE if quick else FULL_SIZE
    n_hosts, n_tenants, per_rack = hosts or size[0], tenants or size[1], rack_size or size[2]
    tmp = Path(work_dir or tempfile.mkdtemp(prefix="bench-fleet-"))
    project = make_project_copy(tmp / "project", kubeconfig=kubeconfig, ca_pem=ca_pem)
    (project / CLUSTER_KUBECONFIG).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(kubeconfig, project / CLUSTER_KUBECONFIG)
    backend = tmp / "state"
    backend.mkdir(exist_ok=True)
    logs = tmp / "logs"
    stack = split_fleet(n_hosts, n_tenants, rack_size=per_rack)
    stack_file = stack.write(project)
    t0 = time.perf_counter()
    load_stack_file(stack_file)  # python -m stack_config validate: raises on a problem
    fleet = load_fleet(project, stack.name)  # the split the command computes
    validate_seconds = time.perf_counter() - t0
    base = init_repo(project, stack.name)
    runs: dict[str, Any] = {}
    last = TENANT_PREFIX + tenant_name(n_tenants)  # the tenant change_tenant changes
    runs["setup"] = estate_command(project, backend, stack.name, ["--stack", last], log_dir=logs / "setup")
    with LoadSampler() as load:
        runs["monolith"] = run_preview(project, stack, backend)
    runs["monolith"]["load"] = load.summary()
    changed = change_tenant(project, stack, n_tenants)
    _git(project, "checkout", "-qb", "change")
    _git(project, "commit", "-qam", f"raise {tenant_name(n_tenants)}'s GPU quota")
    runs["one_tenant"] = estate_command(project, backend, stack.name, ["--changed-since", base],
                                        log_dir=logs / "one-tenant")
    runs["full"] = estate_command(project, backend, stack.name, ["--parallel", str(parallel)],
                                  log_dir=logs / "full")
    if work_dir is None:
        shutil.rmtree(tmp, ignore_errors=True)
    command = "python -m bench --only fleet" + (" --quick" if quick else "")
    if hosts or tenants or rack_size:
        command += f" --fleet-size {n_hosts},{n_tenants},{per_rack}"
    if parallel != 2:
        command += f" --parallel {parallel}"
    return {
        "part": "fleet",
        "commit": measured,
        "quick": quick,
        "estate": {
            "name": stack.name,
            "hosts": n_hosts,
            "tenants": n_tenants,
            "racks": sum(1 for f in stack.files if f.startswith("hosts/")),
            "files": len(stack.files),
            "stacks": len(fleet.slices),
            "validate_seconds": round(validate_seconds, 3),
            "changed_file": changed,
            "changed_stack": stack_name(stack.name, TENANT_PREFIX + tenant_name(n_tenants)),
        },
        "parallel": parallel,
        "goal_seconds": GOAL_SECONDS,
        "runs": runs,
        "command": command,
    }
