"""Part 4's pieces (bench/preview.py): generated fleets are valid inventory folders, the config
bytes they hand over stay small at any size, the project copy, the memory and environment sampler,
and the program under Pulumi mocks."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml

from bench.preview import (
    CREDENTIALS_KEY,
    INVENTORY_KEY,
    RACK_SIZE,
    ROOT,
    TreeSampler,
    _dev_stack,
    config_figures,
    dev_bench_stack,
    engine_config_bytes,
    fleet_stack,
    make_project_copy,
    run_mocks,
    validate_only,
)
from stack_config import load_stack_file


@pytest.mark.parametrize("n", [2, 16, 64])
def test_generated_fleets_are_valid_inventory_folders(tmp_path, n):
    stack = fleet_stack(n)
    est = load_stack_file(stack.write(tmp_path))
    assert len(est.hosts) == n
    assert len({h.bmc.endpoint for h in est.hosts}) == n
    assert len({h.boot_mac for h in est.hosts}) == n
    assert sum(name.startswith("hosts/") for name in stack.files) == -(-n // RACK_SIZE)
    assert stack.doc["encryptionsalt"] == _dev_stack()["encryptionsalt"]


def test_fleet_secrets_are_the_dev_credential_sets_never_plaintext(tmp_path):
    stack = fleet_stack(3)
    assert stack.doc["config"][CREDENTIALS_KEY] == _dev_stack()["config"][CREDENTIALS_KEY]
    assert stack.doc["config"][INVENTORY_KEY] == "environments/fleet3"
    written = stack.write(tmp_path)
    text = "".join(p.read_text() for p in (tmp_path / "environments" / "fleet3").rglob("*.yaml"))
    assert "password" not in text and "secure" not in text
    assert yaml.safe_load(written.read_text()) == stack.doc


def test_config_bytes_stay_small_at_any_size_while_the_inline_estate_grows():
    """What the engine hands over in one environment variable: the folder's path and two credential
    sets, whatever the estate's size; inline the same estate would pass Linux's 128 KiB cap."""
    small, large = config_figures(fleet_stack(16)), config_figures(fleet_stack(1024))
    assert large["config_bytes"] < 1024 and large["config_bytes"] - small["config_bytes"] < 8
    assert large["inline_config_bytes"] > 128 * 1024 > small["inline_config_bytes"]
    assert engine_config_bytes({"a:b": "xyz"}) == len('{"a:b": "xyz"}') + len("[]")
    assert config_figures(dev_bench_stack())["config_bytes"] < 1024


@pytest.mark.slow
def test_a_ten_thousand_host_estate_validates_under_32_kib_of_config(tmp_path):
    row = validate_only(10_000, tmp_path)
    assert row["ok"], row.get("problems")
    assert row["hosts"] == 10_000 and row["files"] > 300
    assert row["config_bytes"] < 32 * 1024 < row["inline_config_bytes"]


def test_project_copy_wraps_the_program_and_points_at_the_given_lab(tmp_path):
    kc, ca = tmp_path / "kc", tmp_path / "ca.pem"
    kc.write_text("kubeconfig")
    ca.write_text("pem")
    proj = make_project_copy(tmp_path / "p", kubeconfig=kc, ca_pem=ca)
    assert (proj / "_program.py").read_text() == (ROOT / "__main__.py").read_text()
    assert "runpy.run_path" in (proj / "__main__.py").read_text()
    assert (proj / "components" / "__init__.py").exists()
    assert (proj / "environments" / "dev" / "hosts").is_dir()
    assert (proj / ".lab" / "kubeconfig").read_text() == "kubeconfig"
    assert (proj / ".lab" / "sim-state" / "redfish" / "tls" / "ca.pem").read_text() == "pem"
    assert sys.prefix in (proj / "Pulumi.yaml").read_text()


def test_tree_sampler_sums_a_process_and_its_children_and_reads_their_config_env():
    env = {**os.environ, "PULUMI_CONFIG": '{"k": "' + "x" * 1000 + '"}'}
    child = subprocess.Popen(
        [sys.executable, "-c", "b = bytearray(60 * 2**20); import time; time.sleep(3)"], env=env
    )
    try:
        time.sleep(1.0)
        s = TreeSampler(os.getpid())
        s.sample()
    finally:
        child.kill()
        child.wait()
    assert s.peak_mib > 60
    assert any(v >= 60 for k, v in s.by_name.items() if k.startswith("python"))
    assert max(s.config_env_bytes.values()) >= 1000 + len('{"k": ""}')


@pytest.mark.slow
def test_dev_stack_program_runs_under_mocks(tmp_path):
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    proj = make_project_copy(tmp_path / "p", kubeconfig=kc, ca_pem=kc)
    out = run_mocks(proj, dev_bench_stack())
    assert out["ok"], out.get("tail")
    assert out["seconds"] > 0 and out["tracemalloc_peak_mib"] > 1
    fleet = run_mocks(proj, fleet_stack(8))
    assert fleet["ok"], fleet.get("tail")


def test_config_figures_leave_the_generated_files_as_they_are():
    stack = fleet_stack(4)
    before = yaml.safe_dump(stack.files)
    config_figures(stack)
    assert yaml.safe_dump(stack.files) == before  # no credential copied into a host's file
