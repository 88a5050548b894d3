"""HypervisorCluster and DpuCluster under Pulumi mocks."""

from __future__ import annotations

import pulumi_kubernetes as k8s
import yaml

from components import DpuCluster, DpuClusterArgs, DpuMember, HypervisorCluster, HypervisorClusterArgs
from components._base import Mothership
from components.manifests import HypervisorGpus
from stack_config import load_estate
from tests.components.conftest import Recorder, run, uses_provider, value
from tests.config.factories import valid_estate

CD = "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment"
DPF = "kubernetes:provisioning.dpu.nvidia.com/v1alpha1"


def _ms() -> Mothership:
    return Mothership(provider=k8s.Provider("mothership", kubeconfig="/dev/null"), namespace="infra")


def test_hypervisor_cluster_deployment(mocks: Recorder) -> None:
    estate = load_estate(valid_estate())
    cfg = estate.hypervisor_clusters[0]
    cluster = run(
        lambda: HypervisorCluster(
            "hv",
            HypervisorClusterArgs(
                config=cfg,
                mothership=_ms(),
                catalog=estate.catalog,
                gpus=HypervisorGpus(
                    models=["NVIDIA-A100-PCIE-40GB"], device_plugin_configs={"x-gpu-sharing": "version: v1\n"}
                ),
            ),
        )
    )
    (child,) = mocks.children_of("hv", "composable:infra:HypervisorCluster")
    assert (child.typ, child.name) == (CD, "hv") and uses_provider(child, "mothership")
    spec = child.inputs["spec"]
    assert (spec["template"], spec["credential"]) == ("capm3-hosted-cp", "metal3-credential")
    assert spec["config"]["workersNumber"] == 1
    services = {s["name"]: s for s in spec["serviceSpec"]["services"]}
    gpu = yaml.safe_load(services["gpu-operator"]["values"])
    assert gpu["sandboxWorkloads"] == {"enabled": True, "defaultWorkload": "vm-passthrough"}
    assert gpu["devicePlugin"]["config"]["data"] == {"x-gpu-sharing": "version: v1\n"}
    kubevirt = yaml.safe_load(services["kubevirt"]["values"])
    assert (
        kubevirt["kubevirt"]["configuration"]["permittedHostDevices"]["pciHostDevices"][0]["resourceName"]
        == "nvidia.com/GA100_A100_PCIE_40GB"
    )
    assert mocks.named("hv", "composable:infra:HypervisorCluster").inputs == {
        "name": "hv",
        "hosts": ["hv-1"],
        "gpu_workload_mode": "vm-passthrough",
        "kubevirt": True,
        "tenant_clusters": [],
    }
    assert value(cluster.services) == ["gpu-operator", "kubevirt"]


def test_container_cluster_without_kubevirt_has_only_the_gpu_operator(mocks: Recorder) -> None:
    estate = load_estate(valid_estate())
    run(
        lambda: HypervisorCluster(
            "workers",
            HypervisorClusterArgs(
                config=estate.hypervisor_clusters[1], mothership=_ms(), catalog=estate.catalog
            ),
        )
    )
    spec = mocks.named("workers", CD).inputs["spec"]
    assert [s["name"] for s in spec["serviceSpec"]["services"]] == ["gpu-operator"]
    assert (
        yaml.safe_load(spec["serviceSpec"]["services"][0]["values"])["sandboxWorkloads"]["enabled"] is False
    )
    assert spec["config"]["k0s"]["workerArgs"] == ["--labels=nvidia.com/gpu.workload.config=container"]


def test_dpu_cluster_registers_deployment_and_dpf_objects(mocks: Recorder) -> None:
    estate = load_estate(valid_estate())
    assert estate.dpu_cluster is not None
    members = [
        DpuMember(dpu="dpu-hv-1", host="hv-1", flavor="dpu-hv-1-flavor"),
        DpuMember(dpu="dpu-bm-1", host="bm-1", flavor="dpu-bm-1-flavor"),
    ]
    cluster = run(
        lambda: DpuCluster(
            "dpus", DpuClusterArgs(config=estate.dpu_cluster, members=members, mothership=_ms())
        )
    )
    children = {(r.typ, r.name) for r in mocks.children_of("dpus", "composable:infra:DpuCluster")}
    assert children == {
        (CD, "dpus"),
        (f"{DPF}:DPUCluster", "dpus-dpucluster"),
        (f"{DPF}:BFB", "dpus-bfb"),
        (f"{DPF}:DPUSet", "dpu-hv-1-dpuset"),
        (f"{DPF}:DPUSet", "dpu-bm-1-dpuset"),
        ("kubernetes:svc.dpu.nvidia.com/v1alpha1:DPUService", "dpus-doca-hbn"),
    }
    deployment = mocks.named("dpus", CD).inputs["spec"]
    assert deployment["config"] == {  # dpu-hosted-cp values: no machines, the DPUs join through DPF
        "controlPlaneNumber": 1,
        "clusterLabels": deployment["config"]["clusterLabels"],
        "k0s": {"version": "v1.33.1+k0s.0"},
    }
    assert mocks.named("dpus-dpucluster").inputs["spec"] == {
        "type": "static",
        "version": "v1.33.1",
        "kubeconfig": "dpus-kubeconfig",
        "maxNodes": 2,
    }
    dpuset = mocks.named("dpu-bm-1-dpuset").inputs["spec"]
    assert dpuset["nodeSelector"] == {"matchLabels": {"kubernetes.io/hostname": "bm-1"}}
    assert dpuset["dpuTemplate"]["spec"]["dpuFlavor"] == "dpu-bm-1-flavor"
    assert dpuset["dpuTemplate"]["spec"]["bfb"] == {"name": "dpus-bfb"}
    assert mocks.named("dpus", "composable:infra:DpuCluster").inputs == {
        "name": "dpus",
        "hosts": ["hv-1", "bm-1"],
        "template": "dpu-hosted-cp",
    }
    assert value(cluster.dpus) == ["dpu-hv-1", "dpu-bm-1"]
