"""The template path in the lab, for real: the lab's chart repository, Flux source-controller built
from its module, and the kcm stand-in. A ClusterTemplate and a ServiceTemplate as the program
declares them turn valid; a ClusterTemplate naming a chart version the repository lacks turns
invalid with source-controller's own message, as kcm reports it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from components.manifests import cluster_template_spec, helm_repository_spec, service_template_spec
from lab import kube, template_sources
from lab.settings import LabConfig
from stack_config.models import CatalogConfig, HelmRepositoryConfig

pytestmark = pytest.mark.lab

NAMESPACE = "template-sources-test"
K0RDENT = ("k0rdent.mirantis.com", "v1beta1")
FLUX = ("source.toolkit.fluxcd.io", "v1")


@pytest.fixture(scope="module")
def api(lab: LabConfig) -> client.ApiClient:
    if not (lab.bin_dir / "source-controller").exists():
        pytest.skip("source-controller not built: run `make setup`")
    template_sources.start(lab)
    api = kube.admin_client(lab)
    core = client.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    return api


def _create(
    custom: client.CustomObjectsApi, group_version: tuple[str, str], plural: str, body: dict[str, Any]
) -> None:
    try:
        custom.delete_namespaced_custom_object(*group_version, NAMESPACE, plural, body["metadata"]["name"])
        time.sleep(1)
    except ApiException as exc:
        if exc.status != 404:
            raise
    custom.create_namespaced_custom_object(*group_version, NAMESPACE, plural, body)


def _verdict(
    custom: client.CustomObjectsApi, plural: str, name: str, timeout_seconds: float = 120
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        status = custom.get_namespaced_custom_object(*K0RDENT, NAMESPACE, plural, name).get("status") or {}
        if "valid" in status:
            return dict(status)
        time.sleep(1)
    raise AssertionError(f"{plural}/{name}: no verdict after {timeout_seconds} s (is kcm-standin running?)")


def test_templates_resolve_through_source_controller_and_a_missing_version_is_invalid(
    api: client.ApiClient,
) -> None:
    custom = client.CustomObjectsApi(api)
    repo = HelmRepositoryConfig(name="composable-gpu-templates", url=template_sources.chart_repo_url())
    _create(custom, FLUX, "helmrepositories", {
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
        "metadata": {"name": repo.name}, "spec": helm_repository_spec(repo, secret_name=None)})
    catalog = CatalogConfig()
    platform = catalog.cluster_template("capm3-hosted-cp")
    upstream = catalog.cluster_template("kubevirt-hosted-cp")  # from kcm's own kcm-templates
    assert platform is not None and upstream is not None
    missing = platform.model_copy(update={"name": "capm3-hosted-cp-missing", "version": "9.9.9"})
    for t in (platform, upstream, missing):
        _create(custom, K0RDENT, "clustertemplates", {
            "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ClusterTemplate",
            "metadata": {"name": t.name}, "spec": cluster_template_spec(t)})
    service = catalog.gpu_operator.model_copy(update={"repository": repo.name})
    _create(custom, K0RDENT, "servicetemplates", {
        "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ServiceTemplate",
        "metadata": {"name": service.name}, "spec": service_template_spec(service)})

    good = _verdict(custom, "clustertemplates", platform.name)
    assert (good["valid"], good["validationError"]) == (True, "")
    assert good["chartRef"] == {"kind": "HelmChart", "name": platform.name, "namespace": NAMESPACE}
    assert good["providers"] == sorted(platform.providers)
    assert good["config"]["controlPlaneNumber"] == 3  # the chart's own values.yaml, fetched
    kcm_made = custom.get_namespaced_custom_object(*FLUX, NAMESPACE, "helmrepositories", "kcm-templates")
    assert kcm_made["spec"]["url"] == template_sources.chart_repo_url()
    assert _verdict(custom, "clustertemplates", upstream.name)["valid"] is True
    standin = _verdict(custom, "servicetemplates", service.name)
    assert standin["valid"] is True
    assert standin["description"].startswith("Lab stand-in for the upstream chart")

    bad = _verdict(custom, "clustertemplates", missing.name)
    chart = custom.get_namespaced_custom_object(*FLUX, NAMESPACE, "helmcharts", missing.name)
    ready = next(c for c in chart["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and "9.9.9" in ready["message"]  # source-controller's words
    assert bad["valid"] is False
    assert bad["validationError"] == f"failed to download helm chart artifact: {ready['message']}"
