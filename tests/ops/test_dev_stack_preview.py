"""The preview-for-review command on the real program's dev stack against the lab.

The dev stack is created afresh in a temporary local backend (so the shared ``.pulumi-state``
is never touched), from the committed ``Pulumi.dev.yaml`` and its inventory folder
``environments/dev``; its preview is then a plan to create the whole estate, checked by the real
policy pack with its ``lab`` config. The expected rows are derived from the same estate, so the
test follows config edits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import services
from ops.preview_events import parse_events
from stack_config import load_stack_file

ROOT = Path(__file__).resolve().parents[2]
DEV_PASSPHRASE = "dev-lab-only-passphrase"  # the lab constant of the Makefile's STACK=dev

pytestmark = [pytest.mark.lab, pytest.mark.cli, pytest.mark.slow]


def test_preview_report_on_the_dev_stack(lab, tmp_path: Path) -> None:
    # The simulators as the session's lab fixture starts them (idempotent): the preview's Redfish
    # checks read their CA file, which a run once found missing here after earlier lab tests.
    services.start_simulators(lab, hotplug_latency_seconds=0.2)
    (tmp_path / "state").mkdir()
    # PULUMI_HOME stays the shared one: it holds the kubernetes plugin that `make setup` installs.
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
           "PULUMI_CONFIG_PASSPHRASE": DEV_PASSPHRASE, "KUBECONFIG": str(lab.kubeconfig)}
    stack_file = ROOT / "Pulumi.dev.yaml"
    before = stack_file.read_bytes()
    subprocess.run(["pulumi", "stack", "init", "dev", "--non-interactive"], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=120)
    assert stack_file.read_bytes() == before  # stack init left the committed file alone

    md_file, events_file = tmp_path / "dev.md", tmp_path / "dev.events.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "ops.preview_report", "--stack", "dev", "--out", str(md_file),
         "--events-out", str(events_file), "--no-diff-text"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    md = md_file.read_text()
    assert proc.returncode == 0, md + proc.stderr[-3000:]

    preview = parse_events(events_file.read_text().splitlines())
    assert preview.result == "succeeded"
    assert preview.violations == []
    assert "composable-gpu-tenant-isolation" in preview.policy_packs
    assert {"composable-gpu-tenant-isolation/tenant-network-uniqueness",
            "composable-gpu-tenant-isolation/tenant-host-dpu-zero-trust"} <= preview.policies_passed
    assert set(preview.change_counts) == {"create"}  # a fresh stack: the whole estate is new

    estate = load_stack_file(stack_file)  # its inventory folder, environments/dev
    assert md.startswith("## Pulumi preview: `composable-gpu` / `dev`\n\n✅ **Preview succeeded** · ✅ all ")
    for tenant in estate.tenants:
        for net in tenant.networks:
            details = f"{net.cidr}, VXLAN {net.vxlan_id}, VLAN {net.vlan_id}"
            assert f"| ➕ added | `{tenant.name}` | `{net.name}` | {details} |" in md
    for host in estate.hosts:
        assert f"| Host `{host.name}` | ➕ added | role={host.role}" in md
    assert "[!CAUTION]" not in md  # nothing is replaced or deleted on a first deployment
