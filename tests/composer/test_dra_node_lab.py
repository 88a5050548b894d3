"""DRA mode's node side on the lab's real node ``mgmt-1``: the driver's kubelet plugin
(``node/kubeletplugin``, started by ``lab.node.start`` beside the kubelet) prepares a claim's GPU by
writing the claim's CDI spec, containerd v2 injects the device into the container, and the spec
goes when the pod does.

The GPU is simulated: its device file ``<lab dir>/gpus/mgmt-1/gpu-7`` is made by the gpu-agent's
own code (:class:`lab.gpu_agent.device_files.DeviceFiles`, a character device 1:3), and the
ResourceSlice is written here as the composer would publish it for a GPU attached to ``mgmt-1``
(the composer's own slices need a Director machine ``mgmt-1``): this checks the node side alone.
A DeviceClass and a pool of their own keep it apart from the composer's objects.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from composer.dra.deviceclass import device_class
from domain.composer_mode import DRA_DRIVER, dra_device_name
from lab import node as lab_node
from lab import processes
from lab.gpu_agent.device_files import NULL_DEVICE, DeviceFiles
from tests.composer.harness import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]

DIRECTOR_GPU = "GPU_7"
DEVICE = dra_device_name(DIRECTOR_GPU) or ""
CLASS = f"lab-node.{DRA_DRIVER}"
POOL = "lab-node"
SLICE = f"{DRA_DRIVER}-{POOL}"


@dataclass
class NodeSide:
    """The objects of one test: its namespace, the node's paths and the simulated GPU's files."""

    api: client.ApiClient
    ns: str
    paths: lab_node.NodePaths
    devices: DeviceFiles
    image: str

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def resource(self) -> client.ResourceV1Api:
        return client.ResourceV1Api(self.api)


def _slice() -> dict[str, Any]:
    """One ResourceSlice of the driver for ``mgmt-1`` with the GPU, without binding conditions
    (the composer publishes an attached, idle GPU this way: ``composer/dra/slices.py``)."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": SLICE},
        "spec": {"driver": DRA_DRIVER, "nodeName": lab_node.NODE_NAME,
                 "pool": {"name": POOL, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": DEVICE}]},
    }


def _delete(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def node_side(real_node: Any, lab_api: client.ApiClient, composer_image: Any) -> Iterator[NodeSide]:
    """mgmt-1 with its kubelet plugin, the GPU's device file, slice and DeviceClass, and a fresh
    namespace; all removed after."""
    p = lab_node.paths(real_node)
    assert processes.running(real_node.lab_dir, "kubelet-plugin"), "the kubelet plugin is not running"
    assert p.plugin_registration_socket.exists(), f"{p.plugin_registration_socket} missing"
    devices = DeviceFiles(lab_node.device_dir(real_node).parent)
    devices.sync({lab_node.NODE_NAME: [DIRECTOR_GPU]})
    side = NodeSide(lab_api, f"dra-node-{uuid.uuid4().hex[:6]}", p, devices, composer_image.ref)
    side.core.create_namespace({"metadata": {"name": side.ns}})
    side.resource.create_device_class(device_class(name=CLASS, extended_resource=None))
    _delete(side.resource.delete_resource_slice, SLICE)
    side.resource.create_resource_slice(_slice())
    try:
        yield side
    finally:
        _delete(side.core.delete_namespace, side.ns)
        wait_for(lambda: not side.core.list_namespaced_pod(side.ns).items, timeout=120,
                 what="the test's pods gone")
        _delete(side.resource.delete_resource_slice, SLICE)
        _delete(side.resource.delete_device_class, CLASS)
        devices.sync({})


def _claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}}


#: What the container prints: the device's type and numbers as the container sees them, and the
#: variable the claim's CDI spec sets.
PROBE = (f"if test -c /dev/{DEVICE}; then echo \"device /dev/{DEVICE} $(stat -c '%t:%T' /dev/{DEVICE})\"; "
         f"else echo 'no /dev/{DEVICE}'; fi; echo \"NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES\"; "
         "exec sleep 3600")


def _pod(name: str, claim: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": lab_node.NODE_NAME},
            "tolerations": [{"key": lab_node.TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [{"name": "probe", "image": image, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", PROBE], "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def _events(side: NodeSide, name: str) -> list[str]:
    items = side.core.list_namespaced_event(side.ns, field_selector=f"involvedObject.name={name}").items
    return [f"{e.reason}: {e.message}" for e in items]


def _log(side: NodeSide, name: str) -> str:
    """The pod's log as text (read unparsed: the client's parsed answer is a bytes repr)."""
    resp = side.core.read_namespaced_pod_log(name, side.ns, _preload_content=False)
    return str(resp.data.decode())


def _running(side: NodeSide, name: str) -> bool:
    phase = side.core.read_namespaced_pod(name, side.ns).status.phase
    assert phase in ("Pending", "Running"), (phase, _events(side, name))
    return phase == "Running"


def test_claim_on_mgmt_1_gets_its_gpu_through_cdi_and_the_spec_goes_with_the_pod(node_side: NodeSide) -> None:
    """The kubelet prepares the claim through the plugin, which writes the claim's CDI spec;
    containerd makes the GPU's device node in the container and sets the spec's variable; once the
    pod is deleted the kubelet unprepares the claim and the spec is gone."""
    side = node_side
    side.resource.create_namespaced_resource_claim(side.ns, _claim("gpu"))
    side.core.create_namespaced_pod(side.ns, _pod("probe", "gpu", side.image))
    try:
        wait_for(lambda: _running(side, "probe"), timeout=120, what="the probe pod Running")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; events: {_events(side, 'probe')}") from None
    claim = side.resource.read_namespaced_resource_claim("gpu", side.ns)
    (result,) = claim.status.allocation.devices.results
    assert (result.driver, result.pool, result.device) == (DRA_DRIVER, POOL, DEVICE)
    spec_file = side.paths.cdi_dir / f"{DRA_DRIVER}-gpu_{claim.metadata.uid}.json"
    spec = json.loads(spec_file.read_text())
    (cdi_device,) = spec["devices"]
    assert spec["kind"] == f"{DRA_DRIVER}/gpu" and cdi_device["name"] == f"{claim.metadata.uid}-{DEVICE}"
    (node,) = cdi_device["containerEdits"]["deviceNodes"]
    assert node["path"] == f"/dev/{DEVICE}"
    assert Path(node["hostPath"]) == side.devices.root / lab_node.NODE_NAME / DEVICE
    major, minor = NULL_DEVICE
    want = [f"device /dev/{DEVICE} {major:x}:{minor:x}", f"NVIDIA_VISIBLE_DEVICES={DEVICE}"]
    lines = wait_for(lambda: _log(side, "probe").splitlines()[:2], timeout=30, what="the container's output")
    assert lines == want

    side.core.delete_namespaced_pod("probe", side.ns, grace_period_seconds=0)
    wait_for(lambda: not spec_file.exists(), timeout=60, what=f"{spec_file.name} removed on unprepare")
    wait_for(lambda: not side.core.list_namespaced_pod(side.ns).items, timeout=60, what="the pod gone")


def test_gpu_without_device_file_on_the_node_keeps_the_pod_waiting_until_the_file_appears(
        node_side: NodeSide) -> None:
    """A GPU allocated to mgmt-1 whose device file is not there (not attached yet, or not seen
    yet): the plugin fails the prepare naming the GPU, the path and the node, the kubelet says so
    in the pod's Events and retries, and the pod starts once the file is there."""
    side = node_side
    side.devices.sync({})
    side.resource.create_namespaced_resource_claim(side.ns, _claim("gpu"))
    side.core.create_namespaced_pod(side.ns, _pod("probe", "gpu", side.image))
    missing = side.devices.root / lab_node.NODE_NAME / DEVICE
    said = f"GPU {DEVICE} (pool {POOL}) has no device file {missing} on node {lab_node.NODE_NAME}"
    wait_for(lambda: [e for e in _events(side, "probe") if e.startswith("FailedPrepareDynamicResources")
                      and said in e], timeout=60, what="the plugin's prepare error in the pod's Events")
    assert not _running(side, "probe") and not list(side.paths.cdi_dir.glob(f"{DRA_DRIVER}-gpu_*.json"))

    side.devices.sync({lab_node.NODE_NAME: [DIRECTOR_GPU]})
    wait_for(lambda: _running(side, "probe"), timeout=120, what="the pod Running once the file is there")
    lines = wait_for(lambda: _log(side, "probe").splitlines()[:2], timeout=30, what="the container's output")
    assert lines[0] == f"device /dev/{DEVICE} 1:3"
