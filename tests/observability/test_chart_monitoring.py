"""The chart's monitoring objects: ServiceMonitor / PodMonitor valid against prometheus-operator's
CRDs and scraping the metrics port, the dashboard ConfigMap carrying the sidecar label and the JSON,
and the dashboard itself: it loads and every panel's query reads metrics the composer exports."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.components.crd_schemas import validation_errors
from tests.observability import chart_render, metric_names

DASHBOARD = chart_render.CHART / "dashboards" / "composer.json"

helm_built = pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")


@helm_built
def test_monitors_are_valid_custom_resources_scraping_the_metrics_port() -> None:
    for kind, value, endpoints in (
        ("ServiceMonitor", "serviceMonitor", "endpoints"),
        ("PodMonitor", "podMonitor", "podMetricsEndpoints"),
    ):
        docs = chart_render.render(
            f"metrics.{value}.enabled=true",
            f"metrics.{value}.labels.release=kps",
            f"metrics.{value}.interval=15s",
        )
        (mon,) = chart_render.of_kind(docs, kind)
        assert validation_errors(mon) == [], kind
        assert mon["metadata"]["labels"]["release"] == "kps"
        assert mon["spec"]["namespaceSelector"] == {"matchNames": [chart_render.NAMESPACE]}
        (deploy,) = chart_render.of_kind(docs, "Deployment")
        pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
        assert mon["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        (ep,) = mon["spec"][endpoints]
        assert ep == {"port": "metrics", "path": "/metrics", "interval": "15s"}
        ports = {p["name"] for p in deploy["spec"]["template"]["spec"]["containers"][0]["ports"]}
        assert "metrics" in ports
    docs = chart_render.render("metrics.prometheusRule.enabled=true")
    (rule,) = chart_render.of_kind(docs, "PrometheusRule")
    assert validation_errors(rule) == []
    assert not chart_render.of_kind(chart_render.render(), "ServiceMonitor")
    assert not chart_render.of_kind(chart_render.render(), "PodMonitor")


@helm_built
def test_both_monitors_or_a_service_monitor_without_the_service_are_refused() -> None:
    for sets in (
        ("metrics.serviceMonitor.enabled=true", "metrics.podMonitor.enabled=true"),
        ("metrics.serviceMonitor.enabled=true", "metrics.service.enabled=false"),
    ):
        argv = ["helm", "template", "composer", str(chart_render.CHART), "--set", "director.password=x"]
        for s in sets:
            argv += ["--set", s]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode != 0 and "metrics." in out.stderr, sets


@helm_built
def test_dashboard_config_map_carries_the_sidecar_label_and_the_json() -> None:
    assert not chart_render.of_kind(chart_render.render(), "ConfigMap")
    docs = chart_render.render(
        "metrics.dashboard.enabled=true", "metrics.dashboard.annotations.grafana_folder=GPU"
    )
    (cm,) = [
        d for d in chart_render.of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")
    ]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "GPU"}
    assert json.loads(cm["data"]["gpu-composer.json"]) == json.loads(DASHBOARD.read_text())


def _queries(path: Path) -> list[tuple[str, str]]:
    dash = json.loads(path.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]


def test_dashboard_loads_and_every_query_reads_exported_metrics() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 36
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "namespace"}
    exported = metric_names.exported()
    queries = _queries(DASHBOARD)
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    assert all(p.get("targets") for p in dash["panels"])
    used: set[str] = set()
    for title, expr in queries:
        names = metric_names.named_in(expr)
        assert names, f"panel {title!r}: {expr} reads no composer metric"
        assert names <= exported, f"panel {title!r} reads metrics not exported: {names - exported}"
        assert 'namespace="$namespace"' in expr, f"panel {title!r} ignores the namespace variable"
        used |= names
    # every metric family the composer exports is on some panel
    families = {n.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") for n in exported}
    assert {n for n in families if not any(u.startswith(n) for u in used)} == set()


def test_the_metric_check_catches_a_misspelt_metric(tmp_path: Path) -> None:
    dash = json.loads(DASHBOARD.read_text())
    dash["panels"][0]["targets"][0]["expr"] = "sum(composer_leaders)"
    (tmp_path / "d.json").write_text(json.dumps(dash))
    (_title, expr), *_ = _queries(tmp_path / "d.json")
    assert not metric_names.named_in(expr) <= metric_names.exported()
