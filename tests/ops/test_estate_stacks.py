"""Which stacks ``python -m ops.estate`` creates and opens, counted on a fake of ``pulumi.automation``:
one listing of the backend's stacks, a creation only for a missing stack that the run touches or
reads, an opening only for a stack that runs. The real CLI runs the same command in
``tests/ops/test_estate_cli.py``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

import ops.estate
from ops.estate import run_estate
from ops.estate_plan import StackResult

ROOT = Path(__file__).resolve().parents[2]
_RACK_C = {"hosts": [{"name": "blade-slot-3", "role": "baremetal-worker", "boot_mac": "52:54:00:00:01:03",
                      "bmc": {"endpoint": "https://127.0.0.1:18453", "credential": "bmc"}}]}


class Backend:
    """The stacks a fake backend holds and every CLI call made on it, as ``(command, stack)``."""

    def __init__(self, stacks: set[str]) -> None:
        self.stacks = stacks
        self.calls: list[tuple[str, str]] = []

    def of(self, command: str) -> list[str]:
        """The stacks of the calls of ``command`` (``ls``, ``init``, ``select``, ``version``), in order."""
        return [s for c, s in self.calls if c == command]


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    """A fake backend holding the platform and lab-workers stacks of fleet ``fleet``, behind fakes of
    the automation calls the estate command makes; a run records the stack it ran on."""
    fake = Backend({"fleet-platform", "organization/composable-gpu/fleet-hosts-lab-workers"})

    class Workspace(auto.LocalWorkspace):
        def __init__(self, work_dir: str | None = None, pulumi_command: Any = None, **_: Any) -> None:
            self.work_dir = work_dir or ""
            self.env_vars = {}

        def list_stacks(self, include_all: bool | None = None) -> list[auto.StackSummary]:
            fake.calls.append(("ls", ""))
            return [auto.StackSummary(name=n, current=False) for n in sorted(fake.stacks)]

        def create_stack(self, stack_name: str) -> None:
            fake.calls.append(("init", stack_name))
            fake.stacks.add(stack_name)

        def select_stack(self, stack_name: str) -> None:
            fake.calls.append(("select", stack_name))
            if not {stack_name, f"organization/composable-gpu/{stack_name}"} & fake.stacks:
                raise auto.errors.StackNotFoundError(auto.CommandResult("", "no stack", 255))

    def create_or_select(stack_name: str, **_: Any) -> auto.Stack:
        return auto.Stack.create_or_select(stack_name, Workspace())

    def version(*_: Any, **__: Any) -> None:
        fake.calls.append(("version", ""))

    def run(stack: auto.Stack, operation: str, *_: Any, **__: Any) -> dict[str, int]:
        fake.calls.append((operation, stack.name))
        return {"same": 1}

    monkeypatch.setattr(auto, "LocalWorkspace", Workspace)
    monkeypatch.setattr(auto, "PulumiCommand", version)
    monkeypatch.setattr(auto, "create_or_select_stack", create_or_select)
    monkeypatch.setattr(ops.estate, "_run", run)
    yield fake


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The dev estate as fleet ``fleet`` (``Pulumi.fleet.yaml``), plus a rack ``rack-c`` of one host
    outside any cluster, which no tenant reads."""
    inv = Path(shutil.copytree(ROOT / "environments" / "dev", tmp_path / "inv"))
    (inv / "hosts" / "rack-c.yaml").write_text(yaml.safe_dump(_RACK_C, sort_keys=False))
    dev = (ROOT / "Pulumi.dev.yaml").read_text()
    (tmp_path / "Pulumi.fleet.yaml").write_text(dev.replace("inventory: environments/dev", "inventory: inv"))
    return tmp_path


def _preview(project: Path, roles: list[str], changed: list[str] | None = None) -> list[StackResult]:
    return run_estate("preview", project=project, fleet_name="fleet", roles=roles, changed=changed,
                      parallel=1)


def test_one_tenant_creates_only_its_missing_stack_and_opens_only_it(project: Path, backend: Backend) -> None:
    results = _preview(project, ["tenant:beta"])
    assert [(r.stack, r.status) for r in results] == [("fleet-tenant-beta", "ok")]
    assert backend.of("ls") == [""]  # one listing of the backend's stacks
    # beta reads platform and lab-workers, which exist (one listed by its qualified name)
    assert backend.of("init") == ["fleet-tenant-beta"]
    assert backend.of("select") == ["fleet-tenant-beta"]
    assert backend.of("preview") == ["fleet-tenant-beta"]
    assert len(backend.of("version")) == 1  # one CLI version check for the whole run
    assert not (project / "Pulumi.fleet-hosts-rack-c.yaml").exists()  # a stack nobody reads waits
    assert "composable-gpu:role: tenant:beta" in (project / "Pulumi.fleet-tenant-beta.yaml").read_text()


def test_a_second_run_creates_nothing(project: Path, backend: Backend) -> None:
    _preview(project, ["tenant:beta"])
    backend.calls.clear()
    _preview(project, [], changed=["inv/tenants/beta.yaml"])
    assert backend.of("init") == []
    assert backend.of("select") == backend.of("preview") == ["fleet-tenant-beta"]


def test_a_host_group_change_creates_what_it_touches_and_reads_then_opens_them_in_order(
    project: Path, backend: Backend
) -> None:
    backend.stacks.clear()
    results = _preview(project, [], changed=["inv/hosts/lab-workers.yaml"])
    touched = ["fleet-hosts-lab-workers", "fleet-tenant-alpha", "fleet-tenant-beta"]
    assert [r.stack for r in results] == touched
    assert backend.of("init") == ["fleet-platform", *touched]  # platform is read, not run
    assert backend.of("select") == backend.of("preview") == touched
    assert "fleet-hosts-rack-c" not in backend.stacks
