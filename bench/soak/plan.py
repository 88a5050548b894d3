"""The soak's timeline: every pod and fault draw, made up front from one seed. No I/O.

A run is reproducible from its seed: :func:`timeline` draws everything with one
``random.Random(seed)`` before the run starts, so the same seed and config give the same pods
(size, model, pin, gating, lifetime, creation time) and the same faults (kind, parameters,
start, duration), whatever happens during the run. What the lab does with them (timing, which
GPU a hand-detach finds attached) varies; the injector logs what it really did.

Fault kinds (:data:`FAULT_KINDS`), what each does on the lab (:mod:`bench.soak.inject`):

- ``director_5xx``: the Director simulator answers the next ``times`` matching calls with an
  error envelope, HTTP 500 or 503 (``/_sim/faults`` kind ``error``);
- ``director_401``: the same with HTTP 401 (the composer authenticates with HTTP Basic, so the
  simulator's digest expiry, ``/_sim/digests/expire``, would not reach it; an injected 401 is
  what an expired session answers);
- ``director_slow_answer``: a change is applied but answered ``seconds`` late (kind ``delay``,
  ``after: true``), beyond the composer's per-request timeout when ``seconds`` exceeds it;
- ``director_job_long`` / ``director_job_fail`` / ``director_job_stuck``: changes answer HTTP 202
  with a job that ends after ``seconds`` (``fail``: in FAILURE; ``stuck``: around the
  composer's job timeout, some past it, so the composer stops waiting and leaves the edit open);
- ``director_reprogram_half``: the next reprogram applies half its relations, then fails;
- ``connection_reset``: the composer-Director relay resets every open connection once;
- ``partition``: the relay refuses (``mode: reset``) or swallows (``mode: blackhole``) every
  connection for ``seconds``;
- ``gpu_detach_by_hand`` / ``gpu_attach_by_hand``: a GPU pulled off its machine, or a free one
  (in the system pool or a group's, not the composer's, in no open edit:
  :func:`bench.soak.inject.hand_attachable`) attached to a machine, through the simulator's
  out-of-band API; a hand-attached GPU is detached again after ``seconds`` (an operator undoing
  a test);
- ``leader_kill``: the composer replica holding the Lease is SIGKILLed and restarted after
  ``seconds``;
- ``apiserver_restart``: kube-apiserver stopped and started again with the same command line;
- ``node_recreate``: a kwok Node deleted and created again after ``seconds``;
- ``agent_down`` / ``agent_slow``: the GPU-Operator stand-in stopped for ``seconds``, or restarted
  with an advertise delay of ``delay`` seconds for ``seconds``.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

#: Every fault kind the injector knows, with its default weight in a draw.
FAULT_KINDS: dict[str, float] = {
    "director_5xx": 3,
    "director_401": 1,
    "director_slow_answer": 2,
    "director_job_long": 2,
    "director_job_fail": 2,
    "director_job_stuck": 1,
    "director_reprogram_half": 1,
    "connection_reset": 2,
    "partition": 1.5,
    "gpu_detach_by_hand": 1.5,
    "gpu_attach_by_hand": 1,
    "leader_kill": 1.5,
    "apiserver_restart": 0.7,
    "node_recreate": 1,
    "agent_down": 1,
    "agent_slow": 1,
}

#: Director API paths (below ``/liqid/api/v2/``) an error or delay rule may target; changes
#: in LIQID's compose/decompose order and the reads every round makes.
DIRECTOR_CHANGES = (
    "pool/edit",
    "predevice/gpu",
    "pool/done",
    "fabric/edit",
    "relate/gpu",
    "fabric/reprogram",
)
DIRECTOR_READS = ("status/gpu", "predevice", "machine", "device/info/gpu")


@dataclass(frozen=True)
class SoakConfig:
    """What a soak draws from.

    Attributes:
        seconds: length of the faulty phase (pods and faults are drawn in it).
        settle_seconds: after it, no new faults or pods; the run waits this long at most for the
            fabric to settle before the final checks.
        mean_pod_gap: mean seconds between pod creations (exponential gaps).
        mean_fault_gap: mean seconds between fault starts (exponential gaps).
        hosts: machine (= Node) names pods may be pinned to and faults may pick.
        models: GPU product labels (``nvidia.com/gpu.product``) pods may ask for.
        max_gpus: largest pod size (GPUs).
        short_lifetime / long_lifetime: (min, max) seconds a short- / long-lived pod lives
            after its creation (deleted whatever its state then: pending, gated or running).
        long_share: share of long-lived pods.
        pin_share / model_share / ungated_share: share of pods pinned to a host, asking for a
            model, opted out of gating.
        director_timeout: the composer's per-request timeout, seconds (slow answers are drawn
            on both sides of it).
        job_timeout: the composer's longest wait for a 202 job, seconds (stuck jobs are drawn
            from 0.7 to 1.4 times it, so some outlast the wait and leave their edit open).
        faults: kind -> weight (kinds with weight 0 are never drawn).
    """

    seconds: float = 1800.0
    settle_seconds: float = 180.0
    mean_pod_gap: float = 10.0
    mean_fault_gap: float = 20.0
    hosts: tuple[str, ...] = ()
    models: tuple[str, ...] = ("Tesla-T4", "NVIDIA-A100-PCIE-40GB")
    max_gpus: int = 2
    short_lifetime: tuple[float, float] = (5.0, 60.0)
    long_lifetime: tuple[float, float] = (120.0, 600.0)
    long_share: float = 0.15
    pin_share: float = 0.25
    model_share: float = 0.6
    ungated_share: float = 0.3
    director_timeout: float = 5.0
    job_timeout: float = 30.0
    faults: dict[str, float] = field(default_factory=lambda: dict(FAULT_KINDS))

    def token_seconds(self) -> int:
        """Lifetime, in seconds, of the composer's ServiceAccount token (TokenRequest
        ``expirationSeconds``): the whole run (faulty and settle phases) plus an hour. The
        composer's kubeconfig holds a fixed token, not a kubelet-rotated one, so a token shorter
        than the run stops every composer at its expiry (401 on the Lease: leadership lost)."""
        return int(self.seconds + self.settle_seconds) + 3600


@dataclass(frozen=True)
class PodDraw:
    """One pod: created ``at`` seconds into the run, deleted at ``delete_at`` (seconds into the
    run, at most the end of the faulty phase)."""

    name: str
    at: float
    count: int
    model: str | None
    host: str | None
    gated: bool
    delete_at: float


@dataclass(frozen=True)
class FaultDraw:
    """One fault: ``kind`` (:data:`FAULT_KINDS`) starting ``at`` seconds into the run with its
    drawn ``params`` (``seconds``: how long it lasts, where it lasts)."""

    index: int
    at: float
    kind: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Timeline:
    """Everything a run will do, in start order."""

    seed: int
    pods: tuple[PodDraw, ...]
    faults: tuple[FaultDraw, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "seed": self.seed,
            "pods": [asdict(p) for p in self.pods],
            "faults": [asdict(f) for f in self.faults],
        }


def _pod(rng: random.Random, i: int, at: float, cfg: SoakConfig) -> PodDraw:
    count = rng.randint(1, cfg.max_gpus)
    model = rng.choice(cfg.models) if cfg.models and rng.random() < cfg.model_share else None
    host = rng.choice(cfg.hosts) if cfg.hosts and rng.random() < cfg.pin_share else None
    gated = rng.random() >= cfg.ungated_share
    life = cfg.long_lifetime if rng.random() < cfg.long_share else cfg.short_lifetime
    delete_at = min(cfg.seconds, at + rng.uniform(*life))
    return PodDraw(f"soak-{i:04d}", round(at, 3), count, model, host, gated, round(delete_at, 3))


def _fault_params(rng: random.Random, kind: str, cfg: SoakConfig) -> dict[str, Any]:
    t = cfg.director_timeout
    if kind in ("director_5xx", "director_401"):
        status = 401 if kind == "director_401" else rng.choice((500, 503))
        path = rng.choice(DIRECTOR_CHANGES + DIRECTOR_READS)
        return {"status": status, "path": path, "times": rng.randint(1, 4)}
    if kind == "director_slow_answer":
        return {"path": rng.choice(DIRECTOR_CHANGES), "seconds": round(rng.uniform(t * 0.5, t * 2.5), 1)}
    if kind == "director_job_long":
        return {
            "path": rng.choice(DIRECTOR_CHANGES),
            "seconds": round(rng.uniform(2, 12), 1),
            "times": rng.randint(1, 3),
        }
    if kind == "director_job_fail":
        return {"path": rng.choice(DIRECTOR_CHANGES), "seconds": round(rng.uniform(0.5, 4), 1)}
    if kind == "director_job_stuck":
        jt = cfg.job_timeout
        return {"path": rng.choice(DIRECTOR_CHANGES), "seconds": round(rng.uniform(jt * 0.7, jt * 1.4), 1)}
    if kind == "partition":
        return {"mode": rng.choice(("reset", "blackhole")), "seconds": round(rng.uniform(5, 40), 1)}
    if kind == "gpu_detach_by_hand":
        return {"pick": rng.random()}
    if kind == "gpu_attach_by_hand":
        return {"pick": rng.random(), "host_pick": rng.random(), "seconds": round(rng.uniform(10, 60), 1)}
    if kind == "leader_kill":
        return {"seconds": round(rng.uniform(0, 15), 1)}
    if kind == "node_recreate":
        return {"host": rng.choice(cfg.hosts) if cfg.hosts else "", "seconds": round(rng.uniform(2, 30), 1)}
    if kind == "agent_down":
        return {"seconds": round(rng.uniform(5, 40), 1)}
    if kind == "agent_slow":
        return {"delay": round(rng.uniform(2, 8), 1), "seconds": round(rng.uniform(20, 60), 1)}
    return {}  # director_reprogram_half, connection_reset, apiserver_restart


def timeline(seed: int, cfg: SoakConfig) -> Timeline:
    """Draw the run's pods and faults (see module docstring). Pure: same seed, same timeline.

    Pods arrive with exponential gaps (mean ``cfg.mean_pod_gap``) over ``cfg.seconds``, faults
    likewise (mean ``cfg.mean_fault_gap``), the first fault after one mean gap. Kinds are drawn
    by weight from ``cfg.faults``; with no positive weight there are no faults.
    """
    rng = random.Random(seed)
    pods: list[PodDraw] = []
    t = rng.expovariate(1 / cfg.mean_pod_gap)
    while t < cfg.seconds:
        pods.append(_pod(rng, len(pods), t, cfg))
        t += rng.expovariate(1 / cfg.mean_pod_gap)
    kinds = [k for k, w in cfg.faults.items() if w > 0]
    weights = [cfg.faults[k] for k in kinds]
    faults: list[FaultDraw] = []
    t = cfg.mean_fault_gap
    while kinds and t < cfg.seconds:
        kind = rng.choices(kinds, weights)[0]
        faults.append(FaultDraw(len(faults), round(t, 3), kind, _fault_params(rng, kind, cfg)))
        t += rng.expovariate(1 / cfg.mean_fault_gap)
    return Timeline(seed, tuple(pods), tuple(faults))
