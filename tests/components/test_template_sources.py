"""Where the k0rdent templates' charts come from: the Flux HelmRepositories the program declares
beside the templates (per namespace, from ``catalog.repositories``), their credentials Secrets, and
the catalog's refusal of a template naming a repository nobody declares; and the hypervisor
clusters' kernel arguments travelling in the ClusterDeployment's worker config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components import Estate, EstateArgs
from components.estate import cluster_kernel_settings
from components.manifests import helm_repository_spec, template_repositories
from stack_config import load_estate
from stack_config.errors import EstateConfigError
from stack_config.models import CatalogConfig, HelmRepositoryConfig
from tests.components.conftest import Recorder, is_secret, plain_occurrences, run
from tests.config.factories import valid_estate

HELM_REPO = "kubernetes:source.toolkit.fluxcd.io/v1:HelmRepository"
SECRET = "kubernetes:core/v1:Secret"
CT = "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterTemplate"
CD = "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment"


def test_helm_repository_spec_types_the_url_and_names_the_secret() -> None:
    oci = HelmRepositoryConfig(name="platform", url="oci://registry.example/charts")
    assert helm_repository_spec(oci, secret_name="platform-credentials") == {
        "url": "oci://registry.example/charts",
        "type": "oci",
        "interval": "10m",
        "secretRef": {"name": "platform-credentials"},
    }
    https = HelmRepositoryConfig(name="nvidia", url="https://helm.ngc.nvidia.com/nvidia")
    assert helm_repository_spec(https, secret_name=None) == {
        "url": "https://helm.ngc.nvidia.com/nvidia",
        "type": "default",
        "interval": "10m",
    }


def test_template_repositories_once_each_in_order_without_kcms_own() -> None:
    catalog = CatalogConfig()
    templates = [catalog.cilium, *catalog.cluster_templates, catalog.gpu_operator, catalog.cilium]
    assert [r.name for r in template_repositories(catalog, templates)] == [
        "cilium",
        "composable-gpu-templates",
        "nvidia",
    ]


@pytest.mark.parametrize(
    ("repositories", "message"),
    [
        ([{"name": "nvidia", "url": "https://x.example"}], "not in catalog.repositories: capm3-hosted-cp"),
        ([{"name": "kcm-templates", "url": "https://x.example"}], "kcm-templates is kcm's own"),
        ([{"name": "a", "url": "https://x"}, {"name": "a", "url": "https://y"}], "declared twice: a"),
        ([{"name": "a", "url": "https://x", "credentials": {"username": "u"}}], "credentials.password"),
        ([{"name": "a", "url": "ftp://x"}], "should match pattern"),
    ],
)
def test_catalog_refuses_repositories_templates_cannot_use(
    repositories: list[dict[str, Any]], message: str
) -> None:
    raw = valid_estate()
    raw["catalog"] = {"repositories": repositories}
    with pytest.raises(EstateConfigError, match=message):
        load_estate(raw)


def _estate(tmp_path: Path, raw: dict[str, Any]) -> Estate:
    return Estate("estate", EstateArgs(config=load_estate(raw), stack="test", project_root=tmp_path))


def test_every_template_namespace_gets_the_repositories_its_templates_name(
    mocks: Recorder, tmp_path: Path
) -> None:
    run(lambda: _estate(tmp_path, valid_estate()))
    repos = {(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"])
             for r in mocks.of_type(HELM_REPO)}
    templates = [r for r in mocks.registrations if r.typ.endswith(("ServiceTemplate", "ClusterTemplate"))]
    assert templates
    for t in templates:
        source = t.inputs["spec"]["helm"]["chartSpec"]["sourceRef"]
        assert source["kind"] == "HelmRepository"
        if source["name"] == "kcm-templates":  # kcm creates it in the template's namespace itself
            assert ("infra", "kcm-templates") not in repos
            continue
        assert (t.inputs["metadata"]["namespace"], source["name"]) in repos, t.name
    assert {n for _, n in repos} == {"nvidia", "k0rdent-catalog", "composable-gpu-templates", "cilium"}


def test_repository_credentials_are_a_secret_the_repository_names(mocks: Recorder, tmp_path: Path) -> None:
    raw = valid_estate()
    password = "repo-token-not-in-state"
    raw["catalog"] = {
        "repositories": [
            {"name": "composable-gpu-templates", "url": "oci://registry.example/charts",
             "credentials": {"username": "robot", "password": password}},
            {"name": "nvidia", "url": "https://helm.ngc.nvidia.com/nvidia"},
            {"name": "k0rdent-catalog", "url": "oci://ghcr.io/k0rdent/catalog/charts"},
            {"name": "cilium", "url": "https://helm.cilium.io"},
        ]
    }
    run(lambda: _estate(tmp_path, raw))
    secret = mocks.named("estate-repo-composable-gpu-templates-credentials", SECRET).inputs
    assert secret["metadata"]["name"] == "composable-gpu-templates-credentials"
    assert is_secret(secret["stringData"])
    repo = mocks.named("estate-repo-composable-gpu-templates", HELM_REPO).inputs
    assert repo["spec"]["secretRef"] == {"name": "composable-gpu-templates-credentials"}
    assert repo["spec"]["type"] == "oci"
    assert "secretRef" not in mocks.named("estate-repo-nvidia", HELM_REPO).inputs["spec"]
    assert plain_occurrences([r.inputs for r in mocks.registrations], password) == []


def test_cluster_kernel_settings_are_its_hosts_settings_once_each_in_order() -> None:
    raw = valid_estate()
    hosts = {h["name"]: h for h in raw["hosts"]}
    hosts["bm-1"]["kernel_args"] = ["amd_iommu=on", "iommu=pt"]
    hosts["bm-2"]["kernel_args"] = ["iommu=pt", "pci=realloc"]
    hosts["bm-2"]["blacklisted_modules"] = ["nouveau", "nvidiafb"]
    cfg = load_estate(raw)
    workers = next(c for c in cfg.hypervisor_clusters if c.name == "workers")
    assert cluster_kernel_settings(cfg, workers) == (
        ["amd_iommu=on", "iommu=pt", "pci=realloc"],
        ["nouveau", "nvidiafb"],
    )


def test_hypervisor_cluster_bootstrap_carries_its_hosts_kernel_args(mocks: Recorder, tmp_path: Path) -> None:
    """The kernel args reach the hosts through the ClusterDeployment's worker config (the chart's
    bootstrap data), not the BareMetalHost's userData, which CAPM3 overwrites."""
    raw = valid_estate()
    raw["hypervisor_clusters"][0]["image"] = {"url": "https://images.example/ubuntu.qcow2",
                                              "checksum": "https://images.example/SHA256SUMS",
                                              "checksum_type": "sha256", "format": "qcow2"}
    run(lambda: _estate(tmp_path, raw))
    worker = mocks.named("hv", CD).inputs["spec"]["config"]["worker"]
    assert worker == {
        "hostSelector": {"matchLabels": {"composable-gpu.io/cluster": "hv"}},
        "kernelArgs": ["intel_iommu=on", "iommu=pt", "pci=realloc"],
        "blacklistedModules": ["nouveau"],
        "image": {"url": "https://images.example/ubuntu.qcow2", "checksum": "https://images.example/SHA256SUMS",
                  "checksumType": "sha256", "format": "qcow2"},
    }
    bmh = mocks.named("hv-1", "kubernetes:metal3.io/v1alpha1:BareMetalHost").inputs["spec"]
    assert "userData" not in bmh


def test_the_dev_stack_fetches_every_chart_from_the_lab_repository() -> None:
    from lab.template_sources import chart_repo_url
    from stack_config import load_stack_file

    root = Path(__file__).resolve().parents[2]
    catalog = load_stack_file(root / "Pulumi.dev.yaml", require_secrets=False).catalog
    assert {r.name: r.url for r in catalog.repositories} == dict.fromkeys(
        ["composable-gpu-templates", "nvidia", "k0rdent-catalog", "cilium"], chart_repo_url())
