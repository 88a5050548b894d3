"""Cross-field rules: one case per rule, each breaking the valid estate in one place and
checking the exact problem (path and message). A meta-test makes sure every rule has a case."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stack_config import EstateConfigError, load_estate, load_stack_file
from stack_config.models import EstateConfig
from stack_config.rules import RULES, check_rules
from tests.config.factories import A30, host_prep, two_composers, valid_estate

ROOT = Path(__file__).resolve().parents[2]
Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    """Mutation setting ``a.b[0].c`` to ``value``."""

    def mutate(raw: dict[str, Any]) -> None:
        parts: list[str | int] = []
        for token in path.replace("]", "").replace("[", ".").split("."):
            parts.append(int(token) if token.isdigit() else token)
        node: Any = raw
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = value

    return mutate


def _do(*mutations: Mutation) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        for m in mutations:
            m(raw)

    return mutate


def _append(path: str, value: Any) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        node: Any = raw
        for token in path.split("."):
            node = node[int(token)] if token.isdigit() else node[token]
        node.append(value)

    return mutate


def _drop_dpu(index: int) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        raw["hosts"][index].pop("dpu", None)

    return mutate


# rule name -> (mutation, expected problem)
CASES: dict[str, tuple[Mutation, str]] = {
    "unique_host_names": (
        _set("hosts[1].name", "hv-1"),
        "hosts[1].name: duplicate host name 'hv-1' (first at hosts[0].name)",
    ),
    "unique_boot_macs": (
        _set("hosts[1].boot_mac", "52:54:00:00:00:01"),
        "hosts[1].boot_mac: duplicate boot MAC '52:54:00:00:00:01' (first at hosts[0].boot_mac)",
    ),
    "unique_bmc_endpoints": (
        _set("hosts[1].bmc.endpoint", "https://10.0.0.1"),
        "hosts[1].bmc.endpoint: duplicate BMC endpoint 'https://10.0.0.1/redfish/v1/Systems/1' "
        "(first at hosts[0].bmc.endpoint)",
    ),
    "unique_dpu_names": (
        _do(_set("hosts[0].dpu.name", "dpu-x"), _set("hosts[1].dpu.name", "dpu-x")),
        "hosts[1].dpu.name: duplicate DPU name 'dpu-x' (first at hosts[0].dpu.name)",
    ),
    "unique_pool_names": (
        _append("fabric.pools", {"name": "pool-a", "models": ["Tesla-T4"]}),
        "fabric.pools[1].name: duplicate pool name 'pool-a' (first at fabric.pools[0].name)",
    ),
    "unique_tenant_names": (
        _set("tenants[2].name", "red"),
        "tenants[2].name: duplicate tenant name 'red' (first at tenants[0].name)",
    ),
    "tenant_namespaces_valid": (
        _set("tenants[2].namespace", "kube-system"),
        "tenants[2].namespace: namespace 'kube-system' is reserved",
    ),
    "unique_network_names": (
        _set("tenants[1].networks[1].name", "blue-a"),
        "tenants[1].networks[1].name: duplicate network name 'blue-a' (first at tenants[1].networks[0].name)",
    ),
    "unique_vxlan_ids": (
        _set("tenants[1].networks[0].vxlan_id", 101),
        "tenants[1].networks[0].vxlan_id: duplicate VXLAN ID '101' (first at "
        "tenants[0].networks[0].vxlan_id)",
    ),
    "unique_vlan_ids": (
        _set("tenants[1].networks[1].vlan_id", 11),
        "tenants[1].networks[1].vlan_id: duplicate VLAN ID '11' (first at tenants[0].networks[0].vlan_id)",
    ),
    "cidrs_do_not_overlap": (
        _set("tenants[1].networks[1].cidr", "10.1.0.128/25"),
        "tenants[1].networks[1].cidr: 10.1.0.128/25 overlaps the network at tenants[0].networks[0].cidr",
    ),
    "gateway_inside_cidr": (
        _set("tenants[1].networks[0].gateway", "10.9.0.1"),
        "tenants[1].networks[0].gateway: 10.9.0.1 is outside 10.2.0.0/24",
    ),
    "unique_cluster_names": (
        _set("hypervisor_clusters[1].name", "hv"),
        "hypervisor_clusters[1].name: duplicate cluster name 'hv' (first at hypervisor_clusters[0].name)",
    ),
    "cluster_hosts_exist": (
        _append("hypervisor_clusters.0.hosts", "hv-9"),
        "hypervisor_clusters[0].hosts[1]: host 'hv-9' is not defined in hosts",
    ),
    "host_in_at_most_one_cluster": (
        _append("hypervisor_clusters.1.hosts", "bm-1"),
        "hypervisor_clusters[1].hosts[2]: duplicate cluster member 'bm-1' (first at "
        "hypervisor_clusters[1].hosts[0])",
    ),
    "host_role_fits_cluster": (
        _set("hosts[1].role", "hypervisor"),
        "hypervisor_clusters[1].hosts[0]: host 'bm-1' has role 'hypervisor'; a container cluster needs role "
        "'baremetal-worker'",
    ),
    "vm_mode_needs_kubevirt": (
        _set("hypervisor_clusters[0].kubevirt", False),
        "hypervisor_clusters[0].kubevirt: must be true: GPU workload mode vm-passthrough runs "
        "GPUs in KubeVirt VMs",
    ),
    "dpu_cluster_hosts_have_dpus": (
        _set("dpu_cluster.hosts", ["bm-2"]),
        "dpu_cluster.hosts[0]: host 'bm-2' has no dpu",
    ),
    "dpu_cluster_host_role_needs_dpu": (
        _drop_dpu(3),
        "hosts[3].dpu: host 'dpu-host-1' has role dpu-cluster-host but no dpu",
    ),
    "dpu_mlxconfig_valid": (
        _set("hosts[0].dpu.mlxconfig", {"VIRTIO_NET_EMULATION_ENABLE": 1, "VIRTIO_NET_EMULATION_NUM_PF": 40}),
        "hosts[0].dpu.mlxconfig.VIRTIO_NET_EMULATION_NUM_PF: 40 is out of range 0..31 (source: BlueField "
        "BSP 'VirtIO-net Emulated Devices': up to 31 PFs)",
    ),
    "ssh_prep_kernel_settings_supported": (
        _do(_set("hosts[0].prep", host_prep()), _set("hosts[0].kernel_args", ["iommu=pt", 'opt="a"'])),
        "hosts[0].kernel_args[1]: 'opt=\"a\"' is not a kernel argument (name or name=value) that can be "
        "applied over SSH (prep is set)",
    ),
    "unique_ssh_prep_targets": (
        _do(_set("hosts[0].prep", host_prep()), _set("hosts[2].prep", host_prep())),
        "hosts[2].prep.host: duplicate host prep target '10.0.2.1:22' (first at hosts[0].prep.host)",
    ),
    "cluster_templates_declared": (
        _set("tenants[0].clusters[0].template", "kubevirt-standalone-cp"),
        "tenants[0].clusters[0].template: ClusterTemplate 'kubevirt-standalone-cp' is not declared in "
        "catalog.cluster_templates (declared: capm3-hosted-cp, dpu-hosted-cp, kubevirt-hosted-cp)",
    ),
    "vgpu_clusters_complete": (
        _set("hypervisor_clusters[0].gpu_workload_mode", "vm-vgpu"),
        "hypervisor_clusters[0].vgpu_manager: required for vm-vgpu (repository and version of the vGPU "
        "Manager image)",
    ),
    "gpu_products_new": (
        _set("gpu_products", [{**A30, "product": "NVIDIA-L40S"}]),
        "gpu_products[0].product: 'NVIDIA-L40S' is built in; remove it from gpu_products",
    ),
    "pool_models_known": (
        _set("fabric.pools[0].models", ["Tesla-T4", "NVIDIA-A100-PCIE-40GB", "GeForce-RTX-4090"]),
        "fabric.pools[0].models[2]: unknown GPU model 'GeForce-RTX-4090' (known: "
        "NVIDIA-A100-80GB-PCIe, NVIDIA-A100-PCIE-40GB, NVIDIA-H100-NVL, NVIDIA-H200-NVL, NVIDIA-L4, "
        "NVIDIA-L40S, NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition, Tesla-T4; declare others under "
        "gpu_products)",
    ),
    "allowed_models_offered": (
        _do(
            _set("fabric.pools[0].models", ["NVIDIA-A100-PCIE-40GB"]), _set("gpu_compositions[1].model", None)
        ),
        "tenants[1].allowed_models[0]: model 'Tesla-T4' is not offered by any pool",
    ),
    "tenant_cluster_hypervisor_exists": (
        _set("tenants[1].clusters[0].hypervisor_cluster", "workers"),
        "tenants[1].clusters[0].hypervisor_cluster: hypervisor cluster 'workers' does not run KubeVirt",
    ),
    "tenant_cluster_networks_exist": (
        _set("tenants[1].clusters[0].networks", ["red-net"]),
        "tenants[1].clusters[0].networks[0]: network 'red-net' is not a network of tenant 'blue'",
    ),
    "tenant_cluster_gpu_request_complete": (
        _set("tenants[0].clusters[0].gpu_count_per_worker", 0),
        "tenants[0].clusters[0].gpu_count_per_worker: must be at least 1 for gpu_mode passthrough",
    ),
    "tenant_cluster_gpu_model_allowed": (
        _set("tenants[0].allowed_models", ["Tesla-T4"]),
        "tenants[0].clusters[0].gpu_model: model 'NVIDIA-A100-PCIE-40GB' is not in the "
        "allowed_models of tenant "
        "'red'",
    ),
    "tenant_cluster_gpu_mode_matches": (
        _set("tenants[0].clusters[0].gpu_mode", "vgpu"),
        "tenants[0].clusters[0].gpu_mode: vgpu needs a vm-vgpu hypervisor cluster; 'hv' is vm-passthrough",
    ),
    "tenant_cluster_vgpu_type_known": (
        _set("tenants[0].clusters[0].vgpu_type", "GRID A100-4C"),
        "tenants[0].clusters[0].vgpu_type: set but gpu_mode is passthrough",
    ),
    "composition_references_exist": (
        _set("gpu_compositions[0].host", "dpu-host-1"),
        "gpu_compositions[0].host: host 'dpu-host-1' is a dpu-cluster-host and runs no GPU workloads",
    ),
    "composition_host_single_pool": (
        _do(
            _append("fabric.pools", {"name": "pool-b", "models": ["Tesla-T4"]}),
            _append("gpu_compositions", {"host": "bm-1", "pool": "pool-b", "count": 1}),
        ),
        "gpu_compositions[2].pool: host 'bm-1' already draws from pool 'pool-a' "
        "(gpu_compositions[1]); a machine "
        "is in one Director group",
    ),
    "composition_count_consistent": (
        _set("gpu_compositions[1].count", 3),
        "gpu_compositions[1].count: 3 does not match the 1 device_names",
    ),
    "composition_model_allowed": (
        _set("gpu_compositions[1].model", "NVIDIA-A100-PCIE-40GB"),
        "gpu_compositions[1].model: model 'NVIDIA-A100-PCIE-40GB' is not in the allowed_models "
        "of tenant 'blue'",
    ),
    "composition_devices_unique": (
        _append("gpu_compositions", {"host": "bm-2", "pool": "pool-a", "device_names": ["gpu5"]}),
        "gpu_compositions[2].device_names[0]: duplicate device 'gpu5' (first at "
        "gpu_compositions[1].device_names[0])",
    ),
    "pool_capacity": (
        _set("fabric.pools[0].size", 2),
        "fabric.pools[0].size: static compositions take 3 GPUs but the pool holds 2",
    ),
    "tenant_gpu_quota": (
        _set("tenants[0].gpu_quota", 1),
        "tenants[0].gpu_quota: tenant 'red' uses 2 GPUs (clusters and compositions) but its quota is 1",
    ),
    "passthrough_capacity": (
        _do(_set("tenants[0].clusters[0].workers", 2), _set("tenants[0].gpu_quota", 8)),
        "hypervisor_clusters[0]: tenant clusters need 4 passthrough NVIDIA-A100-PCIE-40GB GPUs "
        "but only 2 are "
        "composed onto its hosts",
    ),
    "gpu_sharing_valid": (
        _set("tenants[1].gpu_sharing.replicas", 1),
        "tenants[1].gpu_sharing.replicas: time-slicing needs replicas >= 2 (got 1)",
    ),
    "gpu_sharing_hosts_exclusive": (
        _set("tenants[2].gpu_sharing.hosts", ["bm-2", "bm-1"]),
        "tenants[2].gpu_sharing.hosts[1]: duplicate shared-GPU host 'bm-1' (first at "
        "tenants[1].gpu_sharing.hosts[0]): tenants 'blue' and 'green' would share its GPUs; give each "
        "tenant its own hosts",
    ),
    "gpu_sharing_host_in_tenant_pool": (
        _set("composer.pools[0].tenants", ["blue", "green"]),
        "tenants[1].gpu_sharing.hosts[0]: host 'bm-1' time-shares GPUs of tenant 'blue' (time-slicing) "
        "but serves composer pool 'blue' of 'green' too: the composer would place their pods on them; "
        "give it a pool of 'blue' alone",
    ),
    "gpu_sharing_one_mig_strategy_per_cluster": (
        _set(
            "tenants[1].gpu_sharing",
            {"strategy": "mig", "hosts": ["bm-1"], "mig_config": "all-1g.5gb", "mig_strategy": "mixed"},
        ),
        "tenants[2].gpu_sharing.mig_strategy: MIG strategy 'single' of tenant 'green' differs from "
        "'mixed' of tenant 'blue' in hypervisor cluster 'workers': the GPU Operator sets one MIG "
        "strategy per cluster (ClusterPolicy mig.strategy)",
    ),
    "gpu_sharing_hosts_run_pods": (
        _set("tenants[2].gpu_sharing.hosts", ["hv-1"]),
        "tenants[2].gpu_sharing.hosts[0]: host 'hv-1' has role 'hypervisor'; GPU sharing needs "
        "a baremetal-worker",
    ),
    "composers_apart": (
        _do(two_composers, _set("composers[1].owner_tag", "gpu-composer")),
        "composers[1].owner_tag: duplicate owner tag 'gpu-composer' (first at composers[0].owner_tag) "
        "(rule composers_apart: two composers sharing a Director must not meet)",
    ),
    "composer_references_exist": (
        _set("composer.target_cluster", "hv"),
        "composer.target_cluster: cluster 'hv' runs GPUs in VMs (vm-passthrough); the composer "
        "serves GPU pods on "
        "container-mode clusters",
    ),
    "composer_mode_fits_cluster": (
        _set("composer.mode", "dra"),
        "composer.mode: mode 'dra' needs Kubernetes 1.36 or newer (DRA binding conditions and extended "
        "resources on by default); cluster 'workers' runs k0s v1.33.1+k0s.0: raise its k0s_version or "
        "use mode 'deviceplugin'",
    ),
    "adopted_cluster_kubeconfig": (
        _set("hypervisor_clusters[0].context", "admin@hv"),
        "hypervisor_clusters[0].context: context without kubeconfig: a context names an entry of an "
        "adopted cluster's kubeconfig file; set kubeconfig too, or drop context to read Secret "
        "hv-kubeconfig on the mothership",
    ),
    "composer_pool_references_exist": (
        _set("composer.pools[0].hosts[0]", "hv-1"),
        "composer.pools[0].hosts[0]: host 'hv-1' is not in the composer's target cluster 'workers': "
        "the composer never sees its Node",
    ),
    "composer_pool_has_hosts": (
        _set("composer.pools[1].hosts", []),
        "composer.pools[1].hosts: pool 'green' has no host, so the pods of 'green' would never get "
        "GPUs: list hosts or set hypervisor_cluster",
    ),
    "composer_host_in_one_pool": (
        _set("composer.pools[1].hosts", ["bm-2", "bm-1"]),
        "composer.pools[1].hosts: host 'bm-1' is already in another pool (composer.pools[0].hosts); "
        "a host serves one pool",
    ),
    "composer_pool_quota_fits": (
        _set("composer.pools[1].quota_gpus", 6),
        "composer.pools[1].quota_gpus: pool 'green' has a quota of 6 GPUs but the composer can hand "
        "out 5 (fabric pool 'pool-a': size minus static compositions); lower the quota (quota_gpus or "
        "the tenants' gpu_quota)",
    ),
    "static_host_in_tenant_pool": (
        _set("gpu_compositions[1].host", "bm-2"),
        "gpu_compositions[1].host: host 'bm-2' carries GPUs of tenant 'blue' but serves composer pool "
        "'green' of 'green'; move it to the pool of 'blue'",
    ),
    "lab_only_settings": (
        _set("mothership.label_nodes", True),
        "mothership.label_nodes: only allowed in environment lab, not staging",
    ),
    "bmc_endpoints_are_https_outside_lab": (
        _set("hosts[2].bmc.endpoint", "http://10.0.0.3"),
        "hosts[2].bmc.endpoint: http://10.0.0.3 must use https in staging",
    ),
}


def _problems(mutation: Mutation) -> list[str]:
    """Every problem the loader reports for the mutated valid estate."""
    raw = valid_estate()
    mutation(raw)
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    return [str(p) for p in err.value.problems]


def _rule_problems(rule: str, mutation: Mutation) -> list[str]:
    """The problems one rule finds in the mutated (structurally valid) estate."""
    raw = valid_estate()
    mutation(raw)
    fn = next(r for r in RULES if r.__name__ == rule)
    return [str(p) for p in fn(EstateConfig.model_validate(raw))]


def test_every_rule_has_a_case() -> None:
    assert sorted(CASES) == sorted(r.__name__ for r in RULES)


def test_valid_estate_breaks_no_rule() -> None:
    assert check_rules(load_estate(valid_estate())) == []


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule(rule: str) -> None:
    mutation, expected = CASES[rule]
    assert _rule_problems(rule, mutation) == [expected]  # the rule itself finds exactly this
    assert expected in _problems(mutation)  # and the loader reports it


# Second cases for rules with several branches.


def test_mig_sharing_needs_config_of_a_mig_capable_model() -> None:
    msgs = _problems(
        _do(_set("tenants[2].allowed_models", []), _set("tenants[2].gpu_sharing.mig_config", None))
    )
    assert msgs == [
        "tenants[2].gpu_sharing.strategy: mig needs a MIG-capable model in the allowed_models "
        "of tenant 'green'",
        "tenants[2].gpu_sharing.mig_config: required for strategy mig (e.g. all-1g.5gb)",
    ]


def test_mig_config_must_be_known() -> None:
    msgs = _problems(_set("tenants[2].gpu_sharing.mig_config", "all-9g.99gb"))
    assert len(msgs) == 1 and msgs[0].startswith(
        "tenants[2].gpu_sharing.mig_config: 'all-9g.99gb' is not a MIG config"
    )


def test_mig_single_needs_a_config_of_one_profile() -> None:
    msgs = _problems(_set("tenants[2].gpu_sharing.mig_config", "all-balanced"))
    assert msgs == [
        "tenants[2].gpu_sharing.mig_config: MIG strategy single needs one MIG profile per node; "
        "'all-balanced' creates 1g.5gb, 2g.10gb, 3g.20gb on NVIDIA-A100-PCIE-40GB (GFD would label it "
        "NVIDIA-A100-PCIE-40GB-MIG-INVALID); use strategy mixed or an all-<profile> config"
    ]
    mixed = _do(
        _set("tenants[2].gpu_sharing.mig_config", "all-balanced"),
        _set("tenants[2].gpu_sharing.mig_strategy", "mixed"),
    )
    raw = valid_estate()
    mixed(raw)
    assert load_estate(raw).tenants[2].gpu_sharing is not None


def test_mig_config_needs_a_known_layout() -> None:
    msgs = _problems(
        _do(
            _set("gpu_products", [{**A30, "mig_layouts": {}}]),
            _append("fabric.pools.0.models", "NVIDIA-A30"),
            _set("tenants[2].allowed_models", ["NVIDIA-A30"]),
            _set("tenants[2].gpu_sharing.mig_config", "all-4g.24gb"),
        )
    )
    assert msgs == [
        "tenants[2].gpu_sharing.mig_config: no MIG layout of 'all-4g.24gb' is known for NVIDIA-A30: a MIG "
        "node serves only GPUs whose layout of its config is known (gpu_products[].mig_layouts)"
    ]


def test_composition_needs_count_or_names() -> None:
    assert _rule_problems("composition_count_consistent", _set("gpu_compositions[0].count", None)) == [
        "gpu_compositions[0]: set count or device_names"
    ]


def test_dra_mode_runs_the_composer_in_its_target_cluster() -> None:
    """The DRA kubelet plugin's DaemonSet comes with the composer's chart, so a composer on the
    mothership cannot serve a child cluster in mode ``dra``."""
    mutation = _do(_set("composer.mode", "dra"), _set("composer.runs_on", "mothership"),
                   _set("hypervisor_clusters[1].k0s_version", "v1.36.3+k0s.0"))
    assert _rule_problems("composer_mode_fits_cluster", mutation) == [
        "composer.runs_on: mode 'dra' needs the composer's chart in its target cluster: its DRA kubelet "
        "plugin (a DaemonSet) must run on that cluster's nodes, which a release on the mothership cannot "
        "place; drop runs_on or use mode 'deviceplugin'"
    ]
    assert _rule_problems("composer_mode_fits_cluster", _do(
        _set("composer.mode", "dra"), _set("hypervisor_clusters[1].k0s_version", "v1.36.3+k0s.0"))) == []


def test_composer_target_must_exist() -> None:
    assert _problems(_set("composer.target_cluster", "nowhere")) == [
        "composer.target_cluster: cluster 'nowhere' is not defined (use a hypervisor cluster or 'mothership')"
    ]


def test_composer_may_target_the_mothership() -> None:
    raw = valid_estate()
    raw["composer"]["target_cluster"] = "mothership"
    assert load_estate(raw).composer.target_cluster == "mothership"  # type: ignore[union-attr]


def test_cluster_named_mothership_is_reserved() -> None:
    msgs = _problems(
        _do(_set("hypervisor_clusters[1].name", "mothership"), _set("composer.target_cluster", "mothership"))
    )
    assert msgs == ["hypervisor_clusters[1].name: 'mothership' is reserved for the management cluster"]


def test_tenant_cluster_without_networks() -> None:
    raw_mut = _do(_set("tenants[0].networks", []))
    assert _problems(raw_mut) == [
        "tenants[0].clusters[0]: tenant 'red' has no networks to attach the cluster to"
    ]


def test_long_default_namespace() -> None:
    msgs = _problems(_do(_set("tenants[2].name", "g" * 60), _set("composer.pools[1].tenants", ["g" * 60])))
    assert msgs == [
        f"tenants[2].namespace: namespace 'tenant-{'g' * 60}' is longer than 63 characters; "
        "set a shorter namespace"
    ]


def test_rules_run_only_on_structurally_valid_config() -> None:
    # a broken field and a broken reference: only the structural problem is reported
    msgs = _problems(_do(_set("hosts[0].boot_mac", "bad"), _append("hypervisor_clusters.0.hosts", "nope")))
    assert [m.split(":")[0] for m in msgs] == ["hosts[0].boot_mac"]


@pytest.mark.parametrize("stack", ["dev", "production"])
def test_stack_files_are_valid(stack: str) -> None:
    estate: EstateConfig = load_stack_file(ROOT / f"Pulumi.{stack}.yaml", require_secrets=(stack == "dev"))
    assert estate.environment == ("lab" if stack == "dev" else "production")


def test_cluster_template_names_are_unique() -> None:
    raw = valid_estate()
    dup = {
        "name": "kubevirt-hosted-cp",
        "chart": "kubevirt-hosted-cp",
        "version": "1.0.1",
        "repository": "kcm-templates",
        "providers": ["infrastructure-kubevirt"],
        "control_plane": "K0sControlPlane",
    }
    raw["catalog"] = {"cluster_templates": [dup, dup]}
    msgs = _problems(lambda r: r.update(catalog=raw["catalog"]))
    assert "catalog.cluster_templates[1].name: duplicate ClusterTemplate 'kubevirt-hosted-cp' (first at " \
        "catalog.cluster_templates[0].name)" in msgs


@pytest.mark.parametrize("version", ["1.x", ">=1.0.0", "*", "1.0"])
def test_template_versions_are_pinned(version: str) -> None:
    msgs = _problems(_set("catalog", {"gpu_operator": {
        "name": "gpu-operator", "chart": "gpu-operator", "version": version, "repository": "nvidia",
        "namespace": "gpu-operator"}}))
    assert len(msgs) == 1 and msgs[0].startswith("catalog.gpu_operator.version: "), msgs


def test_vgpu_manager_only_for_vm_vgpu() -> None:
    manager = {"repository": "registry.example/nvidia", "version": "580.82.07"}
    assert _rule_problems("vgpu_clusters_complete", _set("hypervisor_clusters[1].vgpu_manager", manager)) == [
        "hypervisor_clusters[1].vgpu_manager: set but gpu_workload_mode is container"
    ]


def test_vgpu_cluster_serves_one_vgpu_type() -> None:
    def two_types(raw: dict[str, Any]) -> None:
        raw["hypervisor_clusters"][0].update(
            gpu_workload_mode="vm-vgpu",
            vgpu_manager={"repository": "r.example/nvidia", "version": "580.82.07"},
        )
        first = raw["tenants"][0]["clusters"][0]
        first.update(gpu_mode="vgpu", gpu_model="NVIDIA-A100-PCIE-40GB", vgpu_type="GRID A100-4C")
        second = {**first, "name": "red-k8s-2", "vgpu_type": "GRID A100-8C"}
        raw["tenants"][0]["clusters"].append(second)

    assert _rule_problems("vgpu_clusters_complete", two_types) == [
        "hypervisor_clusters[0]: tenant clusters on it use several vGPU types (GRID A100-4C, GRID A100-8C); "
        "use one per hypervisor cluster"
    ]


# Composer pools: second cases.


def test_composer_pool_of_a_cluster_and_a_shared_pool() -> None:
    """A pool may name a hypervisor cluster (its hosts join) and several tenants (shared); the
    default quota is the sum of their gpu_quota, checked against the composer's pool size."""
    pools = [{"name": "shared", "tenants": ["blue", "green"], "hypervisor_cluster": "workers"}]
    # blue time-slices bm-1, which a pool shared with green may not hold (gpu_sharing_host_in_tenant_pool)
    no_time_slicing = _set("tenants[1].gpu_sharing", None)
    raw = valid_estate()
    _do(_set("composer.pools", pools), _set("tenants[2].gpu_quota", 3), no_time_slicing)(raw)
    estate = load_estate(raw)
    assert estate.composer_host_pools() == {"bm-1": "shared", "bm-2": "shared"}
    assert estate.composer_tenant_pool("green") == "shared" and estate.composer_tenant_pool("red") is None
    msgs = _problems(_do(_set("composer.pools", pools), _set("tenants[2].gpu_quota", 4), no_time_slicing))
    assert msgs == [
        "composer.pools[0]: pool 'shared' has a quota of 6 GPUs but the composer can hand out 5 (fabric "
        "pool 'pool-a': size minus static compositions); lower the quota (quota_gpus or the tenants' "
        "gpu_quota)"
    ]


def test_composer_pool_bad_references_each_get_a_message() -> None:
    msgs = _problems(
        _set("composer.pools", [{"name": "nobody", "hosts": ["ghost"], "hypervisor_cluster": "hv"}])
    )
    assert "composer.pools[0].name: tenant 'nobody' is not defined in tenants (set tenants)" in msgs
    assert "composer.pools[0].hosts[0]: host 'ghost' is not defined in hosts" in msgs
    assert "composer.pools[0].hypervisor_cluster: cluster 'hv' is not the composer's target cluster " \
        "'workers'" in msgs
    # the tenant's static GPUs on bm-1 now serve no pool
    assert "gpu_compositions[1].host: host 'bm-1' carries GPUs of tenant 'blue' but serves no composer " \
        "pool, so the composer would give them to pods of any namespace; add it to the pool of 'blue'" in msgs
