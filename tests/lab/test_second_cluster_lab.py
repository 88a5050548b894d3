"""The lab's second cluster, for real: the hypervisor cluster ``lab-workers`` is a control plane of
its own (its own etcd and API server), the hosts' Nodes are registered there and not on the
mothership, and the capi stand-in publishes its kubeconfig on the mothership as Cluster API does,
as Secret ``lab-workers-kubeconfig`` (key ``value``) beside a ClusterDeployment of that name."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from domain.cluster_api import KUBECONFIG_DATA_KEY
from lab import kube
from lab.capi_standin import CLUSTER_NAME_LABEL, SECRET_TYPE
from lab.readiness import wait_until
from lab.settings import HYPERVISOR_CLUSTER, LabConfig

NAMESPACE = "second-cluster-test"
K0RDENT = ("k0rdent.mirantis.com", "v1beta1")

pytestmark = pytest.mark.lab


def _second(lab: LabConfig) -> LabConfig:
    hypervisor = lab.hypervisor
    assert hypervisor is not None and hypervisor.name == HYPERVISOR_CLUSTER
    return hypervisor


def _namespace(core: client.CoreV1Api, name: str) -> None:
    try:
        core.create_namespace({"metadata": {"name": name}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def test_the_second_cluster_is_a_separate_api_server(lab: LabConfig) -> None:
    second = _second(lab)
    assert second.apiserver_url != lab.apiserver_url and second.ports.etcd != lab.ports.etcd
    mothership = client.CoreV1Api(kube.admin_client(lab))
    workers = client.CoreV1Api(kube.admin_client(second))
    for core in (mothership, workers):
        _namespace(core, NAMESPACE)
    marker = {"metadata": {"name": "only-on-the-mothership"}, "data": {"where": "mothership"}}
    try:
        mothership.create_namespaced_config_map(NAMESPACE, marker)
    except ApiException as exc:
        if exc.status != 409:
            raise
    with pytest.raises(ApiException) as missing:
        workers.read_namespaced_config_map("only-on-the-mothership", NAMESPACE)
    assert missing.value.status == 404
    uids = {core.read_namespace("kube-system").metadata.uid for core in (mothership, workers)}
    assert len(uids) == 2  # two etcds: the same namespace has two identities
    mothership.delete_namespaced_config_map("only-on-the-mothership", NAMESPACE)


def test_the_hosts_are_nodes_of_the_second_cluster_only(lab: LabConfig) -> None:
    second = _second(lab)
    workers = {n.metadata.name for n in client.CoreV1Api(kube.admin_client(second)).list_node().items}
    mothership = {n.metadata.name for n in client.CoreV1Api(kube.admin_client(lab)).list_node().items}
    assert set(lab.nodes) <= workers
    assert not set(lab.nodes) & mothership
    assert kube.nodes_ready(kube.admin_client(second), lab.nodes)
    assert "mgmt-1" not in workers  # the real node stays the mothership's
    assert lab.hosts_cluster == second


@pytest.fixture
def cluster_deployment(lab: LabConfig) -> Iterator[dict[str, Any]]:
    """A ClusterDeployment named like the second cluster, in a namespace of this test (deleted after)."""
    api = kube.admin_client(lab)
    _namespace(client.CoreV1Api(api), NAMESPACE)
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": "/".join(K0RDENT), "kind": "ClusterDeployment",
            "metadata": {"name": HYPERVISOR_CLUSTER, "namespace": NAMESPACE},
            "spec": {"template": "capm3-hosted-cp-0-1-0"}}
    try:
        created = custom.create_namespaced_custom_object(*K0RDENT, NAMESPACE, "clusterdeployments", body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        created = custom.get_namespaced_custom_object(*K0RDENT, NAMESPACE, "clusterdeployments",
                                                      HYPERVISOR_CLUSTER)
    yield created
    try:
        custom.delete_namespaced_custom_object(*K0RDENT, NAMESPACE, "clusterdeployments", HYPERVISOR_CLUSTER)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_the_kubeconfig_secret_reaches_the_second_cluster(
    lab: LabConfig, cluster_deployment: dict[str, Any]
) -> None:
    core = client.CoreV1Api(kube.admin_client(lab))
    name = f"{HYPERVISOR_CLUSTER}-kubeconfig"

    def secret() -> Any:
        try:
            return core.read_namespaced_secret(name, NAMESPACE)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    found = wait_until(secret, what=f"Secret {NAMESPACE}/{name} written by the capi stand-in",
                       timeout_seconds=30)
    assert found.type == SECRET_TYPE
    assert found.metadata.labels == {CLUSTER_NAME_LABEL: HYPERVISOR_CLUSTER}
    assert [(o.kind, o.uid) for o in found.metadata.owner_references] == [
        ("ClusterDeployment", cluster_deployment["metadata"]["uid"])]
    kubeconfig = yaml.safe_load(base64.b64decode(found.data[KUBECONFIG_DATA_KEY]))
    # A client built from the Secret alone (certificates inline) lists the second cluster's Nodes.
    nodes = {n.metadata.name for n in
             client.CoreV1Api(config.new_client_from_config_dict(kubeconfig)).list_node().items}
    assert set(lab.nodes) <= nodes and "mgmt-1" not in nodes
    assert kubeconfig["clusters"][0]["cluster"]["server"] == _second(lab).apiserver_url
    # Owned by the ClusterDeployment: the mothership's garbage collector deletes it with it.
    client.CustomObjectsApi(kube.admin_client(lab)).delete_namespaced_custom_object(
        *K0RDENT, NAMESPACE, "clusterdeployments", HYPERVISOR_CLUSTER)
    wait_until(lambda: secret() is None, what=f"Secret {name} gone with its ClusterDeployment",
               timeout_seconds=60)
