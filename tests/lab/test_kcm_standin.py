"""The lab's kcm stand-in decides as kcm's template controller does (pure parts, no API server):
the HelmChart it makes from a template, how it reads the HelmChart's readiness, the chart checks,
and the template status it writes. The lab test (test_template_sources_lab.py) runs it against the
real source-controller."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab import chart_repo
from lab.kcm_standin import (
    ChartError,
    ChartInfo,
    default_repository,
    helm_chart,
    read_chart,
    readiness,
    template_status,
)
from stack_config.models import CatalogConfig


def _template(kind: str = "ClusterTemplate", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k0rdent.mirantis.com/v1beta1",
        "kind": kind,
        "metadata": {"name": "capm3-hosted-cp", "namespace": "infra", "uid": "u-1", "generation": 1},
        "spec": {
            "helm": {"chartSpec": {"chart": "capm3-hosted-cp", "version": "1.0.0",
                                   "sourceRef": {"kind": "HelmRepository", "name": "platform"}}},
            **spec,
        },
    }


def _chart_object(generation: int = 1, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "capm3-hosted-cp", "namespace": "infra", "generation": generation},
            "spec": {"version": "1.0.0"}, "status": status}


def test_helm_chart_is_the_templates_chart_spec_owned_by_it() -> None:
    chart = helm_chart(_template())
    assert chart["kind"] == "HelmChart" and chart["apiVersion"] == "source.toolkit.fluxcd.io/v1"
    assert chart["metadata"]["name"] == "capm3-hosted-cp" and chart["metadata"]["namespace"] == "infra"
    assert chart["metadata"]["labels"] == {"k0rdent.mirantis.com/managed": "true"}
    assert chart["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert chart["spec"] == _template()["spec"]["helm"]["chartSpec"]


def test_default_repository_types_the_url() -> None:
    assert default_repository("ns", "http://127.0.0.1:1/")["spec"]["type"] == "default"
    assert default_repository("ns", "oci://ghcr.io/k0rdent/kcm/charts")["spec"]["type"] == "oci"
    assert default_repository("ns", "http://x")["metadata"]["name"] == "kcm-templates"


def test_readiness_reads_the_ready_condition_as_kcm_does() -> None:
    failed = {"type": "Ready", "status": "False", "observedGeneration": 1,
              "message": "no 'capm3-hosted-cp' chart with version matching '9.9.9' found"}
    r = readiness(_chart_object(conditions=[failed]))
    assert (r.ready, r.report) == (False, True)
    assert r.error == ("failed to download helm chart artifact: "
                       "no 'capm3-hosted-cp' chart with version matching '9.9.9' found")
    stale = readiness(_chart_object(generation=2, conditions=[failed]))
    assert (stale.ready, stale.report) == (False, False)
    assert stale.error == "HelmChart was not reconciled yet, retrying"
    ok = {"type": "Ready", "status": "True", "observedGeneration": 1}
    assert readiness(_chart_object(conditions=[ok])).ready is False  # no artifact yet
    assert readiness(_chart_object(conditions=[ok], artifact={"url": "u"}, url="u")).ready is True


def _archive(chart_yaml: dict[str, Any], values: dict[str, Any] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, doc in (("Chart.yaml", chart_yaml), ("values.yaml", values or {})):
            data = yaml.safe_dump(doc).encode()
            info = tarfile.TarInfo(f"chart/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_read_chart_checks_digest_and_metadata() -> None:
    good = _archive({"apiVersion": "v2", "name": "c", "version": "1.0.0"}, {"a": 1})
    info = read_chart(good, "sha256:" + hashlib.sha256(good).hexdigest())
    assert info.metadata["name"] == "c" and info.values == {"a": 1}
    with pytest.raises(ChartError, match="verification for digest"):
        read_chart(good, "sha256:" + "0" * 64)
    nameless = _archive({"apiVersion": "v2", "version": "1.0.0"})
    with pytest.raises(ChartError, match="chart.metadata.name is required"):
        read_chart(nameless, "sha256:" + hashlib.sha256(nameless).hexdigest())


def test_template_status_valid_with_providers_or_invalid_with_the_error() -> None:
    chart = _chart_object()
    info = ChartInfo(metadata={"description": "d", "annotations": {
        "cluster.x-k8s.io/provider": "infrastructure-metal3, control-plane-k0sproject-k0smotron"}},
        values={"controlPlaneNumber": 3})
    status = template_status(_template(), chart, info=info, error=None)
    assert status == {
        "chartRef": {"kind": "HelmChart", "name": "capm3-hosted-cp", "namespace": "infra"},
        "chartVersion": "1.0.0",
        "description": "d",
        "config": {"controlPlaneNumber": 3},
        "providers": ["control-plane-k0sproject-k0smotron", "infrastructure-metal3"],
        "observedGeneration": 1,
        "validationError": "",
        "valid": True,
    }
    declared = template_status(_template(providers=["b", "a", "a"]), chart, info=info, error=None)
    assert declared["providers"] == ["a", "b"]
    service = template_status(_template("ServiceTemplate"), chart, info=info, error=None)
    assert "providers" not in service
    bad = template_status(_template(), chart, info=None, error="failed to download helm chart artifact: x")
    assert (bad["valid"], bad["validationError"]) == (False, "failed to download helm chart artifact: x")


def test_the_lab_repository_has_a_stand_in_for_every_upstream_chart_of_the_catalog() -> None:
    catalog = CatalogConfig()
    platform = chart_repo.platform_charts()
    standins = {(s.name, s.version) for s in chart_repo.standins(catalog, list(platform))}
    assert standins == {("gpu-operator", "v25.3.0"), ("kubevirt", "1.5.0"), ("cilium", "1.17.4"),
                        ("kubevirt-hosted-cp", "1.0.11")}
    # the platform's charts are served as they are, at the versions the catalog pins
    pinned = {t.chart: t.version for t in catalog.cluster_templates if t.chart in platform}
    assert pinned == platform == {"capm3-hosted-cp": "1.0.0", "dpu-hosted-cp": "1.0.0"}
    by_name = {s.name: s for s in chart_repo.standins(catalog, list(platform))}
    kubevirt_cp = by_name["kubevirt-hosted-cp"]
    doc = kubevirt_cp.chart_yaml()
    assert doc["description"].startswith("Lab stand-in for the upstream chart kubevirt-hosted-cp 1.0.11")
    assert doc["annotations"]["cluster.x-k8s.io/provider"].startswith("infrastructure-kubevirt")


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")
def test_the_lab_repository_is_built_by_helm_with_an_index_of_every_chart(tmp_path: Path) -> None:
    files = chart_repo.build(tmp_path / "repo", helm=Path(str(shutil.which("helm"))), url="http://127.0.0.1:1/")
    assert files == ["capm3-hosted-cp-1.0.0.tgz", "cilium-1.17.4.tgz", "dpu-hosted-cp-1.0.0.tgz",
                     "gpu-operator-v25.3.0.tgz", "kubevirt-1.5.0.tgz", "kubevirt-hosted-cp-1.0.11.tgz"]
    index = yaml.safe_load((tmp_path / "repo" / "index.yaml").read_text())
    assert index["entries"]["capm3-hosted-cp"][0]["urls"] == ["http://127.0.0.1:1/capm3-hosted-cp-1.0.0.tgz"]
    archive = (tmp_path / "repo" / "capm3-hosted-cp-1.0.0.tgz").read_bytes()
    info = read_chart(archive, "sha256:" + hashlib.sha256(archive).hexdigest())
    assert info.values["controlPlaneNumber"] == 3  # the platform chart itself, not a stand-in
