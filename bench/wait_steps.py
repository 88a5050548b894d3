"""Part 2: a gated pod's wait from its creation to its compose call, split into steps.

Per gated pod, five timestamps (``time.time()``, one clock on this machine), each from the
observer closest to the event:

- ``created``: the benchmark's own create call (``submitted``: just before the request). The
  pod's ``metadata.creationTimestamp`` is no use here: it has whole seconds only, and the API
  server sets it after mutating admission (sources in :mod:`composer.shell.pod_steps`), so it
  follows ``admitted``;
- ``admitted``: the composer's pod-gating webhook answered the CREATE with the gate (the
  composer's ``pod-step`` line ``admitted``, :mod:`composer.shell.pod_steps`);
- ``seen``: the composer's pod informer first delivered the pod (field ``seen`` of the
  ``planned`` line);
- ``planned``: the composer's round whose plan placed the pod (the ``planned`` line, with the
  node and the GPUs to compose);
- ``sent``: the Director received the compose request: the first ``POST fabric/edit`` for the
  planned node's machine at or after ``planned`` in the Director tap (:mod:`bench.director_tap`).
  A node has one job at a time and is not planned again while it runs, so that edit is the
  pod's own job's; a placement on spare units composes nothing (``devices`` 0) and has none.

Steps (seconds): ``admission`` = admitted - created, ``informer`` = seen - admitted,
``planning`` = planned - seen (the gated-pod batch window is spent here), ``compose_call`` =
sent - planned; ``composer`` = sent - seen is the composer's own share, ``total`` = sent -
created. A step whose timestamps were not both observed is None, never estimated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.pod_times import PodTimes, span, summarize
from composer.shell.pod_steps import parse

#: (key, label) of each step in the order a pod passes them.
STEPS = (
    ("admission", "created → admitted with the gate"),
    ("informer", "admitted → seen by the composer"),
    ("planning", "seen → planned"),
    ("compose_call", "planned → compose sent"),
)
#: (key, label) of the spans over several steps.
SPANS = (
    ("composer", "seen → compose sent (the composer's share)"),
    ("total", "created → compose sent"),
)


@dataclass(frozen=True)
class PodSteps:
    """One gated pod's timestamps (seconds since the epoch; None = not observed)."""

    pod: str
    created: float | None = None
    admitted: float | None = None
    seen: float | None = None
    planned: float | None = None
    node: str | None = None
    sent: float | None = None

    def durations(self) -> dict[str, float | None]:
        """``{step or span key: seconds or None}`` (keys of :data:`STEPS` and :data:`SPANS`)."""

        def d(a: float | None, b: float | None) -> float | None:
            s = span(a, b)
            return None if s is None else round(s, 4)

        return {
            "admission": d(self.created, self.admitted),
            "informer": d(self.admitted, self.seen),
            "planning": d(self.seen, self.planned),
            "compose_call": d(self.planned, self.sent),
            "composer": d(self.seen, self.sent),
            "total": d(self.created, self.sent),
        }


def composer_steps(
    lines: Iterable[str], namespace: str
) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """The composer's step lines for pods of ``namespace``: (pod name -> first ``admitted`` time,
    pod name -> first ``planned`` record). Lines that are not step lines are skipped."""
    admitted: dict[str, float] = {}
    planned: dict[str, dict[str, Any]] = {}
    for line in lines:
        rec = parse(line)
        if rec is None:
            continue
        ns, _, name = rec["pod"].partition("/")
        if ns != namespace or not name:
            continue
        if rec["step"] == "admitted":
            admitted.setdefault(name, float(rec["t"]))
        elif rec["step"] == "planned":
            planned.setdefault(name, rec)
    return admitted, planned


def compose_sent(tap: Iterable[Mapping[str, Any]], machines: Mapping[int, str]) -> dict[str, list[float]]:
    """Node name -> sorted arrival times of its accepted ``POST fabric/edit`` in the Director tap
    (records as :mod:`bench.director_tap` writes them; ``machines``: ``mach_id`` -> node name)."""
    out: dict[str, list[float]] = {}
    for r in tap:
        name = machines.get(r["mach_id"]) if r.get("mach_id") is not None else None
        if name is None or r.get("path") != "fabric/edit" or r.get("status", 200) >= 400:
            continue
        out.setdefault(name, []).append(float(r["t0"]))
    return {n: sorted(ts) for n, ts in out.items()}


def pod_steps(
    pods: Iterable[PodTimes],
    *,
    namespace: str,
    composer_log: Iterable[str],
    tap: Iterable[Mapping[str, Any]],
    machines: Mapping[int, str],
) -> list[PodSteps]:
    """The steps of each pod the composer's webhook gated (see the module docstring); pods it
    did not gate (no ``admitted`` line) are left out."""
    admitted, planned = composer_steps(composer_log, namespace)
    edits = compose_sent(tap, machines)
    out = []
    for p in pods:
        if p.name not in admitted:
            continue
        rec = planned.get(p.name) or {}
        at, node = rec.get("t"), rec.get("node")
        sent = None
        if at is not None and node is not None and rec.get("devices", 1) > 0:
            sent = next((t for t in edits.get(node, []) if t >= at), None)
        seen = rec.get("seen")
        out.append(
            PodSteps(
                pod=p.name,
                created=p.submitted,
                admitted=admitted[p.name],
                seen=float(seen) if seen else None,
                planned=None if at is None else float(at),
                node=node,
                sent=sent,
            )
        )
    return out


def step_stats(steps: Iterable[PodSteps]) -> dict[str, Any]:
    """JSON-ready: ``pods`` (gated pods), ``stats`` (step or span key -> :func:`summarize` over
    the pods where it was observed) and ``per_pod`` (the timestamps)."""
    steps = list(steps)
    durations = [s.durations() for s in steps]
    keys = [k for k, _ in (*STEPS, *SPANS)]
    return {
        "pods": len(steps),
        "stats": {k: summarize(v for d in durations if (v := d[k]) is not None) for k in keys},
        "per_pod": [asdict(s) for s in steps],
    }


def run_steps(
    pods: Iterable[PodTimes],
    namespace: str,
    composer_log: Path,
    tap: Iterable[Mapping[str, Any]],
    machines: Mapping[int, str],
) -> dict[str, Any]:
    """:func:`step_stats` of one run's gated pods, read from the composer's log file
    (``composer_log``; a missing file reads as no lines, so no pod counts as gated)."""
    lines = composer_log.read_text(errors="replace").splitlines() if composer_log.exists() else []
    return step_stats(pod_steps(pods, namespace=namespace, composer_log=lines, tap=tap, machines=machines))
