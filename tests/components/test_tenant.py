"""Tenant, TenantNetwork, TenantCluster and GpuSharing under Pulumi mocks."""

from __future__ import annotations

import json

import pulumi_kubernetes as k8s
import yaml

from components import Tenant, TenantArgs
from stack_config import load_estate
from tests.components.conftest import Recorder, run, uses_provider, value
from tests.config.factories import valid_estate

TENANT = "composable:infra:Tenant"


def _tenant(index: int, **kwargs: object) -> Tenant:
    estate = load_estate(valid_estate())
    cfg = estate.tenants[index]
    provider = k8s.Provider("mothership", kubeconfig="/dev/null")
    return Tenant(cfg.name, TenantArgs(config=cfg, provider=provider, catalog=estate.catalog, **kwargs))  # type: ignore[arg-type]


def test_tenant_children_and_props(mocks: Recorder) -> None:
    tenant = run(lambda: _tenant(1, composer_pool="blue"))
    children = {(r.typ, r.name) for r in mocks.children_of("blue", TENANT)}
    assert children == {
        ("kubernetes:core/v1:Namespace", "blue-namespace"),
        ("kubernetes:core/v1:ResourceQuota", "blue-gpu-quota-mothership"),
        ("kubernetes:k0rdent.mirantis.com/v1beta1:ServiceTemplate", "blue-cilium"),
        ("kubernetes:k0rdent.mirantis.com/v1beta1:ClusterTemplate", "blue-template-kubevirt-hosted-cp"),
        ("kubernetes:source.toolkit.fluxcd.io/v1:HelmRepository", "blue-repo-cilium"),
        ("composable:infra:TenantNetwork", "blue-blue-a"),
        ("composable:infra:TenantNetwork", "blue-blue-b"),
        ("composable:infra:TenantCluster", "blue-blue-k8s"),
        ("composable:infra:GpuSharing", "blue-gpu-sharing"),
    }
    assert mocks.named("blue", TENANT).inputs == {
        "name": "blue",
        "gpu_quota": 2,
        "allowed_models": ["Tesla-T4"],
        "quota_clusters": ["mothership"],
    }
    ns = mocks.named("blue-namespace").inputs["metadata"]
    assert ns["name"] == "tenant-blue"
    assert ns["labels"]["composer.liqid.io/pool"] == "blue"
    quota = mocks.named("blue-gpu-quota-mothership").inputs
    assert quota["metadata"]["namespace"] == "tenant-blue"
    assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": "2"}}
    assert all(uses_provider(r, "mothership") for r in mocks.registrations if r.typ.startswith("kubernetes:"))
    assert value(tenant.networks) == [
        {"name": "blue-a", "cidr": "10.2.0.0/24", "vxlan_id": 102, "vlan_id": 12},
        {"name": "blue-b", "cidr": "10.3.0.0/24", "vxlan_id": 103, "vlan_id": 13},
    ]


def test_tenant_network_is_a_nad_in_the_tenant_namespace_and_a_vxlan_record(mocks: Recorder) -> None:
    run(lambda: _tenant(1, infra_namespace="infra"))
    children = {r.name: r for r in mocks.children_of("blue-blue-a", "composable:infra:TenantNetwork")}
    assert set(children) == {"blue-blue-a-nad-mothership", "blue-blue-a-segment"}
    nad = children["blue-blue-a-nad-mothership"]
    assert nad.typ == "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"
    assert (nad.inputs["metadata"]["name"], nad.inputs["metadata"]["namespace"]) == ("blue-a", "tenant-blue")
    assert json.loads(nad.inputs["spec"]["config"]) == {
        "cniVersion": "0.3.1",
        "name": "blue-blue-a",
        "type": "bridge",
        "bridge": "br-tenant",
        "vlan": 12,
        "ipam": {"type": "whereabouts", "range": "10.2.0.0/24", "gateway": "10.2.0.1"},
    }
    seg = children["blue-blue-a-segment"]
    assert seg.typ == "kubernetes:core/v1:ConfigMap"
    meta = seg.inputs["metadata"]
    assert (meta["name"], meta["namespace"]) == ("vxlan-blue-blue-a", "infra")
    assert seg.inputs["metadata"]["labels"]["composable-gpu.io/segment"] == "vxlan"
    assert seg.inputs["data"] == {
        "tenant": "blue",
        "network": "blue-a",
        "cidr": "10.2.0.0/24",
        "vxlanId": "102",
        "vlanId": "12",
        "gateway": "10.2.0.1",
    }
    assert mocks.named("blue-blue-a", "composable:infra:TenantNetwork").inputs == {
        "tenant": "blue",
        "name": "blue-a",
        "cidr": "10.2.0.0/24",
        "vxlan_id": 102,
        "vlan_id": 12,
        "nad": "tenant-blue/blue-a",
        "clusters": ["mothership"],
    }


def test_vm_interfaces_reference_the_nads_the_tenant_creates(mocks: Recorder) -> None:
    run(lambda: _tenant(1))
    nads = {
        f"{r.inputs['metadata']['namespace']}/{r.inputs['metadata']['name']}"
        for r in mocks.of_type("kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition")
    }
    cd = mocks.named("blue-blue-k8s", "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment")
    spec = cd.inputs["spec"]
    refs = {n["multus"]["networkName"] for n in spec["config"]["worker"]["networks"] if "multus" in n}
    assert refs and refs <= nads


def test_tenant_cluster_deployment(mocks: Recorder) -> None:
    run(lambda: _tenant(0))
    (cd,) = mocks.children_of("red-red-k8s", "composable:infra:TenantCluster")
    assert cd.typ == "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment"
    assert cd.inputs["metadata"] == {
        "name": "red-k8s",
        "namespace": "tenant-red",
        "labels": {
            "app.kubernetes.io/managed-by": "pulumi",
            "app.kubernetes.io/part-of": "composable-gpu",
            "composable-gpu.io/tenant": "red",
            "composable-gpu.io/hypervisor-cluster": "hv",
            "composable-gpu.io/object": "cluster-deployment",
        },
    }
    spec = cd.inputs["spec"]
    assert spec["template"] == "kubevirt-hosted-cp"
    assert spec["config"]["worker"]["devices"]["gpus"] == [
        {"name": "gpu0", "deviceName": "nvidia.com/GA100_A100_PCIE_40GB"},
        {"name": "gpu1", "deviceName": "nvidia.com/GA100_A100_PCIE_40GB"},
    ]
    assert spec["config"]["worker"]["networks"][1] == {
        "name": "red-net",
        "multus": {"networkName": "tenant-red/red-net"},
    }
    assert mocks.named("red-red-k8s", "composable:infra:TenantCluster").inputs == {
        "tenant": "red",
        "name": "red-k8s",
        "template": "kubevirt-hosted-cp",
        "hosted_control_plane": True,
        "control_plane": "K0smotronControlPlane",
        "networks": ["red/red-net"],
        "network_attachments": ["tenant-red/red-net"],
        "hypervisor_cluster": "hv",
        "hypervisor_cluster_in_stack": True,
        "gpu_mode": "passthrough",
        "gpu_model": "NVIDIA-A100-PCIE-40GB",
        "gpu_count": 2,
        "cni": "calico",
    }
    # a GPU cluster gets the GPU Operator ServiceTemplate in the tenant namespace
    st = mocks.named("red-gpu-operator")
    assert st.inputs["metadata"]["namespace"] == "tenant-red"


def test_tenant_cluster_attaches_only_its_networks(mocks: Recorder) -> None:
    run(lambda: _tenant(1))
    spec = mocks.named("blue-blue-k8s", "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment").inputs[
        "spec"
    ]
    assert [n["name"] for n in spec["config"]["worker"]["networks"]] == ["default", "blue-a"]
    assert mocks.named("blue-blue-k8s", "composable:infra:TenantCluster").inputs["networks"] == [
        "blue/blue-a"
    ]


def test_gpu_sharing_time_slicing(mocks: Recorder) -> None:
    tenant = run(lambda: _tenant(1))
    (cm,) = mocks.children_of("blue-gpu-sharing", "composable:infra:GpuSharing")
    assert cm.inputs["metadata"]["name"] == "blue-gpu-sharing"
    assert cm.inputs["metadata"]["namespace"] == "tenant-blue"
    config = yaml.safe_load(cm.inputs["data"]["blue-gpu-sharing"])
    assert config["version"] == "v1"
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert mocks.named("blue-gpu-sharing", "composable:infra:GpuSharing").inputs == {
        "name": "blue-gpu-sharing",
        "hosts": ["bm-1"],
        "strategy": "time-slicing",
        "replicas": 4,
        "tenants": ["blue"],
    }
    assert value(tenant.gpu_sharing)["strategy"] == "time-slicing"


def test_gpu_sharing_mig(mocks: Recorder) -> None:
    run(lambda: _tenant(2))
    cm = mocks.named("green-gpu-sharing-config-mothership")
    assert yaml.safe_load(cm.inputs["data"]["green-gpu-sharing"]) == {
        "version": "v1",
        "flags": {"migStrategy": "single"},
    }
    props = mocks.named("green-gpu-sharing", "composable:infra:GpuSharing").inputs
    assert props["strategy"] == "mig" and props["mig_profile"] == "all-1g.5gb"
    # no networks, no clusters: no TenantNetwork / TenantCluster / ServiceTemplate
    assert {r.typ for r in mocks.children_of("green", TENANT)} == {
        "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:ResourceQuota",
        "composable:infra:GpuSharing",
    }


def test_tenant_declares_the_cluster_template_it_uses_pinned(mocks: Recorder) -> None:
    run(lambda: _tenant(0))
    tpl = mocks.named("red-template-kubevirt-hosted-cp").inputs
    assert tpl["kind"] == "ClusterTemplate"
    assert (tpl["metadata"]["name"], tpl["metadata"]["namespace"]) == ("kubevirt-hosted-cp", "tenant-red")
    assert tpl["metadata"]["labels"]["composable-gpu.io/control-plane"] == "K0smotronControlPlane"
    assert tpl["spec"]["helm"]["chartSpec"]["version"] == "1.0.11"
    assert tpl["spec"]["providers"] == [
        "infrastructure-kubevirt",
        "control-plane-k0sproject-k0smotron",
        "bootstrap-k0sproject-k0smotron",
    ]


def test_hosted_control_plane_comes_from_the_declared_control_plane_not_the_name(mocks: Recorder) -> None:
    """A template whose name says hosted but whose chart renders machine control planes yields
    ``hosted_control_plane: false``, and the policy pack rejects the cluster."""
    from policies.rules import evaluate
    from policies.rules.model import ResourceRecord

    raw = valid_estate()
    raw["catalog"] = {
        "cluster_templates": [
            {
                "name": "kubevirt-hosted-cp",
                "chart": "kubevirt-standalone-cp",
                "version": "1.0.0",
                "repository": "kcm-templates",
                "providers": ["infrastructure-kubevirt", "control-plane-k0sproject-k0smotron"],
                "control_plane": "K0sControlPlane",
            },
            {
                "name": "capm3-hosted-cp",
                "chart": "capm3-hosted-cp",
                "version": "1.0.0",
                "repository": "kcm-templates",
                "providers": ["infrastructure-metal3"],
                "control_plane": "K0smotronControlPlane",
            },
            {
                "name": "dpu-hosted-cp",
                "chart": "dpu-hosted-cp",
                "version": "1.0.0",
                "repository": "kcm-templates",
                "providers": ["control-plane-k0sproject-k0smotron"],
                "control_plane": "K0smotronControlPlane",
            },
        ]
    }
    estate = load_estate(raw)
    cfg = estate.tenants[0]
    run(
        lambda: Tenant(
            cfg.name,
            TenantArgs(
                config=cfg,
                provider=k8s.Provider("mothership", kubeconfig="/dev/null"),
                catalog=estate.catalog,
            ),
        )
    )
    props = mocks.named("red-red-k8s", "composable:infra:TenantCluster").inputs
    assert props["template"] == "kubevirt-hosted-cp"
    assert (props["hosted_control_plane"], props["control_plane"]) == (False, "K0sControlPlane")
    records = [
        ResourceRecord(type=r.typ, name=r.name, urn=r.urn, props=r.inputs)
        for r in mocks.registrations
        if r.typ.startswith("composable:infra:")
    ]
    failed = {name for name, violations in evaluate(records).items() if violations}
    assert "tenant-cluster-hosted-control-plane" in failed
