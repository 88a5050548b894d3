"""DRA mode end to end: the composer as the DRA driver ``gpu.composer.liqid.io``, deployed by its
chart (``dra.mode: dra``) on the lab's real node ``mgmt-1``, against the lab's Kubernetes 1.36
control plane: its kube-scheduler allocates the driver's devices and waits in PreBind for the
binding conditions the composer sets.

The kwok Nodes of each scenario are served in DRA mode: the GPU-Operator stand-in writes GFD's
labels only (no ``nvidia.com/gpu`` capacity), so the scheduler serves ``nvidia.com/gpu`` through the
DeviceClass's extended resource. Scenarios: the article's handover with unmodified pods; a
ResourceClaimTemplate whose CEL selector names the product; an attach failure (the failure
condition, the pod scheduled again, the failed GPU not picked again); the leader killed while a pod
waits in PreBind (the new leader finishes, each GPU composed once).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from composer.dra.deviceclass import product_selector
from composer.dra.slices import ATTACHED, TAINT_KEY, VISIBLE_ON_NODE
from domain.composer_mode import DRA_DRIVER
from tests.composer import deployed as dep
from tests.composer.harness import E2E_LABEL, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _claims(d: dep.Deployed) -> list[dict[str, Any]]:
    """The scenario namespace's ResourceClaims as plain dicts."""
    res = client.ResourceV1Api(d.sc.api)
    items = res.list_namespaced_resource_claim(d.sc.ns).items
    return [client.ApiClient().sanitize_for_serialization(c) for c in items]


def _pod_claims(d: dep.Deployed, pod: str) -> list[dict[str, Any]]:
    """The claims owned by Pod ``pod`` (the scheduler's extended-resource claim, or the claims
    made from the pod's templates)."""
    return [c for c in _claims(d)
            if any(o.get("kind") == "Pod" and o.get("name") == pod
                   for o in c["metadata"].get("ownerReferences") or ())]


def _conditions(claim: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Our device name -> condition type -> status, from ``status.devices``."""
    out: dict[str, dict[str, str]] = {}
    for dev in (claim.get("status") or {}).get("devices") or ():
        if dev.get("driver") == DRA_DRIVER:
            out[dev["device"]] = {c["type"]: c["status"] for c in dev.get("conditions") or ()}
    return out


def _allocated(claim: dict[str, Any]) -> list[str]:
    """Our devices allocated to the claim."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or ()
    return sorted(r["device"] for r in results if r.get("driver") == DRA_DRIVER)


def _slice_devices(d: dep.Deployed) -> dict[str, dict[str, Any]]:
    """Device name -> device entry of the driver's published slices (each pool's highest
    generation)."""
    res = client.ResourceV1Api(d.sc.api)
    items = [client.ApiClient().sanitize_for_serialization(s)
             for s in res.list_resource_slice(field_selector=f"spec.driver={DRA_DRIVER}").items]
    top: dict[str, int] = {}
    for s in items:
        pool = s["spec"]["pool"]
        top[pool["name"]] = max(top.get(pool["name"], -1), pool["generation"])
    newest = [s for s in items if s["spec"]["pool"]["generation"] == top[s["spec"]["pool"]["name"]]]
    return {dev["name"]: dev for s in newest for dev in s["spec"].get("devices") or ()}


def _ready(d: dep.Deployed) -> None:
    wait_for(lambda: len(d.ready_pods()) == 2, timeout=120, what="two Ready Pods")
    wait_for(lambda: len(_slice_devices(d)) >= 2, timeout=60, what="the driver's devices published")


def test_article_scenario_in_dra_mode_unmodified_pods_composed_bound_reclaimed(make_deployed):
    """Pod A pinned to host A asks ``nvidia.com/gpu: 2``: the scheduler allocates two of the
    driver's devices on A, the composer composes exactly those, sets both binding conditions, the
    pod binds and runs; after it ends the GPUs go back to the pool and pod B pinned to host B gets
    the same two."""
    with make_deployed(mode="dra") as d:
        sc = d.sc
        try:
            _ready(d)
            devices = _slice_devices(d)
            assert set(devices) == {"gpu0", "gpu1"}, devices
            assert devices["gpu0"]["bindsToNode"] is True
            assert devices["gpu0"]["attributes"]["productName"]["string"] == "Tesla-T4"
            a, b = sc.node("blade-slot-1"), sc.node("blade-slot-2")
            assert "nvidia.com/gpu" not in (sc.node_obj(a).status.allocatable or {})

            sc.gpu_pod("train-a", 2, host=a)
            assert wait_for(lambda: sc.running_on("train-a"), timeout=90, what="pod A running") == a
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
            [claim] = _pod_claims(d, "train-a")
            assert _allocated(claim) == ["gpu0", "gpu1"]
            conds = _conditions(claim)
            assert conds == {g: {ATTACHED: "True", VISIBLE_ON_NODE: "True"} for g in ("gpu0", "gpu1")}, conds
            reasons = [r for _, r, _ in sc.events("train-a")]
            assert "BindingConditionsPending" in reasons, reasons  # the scheduler waited in PreBind

            sc.delete_pod("train-a")
            wait_for(lambda: sc.attached() == {}, timeout=90, what="GPUs back in the free pool")
            wait_for(lambda: set(_slice_devices(d)) == {"gpu0", "gpu1"}
                     and not any(dev.get("taints") for dev in _slice_devices(d).values()),
                     timeout=60, what="both GPUs published again, untainted")
            sc.gpu_pod("train-b", 2, host=b)
            assert wait_for(lambda: sc.running_on("train-b"), timeout=90, what="pod B running") == b
            assert sc.attached() == {b: ["gpu0", "gpu1"]}
            counters = sc.sim("GET", "state")["counters"]
            assert counters.get("POST relate/gpu") == 4, counters  # 2 to A, then the same 2 to B
            for p in d.pods():
                assert dep.SIM_PASSWORD not in d.logs(p.metadata.name)
        except AssertionError:
            print(d.describe(), sc.diagnostics(), _claims(d))
            raise


def test_a_claim_template_with_a_cel_selector_on_the_product_gets_that_model(make_deployed):
    """A pod whose ResourceClaimTemplate selects ``productName`` by CEL gets a GPU of that model;
    one selecting a model the fabric lacks stays Pending and nothing is composed for it."""
    with make_deployed(mode="dra") as d:
        sc = d.sc
        try:
            _ready(d)
            res = client.ResourceV1Api(sc.api)
            for name, product in (("t4", "Tesla-T4"), ("a100", "NVIDIA-A100-PCIE-40GB")):
                res.create_namespaced_resource_claim_template(sc.ns, {
                    "metadata": {"name": name},
                    "spec": {"spec": {"devices": {"requests": [{
                        "name": "gpu",
                        "exactly": {"deviceClassName": DRA_DRIVER,
                                    "selectors": [{"cel": {"expression": product_selector([product])}}]},
                    }]}}},
                })
            for pod, template in (("want-t4", "t4"), ("want-a100", "a100")):
                sc.core.create_namespaced_pod(sc.ns, {
                    "metadata": {"name": pod},
                    "spec": {
                        "nodeSelector": {E2E_LABEL: sc.sid},
                        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                        "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:stand-in",
                                        "resources": {"claims": [{"name": "gpu"}]}}],
                    },
                })
            host = wait_for(lambda: sc.running_on("want-t4"), timeout=90, what="the T4 pod running")
            attached = sc.attached()
            assert list(attached) == [host] and len(attached[host]) == 1, attached
            [claim] = _pod_claims(d, "want-t4")
            assert _conditions(claim)[attached[host][0]] == {ATTACHED: "True", VISIBLE_ON_NODE: "True"}
            p = sc.pod("want-a100")
            assert p is not None and p.status.phase == "Pending" and not p.spec.node_name
            assert sc.sim("GET", "state")["counters"].get("POST relate/gpu") == 1
        except AssertionError:
            print(d.describe(), sc.diagnostics(), _claims(d))
            raise


def test_attach_failure_sets_the_failure_condition_and_the_pod_gets_another_gpu(make_deployed):
    """The Director refuses the first attach: the claim's device gets ``AttachFailed`` True, the
    scheduler clears the allocation and schedules the pod again, the failed GPU is published with
    the ``NoSchedule`` taint, so the pod runs on the other GPU."""
    with make_deployed(mode="dra") as d:
        sc = d.sc
        try:
            _ready(d)
            sc.sim("POST", "faults", {"kind": "error", "method": "POST", "path": "relate/gpu",
                                      "status": 500, "message": "injected attach failure", "times": 1})
            a = sc.node("blade-slot-1")
            sc.gpu_pod("one", 1, host=a)

            def failed_device() -> str | None:
                tainted = [n for n, dev in _slice_devices(d).items()
                           if any(t["key"] == TAINT_KEY for t in dev.get("taints") or ())]
                return tainted[0] if len(tainted) == 1 else None

            bad = wait_for(failed_device, timeout=90, what="the failed GPU published tainted")
            assert wait_for(lambda: sc.running_on("one"), timeout=120, what="pod running") == a
            [good] = sc.attached()[a]
            assert good != bad, (good, bad)
            [claim] = _pod_claims(d, "one")
            assert _allocated(claim) == [good]
            assert _conditions(claim)[good] == {ATTACHED: "True", VISIBLE_ON_NODE: "True"}
            reasons = [r for _, r, _ in sc.events("one")]
            # two PreBind waits: the first ended by the failure condition, the second bound the pod
            assert reasons.count("BindingConditionsPending") >= 2, reasons
            evs = sc.core.list_namespaced_event(
                sc.ns, field_selector="involvedObject.kind=ResourceClaim").items
            failed = [e.message for e in evs if e.reason == "ComposeGaveUp"]
            assert failed and "injected attach failure" in failed[0], [(e.reason, e.message) for e in evs]
        except AssertionError:
            print(d.describe(), sc.diagnostics(), _claims(d))
            raise


def test_leader_killed_while_the_pod_waits_in_prebind_new_leader_finishes_composing_once(make_deployed):
    """The fabric reprogram hangs for 4 s while the pod waits in the scheduler's PreBind; the
    leader's Pod is force-deleted meanwhile: the new leader sets the binding conditions, the pod
    binds and runs, and each GPU was related once."""
    with make_deployed(mode="dra") as d:
        sc = d.sc
        a = sc.node("blade-slot-1")
        try:
            _ready(d)
            counters = dep.compose_across_a_leader_kill(d, "crash", a)
            assert counters.get("POST relate/gpu") == 2, counters  # each GPU related exactly once
            assert counters.get("POST fabric/reprogram") == 1, counters
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
            [claim] = _pod_claims(d, "crash")
            both = {ATTACHED: "True", VISIBLE_ON_NODE: "True"}
            assert _conditions(claim) == {g: both for g in ("gpu0", "gpu1")}
        except AssertionError:
            print(d.describe(), sc.diagnostics(), _claims(d))
            raise


#: What the real node's container prints: each of its GPU device files (character devices under
#: /dev named like the driver's devices) and the variable the claim's CDI spec sets.
PROBE = ("for f in /dev/gpu*; do test -c \"$f\" && echo \"device $f\"; done; "
         "echo \"NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES\"; exec sleep 3600")


def test_a_gpu_composed_onto_the_real_node_reaches_the_container_through_the_charts_kubelet_plugin(
        make_deployed, real_node, kubelet_plugin_image):
    """Machine ``mgmt-1`` is the lab's real node: an unmodified pod pinned there asks
    ``nvidia.com/gpu: 1``; the composer composes the allocated GPU onto mgmt-1, the GPU-Operator
    stand-in makes its device file, the binding conditions go True, the pod binds, the chart's
    kubelet-plugin Pod prepares the claim (CDI spec) and the container sees the GPU's device node.
    Once the pod is gone the spec goes, the GPU is reclaimed and its device file removed."""
    from lab import node as lab_node

    with make_deployed(mode="dra", real_node=real_node, plugin_image=kubelet_plugin_image) as d:
        sc = d.sc
        core = sc.core
        try:
            _ready(d)
            wait_for(lambda: [p for p in d.plugin_pods() if p.status.phase == "Running"],
                     timeout=60, what="the kubelet plugin's Pod Running on mgmt-1")
            node_paths = lab_node.paths(real_node)
            wait_for(node_paths.plugin_registration_socket.exists, timeout=30,
                     what="the DaemonSet's plugin registered with the kubelet")
            core.create_namespaced_pod(sc.ns, {
                "metadata": {"name": "on-mgmt"},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": lab_node.NODE_NAME},
                    "tolerations": dep.SYSTEM_TOLERATIONS,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "cuda", "image": d.image, "imagePullPolicy": "Never",
                                    "command": ["sh", "-c", PROBE],
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                },
            })

            def running() -> bool:
                phase = core.read_namespaced_pod("on-mgmt", sc.ns).status.phase
                assert phase in ("Pending", "Running"), (phase, sc.events("on-mgmt"))
                return phase == "Running"

            wait_for(running, timeout=150, what="the pod Running on mgmt-1")
            attached = sc.attached()
            assert list(attached) == [lab_node.NODE_NAME] and len(attached[lab_node.NODE_NAME]) == 1, attached
            [gpu] = attached[lab_node.NODE_NAME]
            [claim] = _pod_claims(d, "on-mgmt")
            assert _allocated(claim) == [gpu]
            assert _conditions(claim)[gpu] == {ATTACHED: "True", VISIBLE_ON_NODE: "True"}
            device_file = lab_node.device_dir(real_node) / gpu
            spec_file = node_paths.cdi_dir / f"{DRA_DRIVER}-gpu_{claim['metadata']['uid']}.json"
            assert device_file.is_char_device() and spec_file.exists(), (device_file, spec_file)

            def output() -> list[str]:
                text = core.read_namespaced_pod_log("on-mgmt", sc.ns, _preload_content=False).data.decode()
                lines = text.splitlines()
                return lines if any(line.startswith("NVIDIA_VISIBLE_DEVICES=") for line in lines) else []

            lines = wait_for(output, timeout=30, what="the container's output")
            assert lines == [f"device /dev/{gpu}", f"NVIDIA_VISIBLE_DEVICES={gpu}"], lines

            core.delete_namespaced_pod("on-mgmt", sc.ns, grace_period_seconds=0)
            wait_for(lambda: not spec_file.exists(), timeout=60, what="the claim's CDI spec removed")
            wait_for(lambda: sc.attached() == {}, timeout=90, what="the GPU reclaimed from mgmt-1")
            wait_for(lambda: not device_file.exists(), timeout=30, what="the GPU's device file gone")
        except AssertionError:
            print(d.describe(), sc.diagnostics(), _claims(d))
            raise
