"""The whole estate under Pulumi mocks: structure, the component contract, secrets, preview parity,
the report, and the program entry point (invalid config registers nothing)."""

from __future__ import annotations

import json
import re
import runpy
import shutil
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components import Estate, EstateArgs
from domain import contract
from stack_config import load_estate, load_stack_file
from stack_config.summary import render_summary
from tests.components.conftest import (
    Recorder,
    _Mocks,
    _RecordingMonitor,
    plain_occurrences,
    run,
    unwrap,
    uses_provider,
    value,
)
from tests.config.factories import ALL_PASSWORDS, valid_estate

ROOT = Path(__file__).resolve().parents[2]


def _estate(tmp_path: Path, raw: dict[str, Any] | None = None) -> Estate:
    cfg = load_estate(raw or valid_estate())
    return Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path))


def documented_contract() -> dict[str, set[str]]:
    """Component token -> property keys, parsed from docs/architecture.md's contract table."""
    table: dict[str, set[str]] = {}
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        m = re.match(r"\|\s*`(composable:infra:\w+)`\s*\|(.*)\|\s*$", line)
        if not m:
            continue
        cell = m.group(2).replace("\\|", "/")
        while re.search(r"\([^()]*\)", cell):
            cell = re.sub(r"\([^()]*\)", "", cell)
        table[m.group(1)] = set(re.findall(r"`([a-z_]+)`", cell))
    return table


def test_architecture_table_is_the_typed_contract() -> None:
    """docs/architecture.md lists every token of domain.contract with exactly its required keys."""
    table = documented_contract()
    assert set(table) == set(contract.CONTRACT)
    assert len(table) == 11
    for token, keys in table.items():
        assert keys == contract.required_keys(token), token


def test_typed_contract_host() -> None:
    assert contract.required_keys(contract.HOST) == {
        "name",
        "role",
        "bmc_address",
        "bmc_verify_tls",
        "kernel_args",
        "blacklisted_modules",
        "cluster",
        "tenant_workloads",
        "dpu",
        "gpu_mode",
    }
    assert contract.optional_keys(contract.HOST) == {"allow_reboot"}
    assert contract.optional_keys(contract.DPU) == {"allow_firmware_reset"}


def test_every_component_passes_exactly_its_contract_properties(mocks: Recorder, tmp_path: Path) -> None:
    run(lambda: _estate(tmp_path))
    for token in contract.CONTRACT:
        instances = mocks.of_type(token)
        assert instances, f"no {token} registered"
        seen = set().union(*(r.inputs.keys() for r in instances))
        keys = contract.required_keys(token)
        assert seen == keys, f"{token}: missing {keys - seen}, unexpected {seen - keys}"


def test_a_component_with_props_outside_the_contract_is_refused() -> None:
    from components._base import contract_props

    props = {"stack": "s", "environment": "lab"}
    assert contract_props("Estate", props) is props
    with pytest.raises(ValueError, match="unexpected \\['extra'\\]"):
        contract_props("Estate", {**props, "extra": 1})
    with pytest.raises(ValueError, match="missing \\['environment'\\]"):
        contract_props("Estate", {"stack": "s"})


def test_a_known_prop_value_of_another_type_than_the_contract_is_refused() -> None:
    from components._base import contract_props

    tenant = {"name": "alpha", "gpu_quota": 2, "allowed_models": ["Tesla-T4"], "quota_clusters": ["hv"]}
    assert contract_props("Tenant", tenant) is tenant
    with pytest.raises(ValueError, match=r"Tenant props: gpu_quota: .* valid integer \(got str"):
        contract_props("Tenant", {**tenant, "gpu_quota": "2"})
    with pytest.raises(ValueError, match=r"gpu_quota: .* \(got bool\)"):
        contract_props("Tenant", {**tenant, "gpu_quota": True})
    with pytest.raises(ValueError, match=r"allowed_models\.1: Input should be a valid string"):
        contract_props("Tenant", {**tenant, "allowed_models": ["Tesla-T4", 7]})
    host = {
        "name": "h1", "role": "hypervisor", "bmc_address": "https://h1-bmc:443", "bmc_verify_tls": True,
        "kernel_args": [], "blacklisted_modules": [], "cluster": None, "tenant_workloads": True,
        "dpu": None, "gpu_mode": "passthrough",
    }
    assert contract_props("Host", host) is host
    with pytest.raises(ValueError, match=r"Host props: role: Input should be 'hypervisor'"):
        contract_props("Host", {**host, "role": "worker"})


def test_contract_props_read_from_the_config_what_props_do_not_give() -> None:
    from components._base import contract_props
    from stack_config.models import TenantConfig

    config = TenantConfig(name="alpha", gpu_quota=2, allowed_models=["Tesla-T4"])
    props = contract_props("Tenant", {"name": "beta", "quota_clusters": []}, config=config)
    assert props == {"name": "beta", "gpu_quota": 2, "allowed_models": ["Tesla-T4"], "quota_clusters": []}
    props["allowed_models"].append("A100")  # a copy: the config keeps its list
    assert config.allowed_models == ["Tesla-T4"]
    # a required key neither given nor a field of the config is still missing
    with pytest.raises(ValueError, match="missing \\['stack'\\]"):
        contract_props("Estate", {}, config=load_estate(valid_estate()))


class _Published(pulumi.ComponentResource):
    name: pulumi.Output[str]
    count: pulumi.Output
    note: str  # not an Output: not published

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__("test:index:Published", "published")
        from components._base import publish_outputs

        publish_outputs(self, values)


def test_publish_outputs_sets_and_registers_exactly_the_declared_outputs(
    mocks: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    registered: list[dict[str, Any]] = []
    monkeypatch.setattr(pulumi.ComponentResource, "register_outputs", lambda self, o: registered.append(o))
    published = run(lambda: _Published({"name": "n", "count": 3, "extra": "ignored"}))
    assert [sorted(o) for o in registered] == [["count", "name"]]
    assert value(published.name) == "n" and value(published.count) == 3
    assert registered[0]["name"] is published.name
    assert not hasattr(published, "note") and not hasattr(published, "extra")
    with pytest.raises(ValueError, match=r"_Published outputs: missing \['count'\]"):
        run(lambda: _Published({"name": "n"}))


def test_estate_structure(mocks: Recorder, tmp_path: Path) -> None:
    run(lambda: _estate(tmp_path))
    direct = sorted(
        (r.typ.split(":")[-1], r.name) for r in mocks.children_of("estate", "composable:infra:Estate")
    )
    assert direct == sorted(
        [
            ("kubernetes", "estate-mothership"),
            ("kubernetes", "estate-cluster-hv"),
            ("Secret", "estate-cluster-hv-kubeconfig"),
            ("kubernetes", "estate-cluster-workers"),
            ("Secret", "estate-cluster-workers-kubeconfig"),
            ("Namespace", "estate-namespace"),
            ("ServiceTemplate", "estate-gpu-operator"),
            ("ServiceTemplate", "estate-kubevirt"),
            ("ClusterTemplate", "estate-template-capm3-hosted-cp"),
            ("ClusterTemplate", "estate-template-dpu-hosted-cp"),
            ("HelmRepository", "estate-repo-nvidia"),
            ("HelmRepository", "estate-repo-k0rdent-catalog"),
            ("HelmRepository", "estate-repo-composable-gpu-templates"),
            ("Host", "hv-1"),
            ("Host", "bm-1"),
            ("Host", "bm-2"),
            ("Host", "dpu-host-1"),
            ("DpuCluster", "dpus"),
            ("HypervisorCluster", "hv"),
            ("HypervisorCluster", "workers"),
            ("Tenant", "red"),
            ("Tenant", "blue"),
            ("Tenant", "green"),
            ("GpuComposition", "hv-1-gpus"),
            ("GpuComposition", "bm-1-gpus"),
            ("Composer", "composer"),
        ]
    )
    assert mocks.named("estate", "composable:infra:Estate").inputs == {
        "stack": "test",
        "environment": "staging",
    }
    provider = mocks.named("estate-mothership", "pulumi:providers:kubernetes").inputs
    assert provider["kubeconfig"] == str(tmp_path / "kubeconfig.yaml")


def test_the_dev_stack_reaches_lab_workers_through_its_secret_and_runs_the_composer_on_the_mothership(
    mocks: Recorder,
) -> None:
    """The dev stack's lab-workers is a child reached through its kubeconfig Secret (provider
    ``estate-cluster-lab-workers``): the hosts' Node patches, the tenants' namespaces, quotas and
    NADs and the composer's Lease namespace go there; the composer (``runs_on: mothership``) has its
    chart, namespace and Secrets on the mothership; no namespace twice in one cluster."""
    cfg = load_stack_file(ROOT / "Pulumi.dev.yaml")
    run(lambda: Estate("estate", EstateArgs(config=cfg, stack="dev", project_root=ROOT)))
    objects = [r for r in mocks.registrations if r.typ.startswith("kubernetes:") and not r.read]
    assert len(objects) > 30
    assert sorted(r.name for r in mocks.of_type("pulumi:providers:kubernetes")) == [
        "estate-cluster-lab-workers", "estate-mothership"]
    in_workers = {r.typ.split(":")[-1] for r in objects if uses_provider(r, "estate-cluster-lab-workers")}
    assert in_workers == {"NodePatch", "Namespace", "ResourceQuota", "NetworkAttachmentDefinition"}
    assert uses_provider(mocks.named("composer", "kubernetes:helm.sh/v4:Chart"), "estate-mothership")
    for name in ("composer-namespace", "composer-director-credentials", "composer-target-kubeconfig"):
        assert uses_provider(mocks.named(name), "estate-mothership"), name
    assert uses_provider(mocks.named("composer-lease-namespace"), "estate-cluster-lab-workers")
    for provider in ("estate-mothership", "estate-cluster-lab-workers"):
        namespaces = [r.inputs["metadata"]["name"] for r in mocks.of_type("kubernetes:core/v1:Namespace")
                      if uses_provider(r, provider)]
        assert sorted(namespaces) == sorted(set(namespaces)), provider


def test_composer_with_its_own_kubeconfig_gets_its_own_provider(mocks: Recorder, tmp_path: Path) -> None:
    raw = valid_estate()
    raw["composer"]["kubeconfig"] = "/etc/workers.kubeconfig"
    run(lambda: _estate(tmp_path, raw))
    target = mocks.named("estate-composer-target", "pulumi:providers:kubernetes")
    assert target.inputs["kubeconfig"] == "/etc/workers.kubeconfig"
    composer_objects = [
        r for r in mocks.registrations if r.typ.startswith("kubernetes:") and r.name.startswith("composer")
    ]
    assert composer_objects and all(uses_provider(r, "estate-composer-target") for r in composer_objects)


def test_no_password_appears_outside_a_secret(mocks: Recorder, tmp_path: Path) -> None:
    estate = run(lambda: _estate(tmp_path))
    everything = [r.inputs for r in mocks.registrations]
    for password in ALL_PASSWORDS:
        assert plain_occurrences(everything, password) == [], password
        assert password not in json.dumps(value(estate.report))


def test_host_labels_follow_cluster_mode_and_sharing(mocks: Recorder, tmp_path: Path) -> None:
    run(lambda: _estate(tmp_path))
    labels = {
        name: mocks.named(name, "kubernetes:metal3.io/v1alpha1:BareMetalHost").inputs["metadata"]["labels"]
        for name in ("hv-1", "bm-1", "bm-2", "dpu-host-1")
    }
    assert labels["hv-1"]["nvidia.com/gpu.workload.config"] == "vm-passthrough"
    assert labels["bm-1"]["nvidia.com/device-plugin.config"] == "blue-gpu-sharing"
    assert labels["bm-2"]["nvidia.com/mig.config"] == "all-1g.5gb"
    assert "nvidia.com/gpu.workload.config" not in labels["dpu-host-1"]
    workers = mocks.named("workers", "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment").inputs[
        "spec"
    ]
    gpu_values = yaml.safe_load(workers["serviceSpec"]["services"][0]["values"])
    assert set(gpu_values["devicePlugin"]["config"]["data"]) == {"blue-gpu-sharing", "green-gpu-sharing"}
    assert gpu_values["mig"] == {"strategy": "single"}


def test_report_and_summary(mocks: Recorder, tmp_path: Path) -> None:
    estate = run(lambda: _estate(tmp_path))
    report = value(estate.report)
    assert [h["name"] for h in report["hosts"]] == ["hv-1", "bm-1", "bm-2", "dpu-host-1"]
    assert report["dpus"][0] == {
        "name": "dpu-hv-1",
        "host": "hv-1",
        "mode": "DpuMode",
        "host_privilege_level": "Restricted",
        "host_rshim": "Disabled",
        "reset_pending": False,
        "flavor": "dpu-hv-1-flavor",
    }
    assert report["composer"]["excluded_devices"] == ["gpu0", "gpu1", "gpu5"]
    assert [t["name"] for t in report["tenants"]] == ["red", "blue", "green"]
    text = render_summary(report)
    assert "Estate test (staging)" in text and "dpu-hv-1" in text and "red-k8s" in text


def test_preview_registers_the_same_resources(tmp_path: Path) -> None:
    """Nothing is created inside .apply(): with unknown dynamic outputs (preview) the same set
    of resources is registered."""
    seen = []
    for preview in (False, True):
        recorder = Recorder()
        m = _Mocks(preview=preview)
        pulumi.runtime.set_mocks(
            m, project="composable-gpu", stack="test", preview=preview, monitor=_RecordingMonitor(m, recorder)
        )
        run(lambda: _estate(tmp_path))
        seen.append(sorted((r.typ, r.name, r.parent) for r in recorder.registrations))
    assert seen[0] == seen[1]


def test_dev_stack_labels_the_lab_nodes(mocks: Recorder, tmp_path: Path) -> None:
    cfg = load_stack_file(ROOT / "Pulumi.dev.yaml")
    run(lambda: Estate("estate", EstateArgs(config=cfg, stack="dev", project_root=ROOT)))
    patches = mocks.of_type("kubernetes:core/v1:NodePatch")
    assert sorted(p.inputs["metadata"]["name"] for p in patches) == ["blade-slot-1", "blade-slot-2"]
    assert all(
        p.inputs["metadata"]["labels"] == {"nvidia.com/gpu.workload.config": "container"} for p in patches
    )
    provider = mocks.named("estate-mothership", "pulumi:providers:kubernetes").inputs
    assert provider["kubeconfig"] == str(ROOT / ".lab" / "kubeconfig")
    posture = mocks.named("dpu-blade-slot-1-posture", "pulumi-python:dynamic/redfish:DpuPosture").inputs
    assert posture["ca_bundle"] == str(ROOT / ".lab" / "sim-state" / "redfish" / "tls" / "ca.pem")
    assert mocks.of_type("composable:infra:GpuComposition") == []


def _run_program(config: dict[str, Any], **other_keys: str) -> None:
    """Run ``__main__.py`` with ``config`` as the estate and ``other_keys`` as further config keys."""
    pulumi.runtime.set_all_config(
        {"composable-gpu:estate": json.dumps(config), **other_keys}, ["composable-gpu:estate"]
    )
    try:
        run(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"))
    finally:
        pulumi.runtime.set_all_config({})


def _run_program_on_folder(folder: Path, credentials: dict[str, Any]) -> None:
    """Run ``__main__.py`` with ``folder`` as the stack's inventory and ``credentials`` as its sets."""
    pulumi.runtime.set_all_config(
        {"composable-gpu:inventory": str(folder), "composable-gpu:credentials": json.dumps(credentials)},
        ["composable-gpu:credentials"],
    )
    try:
        run(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"))
    finally:
        pulumi.runtime.set_all_config({})


DEV_CREDENTIALS = {"director": {"username": "admin", "password": "lab-director-password"},
                   "bmc": {"username": "root", "password": "lab-bmc-password"}}


def test_program_reads_the_inventory_folder(mocks: Recorder) -> None:
    _run_program_on_folder(ROOT / "environments" / "dev", DEV_CREDENTIALS)
    creds = mocks.named("blade-slot-2-bmc-credentials", "kubernetes:core/v1:Secret").inputs
    assert "blade-slot-2" in {r.name for r in mocks.of_type("composable:infra:Host")}
    assert unwrap(creds["stringData"]) == {"username": "root", "password": "lab-bmc-password"}


def test_program_names_the_inventory_file_of_a_problem_and_registers_nothing(
    mocks: Recorder, tmp_path: Path
) -> None:
    folder = Path(shutil.copytree(ROOT / "environments" / "dev", tmp_path / "dev"))
    hosts = folder / "hosts" / "lab-workers.yaml"
    hosts.write_text(hosts.read_text().replace('"52:54:00:00:01:02"', '"52:54:00:00:01"'))
    with pytest.raises(pulumi.RunError) as err:
        _run_program_on_folder(folder, DEV_CREDENTIALS)
    assert f"  - {hosts}: hosts[1].boot_mac: " in str(err.value)
    assert mocks.registrations == []
    # a password written in an inventory file is refused the same way, naming file and key
    with_password = "      credential: bmc\n      password: hunter2\n"
    hosts.write_text(hosts.read_text().replace("      credential: bmc\n", with_password, 1))
    with pytest.raises(pulumi.RunError) as err:
        _run_program_on_folder(folder, DEV_CREDENTIALS)
    assert f"  - {hosts}: hosts[0].bmc.password: a secret in plain text in an inventory file is refused" \
        in str(err.value)
    assert "hunter2" not in str(err.value)
    assert mocks.registrations == []


def test_program_registers_nothing_for_an_invalid_config(mocks: Recorder) -> None:
    raw = valid_estate()
    raw["tenants"][1]["networks"][0]["vxlan_id"] = 16777216
    raw["hypervisor_clusters"][0]["hosts"].append("ghost")
    with pytest.raises(pulumi.RunError) as err:
        _run_program(raw)
    assert "tenants[1].networks[0].vxlan_id: 16777216 is outside 1..16777215" in str(err.value)
    assert mocks.registrations == []


def test_program_refuses_a_key_of_its_namespace_it_does_not_read(mocks: Recorder) -> None:
    other_keys = {"composable-gpu:idle_timeout": "30", "aws:region": "eu-west-1", "pulumi:tags": "{}"}
    with pytest.raises(pulumi.RunError) as err:
        _run_program(valid_estate(), **other_keys)
    assert str(err.value).splitlines()[1:] == [
        "  - composable-gpu:idle_timeout: unknown config key "
        "(composable-gpu reads only 'composable-gpu:estate', 'composable-gpu:inventory', "
        "'composable-gpu:credentials', 'composable-gpu:role')"
    ]
    assert mocks.registrations == []


def test_program_builds_the_estate_from_config(mocks: Recorder) -> None:
    _run_program(valid_estate())
    assert mocks.named("estate", "composable:infra:Estate").inputs["environment"] == "staging"
    assert len(mocks.of_type("composable:infra:Host")) == 4


def test_exclusion_list_is_known_at_preview_when_devices_are_named(tmp_path: Path) -> None:
    raw = valid_estate()
    raw["gpu_compositions"][0] = {
        "host": "hv-1",
        "pool": "pool-a",
        "device_names": ["gpu1", "gpu0"],
        "model": "NVIDIA-A100-PCIE-40GB",
    }
    recorder = Recorder()
    m = _Mocks(preview=True)
    pulumi.runtime.set_mocks(
        m, project="composable-gpu", stack="test", preview=True, monitor=_RecordingMonitor(m, recorder)
    )
    run(lambda: _estate(tmp_path, raw))
    assert recorder.named("composer", "composable:infra:Composer").inputs["excluded_devices"] == [
        "gpu0",
        "gpu1",
        "gpu5",
    ]


def test_exclusion_list_is_unknown_at_preview_with_count_based_compositions(tmp_path: Path) -> None:
    from pulumi.output import Unknown

    recorder = Recorder()
    m = _Mocks(preview=True)
    pulumi.runtime.set_mocks(
        m, project="composable-gpu", stack="test", preview=True, monitor=_RecordingMonitor(m, recorder)
    )
    run(lambda: _estate(tmp_path))
    assert isinstance(
        recorder.named("composer", "composable:infra:Composer").inputs["excluded_devices"], Unknown
    )


def test_product_declared_in_config_reaches_kubevirt_and_tenant_vms(mocks: Recorder, tmp_path: Path) -> None:
    """A GPU declared under ``gpu_products`` is looked up like a built-in one: the passthrough
    cluster permits its PCI ID and the tenant's worker VMs ask for its resource."""
    from tests.config.factories import A30

    raw = valid_estate()
    raw["gpu_products"] = [dict(A30)]
    raw["fabric"]["pools"][0]["models"].append("NVIDIA-A30")
    raw["gpu_compositions"][0]["model"] = "NVIDIA-A30"
    red = raw["tenants"][0]
    red["allowed_models"] = ["NVIDIA-A30"]
    red["clusters"][0]["gpu_model"] = "NVIDIA-A30"
    run(lambda: _estate(tmp_path, raw))
    hv = mocks.named("hv", "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment").inputs
    kubevirt = next(s for s in hv["spec"]["serviceSpec"]["services"] if s["name"] == "kubevirt")
    assert "pciVendorSelector: 10DE:20B7" in kubevirt["values"]
    assert "resourceName: nvidia.com/GA100_A30_PCIE" in kubevirt["values"]
    cd = mocks.named("red-red-k8s", "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment").inputs
    assert {g["deviceName"] for g in cd["spec"]["config"]["worker"]["devices"]["gpus"]} == {
        "nvidia.com/GA100_A30_PCIE"
    }


def test_hypervisor_gpus_gathers_the_cluster_gpu_settings_from_the_estate() -> None:
    from components.estate import hypervisor_gpus
    from components.manifests import device_plugin_config, to_yaml

    cfg = load_estate(valid_estate())  # workers: bm-1 time-slicing (blue), bm-2 MIG (green)
    hv, workers = (hypervisor_gpus(cfg, c) for c in cfg.hypervisor_clusters)
    assert hv.models == ["NVIDIA-A100-PCIE-40GB"]
    assert not hv.device_plugin_configs and hv.mig_strategy is None
    # T4 composed statically; both models of pool-a by the composer, which targets workers
    assert workers.models == ["NVIDIA-A100-PCIE-40GB", "Tesla-T4"] and workers.mig_strategy == "single"
    blue, green = (t.gpu_sharing for t in cfg.tenants[1:3])
    assert blue is not None and green is not None
    assert dict(workers.device_plugin_configs) == {
        "blue-gpu-sharing": to_yaml(device_plugin_config(blue)),
        "green-gpu-sharing": to_yaml(device_plugin_config(green)),
    }
    assert workers.device_plugin_default is None and workers.catalogue == cfg.gpu_catalogue()


def test_device_plugin_default_only_when_every_host_of_the_cluster_shares_one_config(
    mocks: Recorder, tmp_path: Path
) -> None:
    """``devicePlugin.config.default`` reaches every node of the cluster without a node label, so it is
    set only when all of the cluster's hosts use the same sharing config."""
    from components.estate import device_plugin_default

    mixed = load_estate(valid_estate())  # workers: bm-1 time-slicing (blue), bm-2 MIG (green)
    assert device_plugin_default(mixed, "workers") is None
    raw = valid_estate()
    raw["tenants"][2].pop("gpu_sharing")
    raw["tenants"][1]["gpu_sharing"]["hosts"] = ["bm-1", "bm-2"]
    raw["composer"]["pools"] = [{"name": "blue", "hosts": ["bm-1", "bm-2"]}]  # blue time-slices both
    uniform = load_estate(raw)
    assert device_plugin_default(uniform, "workers") == "blue-gpu-sharing"
    run(lambda: _estate(tmp_path, raw))
    workers = mocks.named("workers", "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment").inputs
    gpu_operator = next(s for s in workers["spec"]["serviceSpec"]["services"] if s["name"] == "gpu-operator")
    assert "default: blue-gpu-sharing" in gpu_operator["values"]
