"""The readable report of the stack output ``estate``."""

from __future__ import annotations

from typing import Any

from stack_config.summary import gpus_per_host, render_summary

REPORT: dict[str, Any] = {
    "stack": "dev",
    "environment": "lab",
    "hosts": [
        {
            "name": "blade-slot-1",
            "role": "baremetal-worker",
            "bmc_address": "redfish-virtualmedia://127.0.0.1:18451/redfish/v1/Systems/1",
            "cluster": "lab-workers",
            "gpu_mode": "container",
            "dpu": "dpu-blade-slot-1",
        },
        {
            "name": "blade-slot-2",
            "role": "baremetal-worker",
            "bmc_address": "x",
            "cluster": "lab-workers",
            "gpu_mode": "container",
            "dpu": None,
        },
    ],
    "dpus": [
        {
            "name": "dpu-blade-slot-1",
            "host": "blade-slot-1",
            "mode": "DpuMode",
            "host_privilege_level": "Restricted",
            "host_rshim": "Disabled",
            "reset_pending": False,
            "flavor": "dpu-blade-slot-1-flavor",
        }
    ],
    "hypervisor_clusters": [
        {
            "name": "lab-workers",
            "hosts": ["blade-slot-1", "blade-slot-2"],
            "gpu_workload_mode": "container",
            "kubevirt": True,
            "services": ["gpu-operator", "kubevirt"],
        }
    ],
    "dpu_cluster": {
        "name": "lab-dpu",
        "hosts": ["blade-slot-1"],
        "dpus": ["dpu-blade-slot-1"],
        "services": ["doca-hbn"],
    },
    "tenants": [
        {
            "name": "alpha",
            "namespace": "tenant-alpha",
            "gpu_quota": 2,
            "allowed_models": ["Tesla-T4"],
            "networks": [{"name": "alpha-net", "cidr": "10.10.0.0/24", "vxlan_id": 10010, "vlan_id": 110}],
            "clusters": [
                {
                    "name": "alpha-k8s",
                    "hypervisor_cluster": "lab-workers",
                    "workers": 1,
                    "networks": ["alpha/alpha-net"],
                    "gpu_mode": "passthrough",
                    "gpu_model": "Tesla-T4",
                    "gpu_count": 2,
                    "cni": "calico",
                }
            ],
            "gpu_sharing": {
                "name": "alpha-gpu-sharing",
                "strategy": "time-slicing",
                "hosts": ["blade-slot-2"],
                "replicas": 4,
                "mig_profile": None,
            },
        }
    ],
    "gpus": [
        {
            "host": "blade-slot-1",
            "pool": "gpu-pool",
            "tenant": "alpha",
            "device_names": ["gpu0"],
            "models": ["Tesla-T4"],
        }
    ],
    "composer": {
        "namespace": "composer-system",
        "pool": "gpu-pool",
        "target_cluster": "lab-workers",
        "idle_timeout_seconds": 60,
        "excluded_devices": ["gpu0"],
    },
}


def test_summary_mentions_every_section() -> None:
    text = render_summary(REPORT)
    lines = text.splitlines()
    assert lines[0] == "Estate dev (lab)"
    for heading in (
        "Hosts (2)",
        "DPUs (1)",
        "Hypervisor clusters (1)",
        "DPU cluster",
        "Tenants (1)",
        "GPUs per host",
        "Composer",
    ):
        assert heading in lines
    dpu_line = next(ln for ln in lines if ln.strip().startswith("dpu-blade-slot-1"))
    assert "DpuMode" in dpu_line and "host privilege Restricted" in dpu_line and "rshim Disabled" in dpu_line
    assert "reset pending no" in dpu_line
    net = next(ln for ln in lines if "alpha-net" in ln and "network" in ln)
    assert "10.10.0.0/24" in net and "VXLAN 10010" in net and "VLAN 110" in net
    cluster = next(ln for ln in lines if "alpha-k8s" in ln)
    assert "on lab-workers" in cluster and "2 x Tesla-T4 passthrough" in cluster
    assert any("time-slicing" in ln and "4 replicas" in ln for ln in lines)
    assert "pool gpu-pool -> cluster lab-workers" in text
    assert text.endswith("\n")


def test_gpus_per_host_merges_static_and_live() -> None:
    per_host = gpus_per_host(REPORT, {"blade-slot-1": ["gpu0"], "blade-slot-2": ["gpu1"]})
    assert per_host == {
        "blade-slot-1": ["gpu0 (Tesla-T4) static, tenant alpha"],
        "blade-slot-2": ["gpu1 dynamic"],
    }
    text = render_summary(REPORT, attached={"blade-slot-2": ["gpu1"]})
    assert any(ln.split()[:2] == ["blade-slot-2", "gpu1"] for ln in text.splitlines())


def test_hosts_without_gpus_say_none() -> None:
    text = render_summary(REPORT)
    assert any(ln.split() == ["blade-slot-2", "none"] for ln in text.splitlines())


def test_partial_report_does_not_raise() -> None:
    text = render_summary({"stack": "x"})
    assert "Hosts (0)" in text and "(none)" in text
