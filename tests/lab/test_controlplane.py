"""The lab control plane: real API server with the upstream CRDs, kwok Nodes, scheduling."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from lab import kube

pytestmark = pytest.mark.lab


def test_upstream_crds_are_served_and_validate(lab) -> None:
    api = kube.admin_client(lab)
    names = {c.metadata.name for c in client.ApiextensionsV1Api(api).list_custom_resource_definition().items}
    for expected in (
        "clusterdeployments.k0rdent.mirantis.com",
        "servicetemplates.k0rdent.mirantis.com",
        "baremetalhosts.metal3.io",
        "dpuflavors.provisioning.dpu.nvidia.com",
        "clusterpolicies.nvidia.com",
    ):
        assert expected in names
    # The schema is enforced: a BareMetalHost with a wrongly typed field is rejected.
    custom = client.CustomObjectsApi(api)
    bad = {
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": {"name": "bad-host"},
        "spec": {"online": "yes-please", "bootMACAddress": "52:54:00:00:00:99"},
    }
    with pytest.raises(client.exceptions.ApiException) as err:
        custom.create_namespaced_custom_object("metal3.io", "v1alpha1", "default", "baremetalhosts", bad)
    assert err.value.status == 422
    assert "spec.online" in err.value.body


def test_blade_nodes_are_ready_and_run_pods(lab) -> None:
    api = kube.admin_client(lab.hosts_cluster)  # the hypervisor cluster lab-workers
    core = client.CoreV1Api(api)
    nodes = {n.metadata.name for n in core.list_node().items}
    assert {"blade-slot-1", "blade-slot-2"} <= nodes
    assert kube.nodes_ready(api, ["blade-slot-1", "blade-slot-2"])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lab-smoke"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "blade-slot-2"},
            "containers": [{"name": "c", "image": "registry.invalid/none:0"}],
        },
    }
    core.create_namespaced_pod("default", pod)
    try:
        deadline = time.monotonic() + 60
        phase = None
        while time.monotonic() < deadline:
            p = core.read_namespaced_pod("lab-smoke", "default")
            phase = p.status.phase
            if phase == "Running":
                break
            time.sleep(0.5)
        assert phase == "Running"
        assert p.spec.node_name == "blade-slot-2"
    finally:
        core.delete_namespaced_pod("lab-smoke", "default", grace_period_seconds=0)
