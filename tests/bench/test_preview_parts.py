"""Part 4's pieces (bench/preview.py): generated fleets validate, the project copy, the memory
sampler, and the program under Pulumi mocks."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.preview import (
    CONFIG_KEY,
    ROOT,
    TreeSampler,
    _dev_stack,
    _plain_for_mocks,
    fleet_config,
    make_project_copy,
    run_mocks,
)
from stack_config import load_estate


@pytest.mark.parametrize("n", [2, 16, 64])
def test_generated_fleets_are_valid_estates(n):
    doc = fleet_config(n)
    est = load_estate(_plain_for_mocks(doc["config"][CONFIG_KEY]))
    assert len(est.hosts) == n
    assert len({h.bmc.endpoint for h in est.hosts}) == n
    assert len({h.boot_mac for h in est.hosts}) == n
    assert doc["encryptionsalt"] == _dev_stack()["encryptionsalt"]


def test_fleet_secrets_are_the_dev_ciphertexts_never_plaintext():
    doc = fleet_config(3)
    hosts = doc["config"][CONFIG_KEY]["hosts"]
    assert all(set(h["bmc"]["password"]) == {"secure"} for h in hosts)
    assert _plain_for_mocks(hosts[0])["bmc"]["password"] == "bench-placeholder-secret"


def test_project_copy_wraps_the_program_and_points_at_the_given_lab(tmp_path):
    kc, ca = tmp_path / "kc", tmp_path / "ca.pem"
    kc.write_text("kubeconfig")
    ca.write_text("pem")
    proj = make_project_copy(tmp_path / "p", kubeconfig=kc, ca_pem=ca)
    assert (proj / "_program.py").read_text() == (ROOT / "__main__.py").read_text()
    assert "runpy.run_path" in (proj / "__main__.py").read_text()
    assert (proj / "components" / "__init__.py").exists()
    assert (proj / ".lab" / "kubeconfig").read_text() == "kubeconfig"
    assert (proj / ".lab" / "sim-state" / "redfish" / "tls" / "ca.pem").read_text() == "pem"
    assert sys.prefix in (proj / "Pulumi.yaml").read_text()


def test_tree_sampler_sums_a_process_and_its_children():
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(60 * 2**20); import time; time.sleep(3)"])
    try:
        time.sleep(1.0)
        s = TreeSampler(os.getpid())
        s.sample()
    finally:
        child.kill()
        child.wait()
    assert s.peak_mib > 60
    assert any(v >= 60 for k, v in s.by_name.items() if k.startswith("python"))


@pytest.mark.slow
def test_dev_stack_program_runs_under_mocks(tmp_path):
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    proj = make_project_copy(tmp_path / "p", kubeconfig=kc, ca_pem=kc)
    out = run_mocks(proj, "dev", _dev_stack())
    assert out["ok"], out.get("tail")
    assert out["seconds"] > 0 and out["tracemalloc_peak_mib"] > 1
