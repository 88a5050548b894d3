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


def hosts_of(slice_set: dra.SliceSet, device: str, v: FabricView, hosts: dict[str, str] = HOSTS) -> list[str]:
    """The nodes of ``hosts`` the slice of ``device`` selects, each node carrying the driver's
    labels (``reach_labels``) and its hostname label, as a scheduler would match them."""
    labels = {h: {"kubernetes.io/hostname": h, **dra.reach_labels(v, hosts).get(h, {})} for h in hosts}
    for s in slice_set.slices:
        if any(d["name"] == device for d in s["spec"]["devices"]):
            (term,) = s["spec"]["nodeSelector"]["nodeSelectorTerms"]
            assert set(term) == {"matchExpressions"}
            assert all(e["operator"] == "In" for e in term["matchExpressions"])
            return [h for h in hosts if all(labels[h].get(e["key"]) in e["values"]
                                            for e in term["matchExpressions"])]
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
        assert s["spec"]["pool"] == {"name": "fabric/shared/b0", "generation": 3, "resourceSliceCount": 1}
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
    assert hosts_of(out, "gpu0", v, hosts) == ["blade-1", "blade-2", "blade-3"]
    assert hosts_of(out, "gpu1", v, hosts) == ["blade-2"]
    assert hosts_of(out, "gpu2", v, hosts) == ["blade-3"]
    assert devices(out)["gpu2"]["attributes"]["pool"] == {"string": "tenant-a"}
    assert out.omitted == {"gpu3": "no host that reaches the fabric may take it"}


def test_a_pool_above_128_devices_takes_more_slices_and_64_with_a_taint(monkeypatch):
    monkeypatch.setattr(dra, "DEVICES_PER_POOL", 10_000)  # every free GPU in one pool
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4") for i in range(300)]
    out = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0)
    assert [len(s["spec"]["devices"]) for s in out.slices] == [128, 128, 44]
    assert [d["name"] for d in out.slices[0]["spec"]["devices"]][:3] == ["gpu0", "gpu1", "gpu2"]
    names = [s["metadata"]["name"] for s in out.slices]
    assert names == [dra.slice_name(dra.DRIVER, "fabric/shared/b0", i) for i in range(3)]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in out.slices} == {3}

    tainted = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0, tainted={"gpu7": "AttachFailed"})
    assert [len(s["spec"]["devices"]) for s in tainted.slices] == [64, 64, 64, 64, 44]
    assert devices(tainted)["gpu7"]["taints"] == [
        {"key": "gpu.composer.liqid.io/unusable", "value": "AttachFailed", "effect": "NoSchedule"}
    ]


def test_free_gpus_are_spread_over_pools_of_one_slice_each():
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4") for i in range(300)]
    out = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0)
    pools = [s["spec"]["pool"]["name"] for s in out.slices]
    assert len(pools) == len(set(pools)) == dra.bucket_count(300) == 10
    assert all(s["spec"]["pool"]["resourceSliceCount"] == 1 for s in out.slices)
    assert all(len(s["spec"]["devices"]) <= dra.MAX_DEVICES_WITH_TAINTS for s in out.slices)
    assert sum(len(s["spec"]["devices"]) for s in out.slices) == 300


def pool_of(slice_set: dra.SliceSet, device: str) -> str:
    for s in slice_set.slices:
        if any(d["name"] == device for d in s["spec"]["devices"]):
            return str(s["spec"]["pool"]["name"])
    raise AssertionError(f"{device} not published")


def test_a_gpu_keeps_its_pool_while_it_stays_free_and_a_compose_rewrites_one_pool():
    """A claim names ``driver/pool/device``: a free GPU must not change pools when others are
    composed, and taking one GPU must rewrite one slice only (the scheduler's allocator takes no
    device from a pool it sees half rewritten)."""
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4") for i in range(300)]
    before = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0)
    stored = stored_as_the_api_server_returns(dra.plan_rewrite([], before).apply)
    taken = [FabricGpu(g.name, g.model, machine="blade-1", owner_tag="gpu-composer") if i < 100 else g
             for i, g in enumerate(gpus)]
    after = dra.build_slices(view(*taken), hosts=HOSTS, generation=0)
    assert all(pool_of(after, f"gpu{i}") == pool_of(before, f"gpu{i}") for i in range(100, 300))

    one = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0, excluded={"gpu42"})
    change = dra.plan_rewrite(stored, one)
    assert [s["spec"]["pool"]["name"] for s in change.apply] == [pool_of(before, "gpu42")]
    assert change.delete == ()


def test_an_idle_gpu_is_in_its_nodes_pool_and_moving_out_is_written_before_moving_in():
    v = view(FabricGpu("gpu0", "Tesla-T4", machine="blade-2", owner_tag="gpu-composer"),
             FabricGpu("gpu1", "Tesla-T4"))
    idle = dra.build_slices(v, hosts=HOSTS, generation=0, idle={"gpu0": "blade-2"})
    assert pool_of(idle, "gpu0") == "fabric/node/blade-2"
    stored = stored_as_the_api_server_returns(dra.plan_rewrite([], idle).apply)
    # Claimed on its node, then given back to the free pool: a pool that loses a device is
    # written before one that gains it.
    back = view(FabricGpu("gpu0", "Tesla-T4", owner_tag="gpu-composer"), FabricGpu("gpu1", "Tesla-T4"))
    freed = dra.build_slices(back, hosts=HOSTS, generation=0, own_tag="gpu-composer")
    change = dra.plan_rewrite(stored, freed)
    assert change.delete == (dra.slice_name(dra.DRIVER, "fabric/node/blade-2", 0),)
    # A free GPU composed for a claim that went away before the next round: it moves from its
    # shared pool to blade-2's; the pool losing it is written first (it sorts after the other).
    composed = FabricGpu("gpu2", "Tesla-T4", machine="blade-2", owner_tag="gpu-composer")
    before = dra.build_slices(view(*back.gpus, composed), hosts=HOSTS, generation=0,
                              idle={"gpu2": "blade-2"}, own_tag="gpu-composer")
    stored_two = stored_as_the_api_server_returns(dra.plan_rewrite([], before).apply)
    now_idle = dra.build_slices(view(*v.gpus, composed), hosts=HOSTS, generation=0,
                                idle={"gpu0": "blade-2", "gpu2": "blade-2"})
    order = [s["spec"]["pool"]["name"] for s in dra.plan_rewrite(stored_two, now_idle).apply]
    assert order == [pool_of(before, "gpu0"), "fabric/node/blade-2"]


def test_pool_segments_that_are_no_dns_label_are_digested_stably():
    gpu = FabricGpu("gpu0", "Tesla-T4")
    free = dra.FreeGpu(gpu.name, gpu.model, pool="Team_A", group="7")
    name = dra.pool_name(free, buckets=1)
    assert name.startswith("fabric/group-7/pool-x") and name.endswith("/b0")
    assert name == dra.pool_name(free, buckets=1)
    assert all(dra._DNS_LABEL.match(part) for part in name.split("/"))


def test_a_thousand_hosts_stay_far_below_the_request_size_limit():
    hosts = {f"worker-{i:04d}": "default" for i in range(1000)}
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4", "swit-1") for i in range(300)]
    out = dra.build_slices(view(*gpus, groups=dict.fromkeys(hosts, "1")), hosts=hosts, generation=0)
    # etcd's default request limit is 1.5 MiB; one host list per slice, not per device.
    assert max(len(json.dumps(s)) for s in out.slices) < 256 * 1024


def test_slices_select_hosts_by_the_drivers_labels_and_the_labels_follow_the_hosts():
    """A slice's selector holds a few label values, not the host list (the scheduler parses it
    again per node); the labels say which hosts reach the fabric, their group and pool."""
    hosts = {f"worker-{i}": "default" for i in range(1000)}
    v = view(FabricGpu("gpu0", "Tesla-T4"), FabricGpu("gpu1", "Tesla-T4", group="g1"),
             groups={**dict.fromkeys(hosts, "g1"), "worker-0": "g2"})
    out = dra.build_slices(v, hosts={**hosts, "no-machine": "default"}, generation=0,
                           device_pools={"gpu1": "default"})
    for s in out.slices:
        (term,) = s["spec"]["nodeSelector"]["nodeSelectorTerms"]
        assert sum(len(e["values"]) for e in term["matchExpressions"]) <= 3
    assert len(hosts_of(out, "gpu1", v, hosts)) == 999  # worker-0 is in group g2
    wanted = dra.reach_labels(v, {**hosts, "no-machine": "default"})
    assert "no-machine" not in wanted
    assert wanted["worker-0"] == {
        dra.REACH_LABEL: "true", dra.GROUP_LABEL: "g2", dra.HOST_POOL_LABEL: "default"}
    current = {"worker-0": {}, "worker-1": dict(wanted["worker-1"]),
               "no-machine": {dra.REACH_LABEL: "true", "team": "a"}}
    assert dra.label_changes(current, wanted) == {
        "worker-0": wanted["worker-0"],
        "no-machine": {dra.REACH_LABEL: None},
    }


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


def test_rewrite_raises_a_pools_generation_only_when_its_content_changes_and_deletes_leftovers():
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4") for i in range(200)]
    first = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0, tainted={"gpu1": "AttachFailed"})
    start = dra.plan_rewrite([], first)
    assert set(start.generations.values()) == {0} and len(start.apply) == len(first.slices) == 7
    assert start.delete == ()

    stored = stored_as_the_api_server_returns(start.apply)
    same = dra.plan_rewrite(stored, dra.build_slices(view(*gpus), hosts=HOSTS, generation=0,
                                                      tainted={"gpu1": "AttachFailed"}))
    assert (same.apply, same.delete) == ((), ())
    assert same.generations == start.generations

    attached = [FabricGpu(g.name, g.model, machine="blade-1") if i >= 100 else g for i, g in enumerate(gpus)]
    fewer = dra.build_slices(view(*attached), hosts=HOSTS, generation=0)
    change = dra.plan_rewrite(stored, fewer)
    changed = {s["spec"]["pool"]["name"] for s in change.apply}
    assert {change.generations[p] for p in changed} == {1}
    assert {s["spec"]["pool"]["generation"] for s in change.apply} == {1}
    assert all(change.generations[p] == 0 for p in change.generations if p not in changed)
    kept = {s["metadata"]["name"] for s in fewer.slices}
    assert set(change.delete) == {s["metadata"]["name"] for s in stored} - kept
    assert fewer.slices[0]["spec"]["pool"]["generation"] == 0  # the built set is not changed


def test_a_half_written_pool_is_written_again(monkeypatch):
    monkeypatch.setattr(dra, "DEVICES_PER_POOL", 10_000)  # one pool of two slices
    gpus = [FabricGpu(f"gpu{i}", "Tesla-T4") for i in range(200)]
    wanted = dra.build_slices(view(*gpus), hosts=HOSTS, generation=0)
    stored = dra.plan_rewrite([], wanted).apply
    half = copy.deepcopy(list(stored))
    half[1]["spec"]["pool"]["generation"] = 1  # one slice of generation 1 written, the other not yet
    again = dra.plan_rewrite(half, wanted)
    assert again.generations == {"fabric/shared/b0": 2} and len(again.apply) == 2


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
    assert hosts_of(out, "gpu0", v) == ["blade-2"]
    assert hosts_of(out, "gpu3", v) == ["blade-1", "blade-2", "blade-3"]
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
