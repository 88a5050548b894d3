"""GpuComposition and Composer under Pulumi mocks."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components import Composer, ComposerArgs, GpuComposition, GpuCompositionArgs
from components.composer import TenantPool, composer_pools, composer_rbac_rules, composer_values
from stack_config import load_estate
from tests.components.conftest import (
    Recorder,
    is_secret,
    plain_occurrences,
    run,
    unwrap,
    uses_provider,
    value,
)
from tests.config.factories import DIRECTOR_PASSWORD, valid_estate

ATTACH = "pulumi-python:dynamic/director:GpuComposition"


def _composition(index: int) -> GpuComposition:
    estate = load_estate(valid_estate())
    cfg = estate.gpu_compositions[index]
    pool = estate.pool(cfg.pool)
    assert pool is not None
    return GpuComposition(
        f"{cfg.host}-gpus", GpuCompositionArgs(config=cfg, director=estate.fabric.director, pool=pool)
    )


def test_composition_by_count(mocks: Recorder) -> None:
    comp = run(lambda: _composition(0))
    (attach,) = mocks.children_of("hv-1-gpus", "composable:infra:GpuComposition")
    assert (attach.typ, attach.name) == (ATTACH, "hv-1-gpus-attach")
    inputs = attach.inputs
    assert inputs["endpoint"] == "https://director.example:8443"
    assert is_secret(inputs["username"]) and is_secret(inputs["password"])
    assert (inputs["machine"], inputs["count"], inputs["model"], inputs["group"]) == (
        "hv-1",
        2,
        "NVIDIA-A100-PCIE-40GB",
        "pool-a",
    )
    assert "requested_device_names" not in inputs or inputs["requested_device_names"] is None
    assert mocks.named("hv-1-gpus", "composable:infra:GpuComposition").inputs == {
        "host": "hv-1",
        "count": 2,
        "model": "NVIDIA-A100-PCIE-40GB",
        "device_names": [],
        "pool": "pool-a",
    }
    assert value(comp.device_names) == ["gpu0", "gpu1"]
    assert plain_occurrences([r.inputs for r in mocks.registrations], DIRECTOR_PASSWORD) == []


def test_composition_by_device_names_for_a_tenant(mocks: Recorder) -> None:
    run(lambda: _composition(1))
    attach = mocks.named("bm-1-gpus-attach", ATTACH).inputs
    assert attach["requested_device_names"] == ["gpu5"]
    assert attach.get("count") is None
    assert mocks.named("bm-1-gpus", "composable:infra:GpuComposition").inputs == {
        "host": "bm-1",
        "tenant": "blue",
        "count": 1,
        "model": "Tesla-T4",
        "device_names": ["gpu5"],
        "pool": "pool-a",
    }


def _composer(tmp_path: Path, excluded: pulumi.Input[list[str]], raw: dict | None = None) -> Composer:
    estate = load_estate(raw or valid_estate())
    assert estate.composer is not None
    provider = k8s.Provider("target", kubeconfig="/dev/null")
    return Composer(
        "composer",
        ComposerArgs(
            config=estate.composer,
            director=estate.fabric.director,
            pool=estate.fabric.pools[0],
            chart_path=tmp_path / "charts" / "composer",
            provider=provider,
            excluded_devices=excluded,
            tenant_pools=composer_pools(estate),
        ),
    )


def test_composer_chart_secret_and_props(mocks: Recorder, tmp_path: Path) -> None:
    comp = run(lambda: _composer(tmp_path, pulumi.Output.from_input(["gpu5", "gpu0"])))
    children = {(r.typ, r.name) for r in mocks.children_of("composer", "composable:infra:Composer")}
    assert children == {
        ("kubernetes:core/v1:Namespace", "composer-namespace"),
        ("kubernetes:core/v1:Secret", "composer-director-credentials"),
        ("kubernetes:helm.sh/v4:Chart", "composer"),
        ("pulumi-python:dynamic/director:DirectorEndpoint", "composer-director-account"),
        ("pulumi-python:dynamic/director:ComposerGpuGuard", "composer-gpu-guard"),
    }
    assert all(uses_provider(r, "target") for r in mocks.registrations if r.typ.startswith("kubernetes:"))
    account = mocks.named("composer-director-account").inputs  # probed by its check at preview
    assert account["endpoint"] == "https://director.example:8443"
    assert is_secret(account["password"]) and unwrap(account["password"]) == DIRECTOR_PASSWORD

    guard = mocks.named("composer-gpu-guard")  # its order before the chart: tests/components/test_cli_e2e.py
    assert unwrap(guard.inputs["password"]) == DIRECTOR_PASSWORD and is_secret(guard.inputs["password"])
    assert (guard.inputs["owner_tag"], guard.inputs["group"]) == ("gpu-composer", "pool-a")

    creds = mocks.named("composer-director-credentials").inputs
    assert is_secret(creds["stringData"])
    assert unwrap(creds["stringData"]) == {"username": "admin", "password": DIRECTOR_PASSWORD}

    chart = mocks.named("composer", "kubernetes:helm.sh/v4:Chart").inputs
    assert chart["chart"] == str(tmp_path / "charts" / "composer")
    assert chart["namespace"] == "composer-system"
    values = chart["values"]
    assert values["director"] == {
        "url": "https://director.example:8443",
        "username": "admin",
        "existingSecret": "composer-director-credentials",
        "passwordKey": "password",
    }
    assert values["composer"]["excludedDevices"] == ["gpu0", "gpu5"]
    assert values["composer"]["idleTimeoutSeconds"] == 300
    assert values["composer"]["pools"] == [  # membership from config: no Node label needed
        {"name": "blue", "quotaGpus": 2, "hosts": ["bm-1"], "namespaces": ["tenant-blue"]},
        {"name": "green", "quotaGpus": 4, "hosts": ["bm-2"], "namespaces": ["tenant-green"]},
    ]
    assert values["devicePlugin"] == {"restart": True, "namespace": "gpu-operator"}
    assert plain_occurrences([r.inputs for r in mocks.registrations], DIRECTOR_PASSWORD) == []

    props = mocks.named("composer", "composable:infra:Composer").inputs
    assert props == {
        "pool": "pool-a",
        "idle_timeout_seconds": 300,
        "target_cluster": "workers",
        "cluster_admin": False,
        "excluded_devices": ["gpu0", "gpu5"],
        "rbac_rules": composer_rbac_rules(),
        "host_pools": {"bm-1": "blue", "bm-2": "green"},
        "pool_tenants": {"blue": ["blue"], "green": ["green"]},
    }
    assert value(comp.excluded_devices) == ["gpu0", "gpu5"]


def test_composer_reclaim_guards_reach_the_chart_values(mocks: Recorder, tmp_path: Path) -> None:
    """``composer.reclaim_budget``, ``reclaim_windows_utc``, ``owner_tag``, ``orphan_grace_seconds``
    and a pool's ``reclaim_budget`` from the stack config are in the Chart's values."""
    raw = valid_estate()
    raw["composer"].update(reclaim_budget=1, reclaim_windows_utc=["22:00-06:00"], owner_tag="composer-east",
                           orphan_grace_seconds=900)
    raw["composer"]["pools"][1]["reclaim_budget"] = "50%"
    run(lambda: _composer(tmp_path, [], raw))
    values = mocks.named("composer", "kubernetes:helm.sh/v4:Chart").inputs["values"]["composer"]
    assert values["reclaimBudget"] == "1"
    assert values["reclaimWindowsUtc"] == ["22:00-06:00"]
    assert (values["ownerTag"], values["orphanGraceSeconds"]) == ("composer-east", 900)
    assert [p.get("reclaimBudget") for p in values["pools"]] == [None, "50%"]
    assert "reclaimBudget" not in values["pools"][0]  # unset: the composer-wide budget applies


def test_composer_rbac_is_least_privilege() -> None:
    for rule in composer_rbac_rules():
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        assert "secrets" not in rule["resources"]
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])


CHART = Path(__file__).resolve().parents[2] / "charts" / "composer"
requires_chart = pytest.mark.skipif(not (CHART / "Chart.yaml").exists(), reason="charts/composer not present")


def _deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _values(**composer: object) -> dict:
    raw = valid_estate()
    raw["composer"].update(composer)
    estate = load_estate(raw)
    assert estate.composer is not None
    return composer_values(
        config=estate.composer,
        director_url="http://127.0.0.1:18080",
        director_username="admin",
        credentials_secret="composer-director-credentials",
        excluded_devices=["gpu1"],
        tenant_pools=[TenantPool("red", 4, hosts=("bm-1",), namespaces=("tenant-red",), reclaim_budget="1")],
    )


@requires_chart
@pytest.mark.parametrize(
    "composer",
    [{}, {"reclaim_budget": 0, "reclaim_windows_utc": ["22:00-24:00"], "owner_tag": "a.b:c/d+e-f",
          "orphan_grace_seconds": 0}],
)
def test_values_match_the_chart_schema(composer: dict) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    merged = _deep_merge(yaml.safe_load((CHART / "values.yaml").read_text()), _values(**composer))
    assert [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(merged)] == []


@requires_chart
@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make setup)")
@pytest.mark.parametrize("restart", [True, False])
def test_rbac_rules_match_the_rendered_chart(tmp_path: Path, restart: bool) -> None:
    values = _values()
    values["devicePlugin"]["restart"] = restart
    (tmp_path / "values.json").write_text(json.dumps(values))
    rendered = subprocess.run(
        [
            "helm",
            "template",
            "composer",
            str(CHART),
            "-n",
            "composer-system",
            "-f",
            str(tmp_path / "values.json"),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    rules = [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    assert rules == composer_rbac_rules(restart_device_plugin=restart)
    # the Director password stays in our own Secret: the chart renders only the webhook's TLS Secret
    rendered_secrets = [d for d in docs if d["kind"] == "Secret"]
    assert [d.get("type") for d in rendered_secrets] in ([], ["kubernetes.io/tls"])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert "composer-director-credentials" in json.dumps(deployment)
