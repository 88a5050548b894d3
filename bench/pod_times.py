"""What the reaction benchmark records per pod and how it summarises a series: the pod's
timestamps (:class:`PodTimes`), the interval between two of them (:func:`span`) and a series'
nearest-rank quantiles (:func:`summarize`). A leaf module: :mod:`bench.reaction` and
:mod:`bench.wait_steps` both read it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def summarize(values: Iterable[float]) -> dict[str, Any]:
    """``{"n", "mean", "p50", "p90", "p99", "max"}`` of ``values`` (nearest-rank quantiles)."""
    v = sorted(values)
    if not v:
        return {"n": 0}

    def q(p: float) -> float:
        return round(v[min(len(v) - 1, max(0, math.ceil(p * len(v)) - 1))], 3)

    return {
        "n": len(v),
        "mean": round(statistics.fmean(v), 3),
        "p50": q(0.5),
        "p90": q(0.9),
        "p99": q(0.99),
        "max": round(v[-1], 3),
    }


@dataclass
class PodTimes:
    """Timestamps of one pod (seconds since the epoch; None = not seen). ``claim`` (the UID of
    the pod's ResourceClaim), ``allocated``, ``prebind`` and ``visible`` are read in DRA mode only
    (:mod:`bench.dra_times`)."""

    name: str
    uid: str = ""
    claim: str = ""
    submitted: float | None = None
    unschedulable: float | None = None
    gated: float | None = None
    gate_removed: float | None = None
    intent: float | None = None
    node: str | None = None
    issued: float | None = None
    attached: float | None = None
    advertised: float | None = None
    allocated: float | None = None
    prebind: float | None = None
    visible: float | None = None
    bound: float | None = None
    running: float | None = None


def span(a: float | None, b: float | None) -> float | None:
    """Seconds from ``a`` to ``b``; None when either was not observed."""
    return None if a is None or b is None else b - a
