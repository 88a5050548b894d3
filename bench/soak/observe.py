"""What the soak sees, from outside the composer: the Director simulator's state (``GET
/_sim/state``), the scenario's pods, Nodes and Events (Kubernetes API) and the composer's
``/metrics``, sampled every ``interval`` seconds into the records of
:mod:`bench.soak.invariants`. A sample that fails (the API server restarting, the simulator
busy) is counted in :attr:`Observer.missed` and skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import requests
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from bench.soak.invariants import Attachment, EventObs, GpuObs, PodLife, Sample

#: Metrics kept from each scrape (sums over label sets).
METRICS = (
    "composer_reclaims_held",
    "composer_compositions_total",
    "composer_composition_failures_total",
    "composer_decompositions_total",
    "composer_decomposition_failures_total",
    "composer_round_failures_total",
    "composer_gpus_detached_out_of_band_total",
    "composer_orphaned_gpus_reclaimed_total",
    "composer_reservations_expired_total",
    "composer_gpus_adopted_total",
    "composer_leader",
)
GATING_LABEL = "composer.liqid.io/gating"


def _ts(x: datetime | None) -> float | None:
    return x.timestamp() if x is not None else None


def _edit_records(state: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Each open edit of one ``GET /_sim/state`` answer as (``fabric:<machine>`` or
    ``pool:<group>``, its record). Pure."""
    mach = {m["mach_id"]: m["name"] for m in state["machines"]}
    grp = {g["grp_id"]: g["name"] for g in state["groups"]}
    return [
        (f"{prefix}:{names.get(int(k), k)}", rec)
        for prefix, names, records in (("fabric", mach, state.get("edits", {})),
                                       ("pool", grp, state.get("pool_edits", {})))
        for k, rec in records.items()
    ]


def director_sample(state: Mapping[str, Any], t: float) -> tuple[tuple[GpuObs, ...], tuple[str, ...], int]:
    """GPUs, open edits (``fabric:<machine>`` / ``pool:<group>``) and the count of refused
    changes, from one ``GET /_sim/state`` answer (``lab/director_sim/state.py``). Pure."""
    mach = {m["mach_id"]: m["name"] for m in state["machines"]}
    grp = {g["grp_id"]: g["name"] for g in state["groups"]}
    gpus = tuple(
        GpuObs(g["name"], mach.get(g.get("mach_id")), g.get("udesc") or "", grp.get(g.get("grp_id")))
        for g in state["gpus"]
    )
    edits = tuple(sorted(key for key, _ in _edit_records(state)))
    return gpus, edits, len(state.get("violations", []))


def edits_active(state: Mapping[str, Any]) -> dict[str, float]:
    """When each open edit last moved by the Director's clock (seconds since the epoch): its
    last accepted change (``changed_at``: a relation, a reprogram, a pool move, a commit), else
    its opening (``opened_at``); keyed as :func:`director_sample` keys ``edits``; edits with
    neither are left out. Pure."""
    out: dict[str, float] = {}
    for key, rec in _edit_records(state):
        if isinstance(rec, Mapping):
            at = rec.get("changed_at") or rec.get("opened_at")
            if at is not None:
                out[key] = float(at)
    return out


def history(state: Mapping[str, Any]) -> list[Attachment]:
    """Every machine's attach history (``connection_history``, milliseconds) as
    :class:`Attachment` records in seconds. Pure."""
    return [
        Attachment(
            m["name"],
            str(h["name"]),
            int(h["atime"]) / 1000,
            None if h.get("dtime") is None else int(h["dtime"]) / 1000,
        )
        for m in state["machines"]
        for h in m.get("history", [])
    ]


def scrape(text: str) -> dict[str, float]:
    """Sum of each kept metric's samples in a ``/metrics`` text (``_total`` names as exposed)."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in METRICS:
                out[s.name] = out.get(s.name, 0.0) + float(s.value)
    return out


class Observer:
    """Samples the lab in a thread until :meth:`stop`.

    Args:
        sim: ``(method, path) -> JSON`` of the simulator's test-control API.
        core: CoreV1Api of the scenario's cluster.
        namespace: the pods' namespace.
        node_selector: label selector of the scenario's Nodes.
        composer_instance: prefix of the composer's ``reportingInstance`` (its identities).
        metrics_url: ``() -> URL`` of the running composer's ``/metrics``.
    """

    def __init__(
        self,
        *,
        sim: Callable[[str, str], Any],
        core: client.CoreV1Api,
        namespace: str,
        node_selector: str,
        composer_instance: str,
        metrics_url: Callable[[], str],
        interval: float = 2.0,
    ) -> None:
        self.sim, self.core, self.ns = sim, core, namespace
        self.node_selector, self.instance, self.metrics_url = node_selector, composer_instance, metrics_url
        self.interval = interval
        self.samples: list[Sample] = []
        self.pods: dict[str, PodLife] = {}
        self.events: dict[str, EventObs] = {}
        self.metrics: list[tuple[float, dict[str, float]]] = []
        self.missed = 0
        self.last_state: dict[str, Any] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="soak-observer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - API server restarting, simulator busy: next time
                self.missed += 1
            self._stop.wait(self.interval)

    def sample(self) -> Sample:
        """Take one sample now (also called once more at the end)."""
        t = time.time()
        state = self.sim("GET", "state")
        gpus, edits, refused = director_sample(state, t)
        pods = self.core.list_namespaced_pod(self.ns).items
        nodes = self.core.list_node(label_selector=self.node_selector).items
        busy = frozenset(
            p.spec.node_name for p in pods if p.spec.node_name and p.status.phase in ("Pending", "Running")
        )
        events = [
            *self.core.list_namespaced_event(self.ns).items,
            *self.core.list_namespaced_event("default", field_selector="involvedObject.kind=Node").items,
        ]
        with self._lock:
            self._pods(pods, t)
            self._events(events, t)
        try:
            m = scrape(requests.get(self.metrics_url(), timeout=3).text)
        except requests.RequestException:
            m = {}
        s = Sample(t, gpus, edits, busy, frozenset(n.metadata.name for n in nodes), refused,
                   edits_active(state))
        with self._lock:
            self.last_state = state
            self.samples.append(s)
            if m:
                self.metrics.append((t, m))
        return s

    def _pods(self, pods: list[client.V1Pod], t: float) -> None:
        seen = set()
        for p in pods:
            name = p.metadata.name
            seen.add(name)
            life = self.pods.get(name)
            if life is None:
                created = _ts(p.metadata.creation_timestamp) or t
                gated = (p.metadata.labels or {}).get(GATING_LABEL) != "disabled"
                life = self.pods[name] = PodLife(name, created, gated=gated)
            if p.spec.node_name:
                life.node = p.spec.node_name
            if life.running is None and p.status.phase == "Running":
                ready = [c for c in (p.status.conditions or []) if c.type == "Ready" and c.status == "True"]
                life.running = _ts(ready[0].last_transition_time) if ready else t
            if p.metadata.deletion_timestamp is not None and life.gone is None:
                life.gone = t
        for name, life in self.pods.items():
            if name not in seen and life.gone is None:
                life.gone = t

    def _events(self, items: list[client.CoreV1Event], t: float) -> None:
        for e in items:
            last = _ts(e.last_timestamp) or _ts(e.event_time) or _ts(e.metadata.creation_timestamp) or t
            first = _ts(e.first_timestamp) or _ts(e.event_time) or _ts(e.metadata.creation_timestamp)
            if e.series is not None and e.series.last_observed_time is not None:
                last = max(last, e.series.last_observed_time.timestamp())
            composer = (e.reporting_instance or "").startswith(self.instance)
            if e.involved_object.kind == "Node" and not composer:
                continue
            self.events[e.metadata.uid] = EventObs(
                last,
                e.type or "",
                e.reason or "",
                e.involved_object.kind or "",
                e.involved_object.name or "",
                e.message or "",
                composer,
                first,
            )

    def snapshot(
        self,
    ) -> tuple[list[Sample], list[PodLife], list[EventObs], list[tuple[float, dict[str, float]]]]:
        """Copies of everything observed so far."""
        with self._lock:
            return (
                list(self.samples),
                list(self.pods.values()),
                list(self.events.values()),
                list(self.metrics),
            )
