"""GpuComposition through the real ``pulumi`` CLI: preview with unknowns, up, refresh after an
out-of-band detach, up again, destroy; secrets never in plaintext in the exported state. Once
more with a Director that answers every change with HTTP 202 and a job of 2 s."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.cli_assertions import one_line_failure

from .conftest import PASSWORD, ROOT, USER, Sim, start_sim

pytestmark = [pytest.mark.cli, pytest.mark.slow]

TOOLCHAIN = ROOT / ".toolchain" / "bin"
VENV = ROOT / ".venv"
TYPE = "pulumi-python:dynamic/director:GpuComposition"

PROGRAM = textwrap.dedent('''
    """Test program: one GpuComposition whose model comes from a resource not created yet."""
    import os
    import sys

    sys.path.insert(0, os.environ["COMPOSABLE_GPU_ROOT"])

    import pulumi
    from pulumi.dynamic import CreateResult, Resource, ResourceProvider

    from dynamic_providers.director.endpoint import DirectorEndpoint
    from dynamic_providers.director.provider import GpuComposition


    class _Echo(ResourceProvider):
        def create(self, props):
            return CreateResult("echo", {"seed": props["seed"], "value": props["seed"]})


    class Echo(Resource):
        value: pulumi.Output[str]  # computed only: unknown until created

        def __init__(self, name, seed):
            super().__init__(_Echo(), name, {"seed": seed, "value": None})


    cfg = pulumi.Config("director")
    model = Echo("model-source", "Tesla-T4").value  # unknown during the first preview
    # What the composer component declares beside its credentials Secret: checked at preview.
    DirectorEndpoint("director-account", endpoint=cfg.require("endpoint"),
                     username=cfg.require_secret("username"), password=cfg.require_secret("password"))
    gpus = GpuComposition(
        "static-gpus",
        endpoint=cfg.require("endpoint"),
        username=cfg.require_secret("username"),
        password=cfg.require_secret("password"),
        machine="blade-slot-1",
        count=cfg.require_int("count"),
        model=model,
        timeout_seconds=5,
        reprogram_timeout_seconds=30,
    )
    pulumi.export("device_names", gpus.device_names)
    pulumi.export("models", gpus.models)
''')


class Project:
    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path, self.env = path, env

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=self.path,
            env=self.env,
            text=True,
            capture_output=True,
            timeout=300,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    def export(self) -> tuple[str, dict[str, Any]]:
        text = self.run("stack", "export").stdout
        return text, json.loads(text)

    def composition(self) -> dict[str, Any]:
        _, state = self.export()
        resources = state["deployment"].get("resources") or []
        return next(r for r in resources if r["type"] == TYPE)


@pytest.fixture
def sim() -> Iterator[Sim]:
    s = start_sim("dev.yaml")
    yield s
    s.server.stop()


@pytest.fixture
def async_sim() -> Iterator[Sim]:
    """The dev inventory; every change answers HTTP 202 with a job that ends 2 s later."""
    s = start_sim("dev.yaml", async_seconds=2.0)
    yield s
    s.server.stop()


@pytest.fixture
def project(tmp_path: Path, sim: Sim) -> Iterator[Project]:
    yield from _project(tmp_path, sim)


@pytest.fixture
def async_project(tmp_path: Path, async_sim: Sim) -> Iterator[Project]:
    yield from _project(tmp_path, async_sim)


def _project(tmp_path: Path, sim: Sim) -> Iterator[Project]:
    if not (TOOLCHAIN / "pulumi").exists() or not (VENV / "bin" / "python").exists():
        pytest.skip("toolchain not built: run `make setup`")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "Pulumi.yaml").write_text(
        "name: director-cli-test\n"
        f"runtime:\n  name: python\n  options:\n    toolchain: pip\n    virtualenv: {VENV}\n"
    )
    (proj / "__main__.py").write_text(PROGRAM)
    env = {
        **os.environ,
        "PATH": f"{TOOLCHAIN}:{VENV / 'bin'}:{os.environ.get('PATH', '')}",
        "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": "cli-test-passphrase",
        "PULUMI_SKIP_UPDATE_CHECK": "1",
        "PULUMI_DIY_BACKEND_DISABLE_CHECKPOINT_BACKUPS": "1",
        "COMPOSABLE_GPU_ROOT": str(ROOT),
        "PYTHONPATH": str(ROOT),
    }
    (tmp_path / "state").mkdir()
    p = Project(proj, env)
    p.run("stack", "init", "test")
    p.run("config", "set", "director:endpoint", sim.url)
    p.run("config", "set", "--secret", "director:username", USER)
    p.run("config", "set", "--secret", "director:password", PASSWORD)
    p.run("config", "set", "director:count", "2")
    yield p
    if p.run("stack", "export").stdout.count(TYPE):
        p.run("destroy", "--yes", "--skip-preview", check=False)
    shutil.rmtree(tmp_path / "pulumi-home", ignore_errors=True)


def test_up_refresh_after_out_of_band_detach_up_destroy(project: Project, sim: Sim) -> None:
    before = sim.fabric_state()

    pre = project.run("preview", "--diff")  # the model is unknown here: check must cope
    assert re.search(r"model\s*:\s*\[unknown\]", pre.stdout), pre.stdout
    assert "error" not in pre.stdout.lower() and sim.fabric_state() == before

    up = project.run("up", "--yes", "--skip-preview")
    assert "created" in up.stdout
    outs = json.loads(project.run("stack", "output", "--json").stdout)
    assert outs["device_names"] == ["gpu0", "gpu1"] and outs["models"] == ["Tesla-T4", "Tesla-T4"]
    assert sim.gpu("gpu0")["mach_id"] == sim.gpu("gpu1")["mach_id"] == sim.machine_id("blade-slot-1")

    text, state = project.export()
    assert PASSWORD not in text and USER not in text  # secrets stay encrypted in state
    res = next(r for r in state["deployment"]["resources"] if r["type"] == TYPE)
    for key in ("username", "password"):
        assert (
            res["outputs"][key].get("4dabf18193072939515e22adb298388d") == "1b47061264138c4ac30d75fd1eb44270"
        )
        assert (
            res["inputs"][key].get("4dabf18193072939515e22adb298388d") == "1b47061264138c4ac30d75fd1eb44270"
        )

    sim.detach("gpu1")  # someone pulls a GPU out of band
    project.run("refresh", "--yes", "--skip-preview")
    assert project.composition()["outputs"]["device_names"] == ["gpu0"]

    project.run("up", "--yes", "--skip-preview")  # drift: the missing GPU is composed again
    assert project.composition()["outputs"]["device_names"] == ["gpu0", "gpu1"]
    assert sim.gpu("gpu1")["mach_id"] == sim.machine_id("blade-slot-1")

    project.run("destroy", "--yes", "--skip-preview")
    assert sim.fabric_state() == before  # detached, tags cleared, back in the system pool


def test_up_and_destroy_when_every_change_answers_202(async_project: Project, async_sim: Sim) -> None:
    """LIQID's SDK polls a 202 answer's job link before its next call (LiqidClientBase.java:176-237);
    the simulator refuses, and records, any change that arrives while a job still runs."""
    sim = async_sim
    before = sim.fabric_state()
    async_project.run("up", "--yes", "--skip-preview")
    outs = json.loads(async_project.run("stack", "output", "--json").stdout)
    assert outs["device_names"] == ["gpu0", "gpu1"]
    assert sim.gpu("gpu0")["mach_id"] == sim.gpu("gpu1")["mach_id"] == sim.machine_id("blade-slot-1")
    async_project.run("destroy", "--yes", "--skip-preview")
    assert sim.fabric_state() == before
    calls = requests.get(f"{sim.url}/_sim/calls", timeout=5).json()
    changes = [c for c in calls if c["method"] != "GET" and not c["path"].startswith("digest")]
    assert changes and all(c["status"] == 202 for c in changes), changes
    assert not [c for c in changes if c["path"].endswith("cancel")]
    assert sim.state()["violations"] == []


@pytest.mark.parametrize("case", ["wrong password", "unreachable"])
def test_preview_stops_on_a_refused_director_in_one_line_and_changes_nothing(
        project: Project, sim: Sim, case: str) -> None:
    if case == "wrong password":
        project.run("config", "set", "--secret", "director:password", "definitely-wrong")
        endpoint, refused = sim.url, "credentials refused"
    else:
        endpoint = "http://127.0.0.1:9"  # discard port: nothing listens
        project.run("config", "set", "director:endpoint", endpoint)
        refused = "no answer"
    before = sim.fabric_state()
    pre = project.run("preview", check=False)
    text = pre.stdout + pre.stderr
    assert "definitely-wrong" not in text
    # The engine stops at the first resource whose check fails (either of the two that probe
    # this Director) and prints that diagnostic on its progress line and under "Diagnostics:".
    line = one_line_failure(pre.returncode, text, " error: ")
    assert f"Director {endpoint}: {refused}" in line, text
    assert "'director-account'" in line or "'static-gpus'" in line, text
    assert sim.fabric_state() == before
    _, state = project.export()
    assert not [r for r in state["deployment"].get("resources") or [] if r["type"] == TYPE]
