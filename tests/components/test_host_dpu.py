"""Host and Dpu components under Pulumi mocks: what they register, parents, props, secrets."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components import Dpu, DpuArgs, Host, HostArgs
from components._base import Mothership
from stack_config import load_estate
from tests.components.conftest import (
    Recorder,
    is_secret,
    plain_occurrences,
    run,
    unwrap,
    uses_provider,
    value,
)
from tests.config.factories import DPU_BMC_PASSWORD, HOST_BMC_PASSWORD, valid_estate

HOST = "composable:infra:Host"
DPU = "composable:infra:Dpu"
SECRET = "kubernetes:core/v1:Secret"
BMH = "kubernetes:metal3.io/v1alpha1:BareMetalHost"
FLAVOR = "kubernetes:provisioning.dpu.nvidia.com/v1alpha1:DPUFlavor"
POSTURE = "pulumi-python:dynamic/redfish:DpuPosture"


def _mothership() -> Mothership:
    return Mothership(provider=k8s.Provider("mothership", kubeconfig="/dev/null"), namespace="infra")


def _host(index: int, **kwargs: object) -> Host:
    cfg = load_estate(valid_estate()).hosts[index]
    return Host(cfg.name, HostArgs(config=cfg, mothership=_mothership(), **kwargs))  # type: ignore[arg-type]


def test_host_in_a_cluster_registers_credentials_and_bare_metal_host_without_user_data(mocks) -> None:
    """A cluster's host leaves ``userData`` to CAPM3 (it writes the Machine's bootstrap data there
    when it provisions the host): no user-data Secret, no ``spec.userData``."""
    host = run(
        lambda: _host(
            0,
            cluster="hv",
            gpu_mode="passthrough",
            node_labels={"nvidia.com/gpu.workload.config": "vm-passthrough"},
        )
    )
    children = {(r.typ, r.name) for r in mocks.children_of("hv-1", HOST)}
    assert children == {
        (SECRET, "hv-1-bmc-credentials"),
        (BMH, "hv-1"),
        (DPU, "dpu-hv-1"),
    }

    bmh = mocks.named("hv-1", BMH).inputs
    assert bmh["apiVersion"] == "metal3.io/v1alpha1"
    assert bmh["metadata"]["namespace"] == "infra"
    assert bmh["metadata"]["labels"]["nvidia.com/gpu.workload.config"] == "vm-passthrough"
    assert bmh["metadata"]["labels"]["composable-gpu.io/cluster"] == "hv"
    spec = bmh["spec"]
    assert spec["bmc"] == {
        "address": "redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1",
        "credentialsName": "hv-1-bmc-credentials",
        "disableCertificateVerification": False,
    }
    assert spec["bootMACAddress"] == "52:54:00:00:00:01"
    assert spec["online"] is True
    assert "userData" not in spec
    assert value(host.user_data_secret) is None

    assert value(host.bmc_address) == "redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1"
    assert value(host.credentials_secret) == "hv-1-bmc-credentials"
    assert value(host.cluster) == "hv"


def test_host_outside_a_cluster_carries_kernel_args_in_its_user_data(mocks: Recorder) -> None:
    host = run(lambda: _host(0))
    assert mocks.named("hv-1", BMH).inputs["spec"]["userData"] == {
        "name": "hv-1-user-data", "namespace": "infra"}
    user_data = yaml.safe_load(unwrap(mocks.named("hv-1-user-data", SECRET).inputs["stringData"])["userData"])
    grub = next(f["content"] for f in user_data["write_files"] if "grub" in f["path"])
    assert "intel_iommu=on iommu=pt pci=realloc" in grub
    assert any(f["path"] == "/etc/modprobe.d/blacklist-nouveau.conf" for f in user_data["write_files"])
    assert value(host.user_data_secret) == "hv-1-user-data"


def test_host_credentials_are_secret(mocks: Recorder) -> None:
    run(lambda: _host(0))
    creds = mocks.named("hv-1-bmc-credentials", SECRET).inputs
    assert is_secret(creds["stringData"])
    everything = [r.inputs for r in mocks.registrations]
    assert plain_occurrences(everything, HOST_BMC_PASSWORD) == []
    assert plain_occurrences(everything, DPU_BMC_PASSWORD) == []


def test_host_contract_properties(mocks: Recorder) -> None:
    run(lambda: _host(1, cluster="workers", gpu_mode="container"))
    props = mocks.named("bm-1", HOST).inputs
    assert props == {
        "name": "bm-1",
        "role": "baremetal-worker",
        "bmc_address": "redfish-virtualmedia://10.0.0.2/redfish/v1/Systems/1",
        "bmc_verify_tls": True,
        "kernel_args": ["intel_iommu=on", "iommu=pt", "pci=realloc"],
        "blacklisted_modules": ["nouveau"],
        "cluster": "workers",
        "tenant_workloads": True,
        "dpu": "dpu-bm-1",
        "gpu_mode": "container",
    }


def test_host_kubernetes_objects_use_the_explicit_provider(mocks: Recorder) -> None:
    run(lambda: _host(2))
    k8s_objects = [r for r in mocks.registrations if r.typ.startswith("kubernetes:")]
    assert len(k8s_objects) == 3
    assert all(uses_provider(r, "mothership") for r in k8s_objects)


def test_label_nodes_patches_the_node_through_the_clusters_provider(mocks: Recorder) -> None:
    def build() -> None:
        host = _host(2, label_nodes=True, node_labels={"nvidia.com/gpu.workload.config": "container"})
        host.label_node(k8s.Provider("workers", kubeconfig="/dev/null"))

    run(build)
    patch = mocks.named("bm-2-node-labels", "kubernetes:core/v1:NodePatch")
    assert uses_provider(patch, "workers")
    assert patch.parent == mocks.urn_of("bm-2", HOST)
    assert patch.inputs["metadata"]["name"] == "bm-2"
    assert patch.inputs["metadata"]["labels"] == {"nvidia.com/gpu.workload.config": "container"}


def test_host_without_dpu_or_labels_registers_no_dpu_or_patch(mocks: Recorder) -> None:
    host = run(lambda: _host(2, label_nodes=True))
    assert host.dpu is None
    assert mocks.of_type(DPU) == [] and mocks.of_type("kubernetes:core/v1:NodePatch") == []
    assert "dpu" not in mocks.named("bm-2", HOST).inputs  # null props are omitted by the engine


def test_dpu_posture_flavor_and_props(mocks: Recorder) -> None:
    cfg = load_estate(valid_estate()).hosts[0]
    assert cfg.dpu is not None
    dpu = run(
        lambda: Dpu(
            "dpu-hv-1",
            DpuArgs(config=cfg.dpu, host="hv-1", mothership=_mothership(), ca_bundle="/tmp/ca.pem"),
        )
    )
    assert {(r.typ, r.name) for r in mocks.children_of("dpu-hv-1", DPU)} == {
        (POSTURE, "dpu-hv-1-posture"),
        (FLAVOR, "dpu-hv-1-flavor"),
    }

    posture = mocks.named("dpu-hv-1-posture", POSTURE).inputs
    assert posture["bmc_endpoint"] == "https://10.0.1.1"
    assert is_secret(posture["username"]) and is_secret(posture["password"])
    assert (posture["mode"], posture["host_privilege"], posture["host_rshim"]) == (
        "DpuMode",
        "Restricted",
        "Disabled",
    )
    assert posture["ca_bundle"] == "/tmp/ca.pem" and posture["verify_tls"] is True
    assert plain_occurrences([r.inputs for r in mocks.registrations], DPU_BMC_PASSWORD) == []

    flavor = mocks.named("dpu-hv-1-flavor", FLAVOR).inputs
    assert flavor["metadata"]["namespace"] == "infra"
    assert flavor["spec"]["nvconfig"][0]["parameters"] == [
        "PCI_SWITCH_EMULATION_ENABLE=1",
        "PCI_SWITCH_EMULATION_NUM_PORT=10",
        "VIRTIO_NET_EMULATION_ENABLE=1",
        "VIRTIO_NET_EMULATION_NUM_PF=10",
        "VIRTIO_NET_EMULATION_NUM_VF=10",
    ]

    props = mocks.named("dpu-hv-1", DPU).inputs
    assert props == {
        "name": "dpu-hv-1",
        "host": "hv-1",
        "bmc_address": "https://10.0.1.1",
        "bmc_verify_tls": True,
        "mode": "DpuMode",
        "host_privilege": "Restricted",
        "host_rshim": "Disabled",
        "mlxconfig": dict(cfg.dpu.mlxconfig),
    }
    assert value(dpu.host_privilege_level) == "Restricted"
    assert value(dpu.reset_pending) is False
    assert value(dpu.flavor) == "dpu-hv-1-flavor"


def test_dpu_flavor_is_replaced_not_patched(mocks: Recorder) -> None:
    # DPUFlavor.spec is immutable upstream (x-kubernetes-validations: self == oldSelf)
    seen: list[pulumi.ResourceOptions] = []
    original = k8s.apiextensions.CustomResource.__init__

    def spy(self, resource_name, api_version, kind, spec=None, metadata=None, opts=None, **kw):  # type: ignore[no-untyped-def]
        seen.append(opts)
        original(self, resource_name, api_version, kind, spec=spec, metadata=metadata, opts=opts, **kw)

    k8s.apiextensions.CustomResource.__init__ = spy  # type: ignore[method-assign]
    try:
        cfg = load_estate(valid_estate()).hosts[0]
        run(lambda: Dpu("dpu-x", DpuArgs(config=cfg.dpu, host="hv-1", mothership=_mothership())))  # type: ignore[arg-type]
    finally:
        k8s.apiextensions.CustomResource.__init__ = original  # type: ignore[method-assign]
    (opts,) = seen
    assert opts.replace_on_changes == ["spec"] and opts.delete_before_replace is True
