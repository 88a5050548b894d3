"""The planner: tiny cases per rule, hypothesis properties, and scale."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from composer.decide.planner import pinned_hosts, plan
from composer.model.models import (
    MIXED_MODELS,
    FreeGpu,
    GpuRequest,
    HostState,
    LabelRequirement,
    Reason,
    Taint,
    Toleration,
)

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
GIB = 1 << 30


def host(name: str, **kw) -> HostState:
    kw.setdefault("cpu_free_millis", 64_000)
    kw.setdefault("memory_free_bytes", 512 * GIB)
    return HostState(name, **kw)


def req(key: str, units: int = 1, **kw) -> GpuRequest:
    return GpuRequest(f"ns/{key}", f"uid-{key}", units, **kw)


TWO_BLADES = [host("blade-slot-1"), host("blade-slot-2")]
TWO_POOLED_T4S = [FreeGpu("gpu0", T4, "sw0"), FreeGpu("gpu1", T4, "sw0")]


# -- tiny cases, one rule each ----------------------------------------------------------------
def test_a_two_gpu_pod_gets_both_pooled_gpus_on_the_first_host():
    p = plan([req("a", 2, models=frozenset({T4}))], TWO_BLADES, TWO_POOLED_T4S)
    assert [(x.host, x.devices, x.model) for x in p.placements] == [("blade-slot-1", ("gpu0", "gpu1"), T4)]
    assert p.refusals == ()


def test_pinned_host_is_honoured():
    p = plan([req("b", 2, hosts=frozenset({"blade-slot-2"}))], TWO_BLADES, TWO_POOLED_T4S)
    assert p.placements[0].host == "blade-slot-2"
    assert p.placements[0].devices == ("gpu0", "gpu1")


def test_unknown_pinned_host_is_refused():
    p = plan([req("b", 1, hosts=frozenset({"nope"}))], TWO_BLADES, TWO_POOLED_T4S)
    assert p.refusals[0].reason == Reason.UNKNOWN_HOST
    assert "nope" in p.refusals[0].message


def test_model_selection_t4_versus_a100():
    gpus = [FreeGpu("gpu0", T4, "sw0"), FreeGpu("gpu4", A100, "sw1"), FreeGpu("gpu5", A100, "sw1")]
    p = plan(
        [req("a", 2, models=frozenset({A100})), req("t", 1, models=frozenset({T4}))], TWO_BLADES, gpus
    )
    by = {x.key: x for x in p.placements}
    assert by["ns/a"].devices == ("gpu4", "gpu5") and by["ns/a"].model == A100
    assert by["ns/t"].devices == ("gpu0",) and by["ns/t"].model == T4
    # one model per node: the two pods do not share a host
    assert by["ns/a"].host != by["ns/t"].host


def test_a_node_carries_one_model_pinned_conflict_is_refused():
    hosts = [host("h1", model=T4, attached=1), host("h2")]
    gpus = [FreeGpu("gpu4", A100, "sw1")]
    p = plan([req("a", 1, models=frozenset({A100}), hosts=frozenset({"h1"}))], hosts, gpus)
    assert p.refusals[0].reason == Reason.MODEL_CONFLICT
    p = plan([req("a", 1, models=frozenset({A100}))], hosts, gpus)
    assert p.placements[0].host == "h2"


def test_mixed_host_never_gets_more():
    hosts = [host("h1", model=MIXED_MODELS, attached=2)]
    p = plan([req("a", 1, hosts=frozenset({"h1"}))], hosts, TWO_POOLED_T4S)
    assert p.refusals[0].reason == Reason.MODEL_CONFLICT


def test_reuse_a_host_that_already_has_the_model():
    hosts = [host("a-empty"), host("b-warm", model=T4, attached=1, max_gpus=4)]
    p = plan([req("x", 1, models=frozenset({T4}))], hosts, [FreeGpu("gpu1", T4, "sw0")])
    assert p.placements[0].host == "b-warm"


def test_pinned_host_must_fit_cpu_and_memory():
    hosts = [host("small", cpu_free_millis=1000, memory_free_bytes=GIB), host("big")]
    r = req("x", 1, hosts=frozenset({"small"}), cpu_millis=2000)
    p = plan([r], hosts, TWO_POOLED_T4S)
    assert p.refusals[0].reason == Reason.NO_HOST_FITS
    p = plan([req("y", 1, cpu_millis=2000, memory_bytes=2 * GIB)], hosts, TWO_POOLED_T4S)
    assert p.placements[0].host == "big"


def test_multi_gpu_pod_prefers_one_switch_best_fit():
    gpus = [FreeGpu("gpu0", T4, "sw0")] + [FreeGpu(f"gpu{i}", T4, "sw1") for i in (1, 2)]
    gpus += [FreeGpu(f"gpu{i}", T4, "sw2") for i in (3, 4, 5, 6)]
    p = plan([req("x", 2)], [host("h")], gpus)
    # sw1 has exactly two: the tightest switch that fits, leaving sw2's four together
    assert p.placements[0].devices == ("gpu1", "gpu2")
    assert p.placements[0].switches == ("sw1",)


def test_multi_gpu_pod_spreads_over_fewest_switches_when_none_is_big_enough():
    gpus = [FreeGpu("gpu0", T4, "sw0"), FreeGpu("gpu1", T4, "sw1"), FreeGpu("gpu2", T4, "sw1")]
    p = plan([req("x", 3)], [host("h")], gpus)
    assert sorted(p.placements[0].devices) == ["gpu0", "gpu1", "gpu2"]
    assert p.placements[0].switches[0] == "sw1"  # the fullest switch first


def test_bin_packing_smallest_empty_host_that_fits():
    hosts = [host("big", max_gpus=8), host("small", max_gpus=2)]
    gpus = [FreeGpu(f"gpu{i}", T4, "sw0") for i in range(10)]
    p = plan([req("a", 2), req("b", 8)], hosts, gpus)
    by = {x.key: x.host for x in p.placements}
    assert by == {"ns/a": "small", "ns/b": "big"}


def test_batch_never_plans_a_gpu_twice():
    p = plan([req("a"), req("b"), req("c")], TWO_BLADES, TWO_POOLED_T4S)
    devices = [d for x in p.placements for d in x.devices]
    assert sorted(devices) == ["gpu0", "gpu1"]
    assert [r.reason for r in p.refusals] == [Reason.NO_FREE_GPUS]


def test_unsatisfiable_request_names_the_free_pool():
    p = plan([req("a", 3, models=frozenset({A100}))], TWO_BLADES, TWO_POOLED_T4S)
    (r,) = p.refusals
    assert r.reason == Reason.NO_FREE_GPUS
    assert A100 in r.message


def test_quota_caps_a_pool():
    p = plan([req("a"), req("b")], TWO_BLADES, TWO_POOLED_T4S, quotas={"default": 2}, usage={"default": 1})
    assert len(p.placements) == 1
    assert p.refusals[0].reason == Reason.QUOTA_EXCEEDED


def test_pools_keep_hosts_and_reserved_gpus_apart():
    hosts = [host("ha", pool="a"), host("hb", pool="b")]
    gpus = [FreeGpu("gpu0", T4, "sw0", pool="b"), FreeGpu("gpu1", T4, "sw0")]
    p = plan([req("x", 2, pool="a")], hosts, gpus)
    assert p.refusals[0].reason == Reason.NO_FREE_GPUS  # gpu0 is pool b's
    p = plan([req("x", 1, pool="a"), req("y", 2, pool="b")], hosts, gpus)
    by = {x.key: x for x in p.placements}
    assert by["ns/y"].host == "hb" and sorted(by["ns/y"].devices) == ["gpu0", "gpu1"]
    assert by.get("ns/x") is None


def test_gpu_in_a_director_group_pool_only_goes_to_that_groups_machines():
    hosts = [host("h1", group="1"), host("h2", group="2")]
    gpus = [FreeGpu("gpu8", T4, "sw2", group="2")]
    p = plan([req("x", hosts=frozenset({"h1"}))], hosts, gpus)
    assert p.refusals[0].reason == Reason.NO_FREE_GPUS
    p = plan([req("x")], hosts, gpus)
    assert p.placements[0].host == "h2"


def test_taints_need_tolerations_and_labels_must_match():
    hosts = [host("a-tainted", taints=(Taint("dedicated", "ml"),)), host("b-plain", labels={"zone": "z1"})]
    p = plan([req("x")], hosts, TWO_POOLED_T4S)
    assert p.placements[0].host == "b-plain"
    tol = (Toleration("dedicated", "Equal", "ml", "NoSchedule"),)
    p = plan(
        [req("x", tolerations=tol, node_requirements=(LabelRequirement("zone", "DoesNotExist"),))],
        hosts,
        TWO_POOLED_T4S,
    )
    assert p.placements[0].host == "a-tainted"


def test_spare_units_are_reused_before_composing():
    hosts = [host("h", model=T4, attached=1, spare={"nvidia.com/gpu.shared": 2})]
    r = req("x", 1, resource="nvidia.com/gpu.shared", units_per_gpu=4)
    p = plan([r], hosts, TWO_POOLED_T4S)
    assert p.placements[0].devices == () and p.placements[0].spare_units == 1


def test_shared_gpu_units_are_packed_in_a_batch():
    rs = [req(k, 1, resource="nvidia.com/gpu.shared", units_per_gpu=4) for k in "abc"]
    p = plan(rs, TWO_BLADES, TWO_POOLED_T4S)
    assert sum(len(x.devices) for x in p.placements) == 1
    assert {x.host for x in p.placements} == {"blade-slot-1"}


def test_gpu_slot_limit():
    hosts = [host("h", model=T4, attached=1, max_gpus=2)]
    p = plan([req("x", 2)], hosts, TWO_POOLED_T4S)
    assert p.refusals[0].reason == Reason.NO_HOST_FITS


def test_excluded_devices_are_never_planned():
    p = plan([req("x", 1)], TWO_BLADES, TWO_POOLED_T4S, excluded={"gpu0"})
    assert p.placements[0].devices == ("gpu1",)


A100_GPUS = [FreeGpu("gpu4", A100, "sw1"), FreeGpu("gpu5", A100, "sw1")]


def test_host_with_static_gpus_is_not_a_composition_target():
    """blade-slot-4 carries a static A100 (1 spare unit): a 2-GPU A100 pod is not topped up there
    (it would be without the rule: the host already carries the model); a pod pinned to it is refused."""
    static = host("blade-slot-4", model=A100, attached=1, static_gpus=1, spare={"nvidia.com/gpu": 1})
    hosts = [static, host("blade-slot-1")]
    p = plan([req("a100", 2, models=frozenset({A100}))], hosts, A100_GPUS)
    assert [(x.host, x.devices) for x in p.placements] == [("blade-slot-1", ("gpu4", "gpu5"))]
    p = plan([req("pinned", 2, hosts=frozenset({"blade-slot-4"}))], hosts, A100_GPUS)
    assert p.placements == ()
    assert p.refusals[0].reason == Reason.NO_HOST_FITS
    assert "carries 1 statically composed GPU(s)" in p.refusals[0].message
    # an empty host with a static GPU of no model known yet is no target either
    p = plan([req("any", 1)], [host("h", static_gpus=1)], A100_GPUS)
    assert p.refusals[0].reason == Reason.NO_HOST_FITS


def test_static_spare_serves_pods_of_its_own_pool_only():
    """A static GPU no pod uses is spare for pods of the host's pool (the tenant the program composed
    it for), never for another pool's pod."""
    hosts = [
        host("st", pool="alpha", model=T4, attached=1, static_gpus=1, spare={"nvidia.com/gpu": 1}),
        host("hb", pool="beta"),
    ]
    p = plan([req("b", 1, pool="beta")], hosts, TWO_POOLED_T4S)
    assert [(x.host, x.devices) for x in p.placements] == [("hb", ("gpu0",))]
    p = plan([req("b", 1, pool="beta", hosts=frozenset({"st"}))], hosts, TWO_POOLED_T4S)
    assert p.refusals[0].reason == Reason.NO_HOST_FITS and "pool 'alpha'" in p.refusals[0].message
    p = plan([req("a", 1, pool="alpha")], hosts, TWO_POOLED_T4S)
    assert [(x.host, x.devices, x.spare_units) for x in p.placements] == [("st", (), 1)]


def test_higher_priority_first():
    p = plan(
        [req("low", priority=0, created=1.0), req("high", priority=10, created=2.0)],
        TWO_BLADES,
        TWO_POOLED_T4S[:1],
    )
    assert [x.key for x in p.placements] == ["ns/high"]


def test_invalid_request():
    p = plan([req("x", 0)], TWO_BLADES, TWO_POOLED_T4S)
    assert p.refusals[0].reason == Reason.INVALID


# -- properties -----------------------------------------------------------------------------
MODELS = [T4, A100]
POOLS = ["default", "default", "t1"]


@st.composite
def worlds(draw):
    n_hosts = draw(st.integers(1, 6))
    hosts = []
    for i in range(n_hosts):
        model = draw(st.sampled_from([None, T4, A100, MIXED_MODELS]))
        attached = draw(st.integers(1, 3)) if model else 0
        hosts.append(
            HostState(
                f"h{i}",
                pool=draw(st.sampled_from(POOLS)),
                cpu_free_millis=draw(st.integers(0, 16_000)),
                memory_free_bytes=draw(st.integers(0, 16)) * GIB,
                model=model,
                attached=attached,
                max_gpus=draw(st.sampled_from([None, 2, 4, 8])),
                spare={"nvidia.com/gpu": draw(st.integers(0, 2))} if model else {},
                taints=(Taint("t", "v"),) if draw(st.booleans()) and i % 3 == 0 else (),
                schedulable=draw(st.integers(0, 4)) > 0,
                group=draw(st.sampled_from([None, "1", "2"])),
                static_gpus=draw(st.integers(0, attached)) if draw(st.booleans()) else 0,
            )
        )
    gpus = [
        FreeGpu(
            f"gpu{i}",
            draw(st.sampled_from(MODELS)),
            draw(st.sampled_from(["s0", "s1", "s2"])),
            draw(st.sampled_from([None, None, "t1"])),
            draw(st.sampled_from([None, None, "1", "2"])),
        )
        for i in range(draw(st.integers(0, 20)))
    ]
    reqs = []
    for i in range(draw(st.integers(0, 12))):
        shared = draw(st.booleans()) and i % 4 == 0
        reqs.append(
            GpuRequest(
                f"ns/p{i}",
                f"u{i}",
                draw(st.integers(1, 4)),
                pool=draw(st.sampled_from(POOLS)),
                resource="nvidia.com/gpu.shared" if shared else "nvidia.com/gpu",
                units_per_gpu=3 if shared else 1,
                models=draw(st.sampled_from([None, frozenset({T4}), frozenset({A100}), frozenset(MODELS)])),
                hosts=draw(st.sampled_from([None, None, None, frozenset({"h0"}), frozenset({"h1", "h2"})])),
                cpu_millis=draw(st.integers(0, 3000)),
                memory_bytes=draw(st.integers(0, 3)) * GIB,
                tolerations=(Toleration("t", "Exists"),) if draw(st.booleans()) else (),
                priority=draw(st.integers(0, 2)),
                created=float(i),
            )
        )
    quotas = {"t1": draw(st.integers(0, 6))}
    usage = {"t1": draw(st.integers(0, 3))}
    excluded = {f"gpu{i}" for i in draw(st.sets(st.integers(0, 20), max_size=3))}
    return hosts, gpus, reqs, quotas, usage, excluded


@settings(max_examples=300, deadline=None)
@given(worlds(), st.randoms())
def test_plan_invariants(world, rnd):
    hosts, gpus, reqs, quotas, usage, excluded = world
    p = plan(reqs, hosts, gpus, quotas=quotas, usage=usage, excluded=excluded)
    gpu_by = {g.name: g for g in gpus}
    host_by = {h.name: h for h in hosts}
    req_by = {r.key: r for r in reqs}

    # every request exactly once
    keys = [x.key for x in p.placements] + [x.key for x in p.refusals]
    assert sorted(keys) == sorted(req_by)
    # never the same GPU twice, never an excluded or unknown one
    devices = [d for x in p.placements for d in x.devices]
    assert len(devices) == len(set(devices))
    assert set(devices) <= set(gpu_by) - excluded
    per_host_models: dict[str, set[str]] = defaultdict(set)
    per_host_new: Counter[str] = Counter()
    per_host_cpu: Counter[str] = Counter()
    per_pool: Counter[str] = Counter()
    for x in p.placements:
        r, h = req_by[x.key], host_by[x.host]
        assert h.schedulable and h.pool == r.pool
        assert r.hosts is None or x.host in r.hosts
        assert not (h.static_gpus and x.devices)  # nothing composed onto a host with static GPUs
        assert r.models is None or x.model in r.models
        assert h.model is None or h.model == x.model  # never mixed models on a node
        assert len(x.devices) * r.units_per_gpu + x.spare_units >= r.units
        for d in x.devices:
            g = gpu_by[d]
            assert g.model == x.model
            assert g.pool in (None, r.pool)
            assert g.group in (None, h.group)
        per_host_models[x.host].add(x.model)
        per_host_new[x.host] += len(x.devices)
        per_host_cpu[x.host] += r.cpu_millis
        per_pool[r.pool] += len(x.devices)
    for name, models in per_host_models.items():
        assert len(models) == 1, (name, models)
        h = host_by[name]
        assert per_host_cpu[name] <= h.cpu_free_millis
        if h.max_gpus is not None and per_host_new[name]:
            assert h.attached + per_host_new[name] <= h.max_gpus
    # never over quota
    for pool, q in quotas.items():
        assert per_pool[pool] <= max(0, q - usage.get(pool, 0))
    # deterministic and independent of input order
    shuffled = (list(reqs), list(hosts), list(gpus))
    for seq in shuffled:
        rnd.shuffle(seq)
    assert plan(*shuffled, quotas=quotas, usage=usage, excluded=excluded) == p


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_a_pinned_batch_plans_the_same_on_its_own_hosts_as_on_every_host(world):
    hosts, gpus, reqs, quotas, usage, excluded = world
    pinned = [r for r in reqs if r.hosts is not None]
    only = pinned_hosts(pinned)
    assert only is not None and pinned_hosts(reqs) == (None if len(pinned) < len(reqs) else only)
    everywhere = plan(pinned, hosts, gpus, quotas=quotas, usage=usage, excluded=excluded)
    own_hosts = [h for h in hosts if h.name in only]
    own = plan(pinned, own_hosts, gpus, quotas=quotas, usage=usage, excluded=excluded)
    assert own == everywhere


# -- scale ----------------------------------------------------------------------------------
def _scale_world(n_hosts: int, n_gpus: int, n_pods: int, seed: int = 7):
    rng = random.Random(seed)
    hosts = [
        HostState(f"node-{i:04d}", cpu_free_millis=128_000, memory_free_bytes=1 << 40, max_gpus=16)
        for i in range(n_hosts)
    ]
    gpus = [FreeGpu(f"gpu{i}", MODELS[i % 2], f"sw{i // 16}") for i in range(n_gpus)]
    reqs = [
        GpuRequest(
            f"ns/p{i}",
            f"u{i}",
            rng.choice([1, 1, 1, 2, 4, 8]),
            models=rng.choice([None, frozenset({T4}), frozenset({A100})]),
            hosts=frozenset({f"node-{rng.randrange(n_hosts):04d}"}) if rng.random() < 0.05 else None,
            cpu_millis=rng.choice([1000, 4000, 8000]),
            memory_bytes=rng.choice([GIB, 8 * GIB]),
            created=float(i),
        )
        for i in range(n_pods)
    ]
    return reqs, hosts, gpus


def test_scale_1000_hosts_8000_gpus_10000_pods_is_fast_and_near_linear():
    big = _scale_world(1000, 8000, 10_000)
    small = _scale_world(100, 800, 1000)
    best_big = best_small = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        p = plan(*big)
        best_big = min(best_big, time.perf_counter() - t)
        t = time.perf_counter()
        plan(*small)
        best_small = min(best_small, time.perf_counter() - t)
    assert len(p.placements) + len(p.refusals) == 10_000
    assert len({d for x in p.placements for d in x.devices}) == sum(len(x.devices) for x in p.placements)
    # target <100 ms on an idle core; generous bounds for a shared, loaded CI machine. A quadratic
    # planner would take ~100x as long for 10x the input; near-linear stays well under 40x.
    assert best_big < 1.5, best_big
    assert best_big < 40 * best_small + 0.1, (best_big, best_small)


@pytest.mark.parametrize("seed", range(12))
def test_refusal_memo_changes_no_placement(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The within-round refusal memo is an optimisation only: same placements, same refusals."""
    from bench.planner_bench import Size, make_world
    from composer.decide import planner as planner_mod

    for size in (Size(10, 80, 100), Size(60, 480, 600)):
        world = make_world(size, seed=seed)
        fast = planner_mod.plan(*world)
        monkeypatch.setattr(planner_mod, "MEMOIZE_REFUSALS", False)
        slow = planner_mod.plan(*world)
        monkeypatch.setattr(planner_mod, "MEMOIZE_REFUSALS", True)
        assert fast.placements == slow.placements
        assert sorted(r.key for r in fast.refusals) == sorted(r.key for r in slow.refusals)
