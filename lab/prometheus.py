"""A real Prometheus in the lab, scraping the composer Pods on the real node ``mgmt-1``.

The binary is upstream's ``cmd/prometheus`` built by ``lab/toolchain/build.sh`` (pin in
``lab/toolchain/versions.env``). There is no prometheus-operator in the lab, so
:func:`pod_monitor_job` turns a PodMonitor (the composer chart's ``templates/monitoring.yaml``)
into the scrape job prometheus-operator would generate for it: Kubernetes pod discovery (through
the lab's admin kubeconfig) in the PodMonitor's namespaces, running Pods only, ``keep`` on each
``matchLabels`` label and on the endpoint's container port name, and the target labels
``namespace``, ``container``, ``pod`` and ``job`` (``<namespace>/<PodMonitor name>``); source:
prometheus-operator ``pkg/prometheus/promcfg.go`` (``generatePodMonitorConfig``,
``generateRunningFilter``) at v0.93.0. The chart's alert rules (the PrometheusRule's
``spec.groups``) are loaded as rule files.

``make lab-up`` starts one as lab process ``prometheus`` on 127.0.0.1:19090
(:data:`PROMETHEUS_PORT`) scraping every composer Pod of the lab (label
``app.kubernetes.io/name=composer``, any namespace) every 5 s, without rules (they name one
release: a test starts its own instance with them). Pods live on the node's bridge
(``10.89.0.0/24``), which is on this host, so Prometheus reaches them at their pod IPs.

The query helpers (:func:`query`, :func:`query_range`, :func:`alerts`) read the HTTP API
(``/api/v1/...``, https://prometheus.io/docs/prometheus/latest/querying/api/).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests
import yaml

from lab import processes

if TYPE_CHECKING:
    from lab.settings import LabConfig

#: The lab instance's port (127.0.0.1).
PROMETHEUS_PORT = 19090
#: Lab process name of the ``make lab-up`` instance.
PROCESS = "prometheus"
#: Labels of every composer Pod (the chart's selector labels).
COMPOSER_POD_LABELS = {"app.kubernetes.io/name": "composer"}


def _label_name(key: str) -> str:
    """A Kubernetes label key as a Prometheus label name (``app.kubernetes.io/name`` ->
    ``app_kubernetes_io_name``), as Prometheus's Kubernetes discovery writes it."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in key)


def pod_monitor_job(pod_monitor: Mapping[str, Any], kubeconfig: Path) -> dict[str, Any]:
    """The scrape job for a ``monitoring.coreos.com/v1`` PodMonitor with one endpoint (module doc).

    Supported of the PodMonitor: ``spec.selector.matchLabels``, ``spec.namespaceSelector.matchNames``
    (absent: every namespace), and the endpoint's ``port``, ``path``, ``interval``, ``scrapeTimeout``.

    Raises:
        ValueError: the PodMonitor has not exactly one ``podMetricsEndpoints`` entry, or the
            endpoint names no port.
    """
    meta, spec = pod_monitor.get("metadata") or {}, pod_monitor.get("spec") or {}
    endpoints = spec.get("podMetricsEndpoints") or []
    if len(endpoints) != 1 or not endpoints[0].get("port"):
        raise ValueError(f"PodMonitor {meta.get('name')}: only one podMetricsEndpoints entry with a "
                         "port is supported")
    ep = endpoints[0]
    sd: dict[str, Any] = {"role": "pod", "kubeconfig_file": str(kubeconfig)}
    names = (spec.get("namespaceSelector") or {}).get("matchNames")
    if names:
        sd["namespaces"] = {"names": list(names)}
    relabel: list[dict[str, Any]] = [
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"},
    ]
    for key, value in sorted(((spec.get("selector") or {}).get("matchLabels") or {}).items()):
        name = _label_name(key)
        relabel.append({"action": "keep", "regex": f"({value});true", "source_labels": [
            f"__meta_kubernetes_pod_label_{name}", f"__meta_kubernetes_pod_labelpresent_{name}"]})
    relabel += [
        {"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"],
         "regex": ep["port"]},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"target_label": "job", "replacement": f"{meta.get('namespace')}/{meta.get('name')}"},
    ]
    job: dict[str, Any] = {
        "job_name": f"podMonitor/{meta.get('namespace')}/{meta.get('name')}/0",
        "honor_labels": False,
        "kubernetes_sd_configs": [sd],
        "metrics_path": ep.get("path") or "/metrics",
        "relabel_configs": relabel,
    }
    if ep.get("interval"):
        job["scrape_interval"] = ep["interval"]
    if ep.get("scrapeTimeout"):
        job["scrape_timeout"] = ep["scrapeTimeout"]
    return job


def lab_pod_monitor(interval: str = "5s") -> dict[str, Any]:
    """A PodMonitor of every composer Pod in the lab (any namespace), for ``make lab-up``."""
    return {"metadata": {"namespace": "lab", "name": "composer"},
            "spec": {"selector": {"matchLabels": dict(COMPOSER_POD_LABELS)},
                     "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": interval,
                                              "scrapeTimeout": interval}]}}


def config(jobs: Sequence[Mapping[str, Any]], *, rule_files: Sequence[str] = (),
           evaluation_interval: str = "5s", scrape_interval: str = "5s") -> dict[str, Any]:
    """A ``prometheus.yml``: the scrape ``jobs``, ``rule_files`` (paths), the intervals."""
    return {"global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                       "evaluation_interval": evaluation_interval},
            "rule_files": list(rule_files), "scrape_configs": [dict(j) for j in jobs]}


def binary(bin_dir: Path) -> Path:
    """The Prometheus binary of the toolchain.

    Raises:
        processes.LabProcessError: it is not built (``make setup`` builds it).
    """
    path = bin_dir / "prometheus"
    if not path.is_file():
        raise processes.LabProcessError(f"{path} is missing: run `make setup` "
                                        "(lab/toolchain/build.sh prometheus)")
    return path


def start(lab_dir: Path, bin_dir: Path, *, name: str = PROCESS, port: int = PROMETHEUS_PORT,
          jobs: Sequence[Mapping[str, Any]], rule_groups: Sequence[Mapping[str, Any]] = (),
          evaluation_interval: str = "5s", scrape_interval: str = "5s") -> str:
    """Start Prometheus as lab process ``name`` on 127.0.0.1:``port`` and wait until it is ready.

    Its configuration, rule file (``rule_groups``, when given) and TSDB live in
    ``<lab_dir>/<name>/``; an instance of that name already running is left alone.

    Returns:
        Its base URL (``http://127.0.0.1:<port>``).
    Raises:
        processes.LabProcessError: not built, or not ready within 60 s (the message quotes its log).
    """
    exe = binary(bin_dir)
    home = lab_dir / name
    if not processes.running(lab_dir, name):
        shutil.rmtree(home / "data", ignore_errors=True)
    home.mkdir(parents=True, exist_ok=True)
    rule_files = []
    if rule_groups:
        (home / "rules.yaml").write_text(yaml.safe_dump({"groups": list(rule_groups)}, sort_keys=False))
        rule_files.append(str(home / "rules.yaml"))
    cfg = config(jobs, rule_files=rule_files, evaluation_interval=evaluation_interval,
                 scrape_interval=scrape_interval)
    (home / "prometheus.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    processes.start(lab_dir, name, [
        str(exe), f"--config.file={home / 'prometheus.yml'}", f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d", "--log.level=info",
    ], cwd=home, ports=[port])
    url = f"http://127.0.0.1:{port}"
    processes.wait_until(lambda: _ready(url), what=f"{name} ready at {url}", timeout_seconds=60,
                         lab_dir=lab_dir, name=name)
    return url


def _ready(url: str) -> bool:
    try:
        return requests.get(f"{url}/-/ready", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _api(url: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
    """``data`` of a ``/api/v1`` answer.

    Raises:
        requests.RequestException: no answer, or an HTTP error.
        ValueError: the answer's ``status`` is not ``success`` (its ``error`` is the message).
    """
    r = requests.get(f"{url}/api/v1/{path}", params=dict(params or {}), timeout=10)
    body = r.json()
    if body.get("status") != "success":
        raise ValueError(f"{path}: {body.get('errorType')}: {body.get('error')}")
    return body["data"]


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """Instant query: the result vector (``[{"metric": {...}, "value": [t, "v"]}]``)."""
    data = _api(url, "query", {"query": promql})
    return list(data["result"])


def query_range(url: str, promql: str, *, start: float, end: float, step: float) -> list[dict[str, Any]]:
    """Range query: the result matrix (``[{"metric": {...}, "values": [[t, "v"], ...]}]``);
    times in seconds since the epoch, ``step`` in seconds."""
    data = _api(url, "query_range", {"query": promql, "start": start, "end": end, "step": step})
    return list(data["result"])


def alerts(url: str) -> list[dict[str, Any]]:
    """Active alerts (``/api/v1/alerts``): each with ``labels``, ``annotations``, ``state``
    (``pending`` or ``firing``), ``activeAt``, ``value``."""
    return list(_api(url, "alerts")["alerts"])


def targets(url: str) -> list[dict[str, Any]]:
    """Active scrape targets (``/api/v1/targets``) with ``labels``, ``health``, ``lastError``."""
    return list(_api(url, "targets")["activeTargets"])


def start_lab(cfg: LabConfig) -> str | None:
    """Start the ``make lab-up`` instance (module docstring) for lab ``cfg``.

    Returns None when it runs, or why it could not start (not built, did not get ready): the rest
    of the lab does not need it, so ``lab up`` reports it and goes on.
    """
    try:
        start(cfg.lab_dir, cfg.bin_dir, jobs=[pod_monitor_job(lab_pod_monitor(), cfg.kubeconfig)])
    except processes.LabProcessError as exc:
        return str(exc)
    return None
