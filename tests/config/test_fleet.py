"""The estate split into stacks by failure domain and owner (stack_config.fleet): slices, the graph
of StackReferences, the files each stack owns, and the refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stack_config import EstateConfigError
from stack_config.fleet import MONOLITH, Fleet, host_group, parse_role, split_estate, stack_name
from stack_config.inventory import InventoryFile, load_inventory, read_inventory
from stack_config.stack_file import load_stack_file
from tests.config.factories import valid_estate
from tests.config.test_inventory import _credentials, _split

ROOT = Path(__file__).resolve().parents[2]


def _dev() -> Fleet:
    files = read_inventory(ROOT / "environments" / "dev", shown_as="environments/dev")
    estate = load_stack_file(ROOT / "Pulumi.dev.yaml", require_secrets=False)
    return split_estate(files, estate, folder="environments/dev")


def _racks(**change: Any) -> Fleet:
    """``valid_estate()`` as a folder with hv-1 in rack-a and the other hosts in rack-b."""
    parts = _split(valid_estate())
    hosts = parts["hosts/rack-a.yaml"]["hosts"] + parts["hosts/rack-b.yaml"]["hosts"]
    parts["hosts/rack-a.yaml"] = {"hosts": hosts[:1]}
    parts["hosts/rack-b.yaml"] = {"hosts": hosts[1:]}
    parts["estate.yaml"]["dpu_cluster"]["hosts"] = ["dpu-host-1"]
    for name, value in change.items():
        parts[name] = value
    files = [InventoryFile(f"inv/{k}", v) for k, v in sorted(parts.items())]
    return split_estate(files, load_inventory(files, _credentials(), folder="inv"), folder="inv")


def test_the_dev_estate_splits_into_platform_one_host_group_and_a_stack_per_tenant() -> None:
    fleet = _dev()
    assert list(fleet.slices) == ["platform", "hosts:lab-workers", "tenant:alpha", "tenant:beta"]
    hosts = fleet.slices["hosts:lab-workers"]
    assert hosts.hosts == ("blade-slot-1", "blade-slot-2")
    assert hosts.hypervisor_clusters == ("lab-workers",)
    assert hosts.dpu_cluster and hosts.composer and hosts.reads == ("platform",)
    assert fleet.slices["platform"].reads == ()
    assert fleet.slices["tenant:alpha"].tenants == ("alpha",)
    assert fleet.slices["tenant:alpha"].reads == ("hosts:lab-workers", "platform")


def test_a_tenant_file_is_its_tenant_stack_only_and_a_host_file_reaches_its_dependents() -> None:
    fleet = _dev()
    assert fleet.roles_of_files(["environments/dev/tenants/beta.yaml"]) == {"tenant:beta"}
    touched = fleet.roles_of_files(["environments/dev/hosts/lab-workers.yaml"])
    assert fleet.order(fleet.dependents(touched)) == ["hosts:lab-workers", "tenant:alpha", "tenant:beta"]
    everything = fleet.order(fleet.dependents(fleet.roles_of_files(["environments/dev/fabric.yaml"])))
    assert everything == ["platform", "hosts:lab-workers", "tenant:alpha", "tenant:beta"]
    assert fleet.roles_of_files(["README.md"]) == set()


def test_racks_and_tenants_read_only_the_groups_their_work_runs_on() -> None:
    fleet = _racks()
    a, b = fleet.slices["hosts:rack-a"], fleet.slices["hosts:rack-b"]
    assert (a.hosts, a.hypervisor_clusters, a.compositions, a.composer) == (("hv-1",), ("hv",), (0,), False)
    assert b.hosts == ("bm-1", "bm-2", "dpu-host-1") and b.hypervisor_clusters == ("workers",)
    assert b.dpu_cluster and b.composer and b.compositions == (1,)
    # red's cluster runs on hv (rack-a); blue's too, and its GPU sharing and composer pool are on bm-1
    # (rack-b); green shares bm-2's GPUs (rack-b).
    assert fleet.slices["tenant:red"].reads == ("hosts:rack-a", "platform")
    assert fleet.slices["tenant:blue"].reads == ("hosts:rack-a", "hosts:rack-b", "platform")
    assert fleet.slices["tenant:green"].reads == ("hosts:rack-b", "platform")
    assert fleet.order(fleet.dependents({"hosts:rack-a"})) == ["hosts:rack-a", "tenant:red", "tenant:blue"]


def test_a_cluster_whose_hosts_span_two_groups_is_refused_naming_them() -> None:
    with pytest.raises(EstateConfigError) as err:
        _racks(**{"hosts/rack-a.yaml": {"hosts": _split(valid_estate())["hosts/rack-a.yaml"]["hosts"]},
                  "hosts/rack-b.yaml": {"hosts": _split(valid_estate())["hosts/rack-b.yaml"]["hosts"]}})
    text = [str(p) for p in err.value.problems]
    assert any(t.startswith("hypervisor_clusters[1]: its hosts are in host groups hosts:rack-a, hosts:rack-b")
               for t in text), text


def test_host_groups_stack_names_and_roles() -> None:
    assert host_group("environments/dev/hosts/lab-workers.yaml", "environments/dev") == "lab-workers"
    assert host_group("environments/production/hosts.yaml", "environments/production") == "hosts"
    assert host_group("inv/hosts/row-1/rack-a.yaml", "inv/") == "row-1-rack-a"
    assert stack_name("prod", "hosts:rack-a") == "prod-hosts-rack-a"
    assert stack_name("dev", MONOLITH) == "dev"
    fleet = _dev()
    assert parse_role(None, fleet) == MONOLITH
    assert parse_role("tenant:alpha", fleet) == "tenant:alpha"
    roles = "estate, platform, hosts:lab-workers, tenant:alpha, tenant:beta"
    refused = f"'tenant:gamma' is not a stack of this estate; one of: {roles}"
    with pytest.raises(EstateConfigError, match=refused):
        parse_role("tenant:gamma", fleet)
