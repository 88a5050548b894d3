"""The chart's ``dra.mode``: what each mode renders and leaves out, its schema, and the rendered
environment the controller accepts (one mode per composer, domain/composer_mode.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from composer.shell.config import Settings
from domain.composer_mode import MODES
from tests.composer.test_chart import CHART, by_kind, helm, pytestmark, render

__all__ = ["pytestmark"]

DRA_RULES = {
    (("resourceclaims",), ()): ["list", "watch"],
    (("resourceclaims/status",), ()): ["patch"],
    (("resourceclaims/driver",), ("gpu.composer.liqid.io",)): ["arbitrary-node:patch"],
    (("resourceslices",), ()): ["create", "delete", "list", "patch", "watch"],
    (("deviceclasses",), ()): ["create", "get", "patch"],
}


def _dra_rules(docs: list[dict[str, Any]]) -> dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]]:
    (cr,) = by_kind(docs, "ClusterRole")
    rules = [r for r in cr["rules"] if r["apiGroups"] == ["resource.k8s.io"]]
    return {(tuple(r["resources"]), tuple(r.get("resourceNames", ()))): sorted(r["verbs"]) for r in rules}


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (dep,) = by_kind(docs, "Deployment")
    container: dict[str, Any] = dep["spec"]["template"]["spec"]["containers"][0]
    return container


def _plugin_roles(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in by_kind(docs, "Role") if r["metadata"]["name"].endswith("-device-plugin")]


def _env(docs: list[dict[str, Any]]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in _container(docs)["env"] if "value" in e}


def test_deviceplugin_mode_is_the_default_with_the_webhook_and_no_dra_rbac():
    docs = render("director.existingSecret=s")
    assert _env(docs)["COMPOSER_MODE"] == "deviceplugin"
    assert len(by_kind(docs, "MutatingWebhookConfiguration")) == 1
    assert "COMPOSER_WEBHOOK_PORT" in _env(docs)
    assert _dra_rules(docs) == {}
    assert _env(docs)["COMPOSER_RESTART_DEVICE_PLUGIN"] == "true"
    assert [r["metadata"]["namespace"] for r in _plugin_roles(docs)] == ["gpu-operator"]


def test_dra_mode_grants_the_dra_rbac_and_renders_no_webhook():
    docs = render("director.existingSecret=s", "dra.mode=dra")
    env = _env(docs)
    assert env["COMPOSER_MODE"] == "dra"
    assert by_kind(docs, "MutatingWebhookConfiguration") == []
    assert not [d for d in by_kind(docs, "Secret") if "webhook" in d["metadata"]["name"]]
    assert not any(k.startswith("COMPOSER_WEBHOOK") for k in env)
    container = _container(docs)
    assert [p["name"] for p in container["ports"]] == ["metrics"]
    assert [m["name"] for m in container["volumeMounts"]] == ["tmp"]
    assert _dra_rules(docs) == DRA_RULES
    # pods are read, never patched: no gate, release or nomination in DRA mode
    (cr,) = by_kind(docs, "ClusterRole")
    pods = [r for r in cr["rules"] if r["apiGroups"] == [""] and r["resources"][0].startswith("pods")]
    assert pods == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
    # no device plugin to restart on nodes served by DRA: no Role in its namespace, restart off
    assert _plugin_roles(docs) == []
    assert env["COMPOSER_RESTART_DEVICE_PLUGIN"] == "false"
    # the DeviceClass is the composer's to apply (composer/run/dra_start.py), not the chart's
    assert by_kind(docs, "DeviceClass") == []


def test_dra_mode_ignores_webhook_enabled():
    docs = render("director.existingSecret=s", "dra.mode=dra", "webhook.enabled=true")
    assert by_kind(docs, "MutatingWebhookConfiguration") == []


def test_the_schema_takes_exactly_the_composers_modes():
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert tuple(schema["properties"]["dra"]["properties"]["mode"]["enum"]) == MODES


@pytest.mark.parametrize("bad", ["dra.mode=gpu-operator", "dra.mode=DRA", "dra.mode="])
def test_the_schema_refuses_a_bad_mode(bad: str):
    out = helm("template", "gpu", str(CHART), "--set", "director.existingSecret=s", "--set", bad, check=False)
    assert out.returncode != 0 and "/dra/mode" in out.stderr, out.stderr


def test_the_dra_mode_environment_is_accepted_by_the_controller(monkeypatch: pytest.MonkeyPatch):
    for name, value in _env(render("director.existingSecret=s", "dra.mode=dra")).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "from-secret")
    s = Settings()
    assert s.mode == "dra" and s.webhook_port == 0
    assert s.policy().restart_device_plugin is False
