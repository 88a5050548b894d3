"""The fabric at a glance: what ``python -m ops.fabric status`` prints, built from what it read. No I/O.

Inputs are the Director's GPUs (:class:`~dynamic_providers.director.models.Gpu`, from
:meth:`DirectorClient.gpus`) and the cluster's Nodes, Pods and the composer's Events as the API
server returns them (core/v1 JSON objects). :func:`build` joins them:

- **pools**: per Director pool (a group's pool by group name, ``system`` for GPUs in no group)
  and model, how many GPUs are free, composed (attached to a machine) or unhealthy;
- **gpus**: each GPU with where it is: ``free``, ``composed`` to which host (a Director machine;
  the composer names Nodes after machines), whether the composer attached it (the host Node's
  ``composer.liqid.io/devices`` annotation) or it is someone else's (the Pulumi program's static
  compositions), which pods use it, the host's idle timer, an open reclaim and the reclaim guard
  that holds it;
- **hosts**: per Director machine, its Node's composer pool label, GPUs, GPU pods and timers;
- **gated**: pods held by the composer's scheduling gate, with why (their reservation on a node,
  else the composer's latest Event about them, its Warning when a Normal one carries the same
  second);
- **failures**: the composer's Warning Events newer than ``since``, newest first.

With ``namespaces`` the gated pods and the failures are those of pods (and the composer's Lease)
in those namespaces, and of the Director's hosts; the GPUs and hosts are always the Director's.

Which pods use a GPU: the pods whose ``composer.liqid.io/reservation`` annotation names it (the
composer writes it when it releases a gated pod onto its reserved GPUs); for a GPU no reservation
names, the non-terminal GPU pods bound to its host (the device plugin's allocation inside the node
is not visible through the API server).

Which guard holds an idle host's reclaim (docs/composer-reclaim.md): the
``composer.liqid.io/do-not-reclaim`` annotation on the Node or on a GPU pod bound to it, read
here; otherwise the composer's latest ``ReclaimHeld`` Event about the Node since the host became
idle (its message names ``window`` or ``budget``, which depend on the composer's configuration).

Times are seconds since the epoch (floats); JSON output keeps them so, the text shows UTC.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from composer.model.annotations import COMPONENT, NodeRecord, decode
from composer.model.podspec import PodView, pod_view
from domain.labels import DO_NOT_RECLAIM, POOL_LABEL, RESERVATION
from dynamic_providers.director.models import Gpu

#: Director pool name of GPUs that are in no group's pool.
SYSTEM_POOL = "system"
#: Reason of the composer's Event about a Node whose idle reclaim a guard holds.
RECLAIM_HELD = "ReclaimHeld"
#: ``ReclaimHeld`` message: ``idle GPUs gpu0, gpu1 not reclaimed (<guard>): <why>``.
_HELD = re.compile(r"not reclaimed \((?P<guard>[^)]+)\): (?P<text>.*)", re.S)


@dataclass(frozen=True)
class PoolRow:
    """GPUs of one model in one Director pool (counts)."""

    pool: str
    model: str
    total: int
    free: int
    composed: int
    unhealthy: int


@dataclass(frozen=True)
class GpuRow:
    """One GPU and where it is.

    Attributes:
        name / model: Director device name, GFD product name.
        pool: Director pool (group name, or :data:`SYSTEM_POOL`).
        state: ``free``, ``composed`` (attached to ``host``) or ``unhealthy`` (Director state).
        host: machine it is attached to, or None.
        managed: the composer attached it (named in the host Node's devices annotation).
        owner_tag: the Director's device description (the composer writes its owner tag there).
        pods: ``namespace/name`` of the pods using it (module docstring).
        reserved_for: a pod an open intent on the host reserves it for (being composed/advertised).
        idle_since: the host's idle timer start (``composer.liqid.io/idle-since``), or None.
        reclaim: phase of an idle reclaim in progress on the host (``Tainted``/``Decomposed``).
        held_by: the reclaim guard holding the host's idle GPUs (module docstring), or None.
    """

    name: str
    model: str
    pool: str
    state: str
    host: str | None = None
    managed: bool = False
    owner_tag: str | None = None
    pods: tuple[str, ...] = ()
    reserved_for: str | None = None
    idle_since: float | None = None
    reclaim: str | None = None
    held_by: str | None = None


@dataclass(frozen=True)
class HostRow:
    """One Director machine and its Node.

    ``node``: a Node of that name exists. ``composer_pool``: its ``composer.liqid.io/pool`` label.
    """

    name: str
    node: bool
    composer_pool: str | None
    gpus: tuple[str, ...]
    managed_gpus: tuple[str, ...]
    gpu_pods: tuple[str, ...]
    idle_since: float | None
    reclaim: str | None
    held_by: str | None


@dataclass(frozen=True)
class GatedPod:
    """A pod held by the composer's scheduling gate; ``since``: its creation; ``why``: see module."""

    pod: str
    since: float
    why: str


@dataclass(frozen=True)
class Failure:
    """One Warning Event of the composer (``count``: times it was repeated on that Event)."""

    at: float
    kind: str
    object: str
    reason: str
    message: str
    count: int


@dataclass(frozen=True)
class FabricStatus:
    """Everything ``status`` prints; ``read_at``: when it was read (seconds since the epoch)."""

    director: str
    cluster: str
    read_at: float
    pools: tuple[PoolRow, ...] = ()
    gpus: tuple[GpuRow, ...] = ()
    hosts: tuple[HostRow, ...] = ()
    gated: tuple[GatedPod, ...] = ()
    failures: tuple[Failure, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able dict (tuples as lists)."""
        return asdict(self)


def _ts(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _event_time(ev: Mapping[str, Any]) -> float:
    series = ev.get("series") or {}
    return max(
        _ts(series.get("lastObservedTime")),
        _ts(ev.get("lastTimestamp")),
        _ts(ev.get("eventTime")),
        _ts(ev.get("firstTimestamp")),
        _ts((ev.get("metadata") or {}).get("creationTimestamp")),
    )


def _event_order(ev: Mapping[str, Any]) -> tuple[float, bool, str, str]:
    """Sort key of an Event, oldest first: its time (:func:`_event_time`, whole seconds as the
    API server's ``lastTimestamp`` carries them), then on a tie a Warning after a Normal (a pod's
    ``Gated`` and the Warning saying why it waits are often written in the same second; the
    Warning is the answer), then its namespace and name, so the order never depends on the order
    the API server listed them in."""
    meta = ev.get("metadata") or {}
    return (
        _event_time(ev),
        ev.get("type") == "Warning",
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def _is_composers(ev: Mapping[str, Any]) -> bool:
    return COMPONENT in (ev.get("reportingComponent"), (ev.get("source") or {}).get("component"))


def _reservation_devices(pod: PodView) -> tuple[str, tuple[str, ...]]:
    """(node, devices) of the pod's reservation annotation; ("", ()) when absent or malformed."""
    try:
        r = json.loads(pod.annotations.get(RESERVATION) or "{}")
        return str(r.get("node") or ""), tuple(str(d) for d in r.get("devices") or ())
    except (ValueError, TypeError, AttributeError):
        return "", ()


def _opted_out(annotations: Mapping[str, str] | None) -> bool:
    return str((annotations or {}).get(DO_NOT_RECLAIM, "")).strip().lower() == "true"


def _held_by(
    node: Mapping[str, Any],
    record: NodeRecord,
    pods: Sequence[PodView],
    held_events: Sequence[Mapping[str, Any]],
) -> str | None:
    if _opted_out((node.get("metadata") or {}).get("annotations")):
        return "do-not-reclaim (node)"
    for p in pods:
        if _opted_out(p.annotations):
            return f"do-not-reclaim (pod {p.key})"
    if record.idle_since is None:
        return None
    for ev in sorted(held_events, key=_event_order, reverse=True):
        if _event_time(ev) + 1.0 < record.idle_since:
            break  # held before this idle period began
        m = _HELD.search(ev.get("message") or "")
        return f"{m['guard']}: {m['text']}" if m else str(ev.get("message") or RECLAIM_HELD)
    return None


def build(
    *,
    director: str,
    cluster: str,
    read_at: float,
    gpus: Iterable[Gpu],
    machines: Iterable[str],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    since: float,
    namespaces: Collection[str] = (),
) -> FabricStatus:
    """Join the Director's GPUs with the cluster's objects (see the module docstring).

    Args:
        director / cluster: the URLs read (shown in the output).
        read_at: when they were read (seconds since the epoch).
        gpus: every GPU of the Director.
        machines: the names of the Director's machines (the hosts GPUs are composed to).
        nodes / pods / events: core/v1 Node, Pod and Event objects (JSON dicts); events of other
            components than the composer are ignored.
        since: Warning Events older than this (seconds since the epoch) are left out of failures.
        namespaces: when given, only gated pods and failures of these namespaces (and of the
            Director's hosts) are listed.
    """
    gpu_list = list(gpus)
    node_by_name = {str((n.get("metadata") or {}).get("name")): n for n in nodes}
    records = {name: decode((n.get("metadata") or {}).get("annotations")) for name, n in node_by_name.items()}
    views = [pod_view(p) for p in pods]
    gpu_pods = [v for v in views if v.wants_gpu and not v.terminal]
    bound: dict[str, list[PodView]] = {}
    for v in gpu_pods:
        if v.node_name:
            bound.setdefault(v.node_name, []).append(v)
    reserved_by_device: dict[str, list[str]] = {}
    for v in gpu_pods:
        _node, devices = _reservation_devices(v)
        if v.node_name:
            for d in devices:
                reserved_by_device.setdefault(d, []).append(v.key)
    composer_events = [e for e in events if _is_composers(e)]
    held_events: dict[str, list[Mapping[str, Any]]] = {}
    for e in composer_events:
        obj = e.get("involvedObject") or {}
        if obj.get("kind") == "Node" and e.get("reason") == RECLAIM_HELD:
            held_events.setdefault(str(obj.get("name")), []).append(e)

    hosts = sorted(set(machines) | {g.machine for g in gpu_list if g.machine})
    held = {
        h: _held_by(node_by_name[h], records[h], bound.get(h, []), held_events.get(h, []))
        for h in hosts
        if h in node_by_name
    }

    rows: list[GpuRow] = []
    for g in gpu_list:
        host = g.machine
        rec = records.get(host or "", NodeRecord())
        if not g.healthy:
            state = "unhealthy"
        elif g.attached:
            state = "composed"
        else:
            state = "free"
        intent_pod = next((it.pod for it in rec.intents.values() if g.name in it.devices), None)
        users: tuple[str, ...] = ()
        if host:
            users = tuple(
                sorted(
                    reserved_by_device.get(g.name)
                    or [p.key for p in bound.get(host, []) if not _reservation_devices(p)[1]]
                )
            )
        rows.append(
            GpuRow(
                name=g.name,
                model=g.model,
                pool=g.group or SYSTEM_POOL,
                state=state,
                host=host,
                managed=g.name in rec.devices,
                owner_tag=g.owner_tag or None,
                pods=users,
                reserved_for=intent_pod,
                idle_since=rec.idle_since if host else None,
                reclaim=str(rec.reclaim.phase) if host and rec.reclaim else None,
                held_by=held.get(host or "") if host and g.name in rec.devices else None,
            )
        )

    pools: dict[tuple[str, str], list[GpuRow]] = {}
    for r in rows:
        pools.setdefault((r.pool, r.model), []).append(r)
    pool_rows = tuple(
        PoolRow(
            pool,
            model,
            len(rs),
            sum(r.state == "free" for r in rs),
            sum(r.state == "composed" for r in rs),
            sum(r.state == "unhealthy" for r in rs),
        )
        for (pool, model), rs in sorted(pools.items())
    )

    host_rows = []
    for h in hosts:
        n = node_by_name.get(h)
        rec = records.get(h, NodeRecord())
        labels = ((n or {}).get("metadata") or {}).get("labels") or {}
        host_rows.append(
            HostRow(
                name=h,
                node=n is not None,
                composer_pool=labels.get(POOL_LABEL),
                gpus=tuple(r.name for r in rows if r.host == h),
                managed_gpus=tuple(sorted(rec.devices)),
                gpu_pods=tuple(sorted(p.key for p in bound.get(h, []))),
                idle_since=rec.idle_since,
                reclaim=str(rec.reclaim.phase) if rec.reclaim else None,
                held_by=held.get(h),
            )
        )

    intents = {uid: (node, it) for node, rec in records.items() for uid, it in rec.intents.items()}
    latest_about: dict[str, Mapping[str, Any]] = {}
    for e in sorted(composer_events, key=_event_order):
        obj = e.get("involvedObject") or {}
        if obj.get("kind") == "Pod":
            latest_about[f"{obj.get('namespace')}/{obj.get('name')}"] = e
    gated = []
    listed = [v for v in views if v.gated and not v.terminal and
              (not namespaces or v.namespace in namespaces)]
    for v in sorted(listed, key=lambda v: (v.created, v.key)):
        if v.uid in intents:
            node, it = intents[v.uid]
            what = f"GPUs {', '.join(it.devices)}" if it.devices else f"{it.units} spare unit(s)"
            why = f"{what} ({it.model}) reserved on {node}: {it.phase}"
            if it.until:
                why += f", reservation until {_clock(it.until)}"
        elif v.key in latest_about:
            e = latest_about[v.key]
            why = f"{e.get('reason')}: {e.get('message')}"
        else:
            why = "not planned yet (no reservation, no Event from the composer)"
        gated.append(GatedPod(v.key, v.created, why))

    failures = []
    for e in sorted(composer_events, key=_event_order, reverse=True):
        if e.get("type") != "Warning" or _event_time(e) < since:
            continue
        obj = e.get("involvedObject") or {}
        if namespaces and not (obj.get("kind") == "Node" and obj.get("name") in hosts
                               or obj.get("namespace") in namespaces):
            continue
        name = f"{obj.get('namespace')}/{obj.get('name')}" if obj.get("namespace") else str(obj.get("name"))
        failures.append(
            Failure(
                _event_time(e),
                str(obj.get("kind")),
                name,
                str(e.get("reason")),
                str(e.get("message") or ""),
                int(e.get("count") or 1),
            )
        )

    return FabricStatus(
        director=director,
        cluster=cluster,
        read_at=read_at,
        pools=pool_rows,
        gpus=tuple(rows),
        hosts=tuple(host_rows),
        gated=tuple(gated),
        failures=tuple(failures),
    )


def _clock(t: float | None) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S") if t else "-"


def _ago(t: float | None, now: float) -> str:
    if not t:
        return "-"
    return f"{_clock(t)} ({max(0.0, now - t):.0f} s ago)"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return ["  " + fmt.format(*header).rstrip(), *("  " + fmt.format(*r).rstrip() for r in rows)]


def render_text(s: FabricStatus, *, max_failures: int = 20) -> str:
    """The human-readable report (UTC clock times, ages relative to ``s.read_at``)."""
    read = datetime.fromtimestamp(s.read_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    out = [f"Director {s.director}, cluster {s.cluster}, read {read}", "", "POOLS (Director)"]
    out += _table(
        ("pool", "model", "total", "free", "composed", "unhealthy"),
        [(p.pool, p.model, str(p.total), str(p.free), str(p.composed), str(p.unhealthy)) for p in s.pools],
    )
    out += ["", "GPUS"]
    out += _table(
        ("gpu", "model", "pool", "state", "host", "by", "used by", "idle since", "held by"),
        [
            (
                g.name,
                g.model,
                g.pool,
                g.state,
                g.host or "-",
                "composer" if g.managed else ("other" if g.host else "-"),
                ", ".join(g.pods) or (f"reserved for {g.reserved_for}" if g.reserved_for else "-"),
                _ago(g.idle_since, s.read_at) + (f", reclaim {g.reclaim}" if g.reclaim else ""),
                g.held_by or "-",
            )
            for g in s.gpus
        ],
    )
    out += ["", "HOSTS"]
    out += _table(
        ("host", "node", "composer pool", "gpus", "gpu pods", "idle since", "reclaim", "held by"),
        [
            (
                h.name,
                "yes" if h.node else "no",
                h.composer_pool or "-",
                ", ".join(h.gpus) or "-",
                ", ".join(h.gpu_pods) or "-",
                _ago(h.idle_since, s.read_at),
                h.reclaim or "-",
                h.held_by or "-",
            )
            for h in s.hosts
        ],
    )
    out += ["", "GATED PODS"]
    out += [f"  {g.pod}  created {_ago(g.since, s.read_at)}: {g.why}" for g in s.gated] or ["  none"]
    out += ["", "RECENT FAILURES (composer Warning Events)"]
    shown = s.failures[:max_failures]
    out += [
        f"  {_clock(f.at)}  {f.kind} {f.object}  {f.reason}"
        + (f" (x{f.count})" if f.count > 1 else "")
        + f": {f.message}"
        for f in shown
    ] or ["  none"]
    if len(s.failures) > len(shown):
        out.append(f"  ... and {len(s.failures) - len(shown)} more (--output json lists all)")
    return "\n".join(out) + "\n"
