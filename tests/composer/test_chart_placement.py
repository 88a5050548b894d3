"""Stack config -> chart values -> rendered Deployment: the image, the Pods' placement, the
API server address for a cluster without kube-proxy (the lab's real node), and the reclaim guards."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.composer import composer_values
from stack_config.models import ComposerConfig
from stack_config.stack_file import load_stack_file

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "composer"


def _values(cc: ComposerConfig) -> dict[str, Any]:
    """The chart values the program renders for ``cc`` (with ``runs_on: mothership`` the target's
    kubeconfig is in Secret ``composer-target-kubeconfig``, as components.composer names it)."""
    secret = "composer-target-kubeconfig" if cc.runs_on == "mothership" else None
    return composer_values(config=cc, director_url="http://127.0.0.1:18080", director_username="admin",
                           credentials_secret="creds", excluded_devices=[], tenant_pools=[],
                           target_kubeconfig_secret=secret)


def _in_target(cc: ComposerConfig) -> ComposerConfig:
    """``cc`` installed in its target cluster instead, reached at the mothership's relayed port."""
    return cc.model_copy(update={"runs_on": "target_cluster", "api_server": "10.89.0.1:16443"})


def _dev_composer() -> ComposerConfig:
    estate = load_stack_file(ROOT / "Pulumi.dev.yaml")
    assert estate.composer is not None
    return estate.composer


def test_dev_stack_runs_the_lab_image_on_the_real_node_and_reaches_the_api_at_the_node_address() -> None:
    from lab import image, node

    dev = _dev_composer()
    # lab-workers has no real node: the chart goes to the mothership, the Pods to mgmt-1, and they
    # reach lab-workers' API server at the node address (in the kubeconfig, not kubernetesService)
    assert dev.runs_on == "mothership" and dev.api_server == f"{node.NODE_IP}:16543"
    v = _values(dev)
    assert v["targetCluster"] == {"kubeconfigSecret": "composer-target-kubeconfig", "kubeconfigKey": "value"}
    assert v["webhook"] == {"enabled": False} and "kubernetesService" not in v
    assert v["image"] == {"repository": image.IMAGE_REPOSITORY, "tag": image.LAB_TAG}
    assert v["nodeSelector"] == {"kubernetes.io/hostname": node.NODE_NAME}
    assert v["tolerations"] == [{"key": node.TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    assert _values(_in_target(dev))["kubernetesService"] == {"host": node.NODE_IP, "port": 16443}
    assert v["director"]["url"] == f"http://{node.NODE_IP}:18080"
    # scoped to the demo's and the tenants' namespaces: the lab is shared with tests' own composers
    assert v["composer"]["namespaces"] == ["gpu-demo", "tenant-alpha", "tenant-beta"]


def test_unset_placement_leaves_the_chart_defaults() -> None:
    v = _values(ComposerConfig(pool="p", target_cluster="mothership"))
    assert not {"image", "nodeSelector", "tolerations", "kubernetesService"} & v.keys()
    assert "namespaces" not in v["composer"]  # the chart's default: every namespace
    assert v["director"]["url"] == "http://127.0.0.1:18080"


@pytest.mark.parametrize("bad", [{"image": "composer"}, {"image": "a/b"}, {"api_server": "10.0.0.1"},
                                 {"director_endpoint": "ftp://x"}])
def test_bad_placement_config_is_refused(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        ComposerConfig(pool="p", target_cluster="mothership", **bad)


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")
def test_rendered_deployment_carries_image_placement_and_api_server_env(tmp_path: Path) -> None:
    values = _values(_in_target(_dev_composer()))
    vfile = tmp_path / "values.yaml"
    vfile.write_text(yaml.safe_dump(values))
    out = subprocess.run(["helm", "template", "composer", str(CHART), "--namespace", "composer-system",
                          "-f", str(vfile)], capture_output=True, text=True, timeout=60, check=True).stdout
    (dep,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = [c for c in pod["containers"] if c["name"] == "composer"]
    assert c["image"] == "localhost/composable-gpu/composer:lab"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "10.89.0.1" and env["KUBERNETES_SERVICE_PORT"] == "16443"
    assert env["COMPOSER_DIRECTOR_URL"] == "http://10.89.0.1:18080"
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "mgmt-1"}
    assert pod["tolerations"][0]["key"] == "composable-gpu.io/system"
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    (hook,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "MutatingWebhookConfiguration"]
    exprs = hook["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    assert {"key": "kubernetes.io/metadata.name", "operator": "In",
            "values": ["gpu-demo", "tenant-alpha", "tenant-beta"]} in exprs
    # without the setting the kubelet's service variables stay in charge
    plain = subprocess.run(["helm", "template", "composer", str(CHART), "--set", "director.password=x"],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert "KUBERNETES_SERVICE_HOST" not in plain
    assert json.dumps(values).count("lab-director-password") == 0


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")
def test_a_new_idle_timeout_in_the_stack_config_changes_only_the_pod_template_env(tmp_path: Path) -> None:
    """What ``pulumi up`` applies for a changed ``composer.idle_timeout_seconds``: the Deployment's
    pod template differs in that one variable, so the Deployment rolls (the rolling itself, mid
    compose, is test_deployed.py's upgrade test)."""

    def template(idle: int) -> dict[str, Any]:
        cc = _dev_composer().model_copy(update={"idle_timeout_seconds": idle})
        vfile = tmp_path / f"values-{idle}.yaml"
        vfile.write_text(yaml.safe_dump(_values(cc)))
        argv = ["helm", "template", "composer", str(CHART), "-n", "composer-system", "-f", str(vfile)]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
        (dep,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment"]
        return dep["spec"]["template"]

    old, new = template(60), template(30)
    env_old, env_new = ({e["name"]: e.get("value") for e in t["spec"]["containers"][0]["env"]}
                        for t in (old, new))
    assert {k for k in env_old if env_old[k] != env_new[k]} == {"COMPOSER_IDLE_TIMEOUT_SECONDS"}
    assert env_new["COMPOSER_IDLE_TIMEOUT_SECONDS"] == "30"
    old["spec"]["containers"][0]["env"] = new["spec"]["containers"][0]["env"] = []
    assert old == new


GUARDS = {"reclaim_budget": "0", "reclaim_windows_utc": ["22:00-06:00", "12:00-13:00"],
          "owner_tag": "composer-east", "orphan_grace_seconds": 120}


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")
def test_reclaim_guards_of_the_stack_config_reach_the_composers_settings(tmp_path: Path, monkeypatch) -> None:
    """Stack config keys -> chart values -> the rendered Deployment's ``COMPOSER_*`` -> the composer's
    own ``Settings``: the budgets (composer-wide and a pool's), the windows, the owner tag and the
    orphan grace are what the stack said."""
    from components.composer import TenantPool
    from composer.decide import reclaim_guard as guard
    from composer.shell.config import Settings

    cc = _dev_composer().model_copy(update=GUARDS)
    pools = [TenantPool("red", 2, hosts=("n1",), namespaces=("tenant-red",), reclaim_budget="50%"),
             TenantPool("blue", 1, hosts=("n2",), namespaces=("tenant-blue",))]
    values = composer_values(config=cc, director_url="http://127.0.0.1:18080", director_username="admin",
                             credentials_secret="creds", excluded_devices=[], tenant_pools=pools)
    vfile = tmp_path / "values.yaml"
    vfile.write_text(yaml.safe_dump(values))
    argv = ["helm", "template", "composer", str(CHART), "-n", "composer-system", "-f", str(vfile)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    (dep,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment"]
    (c,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "composer"]
    for e in c["env"]:
        if e["name"].startswith("COMPOSER_") and "value" in e:
            monkeypatch.setenv(e["name"], e["value"])
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "from-the-secret")
    policy = Settings().policy()
    assert policy.reclaim_budget == guard.Budget(count=0)
    assert policy.budget_of("red") == guard.Budget(percent=50)
    assert policy.budget_of("blue") == guard.Budget(count=0)  # no budget of its own: the composer-wide one
    assert policy.reclaim_windows == (guard.Window(22 * 60, 6 * 60), guard.Window(12 * 60, 13 * 60))
    assert (policy.owner_tag, policy.orphan_grace_seconds) == ("composer-east", 120)


def test_unset_budgets_are_left_out_and_the_other_guards_written_with_the_charts_defaults() -> None:
    v = _values(ComposerConfig(pool="p", target_cluster="mothership"))["composer"]
    assert "reclaimBudget" not in v  # the chart's null: no limit
    assert (v["reclaimWindowsUtc"], v["ownerTag"], v["orphanGraceSeconds"]) == ([], "gpu-composer", 600)
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["composer"]
    assert {k: chart[k] for k in ("reclaimWindowsUtc", "ownerTag", "orphanGraceSeconds")} == {
        k: v[k] for k in ("reclaimWindowsUtc", "ownerTag", "orphanGraceSeconds")}
