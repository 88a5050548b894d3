"""``composer.mode`` in the stack config: the modes of :mod:`domain.composer_mode`, refused by key
and rule when unknown (by the loader ``pulumi preview``/``up`` runs before any resource), carried
into the chart's ``dra.mode``, and the rendered chart's RBAC and webhook in each mode."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.composer import composer_rbac_rules, composer_values
from domain.composer_mode import DEFAULT_MODE
from stack_config import EstateConfigError, load_estate
from tests.config.factories import valid_estate

CHART = Path(__file__).resolve().parents[2] / "charts" / "composer"


def _estate(mode: str | None, k0s: str = "v1.36.3+k0s.0") -> dict[str, Any]:
    """The valid estate with ``composer.mode``; its target cluster ``workers`` on k0s ``k0s``."""
    raw = valid_estate()
    if mode is not None:
        raw["composer"]["mode"] = mode
    workers = next(c for c in raw["hypervisor_clusters"] if c["name"] == "workers")
    workers["k0s_version"] = k0s
    return raw


def _values(mode: str | None, **composer_keys: Any) -> dict[str, Any]:
    raw = _estate(mode)
    raw["composer"].update(composer_keys)
    composer = load_estate(raw).composer
    assert composer is not None
    return composer_values(
        config=composer,
        director_url="http://127.0.0.1:18080",
        director_username="admin",
        credentials_secret="composer-director-credentials",
        excluded_devices=[],
        tenant_pools=[],
    )


def test_the_default_mode_is_the_charts() -> None:
    composer = load_estate(valid_estate()).composer
    assert composer is not None and composer.mode == DEFAULT_MODE == "deviceplugin"
    assert yaml.safe_load((CHART / "values.yaml").read_text())["dra"]["mode"] == DEFAULT_MODE


@pytest.mark.parametrize("mode", ["gpu-operator", "DRA", ""])
def test_an_unknown_mode_names_the_key_and_the_modes(mode: str) -> None:
    with pytest.raises(EstateConfigError) as err:
        load_estate(_estate(mode))
    assert [str(p) for p in err.value.problems] == [
        f"composer.mode: Input should be 'deviceplugin' or 'dra' (got {mode!r})"
    ]


def test_dra_on_a_cluster_the_program_creates_below_1_36_is_refused_by_key_and_rule() -> None:
    with pytest.raises(EstateConfigError) as err:
        load_estate(_estate("dra", k0s="v1.35.2+k0s.0"))
    assert [str(p) for p in err.value.problems] == [
        "composer.mode: mode 'dra' needs Kubernetes 1.36 or newer (DRA binding conditions and extended "
        "resources on by default); cluster 'workers' runs k0s v1.35.2+k0s.0: raise its k0s_version or "
        "use mode 'deviceplugin'"
    ]
    assert load_estate(_estate("deviceplugin", k0s="v1.33.1+k0s.0")).composer is not None
    for k0s in ("v1.36.0+k0s.0", "v1.37.1+k0s.0", "v2.0.0"):
        assert load_estate(_estate("dra", k0s=k0s)).composer is not None


def test_dra_on_a_cluster_whose_version_the_config_does_not_know_is_left_to_the_start_check() -> None:
    adopted = _estate("dra", k0s="v1.33.1+k0s.0")
    workers = next(c for c in adopted["hypervisor_clusters"] if c["name"] == "workers")
    workers["kubeconfig"] = "workers.kubeconfig"  # adopted: k0s_version is not what runs there
    assert load_estate(adopted).composer is not None


def test_kubernetes_minor_reads_kubernetes_and_k0s_versions() -> None:
    from domain.composer_mode import kubernetes_minor

    assert kubernetes_minor("v1.33.1+k0s.0") == (1, 33)
    assert kubernetes_minor("v1.36.3") == (1, 36)
    assert kubernetes_minor("1.36") == (1, 36)
    assert kubernetes_minor("v1.36.0-rc.1") == (1, 36)
    assert kubernetes_minor("latest") is None


@pytest.mark.parametrize("mode", ["deviceplugin", "dra"])
def test_the_mode_reaches_the_chart_values(mode: str) -> None:
    assert _values(mode)["dra"] == {"mode": mode}


def test_the_kubelet_plugin_image_reaches_the_chart_in_dra_mode_only() -> None:
    image = "registry.example.net/gpu/kubelet-plugin:0.3.1"
    assert _values("dra", kubelet_plugin_image=image)["kubeletPlugin"] == {
        "image": {"repository": "registry.example.net/gpu/kubelet-plugin", "tag": "0.3.1"}}
    assert "kubeletPlugin" not in _values("deviceplugin", kubelet_plugin_image=image)
    assert "kubeletPlugin" not in _values("dra")
    with pytest.raises(EstateConfigError, match="composer.kubelet_plugin_image"):
        _values("dra", kubelet_plugin_image="kubelet-plugin")  # no registry path, no tag


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make setup)")
@pytest.mark.parametrize("mode", ["deviceplugin", "dra"])
def test_the_rendered_chart_has_the_modes_rbac_and_webhook(tmp_path: Path, mode: str) -> None:
    values = tmp_path / "values.json"
    values.write_text(json.dumps(_values(mode)))
    out = subprocess.run(
        ["helm", "template", "composer", str(CHART), "-n", "composer-system", "-f", str(values)],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    composer = [d for d in docs if not d["metadata"]["name"].endswith("-kubelet-plugin")]
    rules = [r for d in composer if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    assert rules == composer_rbac_rules(dra=mode == "dra")
    # DRA mode's node side, the kubelet plugin's DaemonSet, comes with its own ServiceAccount
    plugin = sorted(d["kind"] for d in docs if d["metadata"]["name"].endswith("-kubelet-plugin"))
    assert plugin == (["ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount"]
                      if mode == "dra" else [])
    hooks = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    assert len(hooks) == (1 if mode == "deviceplugin" else 0)
