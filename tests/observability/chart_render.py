"""The composer chart's monitoring objects as ``helm template`` renders them, for the tests here.

:func:`rule_groups` is the ``spec.groups`` of the chart's PrometheusRule, the rule-file content
Prometheus and promtool read (prometheus-operator writes exactly that list into the rule files it
generates). Tests render into namespace ``gpu-composer`` with release ``composer`` unless told
otherwise: the Deployment's Pods are then ``composer-<hash>-<suffix>``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "composer"
NAMESPACE = "gpu-composer"
RELEASE = "composer"


def render(*sets: str, release: str = RELEASE, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every object ``helm template`` renders with ``--set`` ``sets`` (and a Director password).

    Raises:
        AssertionError: helm failed (its stderr is the message).
    """
    argv = [
        "helm",
        "template",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--set",
        "director.existingSecret=composer-director",
    ]
    for s in sets:
        argv += ["--set", s]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0:
        raise AssertionError(f"helm template failed: {out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The objects of ``kind`` among ``docs``."""
    return [d for d in docs if d.get("kind") == kind]


def rule_groups(*sets: str, release: str = RELEASE, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """``spec.groups`` of the PrometheusRule rendered with ``metrics.prometheusRule.enabled``."""
    docs = render("metrics.prometheusRule.enabled=true", *sets, release=release, namespace=namespace)
    (rule,) = of_kind(docs, "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def alerts(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Alerting rules by alert name."""
    return {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}


def write_rules(path: Path, groups: list[dict[str, Any]]) -> Path:
    """Write ``groups`` as a Prometheus rule file; returns ``path``."""
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False, width=10_000))
    return path
