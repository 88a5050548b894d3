"""Pure manifest builders: small input/expected cases, and every custom resource the estate
registers validated offline against the upstream CRD schema."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest
import yaml

from components import Estate, EstateArgs
from components.manifests import (
    bmc_address,
    device_plugin_config,
    dpu_flavor_spec,
    gpu_operator_values,
    host_node_labels,
    host_user_data,
    hypervisor_cluster_spec,
    kubevirt_values,
    mlxconfig_parameters,
    tenant_cluster_spec,
)
from stack_config import load_estate
from stack_config.models import CatalogConfig, GpuSharingConfig, HypervisorClusterConfig, TenantClusterConfig
from tests.components.crd_schemas import validation_errors


@pytest.mark.parametrize(
    ("endpoint", "kwargs", "address"),
    [
        ("https://10.0.0.5", {}, "redfish-virtualmedia://10.0.0.5/redfish/v1/Systems/1"),
        ("https://127.0.0.1:18451", {}, "redfish-virtualmedia://127.0.0.1:18451/redfish/v1/Systems/1"),
        ("http://127.0.0.1:8000/", {}, "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1"),
        (
            "https://bmc:443",
            {"driver": "redfish", "system_id": "System.Embedded.1"},
            "redfish://bmc:443/redfish/v1/Systems/System.Embedded.1",
        ),
    ],
)
def test_bmc_address(endpoint: str, kwargs: dict, address: str) -> None:
    assert bmc_address(endpoint, **kwargs) == address


def test_user_data_sets_kernel_args_and_blacklist() -> None:
    text = host_user_data(
        kernel_args=["intel_iommu=on", "iommu=pt", "pci=realloc"], blacklisted_modules=["nouveau"]
    )
    assert text.startswith("#cloud-config\n")
    # readable as written: no YAML line folding of the GRUB line
    assert (
        'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} intel_iommu=on iommu=pt pci=realloc"\n'
        in text
    )
    doc = yaml.safe_load(text)
    files = {f["path"]: f["content"] for f in doc["write_files"]}
    assert files["/etc/default/grub.d/90-composable-gpu.cfg"] == (
        'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} intel_iommu=on iommu=pt pci=realloc"\n'
    )
    assert files["/etc/modprobe.d/blacklist-nouveau.conf"] == "blacklist nouveau\noptions nouveau modeset=0\n"
    assert ["update-grub"] in doc["runcmd"] and ["update-initramfs", "-u"] in doc["runcmd"]
    assert doc["power_state"]["mode"] == "reboot"


def test_mlxconfig_parameters_and_flavor() -> None:
    assert mlxconfig_parameters({"B": 1, "A": "x"}) == ["A=x", "B=1"]
    spec = dpu_flavor_spec({"VIRTIO_NET_EMULATION_ENABLE": 1})
    assert spec == {
        "nvconfig": [
            {"device": "*", "parameters": ["VIRTIO_NET_EMULATION_ENABLE=1"], "hostPowerCycleRequired": True}
        ]
    }


def test_device_plugin_config_time_slicing() -> None:
    cfg = device_plugin_config(GpuSharingConfig(strategy="time-slicing", hosts=["h"], replicas=4))
    assert cfg == {
        "version": "v1",
        "sharing": {
            "timeSlicing": {
                "renameByDefault": False,
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
            }
        },
    }


def test_device_plugin_config_mps_and_mig() -> None:
    mps = device_plugin_config(GpuSharingConfig(strategy="mps", hosts=["h"], replicas=3))
    assert mps["sharing"]["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 3}]
    mig = device_plugin_config(
        GpuSharingConfig(strategy="mig", hosts=["h"], mig_config="all-1g.5gb", mig_strategy="mixed")
    )
    assert mig == {"version": "v1", "flags": {"migStrategy": "mixed"}}


def test_host_node_labels() -> None:
    mig = GpuSharingConfig(strategy="mig", hosts=["h"], mig_config="all-1g.5gb")
    assert host_node_labels(gpu_workload_mode="vm-vgpu") == {"nvidia.com/gpu.workload.config": "vm-vgpu"}
    assert host_node_labels(gpu_workload_mode=None, sharing=[("t-gpu-sharing", mig)]) == {
        "nvidia.com/device-plugin.config": "t-gpu-sharing",
        "nvidia.com/mig.config": "all-1g.5gb",
    }
    assert host_node_labels(gpu_workload_mode=None) == {}


@pytest.mark.parametrize(
    ("mode", "sandbox", "vfio", "vgpu"),
    [
        ("vm-passthrough", True, True, False),
        ("vm-vgpu", True, False, True),
        ("container", False, False, False),
    ],
)
def test_gpu_operator_values_per_mode(mode: str, sandbox: bool, vfio: bool, vgpu: bool) -> None:
    values = gpu_operator_values(workload_mode=mode)
    assert values["sandboxWorkloads"] == {"enabled": sandbox, "defaultWorkload": mode}
    assert values["vfioManager"]["enabled"] is vfio
    assert values["vgpuManager"]["enabled"] is vgpu
    assert "devicePlugin" not in values


def test_gpu_operator_values_carry_sharing_configs() -> None:
    values = gpu_operator_values(
        workload_mode="container", device_plugin_configs={"b": "y", "a": "x"}, mig_strategy="single"
    )
    assert values["devicePlugin"]["config"] == {
        "create": True,
        "name": "device-plugin-config",
        "default": "",
        "data": {"a": "x", "b": "y"},
    }
    assert values["mig"] == {"strategy": "single"}


def test_kubevirt_permits_passthrough_gpus() -> None:
    values = kubevirt_values(workload_mode="vm-passthrough", gpu_models=["Tesla-T4", "Tesla-T4"])
    config = values["kubevirt"]["configuration"]
    assert config["permittedHostDevices"]["pciHostDevices"] == [
        {
            "pciVendorSelector": "10DE:1EB8",
            "resourceName": "nvidia.com/TU104GL_TESLA_T4",
            "externalResourceProvider": True,
        }
    ]
    assert (
        "permittedHostDevices"
        not in kubevirt_values(workload_mode="vm-vgpu", gpu_models=["Tesla-T4"])["kubevirt"]["configuration"]
    )


def test_hypervisor_cluster_spec_labels_workers_and_lists_services() -> None:
    cluster = HypervisorClusterConfig(name="hv", hosts=["a", "b"], gpu_workload_mode="vm-vgpu")
    spec = hypervisor_cluster_spec(cluster, catalog=CatalogConfig())
    assert spec["template"] == "capm3-hosted-cp"
    assert spec["config"]["workersNumber"] == 2
    assert spec["config"]["k0s"]["workerArgs"] == ["--labels=nvidia.com/gpu.workload.config=vm-vgpu"]
    assert spec["config"]["worker"]["hostSelector"] == {"matchLabels": {"composable-gpu.io/cluster": "hv"}}
    services = {s["name"]: s for s in spec["serviceSpec"]["services"]}
    assert set(services) == {"gpu-operator", "kubevirt"}
    gpu_values = yaml.safe_load(services["gpu-operator"]["values"])
    assert gpu_values["sandboxWorkloads"] == {"enabled": True, "defaultWorkload": "vm-vgpu"}
    assert services["gpu-operator"]["template"] == "gpu-operator-v25-3-0"


def test_tenant_cluster_spec_attaches_networks_and_gpus() -> None:
    from stack_config.models import TenantNetworkConfig

    cluster = TenantClusterConfig(
        name="k",
        hypervisor_cluster="hv",
        workers=2,
        gpu_mode="vgpu",
        gpu_model="Tesla-T4",
        gpu_count_per_worker=1,
        cni="cilium",
    )
    net = TenantNetworkConfig(name="n1", cidr="10.0.0.0/24", vxlan_id=1, vlan_id=2)
    spec = tenant_cluster_spec(
        cluster, tenant="t", namespace="tenant-t", networks=[net], catalog=CatalogConfig()
    )
    worker = spec["config"]["worker"]
    assert spec["template"] == "kubevirt-hosted-cp"
    assert worker["networks"][1] == {"name": "n1", "multus": {"networkName": "tenant-t/n1"}}
    assert worker["devices"]["interfaces"][1] == {"name": "n1", "bridge": {}}
    assert worker["devices"]["gpus"] == [{"name": "gpu0", "deviceName": "nvidia.com/GRID_T4-1Q"}]
    assert worker["memory"] == "4096Mi"
    assert spec["config"]["k0s"]["network"]["provider"] == "custom"
    assert [s["name"] for s in spec["serviceSpec"]["services"]] == ["cilium", "gpu-operator"]


def test_bare_metal_host_with_image_matches_the_crd() -> None:
    from components.manifests import bare_metal_host_spec
    from stack_config.models import HostConfig

    host = HostConfig.model_validate(
        {
            "name": "h",
            "role": "hypervisor",
            "boot_mac": "52:54:00:00:00:09",
            "bmc": {
                "endpoint": "http://10.0.0.9:8000",
                "username": "u",
                "password": "p",
                "verify_tls": False,
            },
            "image": {
                "url": "https://img.example/ubuntu.qcow2",
                "checksum": "https://img.example/SHA256SUMS",
                "checksum_type": "sha256",
                "format": "qcow2",
            },
        }
    )
    spec = bare_metal_host_spec(host, credentials_secret="c", user_data_secret="u", namespace="infra")
    assert spec["image"] == {
        "url": "https://img.example/ubuntu.qcow2",
        "checksum": "https://img.example/SHA256SUMS",
        "checksumType": "sha256",
        "format": "qcow2",
    }
    assert spec["bmc"]["address"] == "redfish-virtualmedia+http://10.0.0.9:8000/redfish/v1/Systems/1"
    assert spec["bmc"]["disableCertificateVerification"] is True
    obj = {
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": {"name": "h"},
        "spec": spec,
    }
    assert validation_errors(obj) == []


def test_offline_crd_validation_catches_mistakes() -> None:
    bmh = {
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": {"name": "x"},
        "spec": {
            "bmc": {"address": "redfish://x", "credentialsName": "c"},
            "bootMACAddress": "zz",
            "onlineX": True,
        },
    }
    assert sorted(validation_errors(bmh)) == sorted(
        [
            "spec: 'online' is a required property",
            "spec: Additional properties are not allowed ('onlineX' was unexpected)",
            "spec.bootMACAddress: 'zz' does not match '[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}'",
        ]
    )


@pytest.mark.parametrize("stack_file", ["valid_estate", "Pulumi.dev.yaml", "Pulumi.production.yaml"])
def test_every_custom_resource_matches_its_crd(mocks, tmp_path: Path, stack_file: str) -> None:
    from stack_config.stack_file import load_stack_file
    from tests.config.factories import valid_estate

    root = Path(__file__).resolve().parents[2]
    cfg = (
        load_estate(valid_estate())
        if stack_file == "valid_estate"
        else load_stack_file(root / stack_file, require_secrets=False)
    )

    @pulumi.runtime.test
    def build() -> None:
        Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path))

    build()
    custom = [
        r
        for r in mocks.registrations
        if r.typ.startswith("kubernetes:")
        and "." in r.typ.split(":")[1].split("/")[0]
        and not r.typ.startswith("kubernetes:helm.sh")
    ]
    assert {r.inputs["kind"] for r in custom} >= {
        "BareMetalHost",
        "DPUFlavor",
        "ClusterDeployment",
        "DPUCluster",
        "BFB",
        "DPUSet",
        "DPUService",
        "ServiceTemplate",
        "NetworkAttachmentDefinition",
        "ClusterTemplate",
    }
    problems = {
        f"{r.inputs['kind']}/{r.name}": validation_errors(
            {k: r.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        )
        for r in custom
    }
    assert {k: v for k, v in problems.items() if v} == {}


def test_the_lab_installs_every_crd_the_program_creates_objects_of() -> None:
    """The lab installs each folder of lab/crds (lab.settings.default_crd_dirs), so the
    NetworkAttachmentDefinition, ClusterTemplate and ClusterPolicy schemas validate the objects the
    program sends to the lab API server."""
    from lab.settings import default_crd_dirs

    installed = {p.name for p in default_crd_dirs()}
    assert {"multus", "kcm", "gpu-operator", "metal3", "dpf"} <= installed


def test_vm_vgpu_cluster_gets_vgpu_manager_device_config_and_permitted_mdevs() -> None:
    from components.manifests import vgpu_device_config_name
    from stack_config.models import VgpuManagerConfig

    manager = VgpuManagerConfig(
        repository="registry.example/nvidia", version="580.82.07-ubuntu22.04", image_pull_secrets=["pull"]
    )
    values = gpu_operator_values(workload_mode="vm-vgpu", vgpu_manager=manager, vgpu_types=["NVIDIA L40S-8Q"])
    assert values["vgpuManager"] == {
        "enabled": True,
        "repository": "registry.example/nvidia",
        "image": "vgpu-manager",
        "version": "580.82.07-ubuntu22.04",
        "imagePullSecrets": ["pull"],
    }
    assert values["vgpuDeviceManager"] == {"enabled": True, "config": {"default": "L40S-8Q"}}
    assert vgpu_device_config_name("GRID T4-4Q") == "T4-4Q"
    assert vgpu_device_config_name("NVIDIA RTX Pro 6000 Blackwell DC-1-24C") == "DC-1-24C"
    kubevirt = kubevirt_values(workload_mode="vm-vgpu", gpu_models=[], vgpu_types=["NVIDIA L40S-8Q"])
    config = kubevirt["kubevirt"]["configuration"]
    assert config["permittedHostDevices"] == {
        "mediatedDevices": [
            {
                "mdevNameSelector": "NVIDIA L40S-8Q",
                "resourceName": "nvidia.com/NVIDIA_L40S-8Q",
                "externalResourceProvider": True,
            }
        ]
    }
    assert "mediatedDevicesConfiguration" not in config  # the GPU Operator creates the mdevs


def _cluster_policy_errors(values: dict) -> list[str]:
    """Schema errors of the ClusterPolicy fragment our GPU Operator values set (CRD in
    lab/crds/gpu-operator), each section checked against its ``spec`` property schema."""
    import jsonschema

    from components.manifests import cluster_policy_overrides
    from tests.components.crd_schemas import schemas

    spec_schema = schemas()[("nvidia.com/v1", "ClusterPolicy")]["properties"]["spec"]
    errors = []
    for key, section in cluster_policy_overrides(values).items():
        if key not in spec_schema["properties"]:
            errors.append(f"{key}: not a ClusterPolicy spec field")
            continue
        for e in jsonschema.Draft7Validator(spec_schema["properties"][key]).iter_errors(section):
            errors.append(f"{key}.{'.'.join(str(p) for p in e.path)}: {e.message}")
    return errors


def test_cluster_policy_check_catches_mistakes() -> None:
    assert _cluster_policy_errors({"vgpuManager": {"enabled": True, "versoin": "1"}, "migg": {}}) == [
        "vgpuManager.: Additional properties are not allowed ('versoin' was unexpected)",
        "migg: not a ClusterPolicy spec field",
    ]


@pytest.mark.parametrize("stack_file", ["Pulumi.dev.yaml", "Pulumi.staging.yaml", "Pulumi.production.yaml"])
def test_gpu_operator_values_match_the_cluster_policy_schema(mocks, tmp_path: Path, stack_file: str) -> None:
    from stack_config.stack_file import load_stack_file

    root = Path(__file__).resolve().parents[2]
    cfg = load_stack_file(root / stack_file, require_secrets=False)

    @pulumi.runtime.test
    def build() -> None:
        Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path))

    build()
    checked = 0
    for r in mocks.registrations:
        if r.typ != "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment":
            continue
        for service in r.inputs["spec"].get("serviceSpec", {}).get("services", []):
            if service["name"] == "gpu-operator":
                values = yaml.safe_load(service["values"])
                assert _cluster_policy_errors(values) == [], (r.name, values)
                checked += 1
    assert checked >= 1
