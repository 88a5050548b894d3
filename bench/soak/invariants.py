"""The soak's invariants, as pure functions over what was observed outside the composer. No I/O.

Observed data (:mod:`bench.soak.observe` collects it): samples of the Director simulator's state
(:class:`Sample`: where each GPU is, its owner tag, open edits), the machines' attach history
(``connection_history``, :class:`Attachment`), the pods' life (:class:`PodLife`), Events
(:class:`EventObs`) and the composers' metrics. None of it is the composer's own view (its
annotations or logs).

Checkers (each returns :class:`Violation` records, empty when the invariant holds):

- :func:`double_attachments`: no GPU attached to two machines at once (history intervals);
- :func:`unaccounted_gpus`: every GPU the composer tagged that sits on a machine is used by a
  running pod there, or the node's idle period is within ``bound`` seconds, or the composer
  named why in an Event on the node (a reclaim guard: ``ReclaimHeld``; a failure: a Warning)
  and a metric counted it; the reclaim unit is the node, so one running GPU pod makes all its
  GPUs used. GPUs without the composer's tag (static compositions, attached by hand) are not
  the composer's to reclaim and are left out;
- :func:`unexplained_waits`: no pod waits for a node longer than its reservation (plus slack)
  without a Warning Event from the composer on it by then;
- :func:`open_transactions`: no fabric or pool edit stays open longer than ``bound``, none is
  open at the end, and the simulator recorded no change sent while a job held its resource;
- :func:`not_converged`: at the end, every GPU the composer composed is back in a pool
  (unattached, untagged) or attached to a machine where a pod runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

#: Event reasons by which the composer names why GPUs stay attached to an idle node, and the
#: metric that counts the same thing (``composer/shell/metrics.py``); any other Warning Event
#: on the node pairs with the failure counters.
REASON_METRICS: dict[str, tuple[str, ...]] = {
    "ReclaimHeld": ("composer_reclaims_held",),
    "ReclaimFailed": ("composer_decomposition_failures_total",),
    "GpuDetachedOutOfBand": ("composer_gpus_detached_out_of_band_total",),
    "OrphanedGpus": ("composer_orphaned_gpus_reclaimed_total",),
    "OrphanReclaimFailed": ("composer_decomposition_failures_total",),
}
FAILURE_METRICS = (
    "composer_composition_failures_total",
    "composer_decomposition_failures_total",
    "composer_round_failures_total",
    "composer_gpus_detached_out_of_band_total",
    "composer_reservations_expired_total",
)


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which ``check``, when (``t``, seconds since the epoch), about what
    (``subject``: a GPU, node, pod or edit) and the evidence (``detail``)."""

    check: str
    t: float
    subject: str
    detail: str


@dataclass(frozen=True)
class GpuObs:
    """A GPU in one Director sample: its ``machine`` (None = not attached), device description
    ``udesc`` (the owner tag) and group pool ``group`` (None = the system free pool)."""

    name: str
    machine: str | None
    udesc: str = ""
    group: str | None = None


@dataclass(frozen=True)
class Sample:
    """One observation at ``t`` (seconds since the epoch).

    Attributes:
        gpus: every GPU of the Director.
        edits: open transactions, as ``"fabric:<machine>"`` / ``"pool:<group>"``.
        busy: node names with a non-terminal pod bound that asks for GPUs.
        nodes: node names that exist.
        job_violations: how many changes the simulator refused so far because a job held
            their resource (cumulative).
        edits_active: when each open edit of ``edits`` last moved (opened, or accepted a
            change), by the Director's clock (seconds since the epoch), where the Director says;
            an edit closed and opened again between two samples then counts as a new one.
    """

    t: float
    gpus: tuple[GpuObs, ...]
    edits: tuple[str, ...] = ()
    busy: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()
    job_violations: int = 0
    edits_active: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Attachment:
    """One entry of a machine's attach history: ``gpu`` attached at ``atime`` and detached at
    ``dtime`` (None: still attached), seconds since the epoch."""

    machine: str
    gpu: str
    atime: float
    dtime: float | None


@dataclass(frozen=True)
class EventObs:
    """An Event: ``t`` (last seen, seconds since the epoch), ``first`` (first seen), type
    (``Normal``/``Warning``), reason, the involved object's kind and name, the message and
    whether the composer reported it."""

    t: float
    type: str
    reason: str
    kind: str
    name: str
    message: str = ""
    composer: bool = True
    first: float | None = None

    @property
    def first_seen(self) -> float:
        return self.t if self.first is None else self.first


@dataclass
class PodLife:
    """One pod's life: created, first seen Running, gone (deleted or end of observation),
    seconds since the epoch."""

    name: str
    created: float
    running: float | None = None
    gone: float | None = None
    node: str | None = None
    gated: bool = False
    extra: dict[str, object] = field(default_factory=dict)


def double_attachments(history: Iterable[Attachment], *, end: float) -> list[Violation]:
    """GPUs whose attach intervals on two different machines overlap (an open interval lasts
    until ``end``)."""
    by_gpu: dict[str, list[Attachment]] = {}
    for a in history:
        by_gpu.setdefault(a.gpu, []).append(a)
    out: list[Violation] = []
    for gpu, items in sorted(by_gpu.items()):
        items.sort(key=lambda a: a.atime)
        for i, a in enumerate(items):
            a_end = end if a.dtime is None else a.dtime
            for b in items[i + 1 :]:
                b_end = end if b.dtime is None else b.dtime
                if b.machine != a.machine and b.atime < a_end and a.atime < b_end:
                    out.append(
                        Violation(
                            "double_attach",
                            b.atime,
                            gpu,
                            f"attached to {a.machine} from {a.atime:.3f} and to {b.machine} "
                            f"from {b.atime:.3f} (until {a_end:.3f} / {b_end:.3f})",
                        )
                    )
    return out


def _idle_spans(samples: Sequence[Sample], owner_tag: str) -> list[tuple[str, float, float, tuple[str, ...]]]:
    """(machine, first idle sample, last idle sample, tagged GPUs) of every run of samples in
    which a machine holds GPUs tagged ``owner_tag`` and no GPU pod is bound to it."""
    spans: list[tuple[str, float, float, tuple[str, ...]]] = []
    open_: dict[str, tuple[float, float, set[str]]] = {}
    for s in samples:
        tagged: dict[str, set[str]] = {}
        for g in s.gpus:
            if g.machine is not None and g.udesc == owner_tag:
                tagged.setdefault(g.machine, set()).add(g.name)
        idle = {m for m in tagged if m not in s.busy}
        for m in list(open_):
            if m not in idle:
                start, last, gpus = open_.pop(m)
                spans.append((m, start, last, tuple(sorted(gpus))))
        for m in idle:
            start, _, gpus = open_.get(m, (s.t, s.t, set()))
            open_[m] = (start, s.t, gpus | tagged[m])
    spans.extend((m, a, b, tuple(sorted(g))) for m, (a, b, g) in open_.items())
    return spans


def _metric_counted(
    metrics: Sequence[tuple[float, Mapping[str, float]]], names: Iterable[str], start: float, end: float
) -> bool:
    wanted = tuple(names)
    return any(start <= t <= end and any(v.get(n, 0) > 0 for n in wanted) for t, v in metrics)


def unaccounted_gpus(
    samples: Sequence[Sample],
    events: Sequence[EventObs],
    metrics: Sequence[tuple[float, Mapping[str, float]]],
    *,
    owner_tag: str,
    bound: float,
) -> list[Violation]:
    """Tagged GPUs on a machine with no GPU pod for longer than ``bound`` seconds (the node's
    idle timeout, or the orphan grace when the node is gone, plus the reclaim's own time) that
    no composer Event on the node explains with a metric counting it in the same period.

    ``metrics``: (t, metric name -> value summed over the composer replicas) samples.
    """
    out: list[Violation] = []
    for machine, start, last, gpus in _idle_spans(samples, owner_tag):
        if last - start <= bound:
            continue
        told = [
            e
            for e in events
            if e.composer
            and e.name == machine
            and start <= e.t
            and e.first_seen <= last
            and (e.type == "Warning" or e.reason in REASON_METRICS)
        ]
        counted = [
            e
            for e in told
            if _metric_counted(metrics, REASON_METRICS.get(e.reason, FAILURE_METRICS), start, last)
        ]
        if counted:
            continue
        why = (
            f"Event(s) {sorted({e.reason for e in told})} but no metric counted them"
            if told
            else "no composer Event on the node"
        )
        out.append(
            Violation(
                "unaccounted_gpu",
                last,
                machine,
                f"{', '.join(gpus)} attached with no GPU pod for {last - start:.0f} s "
                f"(bound {bound:.0f} s, from {start:.3f}): {why}",
            )
        )
    return out


def unexplained_waits(
    pods: Iterable[PodLife],
    events: Sequence[EventObs],
    *,
    reservation: float,
    slack: float,
    end: float,
) -> list[Violation]:
    """Pods not Running ``reservation + slack`` seconds after creation (and still there) with
    no Warning Event from the composer on them by then."""
    out: list[Violation] = []
    for p in pods:
        deadline = p.created + reservation + slack
        stop = min(x for x in (p.running, p.gone, end) if x is not None)
        if stop <= deadline:
            continue
        warned = [
            e
            for e in events
            if e.composer
            and e.type == "Warning"
            and e.kind == "Pod"
            and e.name == p.name
            and e.first_seen <= deadline
        ]
        if not warned:
            later = sorted(
                {
                    e.reason
                    for e in events
                    if e.composer and e.type == "Warning" and e.kind == "Pod" and e.name == p.name
                }
            )
            out.append(
                Violation(
                    "unexplained_wait",
                    deadline,
                    p.name,
                    f"waited {stop - p.created:.0f} s (gated={p.gated}) without a Warning "
                    f"from the composer within {reservation + slack:.0f} s"
                    + (f"; later: {later}" if later else ""),
                )
            )
    return out


def overlap(windows: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of ``[start, end]`` inside ``windows`` (``(from, to)`` pairs, not overlapping
    each other, as :meth:`bench.soak.proxy.Relay.cut_off` gives them)."""
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in windows)


def edits_past_bound(
    samples: Sequence[Sample],
    *,
    bound: float,
    cut_off: Sequence[tuple[float, float]] = (),
    excuse_after: float = 0.0,
) -> tuple[list[Violation], dict[str, float]]:
    """Edits unmoved longer than ``bound`` seconds, one violation per stretch an edit stays
    open; and the edits open in the last sample not reported in their current stretch, each with
    its age start (key -> seconds since the epoch). An
    edit's age runs from its :attr:`Sample.edits_active` time where given (its opening or last
    accepted change; a later time restarts it), else from the first of the consecutive samples
    that show it open. Time inside ``cut_off`` (windows, in seconds since the epoch, when the
    composer could not reach the Director at all, so could not close an edit) after
    ``excuse_after`` seconds of the age (when an edit left open falls due to be cancelled) does
    not count towards ``bound``; a cut before that does not delay the cancel."""
    out: list[Violation] = []
    since: dict[str, float] = {}
    reported: set[str] = set()
    for s in samples:
        for key in list(since):
            if key not in s.edits or s.edits_active.get(key, since[key]) != since[key]:
                since.pop(key)
                reported.discard(key)
        for key in s.edits:
            since.setdefault(key, s.edits_active.get(key, s.t))
            if s.t - since[key] <= bound or key in reported:
                continue
            cut = overlap(cut_off, since[key] + excuse_after, s.t)
            age = s.t - since[key] - cut
            if age > bound:
                reported.add(key)
                beside = f", and {cut:.0f} s cut off from the Director" if cut else ""
                out.append(
                    Violation(
                        "open_transaction",
                        s.t,
                        key,
                        f"open since {since[key]:.3f} ({age:.0f} s > {bound:.0f} s{beside})",
                    )
                )
    return out, {key: t for key, t in since.items() if key not in reported}


def open_transactions(
    samples: Sequence[Sample],
    *,
    bound: float,
    cut_off: Sequence[tuple[float, float]] = (),
    excuse_after: float = 0.0,
) -> list[Violation]:
    """Edits left open: :func:`edits_past_bound` (same arguments), or open in the last sample;
    and changes the simulator refused because a job still held their resource."""
    out, unreported = edits_past_bound(samples, bound=bound, cut_off=cut_off, excuse_after=excuse_after)
    if samples:
        last = samples[-1]
        for key in last.edits:
            if key in unreported:
                detail = f"still open at the end (since {unreported[key]:.3f})"
                out.append(Violation("open_transaction", last.t, key, detail))
        if last.job_violations:
            out.append(
                Violation(
                    "open_transaction",
                    last.t,
                    "director",
                    f"{last.job_violations} change(s) sent while a job held their resource",
                )
            )
    return out


def not_converged(
    final: Sample,
    composed: Iterable[str],
    *,
    owner_tag: str,
    running_on: Mapping[str, int],
) -> list[Violation]:
    """GPUs the composer composed (``composed``: names from its ``relate/gpu`` calls) that, at
    the end, are neither free and untagged nor attached to a machine where pods run
    (``running_on``: node name -> running GPU pods)."""
    by_name = {g.name: g for g in final.gpus}
    out: list[Violation] = []
    for name in sorted(set(composed)):
        g = by_name.get(name)
        if g is None:
            continue
        if g.machine is None:
            if g.udesc == owner_tag:
                out.append(Violation("not_converged", final.t, name, "free but still tagged by the composer"))
        elif not running_on.get(g.machine):
            out.append(
                Violation(
                    "not_converged",
                    final.t,
                    name,
                    f"attached to {g.machine} (tag {g.udesc!r}) where no GPU pod runs",
                )
            )
    return out
