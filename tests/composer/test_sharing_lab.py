"""GPU sharing end to end on the lab: the program's sharing settings, the GPU-Operator stand-in in
sharing mode and the composer, per mode (time-slicing, MPS renamed, MIG single, MIG mixed), and
tenant isolation on a time-sliced host.

Each scenario derives both sides from one stack-config ``gpu_sharing`` (``GpuSharingConfig``), as
the program does (docs/gpu-sharing.md): the host's node labels
(:func:`components.manifests.host_node_labels`), the device-plugin config the stand-in reads
(:func:`components.manifests.device_plugin_config`), and the composer's ``composer.sharing`` entry
(its offers from :meth:`stack_config.models.GpuSharingConfig.offers`). The stand-in turns config
and labels into resources and GFD labels by NVIDIA's rules (:mod:`lab.gpu_agent.nvidia`), on its
own: were it to advertise whole GPUs, as without a config, the pods asking for shared units would
not all run, and these tests fail.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from components.manifests import device_plugin_config, host_node_labels
from domain.gpu_sharing import passthrough_offer
from stack_config.gpus import merge_catalogue
from stack_config.models import GpuSharingConfig
from tests.composer.harness import Scenario, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
CATALOGUE = merge_catalogue([])


def _share(
    sc: Scenario, host: str, s: GpuSharingConfig, *, tenant: str, namespaces: list[str]
) -> dict[str, Any]:
    """Label ``host`` for sharing ``s`` (config ``<tenant>-gpu-sharing``), write the stand-in's
    config files, and return the composer's ``composer.sharing`` entry."""
    name = f"{tenant}-gpu-sharing"
    labels = host_node_labels(gpu_workload_mode=None, sharing=[(name, s)])
    sc.core.patch_node(host, {"metadata": {"labels": labels}})
    (sc.tmp / "plugin-configs.yaml").write_text(yaml.safe_dump({name: device_plugin_config(s)}))
    layouts = (
        {
            s.mig_config: {
                p.product: dict(p.mig_layouts[s.mig_config])
                for p in CATALOGUE.values()
                if s.mig_config in p.mig_layouts
            }
        }
        if s.mig_config
        else {}
    )
    (sc.tmp / "mig-layouts.yaml").write_text(yaml.safe_dump(layouts))
    offers = {
        m: [o.to_json() for o in s.offers(m, CATALOGUE)]
        for m in (T4, A100)
        if s.strategy != "mig" or s.mig_config in CATALOGUE[m].mig_layouts
    }
    entry: dict[str, Any] = {
        "name": name,
        "strategy": s.strategy,
        "hosts": [host],
        "tenant": tenant,
        "offers": offers,
    }
    if s.strategy != "mig":
        entry["namespaces"] = namespaces
    return entry


def _start(sc: Scenario, sharing: list[dict[str, Any]], *agent_args: str, gating: bool = False) -> None:
    """Start the stand-in in sharing mode and the composer with ``sharing``; ``gating``: with the
    chart's pod-gating webhook, so every GPU pod waits for the composer's placement."""
    tmp: Path = sc.tmp
    if gating:
        sc.composer_args += sc.enable_gating()
    sc.start_agent(
        "--plugin-configs",
        str(tmp / "plugin-configs.yaml"),
        "--mig-layouts",
        str(tmp / "mig-layouts.yaml"),
        *agent_args,
    )
    sc.start_composer("--idle-timeout-seconds", "30", "--sharing", json.dumps(sharing))


def _start_mig(sc: Scenario, host: str, mig_config: str, strategy: Literal["single", "mixed"]) -> None:
    """Tenant green's MIG sharing on ``host``; the stand-in re-runs mig-parted on a hot-plug
    (``--mig-reapply-on-hotplug``: NVIDIA's mig-manager does not, docs/gpu-sharing.md)."""
    s = GpuSharingConfig(strategy="mig", hosts=[host], mig_config=mig_config, mig_strategy=strategy)
    sharing = [_share(sc, host, s, tenant="green", namespaces=[])]
    _start(sc, sharing, "--mig-strategy", strategy, "--mig-apply-delay", "1", "--mig-reapply-on-hotplug")


def _alloc(sc: Scenario, node: str) -> dict[str, str]:
    return dict(sc.node_obj(node).status.allocatable or {})


def _labels(sc: Scenario, node: str) -> dict[str, str]:
    return dict(sc.node_obj(node).metadata.labels or {})


def test_time_slicing_one_gpu_serves_four_pods_of_the_tenant(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        host = sc.node("blade-slot-1")
        s = GpuSharingConfig(strategy="time-slicing", hosts=[host], replicas=4)
        _start(sc, [_share(sc, host, s, tenant="blue", namespaces=[sc.ns])])
        try:
            for i in range(4):
                sc.gpu_pod(f"ts-{i}", 1, product=f"{T4}-SHARED")
            for i in range(4):
                assert (
                    wait_for(lambda i=i: sc.running_on(f"ts-{i}"), timeout=60, what=f"ts-{i} running") == host
                )
            assert [len(g) for g in sc.attached().values()] == [1]  # one T4 for the four pods
            assert _alloc(sc, host)["nvidia.com/gpu"] == "4"
            lbl = _labels(sc, host)
            assert lbl["nvidia.com/gpu.product"] == f"{T4}-SHARED"
            assert (lbl["nvidia.com/gpu.replicas"], lbl["nvidia.com/gpu.sharing-strategy"]) == (
                "4",
                "time-slicing",
            )
            assert lbl["nvidia.com/gpu.count"] == "1"
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_mps_renamed_serves_gpu_shared_units(make_scenario):
    with make_scenario(inventory="dev.yaml") as sc:
        host = sc.node("blade-slot-2")
        s = GpuSharingConfig(strategy="mps", hosts=[host], replicas=2, rename_by_default=True)
        _start(sc, [_share(sc, host, s, tenant="blue", namespaces=[sc.ns])])
        try:
            for i in range(2):
                sc.gpu_pod(f"mps-{i}", 1, resource="nvidia.com/gpu.shared")
            for i in range(2):
                assert (
                    wait_for(lambda i=i: sc.running_on(f"mps-{i}"), timeout=60, what=f"mps-{i} running")
                    == host
                )
            assert [len(g) for g in sc.attached().values()] == [1]
            alloc, lbl = _alloc(sc, host), _labels(sc, host)
            assert alloc["nvidia.com/gpu.shared"] == "2" and "nvidia.com/gpu" not in alloc
            assert lbl["nvidia.com/gpu.product"] == T4  # renamed: no -SHARED
            assert (lbl["nvidia.com/gpu.sharing-strategy"], lbl["nvidia.com/mps.capable"]) == ("mps", "true")
        except AssertionError:
            print(sc.diagnostics())
            raise


def _mig_states(sc: Scenario, host: str, until: Any, timeout: float) -> list[str]:
    """``nvidia.com/mig.config.state`` values seen on ``host`` (in order, repeats dropped) until
    ``until()`` is true."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = _labels(sc, host).get("nvidia.com/mig.config.state")
        if st and (not seen or seen[-1] != st):
            seen.append(st)
        if until():
            return seen
        time.sleep(0.1)
    raise AssertionError(f"timed out; mig.config.state seen: {seen}\n{sc.diagnostics()}")


def test_mig_single_one_a100_serves_seven_1g_5gb_pods(make_scenario):
    with make_scenario(inventory="rich.yaml") as sc:
        host = sc.node("blade-slot-3")
        _start_mig(sc, host, "all-1g.5gb", "single")
        try:
            wait_for(
                lambda: _labels(sc, host).get("nvidia.com/mig.config.state") == "success",
                timeout=20,
                what="first mig-parted run (no GPUs)",
            )
            for i in range(7):
                sc.gpu_pod(f"mig-{i}", 1, product=f"{A100}-MIG-1g.5gb")
            states = _mig_states(
                sc, host, lambda: all(sc.running_on(f"mig-{i}") == host for i in range(7)), 90
            )
            assert states[-2:] == ["pending", "success"]  # the hot-plugged A100 partitioned
            assert len(sc.attached()[host]) == 1  # (blade-slot-4 keeps its static gpu7)
            assert _alloc(sc, host)["nvidia.com/gpu"] == "7"
            lbl = _labels(sc, host)
            assert (
                lbl["nvidia.com/gpu.product"] == f"{A100}-MIG-1g.5gb" and lbl["nvidia.com/gpu.count"] == "7"
            )
            assert lbl["nvidia.com/mig.strategy"] == "single"
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_mig_mixed_one_a100_serves_each_profile_of_its_layout(make_scenario):
    """all-balanced on an A100 40GB: 2 x 1g.5gb, 1 x 2g.10gb, 1 x 3g.20gb; three pods asking all
    of them take one A100."""
    with make_scenario(inventory="rich.yaml") as sc:
        host = sc.node("blade-slot-3")
        _start_mig(sc, host, "all-balanced", "mixed")
        try:
            # created together: the A100 composed for one also serves the other (its layout's other
            # profile), not a second A100
            sc.gpu_pod("small", 2, resource="nvidia.com/mig-1g.5gb")
            sc.gpu_pod("large", 1, resource="nvidia.com/mig-3g.20gb")
            for p in ("small", "large"):
                assert wait_for(lambda p=p: sc.running_on(p), timeout=90, what=f"{p} running") == host
            sc.gpu_pod("medium", 1, resource="nvidia.com/mig-2g.10gb")  # later: the same A100's 2g.10gb
            assert wait_for(lambda: sc.running_on("medium"), timeout=60, what="medium running") == host
            assert len(sc.attached()[host]) == 1  # (blade-slot-4 keeps its static gpu7)
            alloc, lbl = _alloc(sc, host), _labels(sc, host)
            assert (
                alloc["nvidia.com/mig-1g.5gb"],
                alloc["nvidia.com/mig-2g.10gb"],
                alloc["nvidia.com/mig-3g.20gb"],
            ) == ("2", "1", "1")
            assert (
                lbl["nvidia.com/gpu.product"] == A100
                and lbl["nvidia.com/mig-1g.5gb.product"] == f"{A100}-MIG-1g.5gb"
            )
            assert lbl["nvidia.com/mig.config.state"] == "success"
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_a_time_sliced_gpu_never_serves_two_tenants(make_scenario):
    """blade-slot-1 time-slices for tenant red (another namespace); the scenario's namespace is
    tenant blue's. Red's pods share one T4 there; blue's pod pinned there is refused with the
    reason, and blue's unpinned pod gets a whole T4 on blade-slot-2. With the gating webhook: a
    pod not gated would be the scheduler's to bind to the free shared units (docs/gpu-sharing.md
    "What the composer does not do")."""
    with make_scenario(inventory="dev.yaml") as sc:
        host, other = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        red = sc.add_namespace("red")
        s = GpuSharingConfig(strategy="time-slicing", hosts=[host], replicas=4)
        _start(sc, [_share(sc, host, s, tenant="red", namespaces=[red])], gating=True)
        try:
            for i in range(2):
                sc.gpu_pod(f"red-{i}", 1, product=f"{T4}-SHARED", namespace=red)
            for i in range(2):
                assert (
                    wait_for(lambda i=i: sc.running_on(f"red-{i}", red), timeout=60, what=f"red-{i}") == host
                )
            sc.gpu_pod("blue-pinned", 1, host=host)
            wait_for(
                lambda: any(r == "NoHostFits" and "'red'" in m for _, r, m in sc.events("blue-pinned")),
                timeout=30,
                what="blue's pinned pod refused naming red's sharing",
            )
            sc.gpu_pod("blue", 1)
            assert wait_for(lambda: sc.running_on("blue"), timeout=60, what="blue running") == other
            assert sc.running_on("blue-pinned") is None
            assert _alloc(sc, host)["nvidia.com/gpu"] == "4" and _alloc(sc, other)["nvidia.com/gpu"] == "1"
            assert len(sc.attached()[host]) == 1
        except AssertionError:
            print(sc.diagnostics())
            raise


def test_vm_passthrough_a_vm_pod_gets_an_a100_advertised_as_its_passthrough_resource(make_scenario):
    """A ``vm-passthrough`` host (docs/gpu-sharing.md "KubeVirt passthrough"): a pod asking the A100's
    passthrough resource, as KubeVirt's virt-launcher does, gets an A100 composed onto that host and
    runs; the stand-in advertises it as the sandbox device plugin would, under that resource and not
    ``nvidia.com/gpu``. Without the stand-in's passthrough rule (no ``--passthrough-resources``) the
    node advertises ``nvidia.com/gpu`` and the pod never runs."""
    resource = CATALOGUE[A100].passthrough_resource
    with make_scenario(inventory="rich.yaml") as sc:
        host = sc.node("blade-slot-3")
        labels = host_node_labels(gpu_workload_mode="vm-passthrough")
        sc.core.patch_node(host, {"metadata": {"labels": labels}})
        (sc.tmp / "plugin-configs.yaml").write_text(yaml.safe_dump({}))
        (sc.tmp / "mig-layouts.yaml").write_text(yaml.safe_dump({}))
        (sc.tmp / "passthrough.yaml").write_text(
            yaml.safe_dump({p.product: p.passthrough_resource for p in CATALOGUE.values()})
        )
        entry = {
            "name": "hv-vm-passthrough",
            "strategy": "vm-passthrough",
            "hosts": [host],
            "offers": {
                m: [passthrough_offer(m, CATALOGUE[m].passthrough_resource).to_json()] for m in (T4, A100)
            },
        }
        _start(sc, [entry], "--passthrough-resources", str(sc.tmp / "passthrough.yaml"))
        try:
            sc.gpu_pod("vm-a100", 1, resource=resource)
            assert wait_for(lambda: sc.running_on("vm-a100"), timeout=60, what="vm-a100 running") == host
            assert len(sc.attached()[host]) == 1  # one A100: a T4 would be advertised as its own resource
            alloc = _alloc(sc, host)
            assert alloc[resource] == "1" and alloc.get("nvidia.com/gpu", "0") == "0"
            assert "nvidia.com/gpu.product" not in _labels(sc, host)  # no GFD on a passthrough node
        except AssertionError:
            print(sc.diagnostics())
            raise
