"""The DRA driver's ResourceSlices from a fabric view (composer.dra.slices), on plain data."""

from __future__ import annotations

import copy
import json

import pytest

from composer.dra import slices as dra
from composer.model.fabric import FabricGpu, FabricView
from tests.imports import ROOT, imported_names

HOSTS = {"blade-1": "default", "blade-2": "default", "blade-3": "tenant-a"}


def view(*gpus: FabricGpu, groups: dict[str, str] | None = None) -> FabricView:
    machine_groups = groups if groups is not None else {h: "1" for h in HOSTS}
    return FabricView(gpus, frozenset(machine_groups), machine_groups)


def devices(slice_set: dra.SliceSet) -> dict[str, dict]:
    return {d["name"]: d for s in slice_set.slices for d in s["spec"]["devices"]}


def hosts_of(slice_set: dra.SliceSet, device: str) -> list[str]:
    for s in slice_set.slices:
        if any(d["name"] == device for d in s["spec"]["devices"]):
            (term,) = s["spec"]["nodeSelector"]["nodeSelectorTerms"]
            (expr,) = term["matchExpressions"]
            assert (expr["key"], expr["operator"]) == ("kubernetes.io/hostname", "In")
            return list(expr["values"])
    raise AssertionError(f"{device} not published")


def test_each_free_gpu_is_one_device_with_identity_and_binding_conditions():
    v = view(
        FabricGpu("gpu0", "Tesla-T4", "swit-1"),
        FabricGpu("gpu1", "Tesla-T4", "swit-2", machine="blade-1"),  # attached: not free
        FabricGpu("gpu2", "Tesla-T4", "swit-1", healthy=False),
        FabricGpu("gpu3", "Tesla-T4", "swit-1", owner_tag="pulumi"),  # the program's static GPU
        FabricGpu("gpu4", "NVIDIA-A100-PCIE-40GB", "swit-2"),
        FabricGpu("gpu5", "Tesla-T4", "swit-2"),
    )
    out = dra.build_slices(
        v, hosts=HOSTS, generation=3, excluded={"gpu5"},
        facts={"gpu4": dra.GpuFacts("NVIDIA A100-PCIE-40GB", 40960, 2)},
    )
    got = devices(out)
    assert sorted(got) == ["gpu0", "gpu4"]
    a100 = got["gpu4"]
    assert a100["attributes"] == {
        "productName": {"string": "NVIDIA-A100-PCIE-40GB"},
        "model": {"string": "NVIDIA A100-PCIE-40GB"},
        "pcieSwitch": {"string": "swit-2"},
        "pool": {"string": ""},
        "directorName": {"string": "gpu4"},
        "fabric": {"int": 2},
    }
    assert a100["capacity"] == {"memory": {"value": "40Gi"}}
    assert a100["bindsToNode"] is True
    assert a100["bindingConditions"] == ["Attached", "VisibleOnNode"]
    assert a100["bindingFailureConditions"] == ["AttachFailed"]
    assert "model" not in got["gpu0"]["attributes"] and "capacity" not in got["gpu0"]
    for s in out.slices:
        assert s["apiVersion"] == "resource.k8s.io/v1" and s["kind"] == "ResourceSlice"
        assert s["spec"]["driver"] == "gpu.composer.liqid.io"
        assert s["spec"]["pool"] == {"name": "fabric", "generation": 3, "resourceSliceCount": len(out.slices)}
    json.dumps(out.slices)  # JSON-ready


def test_hosts_are_those_reaching_the_fabric_and_allowed_by_group_and_pool():
    groups = {"blade-1": "1", "blade-2": "2", "blade-3": "1", "not-a-node": "1"}
    v = view(
        FabricGpu("gpu0", "Tesla-T4"),  # system free pool, shared: every host
        FabricGpu("gpu1", "Tesla-T4", group="2"),  # group 2's pool: its machines only
        FabricGpu("gpu2", "Tesla-T4"),  # reserved to tenant-a: its hosts only
        FabricGpu("gpu3", "Tesla-T4", group="2"),  # tenant-a, but no tenant-a host is in group 2
        groups=groups,
    )
    hosts = {**HOSTS, "no-director-machine": "default"}
    pools = {"gpu2": "tenant-a", "gpu3": "tenant-a"}
    out = dra.build_slices(v, hosts=hosts, generation=0, device_pools=pools)
    assert hosts_of(out, "gpu0") == ["blade-1", "blade-2", "blade-3"]
    assert hosts_of(out, "gpu1") == ["blade-2"]
    assert hosts_of(out, "gpu2") == ["blade-3"]
    assert devices(out)["gpu2"]["attributes"]["pool"] == {"string": "tenant-a"}
    assert out.omitted == {"gpu3": "no host that reaches the fabric may take it"}


def test_slices_hold_at_most_128_devices_and_64_with_a_taint():
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4") for i in range(300)]
    out = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0)
    assert [len(s["spec"]["devices"]) for s in out.slices] == [128, 128, 44]
    assert [d["name"] for d in out.slices[0]["spec"]["devices"]][:3] == ["gpu0", "gpu1", "gpu2"]
    names = [s["metadata"]["name"] for s in out.slices]
    assert names == [f"gpu.composer.liqid.io-fabric-{i}" for i in range(3)]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in out.slices} == {3}

    tainted = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0, tainted={"gpu7": "AttachFailed"})
    assert [len(s["spec"]["devices"]) for s in tainted.slices] == [64, 64, 64, 64, 44]
    assert devices(tainted)["gpu7"]["taints"] == [
        {"key": "gpu.composer.liqid.io/unusable", "value": "AttachFailed", "effect": "NoSchedule"}
    ]


def test_a_thousand_hosts_stay_far_below_the_request_size_limit():
    hosts = {f"worker-{i:04d}": "default" for i in range(1000)}
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4", "swit-1") for i in range(300)]
    out = dra.build_slices(view(*gpus, groups=dict.fromkeys(hosts, "1")), hosts=hosts, generation=0)
    # etcd's default request limit is 1.5 MiB; one host list per slice, not per device.
    assert max(len(json.dumps(s)) for s in out.slices) < 256 * 1024


def test_names_that_make_no_device_name_are_omitted_not_published():
    v = view(FabricGpu("GPU_7", "Tesla-T4"), FabricGpu("gpu-7", "Tesla-T4"), FabricGpu("___", "Tesla-T4"),
             FabricGpu("gpu8", "X" * 65))
    out = dra.build_slices(v, hosts=HOSTS, generation=0)
    got = devices(out)
    assert list(got) == ["gpu-7"]
    assert got["gpu-7"]["attributes"]["directorName"] == {"string": "GPU_7"}
    assert set(out.omitted) == {"gpu-7", "___", "gpu8"}
    assert "also 'GPU_7'" in out.omitted["gpu-7"]
    assert "productName" in out.omitted["gpu8"]


def test_no_free_gpu_means_no_slice():
    assert dra.build_slices(view(), hosts=HOSTS, generation=0).slices == ()


@pytest.mark.parametrize(
    ("kw", "message"), [({"generation": -1}, "generation"), ({"pool": "Fab_ric"}, "pool")]
)
def test_bad_arguments_are_refused(kw, message):
    args = {"hosts": HOSTS, "generation": 0, **kw}
    with pytest.raises(ValueError, match=message):
        dra.build_slices(view(FabricGpu("gpu0", "Tesla-T4")), **args)


@pytest.mark.parametrize(("mib", "text"), [(15360, "15Gi"), (1000, "1000Mi"), (1536, "1536Mi"), (0, "0"),
                                           (1024 * 1024, "1Ti")])
def test_memory_is_written_as_the_api_server_stores_it(mib, text):
    assert dra.binary_quantity(mib) == text


def stored_as_the_api_server_returns(slices):
    """What kube-apiserver v1.36.3 gave back for applied slices: server fields added, taints stamped."""
    out = []
    for s in copy.deepcopy(list(slices)):
        s["metadata"].update(uid="u", resourceVersion="1", generation=1)
        for d in s["spec"]["devices"]:
            for t in d.get("taints", ()):
                t["timeAdded"] = "2026-12-03T18:05:16Z"
        out.append(s)
    return out


def test_rewrite_raises_the_generation_only_when_the_content_changes_and_deletes_leftovers():
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4") for i in range(200)]
    first = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0, tainted={"gpu1": "AttachFailed"})
    start = dra.plan_rewrite([], first)
    assert start.generation == 0 and len(start.apply) == 4 and start.delete == ()

    stored = stored_as_the_api_server_returns(start.apply)
    same = dra.plan_rewrite(stored, dra.build_slices(view(*gpus), hosts=HOSTS, generation=0,
                                                      tainted={"gpu1": "AttachFailed"}))
    assert (same.generation, same.apply, same.delete) == (0, (), ())

    fewer = dra.build_slices(view(*gpus[:100]), hosts=HOSTS, generation=0)
    change = dra.plan_rewrite(stored, fewer)
    assert change.generation == 1
    assert [s["spec"]["pool"]["generation"] for s in change.apply] == [1]
    assert change.delete == tuple(f"gpu.composer.liqid.io-fabric-{i}" for i in (1, 2, 3))
    assert fewer.slices[0]["spec"]["pool"]["generation"] == 0  # the built set is not changed


def test_a_half_written_pool_is_written_again():
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4") for i in range(200)]
    wanted = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0)
    stored = dra.plan_rewrite([], wanted).apply
    half = copy.deepcopy(list(stored))
    half[1]["spec"]["pool"]["generation"] = 1  # one slice of generation 1 written, the other not yet
    again = dra.plan_rewrite(half, wanted)
    assert again.generation == 2 and len(again.apply) == 2


def test_the_dra_core_is_pure():
    for path in (ROOT / "composer" / "dra").glob("*.py"):
        mods = imported_names(path)
        banned = ("kubernetes", "requests", "urllib3", "http", "socket", "subprocess", "dynamic_providers")
        assert sorted(m for m in mods if m.split(".")[0] in banned) == [], path


def test_an_idle_composed_gpu_is_published_for_its_own_node_only():
    v = view(
        FabricGpu("gpu0", "Tesla-T4", "swit-1", machine="blade-2", owner_tag="gpu-composer"),
        FabricGpu("gpu1", "Tesla-T4", "swit-1", machine="blade-2", owner_tag="gpu-composer"),
        FabricGpu("gpu2", "Tesla-T4", "swit-1", machine="blade-1", owner_tag="gpu-composer", healthy=False),
        FabricGpu("gpu3", "Tesla-T4", "swit-1"),
    )
    out = dra.build_slices(
        v, hosts=HOSTS, generation=0,
        idle={"gpu0": "blade-2", "gpu1": "blade-1", "gpu2": "blade-1"},  # gpu1 is not on blade-1
        tainted={"gpu0": "Reclaiming"},
    )
    assert sorted(devices(out)) == ["gpu0", "gpu3"]
    assert hosts_of(out, "gpu0") == ["blade-2"]
    assert hosts_of(out, "gpu3") == ["blade-1", "blade-2", "blade-3"]
    assert devices(out)["gpu0"]["taints"] == [
        {"key": dra.TAINT_KEY, "value": "Reclaiming", "effect": "NoSchedule"}]


def test_a_free_gpu_carrying_the_composers_own_tag_is_published_another_owners_is_not():
    v = view(
        FabricGpu("gpu0", "Tesla-T4", "swit-1", owner_tag="gpu-composer"),  # a failed compose's tag
        FabricGpu("gpu1", "Tesla-T4", "swit-1", owner_tag="pulumi"),
        FabricGpu("gpu2", "Tesla-T4", "swit-1", owner_tag="gpu-composer", healthy=False),
    )
    assert sorted(devices(dra.build_slices(v, hosts=HOSTS, generation=0, own_tag="gpu-composer"))) == ["gpu0"]
    assert devices(dra.build_slices(v, hosts=HOSTS, generation=0)) == {}
