"""A ``vm-passthrough`` host (``composer.sharing`` strategy ``vm-passthrough``, docs/gpu-sharing.md
"KubeVirt passthrough"): a pod asking a model's passthrough resource, as KubeVirt's virt-launcher
does, gets a GPU of that model composed onto such a host; a pod asking ``nvidia.com/gpu`` is never
placed there, and a host that shares nothing never serves the passthrough resource.

The policy is read as the chart hands it over (:class:`composer.shell.config.Settings`). With the
composer's ``is_gpu_resource`` not knowing passthrough resources, or ``Settings`` refusing the
strategy, the first test fails.
"""

from __future__ import annotations

from typing import Any

from composer.decide.planner import plan
from composer.decide.round_types import Policy
from composer.model.models import FreeGpu, HostState, Reason
from composer.model.podspec import gpu_request, pod_view
from composer.shell.config import Settings
from tests.composer.fakes import pod

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
PT_A100, PT_T4 = "nvidia.com/GA100_A100_PCIE_40GB", "nvidia.com/TU104GL_TESLA_T4"
GIB = 1 << 30

#: what the program writes for the mothership's composer and hypervisor cluster ``hv`` (vm-passthrough)
ENTRY = {
    "name": "hv-vm-passthrough",
    "strategy": "vm-passthrough",
    "hosts": ["hv-1"],
    "offers": {
        A100: [{"resource": PT_A100, "units": 1, "product": A100}],
        T4: [{"resource": PT_T4, "units": 1, "product": T4}],
    },
}


def _policy() -> Policy:
    return Settings(director_url="http://d", director_password="pw", sharing=[ENTRY]).policy()


def _host(name: str, policy: Policy) -> HostState:
    return HostState(name, cpu_free_millis=64_000, memory_free_bytes=512 * GIB,
                     sharing=policy.sharing.get(name))


def _request(policy: Policy, units: int, resource: str, **selector: str) -> Any:
    p = pod_view(pod("p", units, resource=resource, host=selector.get("host")))
    return gpu_request(
        p, pool="default", units_per_gpu=policy.units_per_gpu, resource_models=policy.resource_models,
        sharing_only=policy.sharing_only, most_units=policy.most_units,
    )


def test_a_vm_pod_asking_the_passthrough_resource_gets_a_gpu_of_its_model_on_the_passthrough_host() -> None:
    policy = _policy()
    hosts = [_host("bm-0", policy), _host("hv-1", policy)]
    free = [FreeGpu("gpu0", T4, "sw0"), FreeGpu("gpu1", T4, "sw0"), FreeGpu("gpu8", A100, "sw1")]
    p = plan([_request(policy, 1, PT_A100)], hosts, free)
    assert [(x.host, x.model, x.devices) for x in p.placements] == [("hv-1", A100, ("gpu8",))]
    assert p.refusals == ()
    # two passthrough GPUs for one VM: two A100s, one unit each
    p = plan([_request(policy, 2, PT_A100)], hosts, [*free, FreeGpu("gpu9", A100, "sw1")])
    assert [(x.host, len(x.devices)) for x in p.placements] == [("hv-1", 2)]
    # no A100 free: a T4 does not yield the A100's resource
    p = plan([_request(policy, 1, PT_A100)], hosts, free[:2])
    assert p.placements == () and [x.reason for x in p.refusals] == [Reason.NO_HOST_FITS]


def test_a_container_pod_asking_nvidia_gpu_is_not_placed_on_the_passthrough_host() -> None:
    policy = _policy()
    free = [FreeGpu("gpu8", A100, "sw1")]
    p = plan([_request(policy, 1, "nvidia.com/gpu")], [_host("hv-1", policy), _host("bm-0", policy)], free)
    assert [(x.host, x.model) for x in p.placements] == [("bm-0", A100)]
    pinned = _request(policy, 1, "nvidia.com/gpu", host="hv-1")
    p = plan([pinned], [_host("hv-1", policy)], free)
    assert p.placements == () and [x.reason for x in p.refusals] == [Reason.NO_HOST_FITS]
    assert "offers no nvidia.com/gpu" in p.refusals[0].message
    # and the passthrough resource is never composed for on a host that shares nothing
    p = plan([_request(policy, 1, PT_A100)], [_host("bm-0", policy)], free)
    assert p.placements == () and [x.reason for x in p.refusals] == [Reason.NO_HOST_FITS]
