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


def _composer_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The composer's ClusterRole (not the kubelet plugin's)."""
    (cr,) = [r for r in by_kind(docs, "ClusterRole") if not r["metadata"]["name"].endswith("-kubelet-plugin")]
    return cr


def _dra_rules(docs: list[dict[str, Any]]) -> dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]]:
    cr = _composer_role(docs)
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
    cr = _composer_role(docs)
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


def _daemonset(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (ds,) = by_kind(docs, "DaemonSet")
    return ds


def test_dra_mode_runs_the_kubelet_plugin_as_a_daemonset_with_the_host_paths_it_writes():
    docs = render("director.existingSecret=s", "dra.mode=dra", "kubeletPlugin.kubeletDir=/var/lib/k",
                  "kubeletPlugin.cdiDir=/etc/cdi", "kubeletPlugin.nodeSelector.gpu=composable")
    ds = _daemonset(docs)
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "ghcr.io/composable-gpu/kubelet-plugin:" + _app_version()
    assert c["args"] == ["--kubelet-registrar-dir=/var/lib/k/plugins_registry",
                         "--plugin-data-dir=/var/lib/k/plugins/gpu.composer.liqid.io",
                         "--device-dir=/dev", "--cdi-dir=/etc/cdi", "-v=1"]
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"] if "valueFrom" in e} == {
        "NODE_NAME": "spec.nodeName"}
    # every host directory is mounted at its own path: the paths the plugin writes into a CDI
    # spec (the device file's) are the host's
    hosts = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert hosts == mounts == {"plugins-registry": "/var/lib/k/plugins_registry",
                               "plugin-data": "/var/lib/k/plugins/gpu.composer.liqid.io",
                               "cdi": "/etc/cdi", "devices": "/dev"}
    assert [m["name"] for m in c["volumeMounts"] if m.get("readOnly")] == ["devices"]
    assert pod["nodeSelector"] == {"gpu": "composable"}
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    # its own ServiceAccount, allowed to get ResourceClaims and nothing else
    (role,) = [r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"].endswith("-kubelet-plugin")]
    claims_get = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}
    assert role["rules"] == [claims_get]
    (binding,) = [b for b in by_kind(docs, "ClusterRoleBinding")
                  if b["roleRef"]["name"] == role["metadata"]["name"]]
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"] != _deployment_sa(docs)


def _app_version() -> str:
    import yaml

    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


def _deployment_sa(docs: list[dict[str, Any]]) -> str:
    (dep,) = by_kind(docs, "Deployment")
    return str(dep["spec"]["template"]["spec"]["serviceAccountName"])


def test_the_composers_selectors_never_match_the_kubelet_plugins_pods():
    """The Deployment's and the metrics Service's selectors must not select the plugin's Pods
    (the Service would send scrapes to a Pod without the port)."""
    docs = render("director.existingSecret=s", "dra.mode=dra")
    plugin_labels = _daemonset(docs)["spec"]["template"]["metadata"]["labels"]
    (dep,) = by_kind(docs, "Deployment")
    (svc,) = by_kind(docs, "Service")
    for selector in (dep["spec"]["selector"]["matchLabels"], svc["spec"]["selector"]):
        assert not all(plugin_labels.get(k) == v for k, v in selector.items()), selector
    assert _daemonset(docs)["spec"]["selector"]["matchLabels"].items() <= plugin_labels.items()


def test_per_node_device_directories_take_the_nodes_name():
    ds = _daemonset(render("director.existingSecret=s", "dra.mode=dra", "kubeletPlugin.deviceDir=/srv/gpus",
                           "kubeletPlugin.deviceDirPerNode=true"))
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert "--device-dir=/srv/gpus/$(NODE_NAME)" in c["args"]
    assert ds["spec"]["template"]["spec"]["volumes"][-1]["hostPath"]["path"] == "/srv/gpus"


@pytest.mark.parametrize("sets", [
    (),  # deviceplugin mode: the NVIDIA device plugin serves the nodes
    ("dra.mode=dra", "kubeletPlugin.enabled=false"),
    ("dra.mode=dra", "targetCluster.kubeconfigSecret=child", "webhook.enabled=false"),
])
def test_no_kubelet_plugin_outside_dra_mode_when_disabled_or_for_another_cluster(sets: tuple[str, ...]):
    docs = render("director.existingSecret=s", *sets)
    assert by_kind(docs, "DaemonSet") == []
    assert not [d for d in docs if d["metadata"]["name"].endswith("-kubelet-plugin")]


@pytest.mark.parametrize("bad", ["kubeletPlugin.kubeletDir=var/lib/kubelet",
                                 "kubeletPlugin.cdiDir=/var/run/cdi/", "kubeletPlugin.logVerbosity=11",
                                 "kubeletPlugin.image.pullPolicy=Sometimes"])
def test_the_schema_refuses_bad_kubelet_plugin_values(bad: str):
    out = helm("template", "gpu", str(CHART), "--set", "director.existingSecret=s", "--set", "dra.mode=dra",
               "--set", bad, check=False)
    key = bad.split("=", 1)[0].replace(".", "/")
    assert out.returncode != 0 and f"/{key}" in out.stderr, out.stderr
