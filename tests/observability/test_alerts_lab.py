"""A real alert, end to end: the chart's Deployment on the lab's real node, its PodMonitor and
PrometheusRule accepted by the lab's API server (prometheus-operator's CRDs), a real Prometheus
(``lab.prometheus``) scraping the Pods as that PodMonitor says and evaluating those rules;
stopping the scenario's Director makes ``ComposerDirectorUnavailable`` fire in Prometheus's
``/api/v1/alerts``, starting it again resolves it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from lab import processes
from lab import prometheus as prom
from lab.settings import ROOT
from ops import dashboard_png
from tests.composer import deployed as dep
from tests.composer.harness import SIM_PASSWORD, SIM_USER, start_proc, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]

ALERT = "ComposerDirectorUnavailable"
BIN = ROOT / ".toolchain" / "bin"


def uninstall(d: dep.Deployed) -> None:
    """``helm uninstall`` of a release installed with ``d.helm`` (``make_deployed(install=False)``
    leaves that to the test)."""
    subprocess.run(
        [
            "helm",
            "uninstall",
            d.release,
            "--namespace",
            d.sc.ns,
            "--kubeconfig",
            str(d.kubeconfig),
            "--wait",
            "--timeout",
            "60s",
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )


def _monitoring_objects(d: dep.Deployed) -> tuple[dict[str, Any], dict[str, Any]]:
    """The PodMonitor and PrometheusRule of the release, as the API server stored them."""
    custom = client.CustomObjectsApi(d.sc.api)
    name = f"{d.release}-composer"
    group, version = "monitoring.coreos.com", "v1"
    pm = custom.get_namespaced_custom_object(group, version, d.sc.ns, "podmonitors", name)
    rule = custom.get_namespaced_custom_object(group, version, d.sc.ns, "prometheusrules", name)
    return pm, rule


@pytest.mark.skipif(not (BIN / "prometheus").is_file(), reason="prometheus not built: run `make setup`")
def test_director_stopped_fires_the_alert_in_a_real_prometheus_and_it_resolves(
    make_deployed: Any, tmp_path: Path
) -> None:
    with make_deployed(install=False) as d:
        d.helm(
            "install",
            metrics={
                "podMonitor": {"enabled": True, "interval": "2s", "scrapeTimeout": "2s"},
                "prometheusRule": {
                    "enabled": True,
                    "window": "20s",
                    "for": {"directorUnavailable": "0s", "noLeader": "30s"},
                },
            },
        )
        pm, rule = _monitoring_objects(d)
        port = processes.free_port()
        name = "prometheus-alerts-test"
        try:
            url = prom.start(
                tmp_path,
                BIN,
                name=name,
                port=port,
                jobs=[prom.pod_monitor_job(pm, d.kubeconfig)],
                rule_groups=rule["spec"]["groups"],
                evaluation_interval="1s",
                scrape_interval="2s",
            )
            sel = f'namespace="{d.sc.ns}"'
            wait_for(
                lambda: (
                    len(
                        [
                            t
                            for t in prom.targets(url)
                            if t["health"] == "up" and t["labels"].get("namespace") == d.sc.ns
                        ]
                    )
                    == 2
                ),
                timeout=120,
                interval=1,
                what="both composer Pods scraped",
            )
            wait_for(
                lambda: prom.query(url, f"sum(composer_leader{{{sel}}}) == 1"),
                timeout=90,
                interval=1,
                what="one leader seen by Prometheus",
            )
            wait_for(
                lambda: prom.query(url, f"sum(increase(composer_rounds_total{{{sel}}}[20s])) > 0"),
                timeout=60,
                interval=1,
                what="rounds counted",
            )
            assert [a for a in prom.alerts(url) if a["labels"]["alertname"] == ALERT] == []
            # some work for the dashboard: host A gets both GPUs, then gives them back when idle
            sc, t0 = d.sc, time.time()
            a = sc.node("blade-slot-1")
            sc.gpu_pod("train-a", 2, host=a)
            wait_for(lambda: sc.running_on("train-a") == a, timeout=90, what="pod A running")
            sc.delete_pod("train-a")
            wait_for(lambda: sc.attached() == {}, timeout=60, what="GPUs back in the free pool")
            wait_for(
                lambda: prom.query(url, f"sum(composer_decomposed_gpus_total{{{sel}}}) >= 2"),
                timeout=30,
                interval=1,
                what="the reclaim scraped",
            )

            sim = d.sc.procs["director-sim"]
            argv = [str(a) for a in sim.popen.args]
            stopped_at = time.monotonic()
            sim.stop()
            firing = wait_for(
                lambda: [
                    a
                    for a in prom.alerts(url)
                    if a["labels"]["alertname"] == ALERT and a["state"] == "firing"
                ],
                timeout=150,
                interval=1,
                what=f"{ALERT} firing",
            )
            (alert,) = firing
            assert alert["labels"]["severity"] == "critical"
            assert "DirectorUnavailableError" in alert["annotations"]["description"]
            fired_after = time.monotonic() - stopped_at

            d.sc.procs["director-sim"] = start_proc(
                "director-sim",
                argv,
                d.sc.tmp,
                env={"DIRECTOR_SIM_USERNAME": SIM_USER, "DIRECTOR_SIM_PASSWORD": SIM_PASSWORD},
            )
            wait_for(
                lambda: not [a for a in prom.alerts(url) if a["labels"]["alertname"] == ALERT],
                timeout=120,
                interval=1,
                what=f"{ALERT} resolved",
            )
            assert prom.query(url, f"sum(increase(composer_rounds_total{{{sel}}}[20s])) > 0")
            print(f"{ALERT} fired {fired_after:.0f} s after the Director stopped")
            png = dashboard_png.render(
                url,
                tmp_path / "composer-dashboard.png",
                namespace=sc.ns,
                start=t0,
                end=time.time(),
                scrape_seconds=2,
            )
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            moved = prom.query(url, f"sum(composer_composed_gpus_total{{{sel}}})")
            assert float(moved[0]["value"][1]) == 2
            print(f"dashboard: {png}")
        except AssertionError:
            print(
                d.describe(),
                processes.log_path(tmp_path, name).read_text()[-3000:]
                if processes.log_path(tmp_path, name).exists()
                else "",
            )
            raise
        finally:
            processes.stop(tmp_path, name)
            uninstall(d)
