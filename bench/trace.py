"""Pod traces for the GPU-savings simulation (part 3): the file format, a reader, a writer and a
seeded generator of bursty traces.

File format (bring your own trace): UTF-8, one pod per record, in either of two encodings,
chosen by the file extension.

``.csv``: a header line naming the columns, then one line per pod::

    arrival_seconds,duration_seconds,gpus,model,host
    0,3600,2,Tesla-T4,blade-slot-1
    4000,3600,2,Tesla-T4,blade-slot-2
    120.5,600,1,,

``.jsonl``: one JSON object per line with the same keys (``model``/``host`` may be null or
absent; blank lines and lines starting with ``#`` are skipped)::

    {"arrival_seconds": 0, "duration_seconds": 3600, "gpus": 2, "model": "Tesla-T4", "host": "blade-slot-1"}

Fields:

- ``arrival_seconds`` (float >= 0): when the pod is created (becomes pending), seconds from the
  start of the trace. Records need not be sorted.
- ``duration_seconds`` (float > 0): how long the pod runs once it has its GPUs.
- ``gpus`` (int 1..64): whole GPUs requested (``resources.limits["nvidia.com/gpu"]``).
- ``model`` (string or empty): required GPU model as the GFD product label
  (``nvidia.com/gpu.product``, e.g. ``Tesla-T4``); empty = any model.
- ``host`` (string or empty): the node the pod is pinned to (``kubernetes.io/hostname``
  node selector, e.g. ``blade-slot-2``); empty = any host. Hosts named here join the simulated
  fleet.
- ``name`` (optional string): the pod's name; default ``pod-<line number>``.

Errors: :class:`TraceError` names the file, the line and the problem.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

#: Columns of the CSV encoding, in order.
COLUMNS = ("arrival_seconds", "duration_seconds", "gpus", "model", "host")


class TraceError(ValueError):
    """A trace file could not be read: ``path``, 1-based ``line`` (0 = whole file) and why."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")
        self.path = str(path)
        self.line = line


class TracePod(BaseModel):
    """One pod of a trace (see the module docstring for each field's meaning and unit)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arrival_seconds: float = Field(ge=0, allow_inf_nan=False)
    duration_seconds: float = Field(gt=0, allow_inf_nan=False)
    gpus: int = Field(ge=1, le=64)
    model: str | None = None
    host: str | None = None
    name: str | None = None

    @field_validator("model", "host", "name", mode="before")
    @classmethod
    def _blank_is_none(cls, v: object) -> object:
        if isinstance(v, str) and not v.strip():
            return None
        return v.strip() if isinstance(v, str) else v


def _from_row(path: Path, line: int, row: dict[str, object]) -> TracePod:
    try:
        pod = TracePod.model_validate(row)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise TraceError(path, line, problems) from None
    return pod if pod.name else pod.model_copy(update={"name": f"pod-{line}"})


def read_trace(path: str | Path) -> list[TracePod]:
    """Read a ``.csv`` or ``.jsonl`` trace; returns pods sorted by arrival (stable).

    Raises:
        TraceError: unknown extension, missing CSV columns, bad JSON or a bad field (the message
            names the line and the field).
        OSError: the file cannot be read.
    """
    p = Path(path)
    pods: list[TracePod] = []
    if p.suffix == ".csv":
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in COLUMNS[:3] if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceError(p, 1, f"missing column(s): {', '.join(missing)}")
            for i, row in enumerate(reader, start=2):
                clean = {k: v for k, v in row.items() if k is not None and v is not None}
                pods.append(_from_row(p, i, clean))
    elif p.suffix == ".jsonl":
        for i, text in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TraceError(p, i, f"not JSON: {exc.msg}") from None
            if not isinstance(row, dict):
                raise TraceError(p, i, "expected a JSON object")
            pods.append(_from_row(p, i, row))
    else:
        raise TraceError(p, 0, "unknown extension: use .csv or .jsonl")
    return sorted(pods, key=lambda x: x.arrival_seconds)


def write_trace(path: str | Path, pods: Iterable[TracePod]) -> Path:
    """Write ``pods`` as ``.csv`` (columns :data:`COLUMNS` plus ``name``) or ``.jsonl``.

    Raises:
        TraceError: unknown extension.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".csv":
        with p.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow([*COLUMNS, "name"])
            for x in pods:
                w.writerow(
                    [x.arrival_seconds, x.duration_seconds, x.gpus, x.model or "", x.host or "", x.name or ""]
                )
    elif p.suffix == ".jsonl":
        with p.open("w", encoding="utf-8") as fh:
            for x in pods:
                fh.write(json.dumps(x.model_dump(exclude_none=True)) + "\n")
    else:
        raise TraceError(p, 0, "unknown extension: use .csv or .jsonl")
    return p


def handover_trace(
    *, cycles: int = 4, run_seconds: float = 1800.0, gap_seconds: float = 1800.0
) -> list[TracePod]:
    """Seed 000's minimal lab as a trace: 2 hosts, one 2-GPU Tesla-T4 pod at a time, pinned
    alternately to ``blade-slot-1`` and ``blade-slot-2``; each starts ``gap_seconds`` after the
    previous one ended (so its GPUs have gone back to the pool). Its pods are named
    ``article-<i>``, as in the traces and reports written before."""
    pods = []
    t = 0.0
    for i in range(cycles * 2):
        host = f"blade-slot-{1 + i % 2}"
        pods.append(
            TracePod(
                arrival_seconds=t,
                duration_seconds=run_seconds,
                gpus=2,
                model="Tesla-T4",
                host=host,
                name=f"article-{i}",
            )
        )
        t += run_seconds + gap_seconds
    return pods


def bursty_trace(
    *,
    seed: int = 42,
    hours: float = 24.0,
    hosts: Sequence[str] = tuple(f"gpu-node-{i:02d}" for i in range(1, 17)),
    base_per_hour: float = 6.0,
    burst_per_hour: float = 60.0,
    bursts_per_day: float = 6.0,
    burst_minutes: float = 20.0,
    pinned_fraction: float = 0.3,
    models: Sequence[str] = ("Tesla-T4",),
    mean_duration_seconds: float = 1800.0,
    gpu_sizes: Sequence[int] = (1, 2, 4),
    gpu_weights: Sequence[float] = (8, 4, 2),
) -> list[TracePod]:
    """A bursty trace from a two-state Markov-modulated Poisson process (seeded, reproducible).

    Between bursts pods arrive at ``base_per_hour``; bursts (on average ``bursts_per_day``,
    exponentially distributed lengths of mean ``burst_minutes``) raise the rate to
    ``burst_per_hour``. Durations are log-normal with mean ``mean_duration_seconds`` (sigma 1,
    capped at 8x the mean); GPUs per pod drawn from ``gpu_sizes`` with ``gpu_weights``; ``pinned_fraction`` of
    pods are pinned to a uniformly chosen host of ``hosts``; models uniform over ``models``
    (a single model gives ``model`` on every pod).
    """
    rng = random.Random(seed)
    end = hours * 3600.0
    mean_burst = burst_minutes * 60.0
    mean_quiet = max(60.0, 86400.0 / max(bursts_per_day, 1e-9) - mean_burst)
    sigma = 1.0
    mu = math.log(mean_duration_seconds) - sigma**2 / 2
    pods: list[TracePod] = []
    t, in_burst = 0.0, False
    switch_at = rng.expovariate(1 / mean_quiet)
    while t < end:
        rate = (burst_per_hour if in_burst else base_per_hour) / 3600.0
        nxt = t + rng.expovariate(rate)
        if nxt >= switch_at:
            t = switch_at
            in_burst = not in_burst
            switch_at = t + rng.expovariate(1 / (mean_burst if in_burst else mean_quiet))
            continue
        t = nxt
        if t >= end:
            break
        duration = min(rng.lognormvariate(mu, sigma), 8 * mean_duration_seconds)
        pods.append(
            TracePod(
                arrival_seconds=round(t, 3),
                duration_seconds=round(max(1.0, duration), 3),
                gpus=rng.choices(list(gpu_sizes), weights=list(gpu_weights))[0],
                model=rng.choice(list(models)) if models else None,
                host=rng.choice(list(hosts)) if rng.random() < pinned_fraction else None,
                name=f"pod-{len(pods)}",
            )
        )
    return pods
