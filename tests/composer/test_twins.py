"""Empty twin hosts (composer/decide/twins.py): the planner plans the same over the few kept as
over all of them, and the cut keeps what a request could tell apart."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from composer.decide.planner import plan
from composer.decide.twins import empty_host_kind, without_twins
from composer.model.models import (
    HOSTNAME_LABEL,
    MIXED_MODELS,
    FreeGpu,
    GpuRequest,
    HostSharing,
    HostState,
    LabelRequirement,
    Taint,
    Toleration,
)
from domain.gpu_sharing import Offer

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
GIB = 1 << 30
SHARED = HostSharing("ts", "time-slicing", {T4: (Offer("nvidia.com/gpu", 4, f"{T4}-SHARED"),)})


def name(h: HostState) -> str:
    return h.name


def cut(reqs: list[GpuRequest], hosts: list[HostState]) -> list[HostState]:
    return without_twins(reqs, hosts, kind=empty_host_kind, name=name)


@st.composite
def twin_worlds(draw):
    """A few kinds of empty hosts, each repeated under several names (interleaved in name
    order), some hosts carrying GPUs, a free pool and a batch of requests."""
    hosts: list[HostState] = []
    n = 0
    for _ in range(draw(st.integers(1, 4))):
        pool = draw(st.sampled_from(["default", "default", "t1"]))
        cpu = draw(st.sampled_from([0, 2000, 16_000]))
        mem = draw(st.sampled_from([1, 16])) * GIB
        max_gpus = draw(st.sampled_from([None, 1, 2, 8]))
        rack = draw(st.sampled_from(["a", "b"]))
        taints = (Taint("t", "v"),) if draw(st.booleans()) else ()
        schedulable = draw(st.integers(0, 4)) > 0
        group = draw(st.sampled_from([None, "1", "2"]))
        sharing = SHARED if draw(st.integers(0, 3)) == 0 else None
        for _ in range(draw(st.integers(1, 8))):
            n += 1
            hn = f"blade-{draw(st.integers(0, 999)):03d}-{n}"
            hosts.append(
                HostState(hn, pool=pool, cpu_free_millis=cpu, memory_free_bytes=mem, max_gpus=max_gpus,
                          labels={HOSTNAME_LABEL: hn, "rack": rack}, taints=taints, schedulable=schedulable,
                          group=group, sharing=sharing)
            )
    for _ in range(draw(st.integers(0, 3))):
        n += 1
        model = draw(st.sampled_from([T4, A100, MIXED_MODELS]))
        hosts.append(
            HostState(f"warm-{n}", pool="default", cpu_free_millis=16_000, memory_free_bytes=16 * GIB,
                      model=model, attached=1, max_gpus=4, spare={"nvidia.com/gpu": draw(st.integers(0, 1))})
        )
    gpus = [
        FreeGpu(f"gpu{i}", draw(st.sampled_from([T4, A100])), draw(st.sampled_from(["s0", "s1"])),
                draw(st.sampled_from([None, None, "t1"])), draw(st.sampled_from([None, None, "1", "2"])))
        for i in range(draw(st.integers(0, 24)))
    ]
    names = [h.name for h in hosts]
    reqs = []
    for i in range(draw(st.integers(1, 8))):
        needs: tuple[LabelRequirement, ...] = ()
        choice = draw(st.integers(0, 5))
        if choice == 0:
            needs = (LabelRequirement("rack", "In", (draw(st.sampled_from(["a", "b"])),)),)
        elif choice == 1:
            needs = (LabelRequirement(HOSTNAME_LABEL, "NotIn", (draw(st.sampled_from(names)),)),)
        reqs.append(
            GpuRequest(
                f"ns/p{i}", f"u{i}", draw(st.integers(1, 4)),
                pool=draw(st.sampled_from(["default", "default", "t1"])),
                models=draw(st.sampled_from([None, frozenset({T4}), frozenset({A100})])),
                hosts=frozenset({draw(st.sampled_from(names))}) if draw(st.integers(0, 5)) == 0 else None,
                cpu_millis=draw(st.sampled_from([0, 1000, 4000])),
                memory_bytes=draw(st.integers(0, 2)) * GIB,
                tolerations=(Toleration("t", "Exists"),) if draw(st.booleans()) else (),
                node_requirements=needs,
                created=float(i),
            )
        )
    quotas = {"t1": draw(st.integers(0, 6))}
    return hosts, gpus, reqs, quotas


@settings(max_examples=400, deadline=None)
@given(twin_worlds())
def test_the_plan_over_the_kept_hosts_is_the_plan_over_all(world):
    hosts, gpus, reqs, quotas = world
    assert plan(reqs, cut(reqs, hosts), gpus, quotas=quotas) == plan(reqs, hosts, gpus, quotas=quotas)


def twins(count: int, **kw) -> list[HostState]:
    return [HostState(f"blade-slot-{i}", cpu_free_millis=8000, memory_free_bytes=GIB,
                      labels={HOSTNAME_LABEL: f"blade-slot-{i}"}, **kw) for i in range(1, count + 1)]


def test_a_batch_keeps_as_many_twins_as_it_has_requests_first_in_name_order():
    reqs = [GpuRequest(f"ns/p{i}", f"u{i}", 1) for i in range(2)]
    kept = cut(reqs, twins(12))
    assert sorted(h.name for h in kept) == ["blade-slot-1", "blade-slot-10"]  # plain string order


def test_hosts_that_are_not_empty_or_are_named_are_all_kept():
    hosts = twins(5) + [HostState("warm", model=T4, attached=1)]
    reqs = [GpuRequest("ns/p", "u", 1), GpuRequest("ns/q", "v", 1, hosts=frozenset({"blade-slot-4"}))]
    assert {h.name for h in cut(reqs, hosts)} == {"blade-slot-1", "blade-slot-2", "blade-slot-4", "warm"}


def test_a_requirement_on_the_hostname_label_keeps_every_host():
    reqs = [GpuRequest("ns/p", "u", 1,
                       node_requirements=(LabelRequirement(HOSTNAME_LABEL, "NotIn", ("blade-slot-1",)),))]
    assert len(cut(reqs, twins(5))) == 5


def test_hosts_differing_in_anything_but_their_name_are_different_kinds():
    base = twins(1)[0]
    others = [
        HostState("x1", cpu_free_millis=4000, memory_free_bytes=GIB),
        HostState("x2", cpu_free_millis=8000, memory_free_bytes=GIB, taints=(Taint("t", "v"),)),
        HostState("x3", cpu_free_millis=8000, memory_free_bytes=GIB, labels={"rack": "b"}),
        HostState("x4", cpu_free_millis=8000, memory_free_bytes=GIB, group="2"),
        HostState("x5", cpu_free_millis=8000, memory_free_bytes=GIB, sharing=SHARED),
        HostState("x6", cpu_free_millis=8000, memory_free_bytes=GIB, schedulable=False),
    ]
    kinds = {empty_host_kind(h) for h in [base, *others]}
    assert len(kinds) == 7
    assert empty_host_kind(HostState("y", spare={"nvidia.com/gpu": 1})) is None
