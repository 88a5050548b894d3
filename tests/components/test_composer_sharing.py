"""The program carries the stack's GPU sharing to the composer: ``composer.sharing`` in the chart's
values, derived from the same settings as the hosts' device-plugin configs and node labels, and
accepted by the composer's settings as the chart hands it over (``COMPOSER_SHARING``, JSON).

The valid estate: tenant ``blue`` time-slices ``bm-1`` (4 replicas), tenant ``green`` runs MIG
``all-1g.5gb`` (strategy single) on ``bm-2``; the composer serves cluster ``workers`` (both) from
pool ``pool-a`` (Tesla T4 and A100 40GB).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from components import Estate, EstateArgs
from components.composer import composer_sharing, composer_values
from components.estate import host_sharing, hypervisor_gpus
from components.manifests import host_node_labels
from composer.shell.config import Settings
from domain.gpu_sharing import Offer
from domain.labels import DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL
from stack_config import load_estate
from stack_config.models import EstateConfig
from tests.components.conftest import Recorder, run
from tests.config.factories import valid_estate

CHART = Path(__file__).resolve().parents[2] / "charts" / "composer"
T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"

BLUE = {
    "name": "blue-gpu-sharing",
    "strategy": "time-slicing",
    "hosts": ["bm-1"],
    "tenant": "blue",
    "namespaces": ["tenant-blue"],  # time-slicing: only blue's pods share bm-1's GPUs
    "offers": {
        T4: [{"resource": "nvidia.com/gpu", "units": 4, "product": "Tesla-T4-SHARED"}],
        A100: [{"resource": "nvidia.com/gpu", "units": 4, "product": "NVIDIA-A100-PCIE-40GB-SHARED"}],
    },
}
GREEN = {
    "name": "green-gpu-sharing",
    "strategy": "mig",
    "hosts": ["bm-2"],
    "tenant": "green",  # MIG instances are isolated: no namespace restriction
    # a T4 cannot be laid out as all-1g.5gb: the composer never composes one onto bm-2
    "offers": {
        A100: [{"resource": "nvidia.com/gpu", "units": 7, "product": "NVIDIA-A100-PCIE-40GB-MIG-1g.5gb"}]
    },
}


def _estate(**blue: Any) -> EstateConfig:
    raw = valid_estate()
    raw["tenants"][1]["gpu_sharing"].update(blue)
    return load_estate(raw)


def _values(cfg: EstateConfig) -> dict[str, Any]:
    assert cfg.composer is not None
    return composer_values(
        config=cfg.composer,
        director_url="http://127.0.0.1:18080",
        director_username="admin",
        credentials_secret="composer-director-credentials",
        excluded_devices=[],
        tenant_pools=[],
        sharing=composer_sharing(cfg, cfg.composer),
    )


def test_the_composer_gets_what_one_gpu_yields_on_each_shared_host() -> None:
    cfg = _estate()
    assert cfg.composer is not None
    assert composer_sharing(cfg, cfg.composer) == [BLUE, GREEN]


def test_one_setting_gives_the_device_plugin_config_the_node_labels_and_the_composers_count() -> None:
    """Change the stack's replicas (or renaming) once: the GPU Operator's device-plugin config and
    the composer's units and resource follow, under the one config name the hosts' label selects."""
    for replicas, rename in ((4, False), (6, True)):
        cfg = _estate(replicas=replicas, rename_by_default=rename)
        workers = hypervisor_gpus(cfg, cfg.hypervisor_clusters[1])
        config = yaml.safe_load(workers.device_plugin_configs["blue-gpu-sharing"])
        ts = config["sharing"]["timeSlicing"]
        assert (ts["resources"][0]["replicas"], ts["renameByDefault"]) == (replicas, rename)
        labels = host_node_labels(gpu_workload_mode="container", sharing=host_sharing(cfg, "bm-1"))
        (blue, green) = _values(cfg)["composer"]["sharing"]
        assert labels[DEVICE_PLUGIN_CONFIG_LABEL] == blue["name"] == "blue-gpu-sharing"
        assert blue["offers"][T4] == [
            Offer("nvidia.com/gpu.shared" if rename else "nvidia.com/gpu", replicas,
                  T4 if rename else "Tesla-T4-SHARED").to_json()
        ]
    mig_labels = host_node_labels(gpu_workload_mode="container", sharing=host_sharing(cfg, "bm-2"))
    assert mig_labels[MIG_CONFIG_LABEL] == "all-1g.5gb"
    assert green["name"] == mig_labels[DEVICE_PLUGIN_CONFIG_LABEL]


def test_a_composer_of_another_cluster_gets_none_of_these_hosts() -> None:
    raw = valid_estate()
    raw["composer"]["target_cluster"] = "mothership"
    raw["composer"].pop("pools")
    cfg = load_estate(raw)
    assert cfg.composer is not None
    # the mothership's composer serves every cluster: the shared hosts and the passthrough host hv-1
    assert [e["hosts"] for e in composer_sharing(cfg, cfg.composer)] == [["bm-1"], ["bm-2"], ["hv-1"]]
    raw = valid_estate()
    for t in raw["tenants"]:
        t.pop("gpu_sharing", None)
    cfg = load_estate(raw)
    assert cfg.composer is not None and composer_sharing(cfg, cfg.composer) == []
    assert "sharing" not in _values(cfg)["composer"]  # no key: the chart's default, as before


def _rendered_sharing(values: dict[str, Any], tmp_path: Path) -> str:
    """``COMPOSER_SHARING`` of the composer's container in ``helm template`` of ``values``."""
    (tmp_path / "values.json").write_text(json.dumps(values))
    rendered = subprocess.run(
        ["helm", "template", "composer", str(CHART), "-n", "composer-system",
         "-f", str(tmp_path / "values.json")],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    dep = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    return str({e["name"]: e["value"] for e in container["env"] if "value" in e}["COMPOSER_SHARING"])


def test_the_values_match_the_chart_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = _values(_estate())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    merged = {**defaults, **values, "composer": {**defaults["composer"], **values["composer"]}}
    assert [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(merged)] == []
    bad = json.loads(json.dumps(merged))
    bad["composer"]["sharing"][0]["offers"][T4][0]["units"] = 0
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))


def test_the_composer_reads_the_values_as_the_chart_hands_them_over(monkeypatch: pytest.MonkeyPatch) -> None:
    # templates/deployment.yaml: COMPOSER_SHARING = {{ .Values.composer.sharing | toJson | quote }}
    template = (CHART / "templates" / "deployment.yaml").read_text()
    assert (
        "- name: COMPOSER_SHARING\n              value: {{ .Values.composer.sharing | toJson | quote }}"
        in template
    )
    monkeypatch.setenv("COMPOSER_SHARING", json.dumps(_values(_estate())["composer"]["sharing"]))
    policy = Settings(director_url="http://d", director_password="pw").policy()
    assert set(policy.sharing) == {"bm-1", "bm-2"}
    assert policy.sharing["bm-1"].offer(T4, "nvidia.com/gpu") == Offer("nvidia.com/gpu", 4, "Tesla-T4-SHARED")
    assert policy.sharing["bm-2"].offers.keys() == {A100}
    assert policy.most_units == {"nvidia.com/gpu": 7} and policy.sharing_only == frozenset()


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make setup)")
def test_the_rendered_chart_hands_the_sharing_to_the_composer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = _values(_estate(rename_by_default=True))
    monkeypatch.setenv("COMPOSER_SHARING", _rendered_sharing(values, tmp_path))
    policy = Settings(director_url="http://d", director_password="pw").policy()
    assert policy.sharing["bm-1"].offer(T4, "nvidia.com/gpu.shared") == Offer("nvidia.com/gpu.shared", 4, T4)
    assert policy.sharing_only == {"nvidia.com/gpu.shared"}


def test_pulumi_up_deploys_the_composer_with_the_sharing(mocks: Recorder, tmp_path: Path) -> None:
    cfg = _estate()
    run(lambda: Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path)))
    chart = mocks.named("composer", "kubernetes:helm.sh/v4:Chart")
    assert chart.inputs["values"]["composer"]["sharing"] == [BLUE, GREEN]


PT_A100 = "nvidia.com/GA100_A100_PCIE_40GB"
HV = {
    "name": "hv-vm-passthrough",
    "strategy": "vm-passthrough",
    "hosts": ["hv-1"],
    # the sandbox device plugin's resource per model (catalogue passthrough_resource), one per GPU
    "offers": {
        T4: [{"resource": "nvidia.com/TU104GL_TESLA_T4", "units": 1, "product": T4}],
        A100: [{"resource": "nvidia.com/GA100_A100_PCIE_40GB", "units": 1, "product": A100}],
    },
}


def _passthrough_composer() -> EstateConfig:
    raw = valid_estate()
    raw["composer"]["target_cluster"] = "mothership"
    raw["composer"].pop("pools")
    return load_estate(raw)


def test_a_passthrough_hosts_gpus_are_offered_as_their_passthrough_resource_only() -> None:
    """The mothership's composer gets the ``vm-passthrough`` cluster ``hv``'s host with each model's
    catalogue passthrough resource, one unit per GPU, and no ``nvidia.com/gpu``, after the tenants'
    shared hosts; a composer of cluster ``workers`` gets no passthrough entry."""
    cfg = _passthrough_composer()
    assert cfg.composer is not None
    catalogue = cfg.gpu_catalogue()
    assert HV["offers"] == {m: [{"resource": catalogue[m].passthrough_resource, "units": 1, "product": m}]
                            for m in (T4, A100)}
    assert composer_sharing(cfg, cfg.composer)[-1] == HV
    workers = _estate()
    assert workers.composer is not None
    assert all(e["strategy"] != "vm-passthrough" for e in composer_sharing(workers, workers.composer))


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make setup)")
def test_the_chart_and_the_composer_accept_the_passthrough_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = _values(_passthrough_composer())
    assert values["composer"]["sharing"][-1] == HV
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    merged = {**defaults, **values, "composer": {**defaults["composer"], **values["composer"]}}
    assert [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(merged)] == []
    monkeypatch.setenv("COMPOSER_SHARING", _rendered_sharing(values, tmp_path))
    policy = Settings(director_url="http://d", director_password="pw").policy()
    hs = policy.sharing["hv-1"]
    assert hs.strategy == "vm-passthrough"
    assert hs.offer(A100, PT_A100) == Offer(PT_A100, 1, A100)
    assert hs.offer(A100, "nvidia.com/gpu") is None
    # only the passthrough host advertises it: a host without a sharing entry never serves it
    assert PT_A100 in policy.sharing_only


def test_kubevirt_permits_the_gpus_the_mothership_composer_composes_onto_a_passthrough_cluster() -> None:
    """The mothership's composer composes its pool's models (T4, A100) onto ``hv``'s hosts, so the
    cluster's KubeVirt values permit each model's passthrough resource: without that, KubeVirt would
    refuse a VM asking for the GPU the composer put there. A composer of cluster ``workers`` adds
    nothing to ``hv``."""
    from components.manifests import kubevirt_values

    cfg = _passthrough_composer()
    hv = next(c for c in cfg.hypervisor_clusters if c.gpu_workload_mode == "vm-passthrough")
    gpus = hypervisor_gpus(cfg, hv)
    values = kubevirt_values(workload_mode=hv.gpu_workload_mode, gpu_models=gpus.models,
                             catalogue=gpus.catalogue)
    permitted = values["kubevirt"]["configuration"]["permittedHostDevices"]["pciHostDevices"]
    assert {d["resourceName"] for d in permitted} >= {o["resource"] for offers in HV["offers"].values()
                                                      for o in offers}
    workers = _estate()
    hv_of_workers = next(c for c in workers.hypervisor_clusters if c.name == hv.name)
    assert hypervisor_gpus(workers, hv_of_workers).models == ["NVIDIA-A100-PCIE-40GB"]
