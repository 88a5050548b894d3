"""Real ``pulumi`` CLI run of the Redfish providers against the simulator.

A small project under tmp_path (local file backend) declares a DpuPosture (HTTPS BMC, CA
bundle) and a BiosAttributes whose values depend on the DPU's outputs (unknown during the
first preview). Sequence: an ``up`` with a wrong password fails and records nothing; ``up``;
out-of-band drift; ``refresh`` shows it; ``preview`` shows the correction; ``destroy``
leaves the BMCs alone. ``pulumi stack export`` never holds the password in plaintext.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from dynamic_providers import preflight
from tests.cli_assertions import one_line_failure

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent('''
    import pulumi

    from dynamic_providers.redfish.provider import BiosAttributes, DpuPosture

    cfg = pulumi.Config()
    dpu = DpuPosture("dpu-a", bmc_endpoint=cfg.require("dpuEndpoint"), username=cfg.require("user"),
                     password=cfg.require_secret("password"), ca_bundle=cfg.require("caBundle"),
                     apply_reset=True, reset_timeout_seconds=10)
    host = BiosAttributes("host-a", bmc_endpoint=cfg.require("hostEndpoint"), username=cfg.require("user"),
                          password=cfg.require_secret("password"),
                          attributes={"ProcVirtualization": "Enabled", "IOMMU": "Enabled",
                                      # unknown until the DPU exists: SR-IOV only behind a DPU-mode card
                                      "SriovGlobalEnable": dpu.mode.apply(
                                          lambda m: "Enabled" if m == "DpuMode" else "Disabled")},
                          apply_reset=True, reset_timeout_seconds=10)
    pulumi.export("mode", dpu.mode)
    pulumi.export("host_rshim", dpu.host_rshim)
    pulumi.export("reset_pending", dpu.reset_pending)
    pulumi.export("firmware", dpu.firmware_version)
    pulumi.export("bios", host.attributes)
''')


def _which_pulumi() -> str:
    exe = shutil.which("pulumi")
    if exe is None:
        pytest.skip("pulumi CLI not on PATH (run `make setup`)")
    return exe


@pytest.fixture
def project(tmp_path: Path, sim) -> dict:
    pulumi = _which_pulumi()
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "Pulumi.yaml").write_text(
        "name: redfish-cli-test\n"
        f"runtime:\n  name: python\n  options:\n    virtualenv: {ROOT / '.venv'}\n")
    (proj / "__main__.py").write_text(PROGRAM)
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
           "PULUMI_CONFIG_PASSPHRASE": "redfish-cli-test", "PULUMI_SKIP_UPDATE_CHECK": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    (tmp_path / "state").mkdir()

    def run(*args: str, ok: bool = True,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run([pulumi, *args, "--non-interactive"], cwd=proj,
                              env={**env, **(extra_env or {})}, capture_output=True, text=True,
                              timeout=300, check=False)
        if ok and proc.returncode != 0:
            pytest.fail(f"pulumi {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    run("stack", "init", "test")
    for key, value in (("dpuEndpoint", sim.url("dpu-tls")), ("hostEndpoint", sim.url("host")),
                       ("user", sim.username), ("caBundle", sim.ca_bundle)):
        run("config", "set", key, value)
    return {"run": run, "proj": proj}


def _export(run) -> tuple[str, dict]:
    text = run("stack", "export").stdout
    return text, json.loads(text)


def _resource(state: dict, type_suffix: str) -> dict | None:
    for res in state["deployment"].get("resources", []):
        if res["type"].endswith(type_suffix):
            return res
    return None


@pytest.mark.cli
@pytest.mark.slow
def test_up_drift_refresh_destroy(project, sim):
    run = project["run"]

    # 1. wrong password: clear error, nothing recorded as created
    run("config", "set", "--secret", "password", "definitely-wrong")
    failed = run("up", "--yes", "--skip-preview", ok=False)
    assert failed.returncode != 0
    assert "login refused for user 'root'" in failed.stdout + failed.stderr
    assert "definitely-wrong" not in failed.stdout + failed.stderr
    _, state = _export(run)
    assert _resource(state, "redfish:DpuPosture") is None

    # 2. real up (the preview runs with the BIOS attributes unknown)
    sim.drift("dpu-tls", mode="NicMode")
    run("config", "set", "--secret", "password", sim.password)
    run("up", "--yes")
    outputs = json.loads(run("stack", "output", "--json").stdout)
    assert outputs["mode"] == "DpuMode" and outputs["host_rshim"] == "Disabled"
    assert outputs["reset_pending"] is False and outputs["firmware"] == "BF-24.10-17"
    assert outputs["bios"] == {"ProcVirtualization": "Enabled", "IOMMU": "Enabled",
                               "SriovGlobalEnable": "Enabled"}
    # BF-24.10 firmware: the privilege went through ExternalHostPrivileges and its reset applied it
    assert sim.host_privilege("dpu-tls") == "Restricted" and sim.state("dpu-tls")["reset_count"] == 1

    # 3. no plaintext secret anywhere in the state; the credentials are ciphertext
    text, state = _export(run)
    assert sim.password not in text
    dpu = _resource(state, "redfish:DpuPosture")
    for props in (dpu["inputs"], dpu["outputs"]):
        assert "ciphertext" in props["password"] and "ciphertext" in props["username"]

    # 4. out-of-band drift; refresh shows it
    sim.drift("dpu-tls", mode="NicMode", host_rshim="Enabled",
              external_privileges={"HostPrivFwUpdate": "Enabled"})
    refreshed = run("refresh", "--yes", "--diff").stdout
    assert re.search(r'~ mode\s*: "DpuMode" => "NicMode"', refreshed), refreshed
    assert re.search(r'~ host_rshim\s*: "Disabled" => "Enabled"', refreshed), refreshed
    assert re.search(r'~ host_privilege_level\s*: "Restricted" => "Custom"', refreshed), refreshed
    text, state = _export(run)
    dpu = _resource(state, "redfish:DpuPosture")
    assert (dpu["outputs"]["mode"], dpu["outputs"]["host_rshim"]) == ("NicMode", "Enabled")
    assert dpu["outputs"]["drift"] == ["mode", "host_privilege", "host_rshim"]
    assert sim.password not in text, "still no plaintext secret after refresh"

    # 5. the next preview proposes the correction
    preview = run("preview", "--diff").stdout
    assert re.search(r'~ mode\s*: "NicMode" => "DpuMode"', preview), preview
    assert re.search(r'~ host_rshim\s*: "Enabled" => "Disabled"', preview), preview
    assert re.search(r'~ host_privilege\s*: "Custom" => "Restricted"', preview), preview

    # 6. destroy forgets the resources and leaves the hardware as it is
    before = sim.state("dpu-tls")
    run("destroy", "--yes")
    after = sim.state("dpu-tls")
    assert (after["attributes"], after["pending"], after["host_rshim"], after["reset_count"]) == \
        (before["attributes"], before["pending"], before["host_rshim"], before["reset_count"])
    _, state = _export(run)
    assert _resource(state, "redfish:DpuPosture") is None


@pytest.mark.cli
@pytest.mark.parametrize("case", ["wrong password", "unreachable"])
def test_preview_stops_on_a_refused_bmc_in_one_line_and_changes_nothing(project, sim, free_port, case):
    run = project["run"]
    if case == "wrong password":
        run("config", "set", "--secret", "password", "definitely-wrong")
        endpoint, refused = sim.url("dpu-tls"), "credentials refused"
    else:
        run("config", "set", "--secret", "password", sim.password)
        endpoint, refused = f"http://127.0.0.1:{free_port}", "no answer"
        run("config", "set", "dpuEndpoint", endpoint)
    before = sim.state("dpu-tls")
    preview = run("preview", ok=False)
    line = one_line_failure(preview.returncode, preview.stdout + preview.stderr, "dpu-a", endpoint, refused)
    assert "definitely-wrong" not in preview.stdout + preview.stderr
    after = sim.state("dpu-tls")
    assert (after["attributes"], after["pending"], after["host_rshim"], after["reset_count"]) == \
        (before["attributes"], before["pending"], before["host_rshim"], before["reset_count"]), line
    writes = [r for r in after["requests"][len(before["requests"]):] if r["method"] not in ("GET", "HEAD")
              and "Sessions" not in r["path"]]
    assert writes == []
    _, state = _export(run)
    assert _resource(state, "redfish:DpuPosture") is None


@pytest.mark.cli
def test_an_error_during_up_is_one_line_and_the_traceback_is_on_request(project, sim):
    """With the preview probe off, a refused login happens inside ``create``: the user sees the
    typed error's one line; ``--debug`` adds the traceback for whoever needs it."""
    run = project["run"]
    run("config", "set", "--secret", "password", "definitely-wrong")
    off = {preflight.PREFLIGHT_ENV: "off"}
    failed = run("up", "--yes", "--skip-preview", ok=False, extra_env=off)
    line = one_line_failure(failed.returncode, failed.stdout + failed.stderr, "dpu-a", "AuthError:")
    assert "login refused for user 'root'" in line and sim.url("dpu-tls") in line
    assert "definitely-wrong" not in failed.stdout + failed.stderr
    debug = run("up", "--yes", "--skip-preview", "--debug", ok=False, extra_env=off)
    assert "Traceback (most recent call last)" in debug.stdout + debug.stderr
    assert "definitely-wrong" not in debug.stdout + debug.stderr
