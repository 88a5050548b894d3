"""Part 5's pieces (bench/fleet_estate.py, bench/fleet.py): the generated split estate is valid under
the estate's config rules and splits as the benchmark says, the change touches one tenant's stack,
and the estate command's summary is read back as it prints it."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import pytest
import yaml

from bench.fleet import init_repo, parse_summary
from bench.fleet_estate import CLUSTER_KUBECONFIG, change_tenant, split_fleet, tenant_file, tenant_name
from ops.estate import changed_files, load_fleet
from ops.estate_plan import StackResult, render_summary, select
from stack_config import load_stack_file
from stack_config.fleet import PLATFORM


@pytest.fixture(scope="module")
def thousand(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """The full-size estate (1,000 hosts, 100 tenants, racks of 32) written to a project folder."""
    project = tmp_path_factory.mktemp("fleet")
    stack = split_fleet(1_000, 100)
    stack.write(project)
    return project, stack


def test_the_full_size_estate_passes_the_config_validation_with_distinct_network_ids(thousand):
    project, stack = thousand
    estate = load_stack_file(project / f"Pulumi.{stack.name}.yaml")  # python -m stack_config validate
    assert stack.name == "fleet1000x100"
    assert len(estate.hosts) == 1_000 and len({h.name for h in estate.hosts}) == 1_000
    assert len(estate.tenants) == 100
    nets = [n for t in estate.tenants for n in t.networks]
    assert len(nets) == 100
    assert len({n.vxlan_id for n in nets}) == 100 and len({n.vlan_id for n in nets}) == 100
    cidrs = [ipaddress.ip_network(str(n.cidr)) for n in nets]
    assert not any(a.overlaps(b) for i, a in enumerate(cidrs) for b in cidrs[i + 1:])
    endpoints = {h.bmc.endpoint for h in estate.hosts} | {h.dpu.bmc.endpoint for h in estate.hosts if h.dpu}
    assert len(endpoints) == 2_000
    assert all(c.kubeconfig == CLUSTER_KUBECONFIG for c in estate.hypervisor_clusters)
    # no secret in the files: the stack file names the dev credential sets (ciphertexts)
    text = "".join(p.read_text() for p in (project / stack.folder).rglob("*.yaml"))
    assert "password" not in text and "secure" not in text


def test_the_full_size_estate_splits_into_a_platform_a_stack_per_rack_and_one_per_tenant(thousand):
    project, stack = thousand
    fleet = load_fleet(project, stack.name)
    racks = [r for r in fleet.slices if r.startswith("hosts:")]
    tenants = [r for r in fleet.slices if r.startswith("tenant:")]
    assert (len(racks), len(tenants), len(fleet.slices)) == (32, 100, 133)
    assert sum(len(fleet.slices[r].hosts) for r in racks) == 1_000
    assert all(len(fleet.slices[r].hypervisor_clusters) == 1 for r in racks)
    assert fleet.slices["hosts:rack-001"].composer and fleet.slices["hosts:rack-001"].dpu_cluster
    last = fleet.slices["tenant:" + tenant_name(100)]
    assert last.reads == ("hosts:rack-004", PLATFORM)  # team-100's cluster runs on rack (100 - 1) % 32 + 1


def test_a_changed_tenant_file_selects_that_tenants_stack_alone(thousand, tmp_path):
    project, stack = thousand
    fleet = load_fleet(project, stack.name)
    work = tmp_path / "repo"
    stack.write(work)
    base = init_repo(work, stack.name)
    rel = change_tenant(work, stack, 100)
    assert rel == f"{stack.folder}/{tenant_file(100)}"
    assert changed_files(base, work) == [rel]
    assert select(fleet, changed_files=[rel]) == ["tenant:" + tenant_name(100)]
    data = yaml.safe_load((work / rel).read_text())
    assert data["tenants"][0]["gpu_quota"] == 5
    load_stack_file(work / f"Pulumi.{stack.name}.yaml")  # still valid
    diff = subprocess.run(["git", "diff", "--stat"], cwd=work, capture_output=True, text=True, check=True)
    assert diff.stdout.count("|") == 1


def test_small_estates_keep_their_shape_and_bad_sizes_are_refused(tmp_path):
    stack = split_fleet(20, 4, rack_size=8)
    stack.write(tmp_path)
    fleet = load_fleet(tmp_path, stack.name)
    assert list(fleet.slices) == [
        "platform", "hosts:rack-001", "hosts:rack-002", "hosts:rack-003",
        "tenant:team-001", "tenant:team-002", "tenant:team-003", "tenant:team-004"]
    assert len(fleet.slices["hosts:rack-003"].hosts) == 4
    for bad in ((0, 1), (1, 0), (1, 4000)):
        with pytest.raises(ValueError):
            split_fleet(*bad)


def test_the_estate_commands_summary_is_read_back_as_rendered():
    results = [
        StackResult("platform", "f-platform", "ok", 3.04, {"create": 11, "same": 0}),
        StackResult("hosts:rack-001", "f-hosts-rack-001", "failed", 2.0, detail="error: boom, again"),
        StackResult("tenant:team-001", "f-tenant-team-001", "skipped",
                    detail="not run: it reads f-hosts-rack-001"),
        StackResult("tenant:team-002", "f-tenant-team-002", "ok", 12.25, {"create": 14, "update": 1}),
    ]
    rows = parse_summary(render_summary(results, operation="preview") + "\n")
    assert rows == [
        {"stack": "f-platform", "status": "ok", "seconds": 3.0, "changes": {"create": 11}, "detail": ""},
        {"stack": "f-hosts-rack-001", "status": "failed", "seconds": 2.0, "changes": {},
         "detail": "error: boom, again"},
        {"stack": "f-tenant-team-001", "status": "skipped", "seconds": 0.0, "changes": {},
         "detail": "not run: it reads f-hosts-rack-001"},
        {"stack": "f-tenant-team-002", "status": "ok", "seconds": 12.2,
         "changes": {"create": 14, "update": 1}, "detail": ""},
    ]
