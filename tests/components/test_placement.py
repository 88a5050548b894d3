"""Placement: every Kubernetes object of the program goes through a provider of the cluster
domain.placement names for it (docs/architecture.md "Where each object lives" is the same table),
and a child cluster is reached through its kubeconfig Secret on the mothership, also at a first
preview when the cluster does not exist yet."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components import Estate, EstateArgs
from domain.placement import CLUSTER_ROLES, OBJECT_LABEL, PLACEMENTS, Placement
from stack_config import load_estate
from tests.components.conftest import (
    KUBECONFIG_MARKER,
    Recorder,
    Registration,
    install_mocks,
    is_secret,
    plain_occurrences,
    run,
    unwrap,
)
from tests.config.factories import valid_estate

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = "pulumi:providers:kubernetes"


def documented_placements(text: str) -> dict[str, Placement]:
    """The table of docs/architecture.md "Where each object lives": object -> placement."""
    section = text.split("## Where each object lives", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, Placement] = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*`([a-z-]+)`\s*\|\s*([^|]+?)\s*\|\s*([a-z]+)\s*\|\s*(.+?)\s*\|\s*$", line)
        if m:
            rows[m.group(1)] = Placement(m.group(2), m.group(3), m.group(4))  # type: ignore[arg-type]
    return rows


def test_the_architecture_table_is_the_placement_of_the_code() -> None:
    table = documented_placements((ROOT / "docs" / "architecture.md").read_text())
    assert table == PLACEMENTS
    assert {p.cluster for p in table.values()} <= set(CLUSTER_ROLES)


def test_a_table_differing_from_the_code_is_seen() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    moved = text.replace("| `network-attachment` | NetworkAttachmentDefinition | hypervisor |",
                         "| `network-attachment` | NetworkAttachmentDefinition | mothership |")
    assert moved != text and documented_placements(moved) != PLACEMENTS


def _estate(tmp_path: Path, raw: dict[str, Any] | None = None) -> Estate:
    cfg = load_estate(raw or valid_estate())
    return Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path))


def _object(r: Registration) -> str:
    """Which PLACEMENTS entry a registered Kubernetes resource is."""
    if r.typ == "kubernetes:core/v1:NodePatch":
        return "node-labels"
    if r.typ == "kubernetes:helm.sh/v4:Chart":
        hosted = bool(r.inputs.get("values", {}).get("targetCluster"))
        return "hosted-composer-release" if hosted else "composer-release"
    return r.inputs["metadata"]["labels"][OBJECT_LABEL]


def _provider_name(r: Registration) -> str:
    return r.provider.split("::")[-2]


def _objects(recorder: Recorder) -> list[Registration]:
    return [r for r in recorder.registrations if r.typ.startswith("kubernetes:") and not r.read]


def _every_object_estate() -> dict[str, Any]:
    """The example estate, in the lab (Node patches) with a private chart repository."""
    raw = valid_estate()
    raw["environment"] = "lab"
    raw["mothership"]["label_nodes"] = True
    raw["catalog"] = {"repositories": [
        {"name": n, "url": "https://charts.example", "credentials": {"username": "u", "password": "repo-pw"}}
        for n in ("composable-gpu-templates", "nvidia", "k0rdent-catalog", "cilium")
    ]}
    return raw


def test_every_object_goes_through_a_provider_of_its_cluster(tmp_path: Path) -> None:
    hosted = _every_object_estate()
    hosted["composer"]["runs_on"] = "mothership"  # its chart on the mothership, watching workers
    seen: dict[str, set[str]] = {}
    for raw in (_every_object_estate(), hosted):
        recorder = install_mocks()
        run(lambda raw=raw: _estate(tmp_path, raw))
        for r in _objects(recorder):
            obj = _object(r)
            expected = PLACEMENTS[obj]
            assert r.typ.split(":")[-1] == expected.kind, (r.name, obj)
            seen.setdefault(obj, set()).add(_provider_name(r))
    assert set(seen) == set(PLACEMENTS)  # the two example estates create every kind of object
    children = {"estate-cluster-hv", "estate-cluster-workers"}
    for obj, providers in seen.items():
        if PLACEMENTS[obj].cluster == "mothership":
            assert providers == {"estate-mothership"}, obj
        else:
            assert providers <= children, obj


def test_tenant_objects_are_in_the_clusters_where_its_work_runs(tmp_path: Path) -> None:
    recorder = install_mocks()
    run(lambda: _estate(tmp_path))

    def where(obj: str, tenant: str) -> set[str]:
        return {
            _provider_name(r).removeprefix("estate-cluster-")
            for r in _objects(recorder)
            if _object(r) == obj and r.inputs["metadata"]["labels"].get("composable-gpu.io/tenant") == tenant
        }

    # red: VMs on hv; blue: VMs on hv, composer pool and shared GPUs on workers; green: workers only
    assert where("gpu-quota", "red") == {"hv"}
    assert where("gpu-quota", "blue") == {"hv", "workers"}
    assert where("gpu-quota", "green") == {"workers"}
    assert where("tenant-workload-namespace", "blue") == {"hv", "workers"}
    assert where("network-attachment", "blue") == {"hv"}  # only blue-a is attached, by VMs on hv
    assert where("gpu-sharing", "green") == {"workers"}
    assert where("tenant-namespace", "blue") == {"estate-mothership"}
    nads = [r for r in _objects(recorder) if _object(r) == "network-attachment"]
    assert sorted(r.inputs["metadata"]["name"] for r in nads) == ["blue-a", "red-net"]


def test_a_child_cluster_is_reached_through_its_kubeconfig_secret_kept_secret(tmp_path: Path) -> None:
    recorder = install_mocks()
    run(lambda: _estate(tmp_path))
    read = recorder.named("estate-cluster-hv-kubeconfig", "kubernetes:core/v1:Secret")
    assert _provider_name(read) == "estate-mothership"
    provider = recorder.named("estate-cluster-hv", PROVIDER)
    assert is_secret(provider.inputs["kubeconfig"])
    assert KUBECONFIG_MARKER + "-infra/hv-kubeconfig" in unwrap(provider.inputs["kubeconfig"])
    everything = [r.inputs for r in recorder.registrations]
    assert plain_occurrences(everything, KUBECONFIG_MARKER) == []


def test_first_preview_before_the_child_exists_shows_its_objects_to_create(tmp_path: Path) -> None:
    """At a first preview the ClusterDeployment's ID is unknown: the Secret is not read, the child's
    provider has an unknown kubeconfig (the engine then previews its objects as creates), and the
    same resources are registered as in an update."""
    previews = install_mocks(preview=True)
    run(lambda: _estate(tmp_path))
    provider = previews.named("estate-cluster-hv", PROVIDER)
    assert not isinstance(unwrap(provider.inputs["kubeconfig"]), str)  # unknown
    read = previews.named("estate-cluster-hv-kubeconfig", "kubernetes:core/v1:Secret")
    assert read.inputs["id"] == pulumi.runtime.rpc.UNKNOWN
    assert sorted(r.name for r in previews.of_type(PROVIDER) if r.name.startswith("estate-cluster-")) == [
        "estate-cluster-hv", "estate-cluster-workers"
    ]
    in_preview = sorted((r.typ, r.name) for r in previews.registrations)
    updates = install_mocks()
    run(lambda: _estate(tmp_path))
    assert in_preview == sorted((r.typ, r.name) for r in updates.registrations)


def test_an_update_before_cluster_api_wrote_the_secret_fails_naming_it(tmp_path: Path) -> None:
    install_mocks(missing=frozenset({"infra/workers-kubeconfig"}))
    with pytest.raises(Exception, match="infra/workers-kubeconfig"):
        run(lambda: _estate(tmp_path))


def test_a_cluster_reached_through_its_secret_is_waited_for_until_ready(tmp_path: Path) -> None:
    """The ClusterDeployment of a cluster whose kubeconfig Secret is read carries
    ``pulumi.com/waitFor: condition=Ready`` (pulumi-kubernetes then ends its create only once kcm
    reports it Ready); an adopted cluster's does not (nothing would wait on it)."""
    raw = valid_estate()
    raw["hypervisor_clusters"][1]["kubeconfig"] = "adopted.kubeconfig"
    recorder = install_mocks()
    run(lambda: _estate(tmp_path, raw))
    deployments = {
        r.name: (r.inputs["metadata"].get("annotations") or {})
        for r in recorder.of_type("kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment")
    }
    assert deployments["hv"] == {"pulumi.com/waitFor": "condition=Ready"}
    assert "pulumi.com/waitFor" not in deployments["workers"]
