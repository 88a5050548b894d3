"""``python -m ops.estate migrate`` through the real pulumi CLI (``pulumi state move``) on a file backend.

The monolithic stack ``fleet`` deploys the dev estate, then is split into ``fleet-platform``,
``fleet-hosts-lab-workers``, ``fleet-tenant-alpha`` and ``fleet-tenant-beta`` without recreating
anything: each split stack's preview shows every moved resource unchanged, and an ``up`` of the
fleet afterwards makes no provider write. The stacks run ``tests/ops/programs/estate-split``, a
stand-in with the program's resource tree (the Estate component with the split stacks' alias and
an explicit Kubernetes provider, a component per host, cluster, tenant, composition and composer)
whose resources record every provider write (a log line, a rendered manifest), so it runs without
the lab; ``tests/ops/test_estate_migrate_dev.py`` migrates this repository's program's deployed dev
stack on the lab. Which stack owns which resource of the program itself is checked in
``tests/components/test_estate_migrate_plan.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import dev_fleet_project

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ("fleet-platform", "fleet-hosts-lab-workers", "fleet-tenant-alpha", "fleet-tenant-beta")

pytestmark = pytest.mark.cli


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The stand-in project with the fleet ``fleet`` (the dev estate) on a file backend; the
    environment of its commands."""
    work, env = dev_fleet_project(tmp_path, "estate-split", backend_url=f"file://{tmp_path / 'state'}")
    (tmp_path / "state").mkdir()
    env["ESTATE_WRITES_LOG"] = str(tmp_path / "writes.log")
    env["ESTATE_RENDER_DIR"] = str(tmp_path / "rendered")
    env.pop("KUBECONFIG", None)  # the provider renders files: it takes no cluster
    return work, env


def _pulumi(work: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"pulumi {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _estate(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ops.estate", *args, "--fleet", "fleet", "--project", str(work)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _rendered(folder: Path) -> dict[str, tuple[int, str]]:
    """Each manifest the Kubernetes provider rendered: path -> (modification time in ns, text)."""
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_text())
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _resources(work: Path, env: dict[str, str], stack: str) -> list[dict]:
    exported = json.loads(_pulumi(work, env, "stack", "export", "--stack", stack))
    return exported["deployment"].get("resources") or []


def test_the_monolith_moves_into_its_split_without_a_create_replace_or_delete(
    project: tuple[Path, dict[str, str]],
) -> None:
    work, env = project
    writes = Path(env["ESTATE_WRITES_LOG"])
    _pulumi(work, env, "stack", "init", "fleet")
    _pulumi(work, env, "up", "--yes", "--stack", "fleet")
    created = writes.read_text().splitlines()
    assert len(created) >= 8 and all(line.startswith("create ") for line in created), created
    writes.write_text("")
    manifests = _rendered(Path(env["ESTATE_RENDER_DIR"]))
    assert len(manifests) == len(created)  # a ConfigMap beside each dynamic resource
    before = {r["urn"].split("::", 2)[2] for r in _resources(work, env, "fleet")}

    migrated = _estate(work, env, "migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert [ln.split()[-1] for ln in migrated.stdout.splitlines() if ln.startswith("moved")] == list(SPLIT)

    # the monolith keeps only its root stack, its Estate component and its providers
    kept = {r["type"] for r in _resources(work, env, "fleet")}
    assert kept == {"pulumi:pulumi:Stack", "composable:infra:Estate", "pulumi:providers:pulumi-python",
                    "pulumi:providers:kubernetes"}, kept
    # each split stack's preview: every resource unchanged but its own new Estate component
    moved = 0
    for stack in SPLIT:
        preview = json.loads(_pulumi(work, env, "preview", "--json", "--show-sames", "--stack", stack))
        ops = {(s["op"], s["urn"].split("::")[2]) for s in preview["steps"]}
        changed = {(op, typ) for op, typ in ops if op != "same"}
        assert changed == {("create", "composable:infra:Estate")}, (stack, changed)
        assert preview["changeSummary"] == {"create": 1, "same": len(preview["steps"]) - 1}
        things = [s for s in preview["steps"] if "dynamic:Resource" in s["urn"]]
        assert things and all(s["op"] == "same" for s in things), stack
        # the explicit provider, copied into the stack by the move, and the objects going through it
        kube = [s for s in preview["steps"] if s["urn"].split("::")[2].endswith(
            ("pulumi:providers:kubernetes", "kubernetes:core/v1:ConfigMap"))]
        assert len(kube) == len(things) + 1 and all(s["op"] == "same" for s in kube), stack
        # matched through the alias: the state's URN (a root stack's child) is not the program's
        for s in things:
            assert s["oldState"]["urn"] != s["urn"] and "composable:infra:Estate$" in s["urn"], s["urn"]
        moved += len(things)
    assert moved == len(created)

    # an up of the whole fleet writes nothing through a provider, and the state takes the program's URNs
    up = _estate(work, env, "up")
    assert up.returncode == 0, up.stdout + up.stderr
    assert up.stdout.splitlines()[0] == "up of 4 stacks: 4 ok, 0 failed, 0 skipped", up.stdout
    assert writes.read_text() == ""
    assert _rendered(Path(env["ESTATE_RENDER_DIR"])) == manifests  # no manifest written again
    after = set()
    mothership = "composable:infra:Estate$pulumi:providers:kubernetes::estate-mothership"
    for stack in SPLIT:
        held = _resources(work, env, stack)
        kube = [r["urn"].split("::", 2)[2] for r in held if r["type"] == "pulumi:providers:kubernetes"]
        assert kube == [mothership], (stack, kube)  # the copy, under the stack's own Estate now
        after |= {r["urn"].split("::", 2)[2] for r in held
                  if r["type"] not in ("pulumi:pulumi:Stack", "composable:infra:Estate")
                  and not r["type"].startswith("pulumi:providers:")}
    assert after == {u for u in before if u.startswith("composable:infra:Estate$") and u != mothership}


def test_a_split_stack_that_holds_resources_is_refused_before_any_move(
    project: tuple[Path, dict[str, str]],
) -> None:
    work, env = project
    _pulumi(work, env, "stack", "init", "fleet")
    _pulumi(work, env, "up", "--yes", "--stack", "fleet")
    # beta deployed anew in the split before the migration
    assert _estate(work, env, "up", "--stack", "tenant:beta").returncode == 0
    count = len(_resources(work, env, "fleet"))
    refused = _estate(work, env, "migrate")
    assert refused.returncode == 1
    assert "error: fleet-tenant-beta already holds" in refused.stderr, refused.stderr
    assert len(_resources(work, env, "fleet")) == count  # nothing moved
