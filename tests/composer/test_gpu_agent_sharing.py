"""The GPU-Operator stand-in per sharing mode, against NVIDIA's own code and tests.

Expected values are transcribed from NVIDIA k8s-device-plugin v0.17.1 (``README.md`` "With CUDA
Time-Slicing": 8 GPUs at 10 replicas advertise 80 ``nvidia.com/gpu`` or, renamed, 80
``nvidia.com/gpu.shared``; ``internal/lm/resource_test.go`` "time-slicing appends suffix and
doubles count", "time-slicing renamed does not append suffix", "mps appends suffix";
``internal/lm/mig-strategy_test.go`` "single mig-enabled device returns mig labels", "multiple
non-mig device returns non-mig (none) labels"; ``internal/lm/mig-strategy.go`` invalid and mixed
labelling) and mig-parted v0.12.1 (``deployments/container/reconfigure-mig.sh``:
``nvidia.com/mig.config.state`` pending, then success). Then the agent in sharing mode against a
fake API: a node's labels pick the config, mig-manager's state goes pending -> success.
"""

from __future__ import annotations

import pytest

from lab.gpu_agent.agent import Advert, GpuAgent
from lab.gpu_agent.nvidia import (
    NodeView,
    PluginConfig,
    PluginConfigError,
    node_view,
    parse_plugin_config,
    passthrough_view,
)
from tests.composer.test_gpu_agent import Clock, FakeCore, FakeDirector

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
#: the sandbox device plugin's resource of an A100 PCIe 40GB (catalogue passthrough_resource)
PT_A100 = "nvidia.com/GA100_A100_PCIE_40GB"


def _ts(replicas: int, *, rename: bool = False, key: str = "timeSlicing") -> dict:
    return {
        "version": "v1",
        "sharing": {
            key: {"renameByDefault": rename, "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
        },
    }


def _base(resource: str, product: str, count: int, replicas: int, strategy: str) -> dict[str, str]:
    return {
        f"{resource}.product": product,
        f"{resource}.count": str(count),
        f"{resource}.replicas": str(replicas),
        f"{resource}.sharing-strategy": strategy,
    }


def test_time_slicing_multiplies_the_gpus_and_marks_the_product_shared():
    # README: 8 GPUs x 10 replicas -> 80 nvidia.com/gpu; resource_test.go: MOCKMODEL-SHARED
    v = node_view(gpus=8, product=T4, config=parse_plugin_config(_ts(10)))
    assert v.resources == {"nvidia.com/gpu": 80}
    assert v.labels == {
        **_base("nvidia.com/gpu", "Tesla-T4-SHARED", 8, 10, "time-slicing"),
        "nvidia.com/mps.capable": "false",
    }


def test_renamed_time_slicing_advertises_gpu_shared_and_keeps_the_product():
    v = node_view(gpus=8, product=T4, config=parse_plugin_config(_ts(10, rename=True)))
    assert v.resources == {"nvidia.com/gpu.shared": 80}
    assert v.labels["nvidia.com/gpu.product"] == T4
    assert v.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


def test_mps_is_shared_and_mps_capable():
    v = node_view(gpus=1, product=T4, config=parse_plugin_config(_ts(2, key="mps")))
    assert v.resources == {"nvidia.com/gpu": 2}
    assert v.labels == {
        **_base("nvidia.com/gpu", "Tesla-T4-SHARED", 1, 2, "mps"),
        "nvidia.com/mps.capable": "true",
    }


def test_no_sharing_and_one_replica_are_whole_gpus():
    for cfg in ({"version": "v1"}, _ts(1)):
        v = node_view(gpus=2, product=T4, config=parse_plugin_config(cfg))
        assert v.resources == {"nvidia.com/gpu": 2}
        assert v.labels == {**_base("nvidia.com/gpu", T4, 2, 1, "none"), "nvidia.com/mps.capable": "false"}


def test_config_errors_name_the_field():
    with pytest.raises(PluginConfigError, match="version"):
        parse_plugin_config({"version": "v2"})
    with pytest.raises(PluginConfigError, match="replicas"):
        parse_plugin_config(_ts(0))
    with pytest.raises(PluginConfigError, match="migStrategy"):
        parse_plugin_config({"version": "v1", "flags": {"migStrategy": "all"}})


SINGLE = PluginConfig(mig_strategy="single")
MIXED = PluginConfig(mig_strategy="mixed")


def test_mig_single_advertises_mig_devices_as_gpus_with_the_profile_in_the_product():
    v = node_view(gpus=2, product=A100, config=SINGLE, mig_layout={"1g.5gb": 7}, partitioned=2)
    assert v.resources == {"nvidia.com/gpu": 14}
    assert v.labels == {
        **_base("nvidia.com/gpu", f"{A100}-MIG-1g.5gb", 14, 1, "none"),  # count: MIG devices
        "nvidia.com/mps.capable": "false",
        "nvidia.com/mig.strategy": "single",
    }
    me = node_view(gpus=1, product=A100, config=SINGLE, mig_layout={"1g.5gb+me": 1}, partitioned=1)
    assert me.labels["nvidia.com/gpu.product"] == f"{A100}-MIG-1g.5gb.me"  # '+' spelt '.'


def test_mig_single_before_mig_parted_ran_is_whole_gpus():
    v = node_view(gpus=2, product=A100, config=SINGLE, mig_layout={"1g.5gb": 7}, partitioned=0)
    assert v.resources == {"nvidia.com/gpu": 2}
    assert v.labels["nvidia.com/gpu.product"] == A100 and v.labels["nvidia.com/mig.strategy"] == "single"


@pytest.mark.parametrize(
    ("layout", "partitioned"),
    [({"1g.5gb": 2, "2g.10gb": 1}, 1), ({"1g.5gb": 7}, 1)],
    ids=["two-profiles", "enabled-and-disabled-mixed"],
)
def test_mig_single_invalid_node_is_labelled_invalid_with_nothing_to_offer(layout, partitioned):
    v = node_view(
        gpus=2 if partitioned == 1 and len(layout) == 1 else 1,
        product=A100,
        config=SINGLE,
        mig_layout=layout,
        partitioned=partitioned,
    )
    assert "nvidia.com/gpu" not in v.resources
    assert v.labels["nvidia.com/gpu.product"] == f"{A100}-MIG-INVALID"
    assert (v.labels["nvidia.com/gpu.count"], v.labels["nvidia.com/gpu.replicas"]) == ("0", "0")
    assert v.labels["nvidia.com/gpu.sharing-strategy"] == ""


def test_mig_mixed_advertises_one_resource_per_profile_and_keeps_the_parent_product():
    v = node_view(
        gpus=1,
        product=A100,
        config=MIXED,
        mig_layout={"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        partitioned=1,
    )
    assert v.resources == {
        "nvidia.com/mig-1g.5gb": 2,
        "nvidia.com/mig-2g.10gb": 1,
        "nvidia.com/mig-3g.20gb": 1,
    }
    assert v.labels["nvidia.com/gpu.product"] == A100  # the MIG-enabled parent, without sharing
    assert v.labels["nvidia.com/gpu.replicas"] == "0"
    assert v.labels["nvidia.com/mig-1g.5gb.product"] == f"{A100}-MIG-1g.5gb"
    assert v.labels["nvidia.com/mig-1g.5gb.count"] == "2"
    assert v.labels["nvidia.com/mig.strategy"] == "mixed"


# --- the agent in sharing mode -----------------------------------------------------------------
CONFIGS = {
    "ts": parse_plugin_config(_ts(4)),
    "mig": parse_plugin_config({"version": "v1", "flags": {"migStrategy": "single"}}),
}
LAYOUTS = {"all-1g.5gb": {A100: {"1g.5gb": 7}}}


def _agent(core: FakeCore, director: FakeDirector, clock: Clock, **kw) -> GpuAgent:
    return GpuAgent(
        core,
        director,
        advertise_delay_seconds=0.5,
        plugin_configs=CONFIGS,
        mig_layouts=LAYOUTS,
        mig_apply_seconds=2.0,
        clock=clock,
        **kw,
    )


def _steps(agent: GpuAgent, clock: Clock, *times: float) -> None:
    """One poll at each clock time."""
    for t in times:
        clock.t = t
        agent.step()


def _node(core: FakeCore, name: str) -> tuple[dict, dict]:
    n = core.nodes[name]
    return n["status"]["allocatable"], n["metadata"]["labels"]


def test_the_node_label_picks_the_config_and_detach_removes_what_was_written():
    core, director, clock = FakeCore(["ts-host", "plain"]), FakeDirector(), Clock()
    core.nodes["ts-host"]["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "ts"
    agent = _agent(core, director, clock)
    director.machines.update({"ts-host": [T4], "plain": [T4, T4]})
    agent.step()
    clock.t = 1.0
    assert agent.step() == {"ts-host": Advert(1, T4), "plain": Advert(2, T4)}
    alloc, labels = _node(core, "ts-host")
    assert alloc["nvidia.com/gpu"] == "4" and labels["nvidia.com/gpu.product"] == "Tesla-T4-SHARED"
    assert labels["nvidia.com/gpu.replicas"] == "4" and labels["nvidia.com/gpu.present"] == "true"
    alloc, labels = _node(core, "plain")
    assert alloc["nvidia.com/gpu"] == "2" and labels["nvidia.com/gpu.product"] == T4
    assert agent.step() == {}  # steady: nothing advertised again
    director.machines.clear()
    clock.t = 2.0
    agent.step()
    clock.t = 3.0
    agent.step()
    alloc, labels = _node(core, "ts-host")
    assert "nvidia.com/gpu" not in alloc and alloc["cpu"] == "8"
    assert labels == {"nvidia.com/device-plugin.config": "ts"}  # the GFD labels gone with the GPU


def test_mig_manager_goes_pending_then_success_and_a_hot_plugged_gpu_waits_for_a_rerun():
    core, director, clock = FakeCore(["mig-host"]), FakeDirector(), Clock()
    lbl = core.nodes["mig-host"]["metadata"]["labels"]
    lbl["nvidia.com/device-plugin.config"] = "mig"
    director.machines["mig-host"] = [A100]
    agent = _agent(core, director, clock)
    agent.step()
    clock.t = 1.0
    agent.step()
    assert "nvidia.com/mig.config.state" not in lbl  # no nvidia.com/mig.config label yet
    assert lbl["nvidia.com/gpu.product"] == A100 and lbl["nvidia.com/mig.strategy"] == "single"
    lbl["nvidia.com/mig.config"] = "all-1g.5gb"
    clock.t = 1.5
    agent.step()
    assert lbl["nvidia.com/mig.config.state"] == "pending"
    assert lbl["nvidia.com/gpu.product"] == A100  # paused while pending: the whole GPU as before
    clock.t = 3.0
    agent.step()
    assert lbl["nvidia.com/mig.config.state"] == "pending"
    clock.t = 3.5
    agent.step()
    alloc, lbl = _node(core, "mig-host")
    assert lbl["nvidia.com/mig.config.state"] == "success"
    assert alloc["nvidia.com/gpu"] == "7" and lbl["nvidia.com/gpu.product"] == f"{A100}-MIG-1g.5gb"
    # a second GPU hot-plugged: NVIDIA's mig-manager does not run again -> enabled and disabled mixed
    director.machines["mig-host"] = [A100, A100]
    _steps(agent, clock, 4.0, 5.0)
    alloc, lbl = _node(core, "mig-host")
    assert lbl["nvidia.com/gpu.product"] == f"{A100}-MIG-INVALID" and "nvidia.com/gpu" not in alloc
    assert lbl["nvidia.com/mig.config.state"] == "success"


def test_a_restarted_mig_manager_partitions_a_hot_plugged_gpu():
    """As mig-manager v0.12.1: one (fake) pod per MIG node; a hot-plug alone runs nothing, the
    pod's restart (deleted, recreated by its "DaemonSet") runs mig-parted again."""
    core, director, clock = FakeCore(["mig-host"]), FakeDirector(), Clock()
    lbl = core.nodes["mig-host"]["metadata"]["labels"]
    lbl |= {"nvidia.com/device-plugin.config": "mig", "nvidia.com/mig.config": "all-1g.5gb"}
    agent = _agent(core, director, clock)
    agent.step()
    assert core.pods["nvidia-mig-manager-mig-host"]["metadata"]["labels"] == {"app": "nvidia-mig-manager"}
    clock.t = 2.5
    agent.step()
    assert lbl["nvidia.com/mig.config.state"] == "success"  # the run on no GPUs
    director.machines["mig-host"] = [A100]
    _steps(agent, clock, 3.0, 6.0)
    assert lbl["nvidia.com/mig.config.state"] == "success"  # no run: the A100 stays whole
    assert _node(core, "mig-host")[0]["nvidia.com/gpu"] == "1"
    del core.pods["nvidia-mig-manager-mig-host"]  # the composer restarts it
    clock.t = 6.5
    agent.step()
    assert lbl["nvidia.com/mig.config.state"] == "pending"
    clock.t = 9.0
    agent.step()
    alloc, lbl = _node(core, "mig-host")
    assert lbl["nvidia.com/mig.config.state"] == "success" and alloc["nvidia.com/gpu"] == "7"


def test_a_product_without_a_layout_fails_the_mig_run():
    core, director, clock = FakeCore(["mig-host"]), FakeDirector(), Clock()
    lbl = core.nodes["mig-host"]["metadata"]["labels"]
    lbl |= {"nvidia.com/device-plugin.config": "mig", "nvidia.com/mig.config": "all-1g.5gb"}
    director.machines["mig-host"] = [T4]
    agent = _agent(core, director, clock)
    agent.step()
    clock.t = 2.5
    agent.step()
    alloc, lbl = _node(core, "mig-host")
    assert lbl["nvidia.com/mig.config.state"] == "failed"
    assert alloc["nvidia.com/gpu"] == "1" and lbl["nvidia.com/gpu.product"] == T4


def test_node_view_default_is_empty():
    assert NodeView().resources == {} and NodeView().labels == {}


def test_passthrough_view_is_the_sandbox_device_plugins_resource_only():
    # gpu-operator controllers/state_manager.go gpuStateLabels: vm-passthrough nodes run the
    # sandbox device plugin, not the container device plugin or GFD
    assert passthrough_view(gpus=2, resource=PT_A100) == NodeView({PT_A100: 2}, {})
    assert passthrough_view(gpus=0, resource=PT_A100) == NodeView()
    assert passthrough_view(gpus=1, resource=None) == NodeView()  # a product without a known resource


def test_a_vm_passthrough_node_advertises_its_gpus_as_their_passthrough_resource():
    core, director, clock = FakeCore(["hv-1", "plain"]), FakeDirector(), Clock()
    core.nodes["hv-1"]["metadata"]["labels"]["nvidia.com/gpu.workload.config"] = "vm-passthrough"
    agent = _agent(core, director, clock, passthrough_resources={A100: PT_A100})
    director.machines.update({"hv-1": [A100, A100], "plain": [A100]})
    _steps(agent, clock, 0.0, 1.0)
    alloc, labels = _node(core, "hv-1")
    assert alloc[PT_A100] == "2" and "nvidia.com/gpu" not in alloc
    assert "nvidia.com/gpu.product" not in labels  # no GFD there
    alloc, labels = _node(core, "plain")  # a container node: whole GPUs as before
    assert alloc["nvidia.com/gpu"] == "1" and PT_A100 not in alloc
    director.machines["hv-1"] = [A100]
    _steps(agent, clock, 2.0, 3.0)
    assert _node(core, "hv-1")[0][PT_A100] == "1"
    director.machines.pop("hv-1")
    _steps(agent, clock, 4.0, 5.0)
    assert PT_A100 not in _node(core, "hv-1")[0]
