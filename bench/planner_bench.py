"""Part 1: time and peak memory of one planning round against scale.

A planning round is one call of :func:`composer.decide.planner.plan` over the unschedulable pods'
requests, the composable hosts and the Director's free pool. The worlds are generated with a
fixed seed (:func:`make_world`) and mix what a real round sees: two GPU models on PCIe switches
of 16 GPUs, hosts of 8 GPU slots of which a fifth already carry GPUs (some spare), a tenth
tainted, pods of 1/2/4/8 GPUs with model selectors, tolerations and 5 % pinned to a host.

Figures per size: wall time of ``plan()`` (``time.perf_counter``; min / median / max over
``repeats`` runs with the garbage collector left on), the peak of memory allocated during one
round (``tracemalloc``, a separate run since tracing slows Python down), the memory held by the
inputs, and placements/refusals. The largest size is profiled with cProfile (top functions by
cumulative time). ``growth_exponent`` fits ``time ~ size^k`` between consecutive sizes
(k = 1 is linear).
"""

from __future__ import annotations

import cProfile
import gc
import io
import math
import pstats
import random
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any

from composer.decide.planner import plan
from composer.model.models import GPU_RESOURCE, FreeGpu, GpuRequest, HostState, Taint, Toleration

MODELS = ("Tesla-T4", "NVIDIA-A100-PCIE-40GB")
GIB = 1 << 30
#: GPU slots per host and GPUs per PCIe switch in the generated worlds.
SLOTS_PER_HOST = 8
GPUS_PER_SWITCH = 16
_TAINT = Taint("dedicated", "training", "NoSchedule")
_TOLERATION = Toleration("dedicated", "Equal", "training", "NoSchedule")


@dataclass(frozen=True)
class Size:
    """One benchmark size: hosts, free GPUs, pending pods."""

    hosts: int
    gpus: int
    pods: int

    @property
    def label(self) -> str:
        return f"{self.hosts}h/{self.gpus}g/{self.pods}p"


#: The full sweep: sizes grow x3 / x3.3 up to the issue's 1,000 hosts, 8,000 GPUs, 10,000 pods.
FULL_SIZES = (
    Size(10, 80, 100),
    Size(30, 240, 300),
    Size(100, 800, 1000),
    Size(300, 2400, 3000),
    Size(1000, 8000, 10000),
)
#: Pods swept at 1,000 hosts / 8,000 GPUs (a round with few pending pods is the common case).
FULL_POD_SWEEP = (Size(1000, 8000, 10), Size(1000, 8000, 100), Size(1000, 8000, 1000))
QUICK_SIZES = (Size(10, 80, 100), Size(30, 240, 300), Size(100, 800, 1000))
QUICK_POD_SWEEP = (Size(100, 800, 10),)


def make_world(size: Size, *, seed: int = 9) -> tuple[list[GpuRequest], list[HostState], list[FreeGpu]]:
    """A deterministic planning input of ``size``: (requests, hosts, free GPUs).

    A fifth of the hosts already carry 1-4 GPUs of one model (a third of those with one spare
    GPU), a tenth are tainted ``dedicated=training:NoSchedule``; requests ask for 1/2/4/8 GPUs
    (weights 6/3/2/1), a model or any, 5 % pinned to a random host, 10 % tolerating the taint.
    """
    rng = random.Random(seed)
    hosts: list[HostState] = []
    for i in range(size.hosts):
        attached = rng.randint(1, 4) if rng.random() < 0.2 else 0
        model = rng.choice(MODELS) if attached else None
        spare = {GPU_RESOURCE: 1} if attached and rng.random() < 0.33 else {}
        hosts.append(
            HostState(
                f"node-{i:05d}",
                cpu_free_millis=rng.choice([32_000, 64_000, 128_000]),
                memory_free_bytes=rng.choice([256, 512, 1024]) * GIB,
                model=model,
                attached=attached,
                max_gpus=SLOTS_PER_HOST,
                spare=spare,
                labels={"kubernetes.io/hostname": f"node-{i:05d}", "rack": f"r{i // 40}"},
                taints=(_TAINT,) if rng.random() < 0.1 else (),
            )
        )
    gpus = [
        FreeGpu(f"gpu{i}", MODELS[(i // GPUS_PER_SWITCH) % 2], f"sw{i // GPUS_PER_SWITCH}")
        for i in range(size.gpus)
    ]
    reqs: list[GpuRequest] = []
    for i in range(size.pods):
        pinned = rng.random() < 0.05
        reqs.append(
            GpuRequest(
                f"ns{i % 20}/pod-{i}",
                f"uid-{i}",
                rng.choices([1, 2, 4, 8], weights=[6, 3, 2, 1])[0],
                models=rng.choice([None, frozenset({MODELS[0]}), frozenset({MODELS[1]})]),
                hosts=frozenset({f"node-{rng.randrange(size.hosts):05d}"}) if pinned else None,
                cpu_millis=rng.choice([1000, 4000, 8000]),
                memory_bytes=rng.choice([4, 16, 64]) * GIB,
                tolerations=(_TOLERATION,) if rng.random() < 0.1 else (),
                priority=rng.choice([0, 0, 0, 100]),
                created=float(i),
            )
        )
    return reqs, hosts, gpus


def _time_rounds(world: tuple[Any, ...], repeats: int) -> tuple[list[float], Any]:
    times: list[float] = []
    result = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = plan(*world)
        times.append(time.perf_counter() - t0)
    return times, result


def _peak_round_mib(world: tuple[Any, ...]) -> float:
    """MiB allocated at peak during one round, over what was allocated before it."""
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        plan(*world)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak - base) / 2**20


def _input_mib(size: Size, seed: int) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        world = make_world(size, seed=seed)
        cur, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del world
    return cur / 2**20


def profile_round(world: tuple[Any, ...], *, top: int = 12) -> list[dict[str, Any]]:
    """cProfile one round; the ``top`` functions by cumulative time.

    Returns a list of ``{"function", "calls", "tottime_s", "cumtime_s"}`` (seconds, with the
    profiler's own overhead included, so compare the shares, not the totals).
    """
    prof = cProfile.Profile()
    prof.enable()
    plan(*world)
    prof.disable()
    st = pstats.Stats(prof, stream=io.StringIO())
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        where = file.rsplit("/", 2)
        rows.append(
            {
                "function": f"{'/'.join(where[-2:])}:{line}({fn})",
                "calls": nc,
                "tottime_s": round(tt, 6),
                "cumtime_s": round(ct, 6),
            }
        )
    rows.sort(key=lambda r: -r["cumtime_s"])
    return rows[:top]


def measure(size: Size, *, repeats: int, seed: int = 9) -> dict[str, Any]:
    """All figures for one size (see the module docstring); times in ms, memory in MiB."""
    world = make_world(size, seed=seed)
    plan(*world)  # warm-up: imports, interned strings
    times, result = _time_rounds(world, repeats)
    peak_mib = _peak_round_mib(world)
    composed = sum(len(p.devices) for p in result.placements)
    return {
        "hosts": size.hosts,
        "gpus": size.gpus,
        "pods": size.pods,
        "label": size.label,
        "repeats": repeats,
        "ms_min": round(min(times) * 1e3, 3),
        "ms_median": round(statistics.median(times) * 1e3, 3),
        "ms_max": round(max(times) * 1e3, 3),
        "peak_round_mib": round(peak_mib, 3),
        "input_mib": round(_input_mib(size, seed), 3),
        "placements": len(result.placements),
        "refusals": len(result.refusals),
        "gpus_planned": composed,
    }


def growth_exponents(rows: list[dict[str, Any]], *, key: str = "ms_median", by: str = "pods") -> list[float]:
    """log(t2/t1) / log(n2/n1) between consecutive rows (1.0 = linear growth)."""
    out = []
    for a, b in zip(rows, rows[1:], strict=False):
        if a[key] > 0 and b[key] > 0 and b[by] != a[by]:
            out.append(round(math.log(b[key] / a[key]) / math.log(b[by] / a[by]), 3))
    return out


def run(*, quick: bool = False, repeats: int | None = None, seed: int = 9) -> dict[str, Any]:
    """Run part 1. Returns ``{"sizes": [...], "pod_sweep": [...], "growth_exponents": [...],
    "profile": {...}, "target_ms": 100, "target_met": bool, ...}``."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    sweep = QUICK_POD_SWEEP if quick else FULL_POD_SWEEP
    reps = repeats or (3 if quick else 7)
    rows = [measure(s, repeats=reps, seed=seed) for s in sizes]
    sweep_rows = [measure(s, repeats=reps, seed=seed) for s in sweep]
    biggest = sizes[-1]
    profile = profile_round(make_world(biggest, seed=seed))
    at_1000 = [r for r in rows if r["hosts"] >= 1000]
    return {
        "part": "planner",
        "quick": quick,
        "seed": seed,
        "world": {
            "models": list(MODELS),
            "slots_per_host": SLOTS_PER_HOST,
            "gpus_per_switch": GPUS_PER_SWITCH,
        },
        "sizes": rows,
        "pod_sweep": sweep_rows,
        "growth_exponents": growth_exponents(rows),
        "profile": {"size": biggest.label, "top": profile},
        "target_ms": 100,
        "target_met": all(r["ms_median"] < 100 for r in at_1000) if at_1000 else None,
        "target_met_best_round": all(r["ms_min"] < 100 for r in at_1000) if at_1000 else None,
        "command": "python -m bench --only planner" + (" --quick" if quick else ""),
    }
