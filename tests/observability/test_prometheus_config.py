"""lab.prometheus: the scrape job made from the chart's PodMonitor is the one prometheus-operator
generates for it (keep by pod labels and port name, running Pods, namespace/container/pod/job
labels), and promtool accepts the whole configuration."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lab import prometheus as prom
from tests.kubeconfigs import write_kubeconfig
from tests.observability import chart_render


def _chart_pod_monitor() -> dict[str, object]:
    docs = chart_render.render("metrics.podMonitor.enabled=true", "metrics.podMonitor.interval=2s")
    (pm,) = chart_render.of_kind(docs, "PodMonitor")
    return pm


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")
def test_the_job_of_the_charts_pod_monitor_keeps_its_pods_and_labels_them_as_the_operator_does(
    tmp_path: Path,
) -> None:
    job = prom.pod_monitor_job(_chart_pod_monitor(), tmp_path / "kubeconfig")
    assert job["job_name"] == f"podMonitor/{chart_render.NAMESPACE}/{chart_render.RELEASE}/0"
    assert job["kubernetes_sd_configs"] == [
        {
            "role": "pod",
            "kubeconfig_file": str(tmp_path / "kubeconfig"),
            "namespaces": {"names": [chart_render.NAMESPACE]},
        }
    ]
    assert job["scrape_interval"] == "2s" and job["metrics_path"] == "/metrics"
    relabel = job["relabel_configs"]
    assert relabel[0] == {
        "action": "drop",
        "source_labels": ["__meta_kubernetes_pod_phase"],
        "regex": "(Failed|Succeeded)",
    }
    keeps = {tuple(r["source_labels"]): r["regex"] for r in relabel if r.get("action") == "keep"}
    assert keeps == {
        (
            "__meta_kubernetes_pod_label_app_kubernetes_io_instance",
            "__meta_kubernetes_pod_labelpresent_app_kubernetes_io_instance",
        ): f"({chart_render.RELEASE});true",
        (
            "__meta_kubernetes_pod_label_app_kubernetes_io_name",
            "__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name",
        ): "(composer);true",
        ("__meta_kubernetes_pod_container_port_name",): "metrics",
    }
    targets = {
        r["target_label"]: r.get("source_labels", [r.get("replacement")])[0]
        for r in relabel
        if "target_label" in r
    }
    assert targets == {
        "namespace": "__meta_kubernetes_namespace",
        "container": "__meta_kubernetes_pod_container_name",
        "pod": "__meta_kubernetes_pod_name",
        "job": f"{chart_render.NAMESPACE}/{chart_render.RELEASE}",
    }


def test_a_pod_monitor_without_one_named_port_is_refused() -> None:
    with pytest.raises(ValueError, match="one podMetricsEndpoints"):
        prom.pod_monitor_job(
            {"metadata": {"name": "x"}, "spec": {"podMetricsEndpoints": [{"path": "/m"}]}}, Path("k")
        )


@pytest.mark.skipif(
    shutil.which("promtool") is None or shutil.which("helm") is None,
    reason="promtool or helm not built: run `make setup`",
)
def test_promtool_accepts_the_configuration_with_the_charts_rules(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:6443")
    rules = chart_render.write_rules(tmp_path / "rules.yaml", chart_render.rule_groups())
    cfg = prom.config(
        [
            prom.pod_monitor_job(_chart_pod_monitor(), kubeconfig),
            prom.pod_monitor_job(prom.lab_pod_monitor(), kubeconfig),
        ],
        rule_files=[str(rules)],
    )
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    out = subprocess.run(
        ["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
