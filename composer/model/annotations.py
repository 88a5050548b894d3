"""Names the composer writes into Kubernetes, and the codecs of its node annotations.

All under the prefix ``composer.liqid.io/``, declared in :mod:`domain.labels` (LIQID's own
Kubernetes tooling also keeps desired state in node annotations: docs/domain.md "Kubernetes
names"). The composer is the only writer of these keys; people may read them
(``kubectl get node -o yaml``) to see what it intends.

Node annotations:

``composer.liqid.io/devices``
    Comma-separated, sorted Director device names the composer attached to this node. Only
    these are ever decomposed; GPUs attached by anyone else (the Pulumi program's static
    compositions) are never touched.
``composer.liqid.io/intents``
    JSON object, pod UID -> :class:`Intent`: a pending pod the composer is serving on this
    node, and how far it got (``Composing`` -> ``Attached`` -> ``Advertised``). Written before
    the Director is called, so a restart finds what was under way and converges from the
    Director's truth instead of composing twice.
``composer.liqid.io/reclaim``
    JSON :class:`Reclaim`: an idle-reclaim in progress (the node is tainted meanwhile).
``composer.liqid.io/idle-since``
    Seconds since the epoch (``1800000000.250``): when a composer replica first saw the node
    idle with composer-managed GPUs. The idle timeout counts from it, so a new leader goes on
    with the timer instead of starting it again; removed when a GPU pod arrives or the reclaim
    starts.

An intent is also the *reservation* of its GPUs for its pod: the planner counts its devices
and units as taken until the pod is bound, so two pods never get the same GPUs. For a pod held
by the scheduling gate below, ``until`` bounds the reservation (it is re-planned after that).

Pod fields written (see :mod:`composer.decide.gating`):

``spec.schedulingGates`` entry ``composer.liqid.io/compose``
    Added by the composer's admission webhook to new GPU pods; removed by the composer when
    the pod's reserved GPUs are advertised on its node (together with a
    ``kubernetes.io/hostname`` node selector), or unchanged when nothing can serve the pod.
Pod annotation ``composer.liqid.io/reservation``
    JSON ``{"node", "devices", "resource", "units"}`` written with the release: where the
    pod's GPUs were reserved (for people; the node's ``intents`` stay the record).
Label or annotation ``composer.liqid.io/gating: disabled`` (pod), label (namespace)
    Opt-out: the webhook does not gate the pod (or any pod of the namespace).

``composer.liqid.io/autoscaler-hold``
    ``"true"`` while the node holds composer-managed GPUs (or an intent or a reclaim is open);
    written together with :data:`AUTOSCALER_ANNOTATIONS` (cluster-autoscaler's
    ``scale-down-disabled`` and Karpenter's ``do-not-disrupt``), and all three are removed
    together after the reclaim, so the composer only ever removes what it set.

Opt-out read on a Node or on a pod running on it: annotation ``composer.liqid.io/do-not-reclaim:
"true"`` holds the node's GPUs (no idle reclaim starts; one in progress is aborted).

Node label read (optional): ``composer.liqid.io/pool`` (the host's pool) and
``composer.liqid.io/max-gpus`` (PCIe slots the host has for fabric GPUs).
Namespace label read (optional): ``composer.liqid.io/pool`` (the pool of the namespace's pods).
Taint written during reclaim: ``composer.liqid.io/reclaiming=true:NoSchedule``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

# The names are declared once in domain.labels and re-exported here for the composer's modules.
from domain.labels import AUTOSCALER_ANNOTATIONS as AUTOSCALER_ANNOTATIONS
from domain.labels import AUTOSCALER_HOLD as AUTOSCALER_HOLD
from domain.labels import DEVICES as DEVICES
from domain.labels import DO_NOT_RECLAIM as DO_NOT_RECLAIM
from domain.labels import GATE as GATE
from domain.labels import GATING_DISABLED as GATING_DISABLED
from domain.labels import GATING_OPT_OUT as GATING_OPT_OUT
from domain.labels import IDLE_SINCE as IDLE_SINCE
from domain.labels import INTENTS as INTENTS
from domain.labels import MAX_GPUS_LABEL as MAX_GPUS_LABEL
from domain.labels import POOL_LABEL as POOL_LABEL
from domain.labels import PREFIX as PREFIX
from domain.labels import RECLAIM as RECLAIM
from domain.labels import RECLAIM_TAINT_EFFECT as RECLAIM_TAINT_EFFECT
from domain.labels import RECLAIM_TAINT_KEY as RECLAIM_TAINT_KEY
from domain.labels import RECLAIM_TAINT_VALUE as RECLAIM_TAINT_VALUE
from domain.labels import RESERVATION as RESERVATION

#: Event source (``reportingComponent`` / ``source.component``).
COMPONENT = "gpu-composer"


class IntentPhase(StrEnum):
    """How far serving one pod got."""

    #: recorded before ``compose`` is called; the devices may or may not be attached yet
    COMPOSING = "Composing"
    #: the Director attached the devices (or the pod reuses spare units already on the node)
    ATTACHED = "Attached"
    #: the node advertises enough units of the pod's resource; waiting for the scheduler
    ADVERTISED = "Advertised"


@dataclass(frozen=True, slots=True)
class Intent:
    """One pod being served on a node (value of the ``intents`` annotation, by pod UID).

    Attributes:
        pod: ``namespace/name``.
        resource: the GPU resource name the pod requests.
        units: units of ``resource`` requested.
        model: GPU model composed for it.
        devices: devices composed for it (empty when it reuses spare units).
        phase: see :class:`IntentPhase`.
        since: when ``phase`` was entered (seconds since the epoch).
        retry_at: for ``Composing`` after a failed compose: not before this time is the
            intent dropped and the pod planned again (0 = no failure recorded).
        plugin_restarts: device-plugin restarts done while waiting for the advertisement.
        until: for a pod held by the scheduling gate, when its reservation expires (seconds
            since the epoch; 0 = no deadline, e.g. a pod that was never gated).
    """

    pod: str
    resource: str
    units: int
    model: str
    devices: tuple[str, ...] = ()
    phase: IntentPhase = IntentPhase.COMPOSING
    since: float = 0.0
    retry_at: float = 0.0
    plugin_restarts: int = 0
    until: float = 0.0

    def moved(self, phase: IntentPhase, now: float, **changes: Any) -> Intent:
        """A copy in ``phase`` entered at ``now``."""
        return replace(self, phase=phase, since=now, **changes)


class ReclaimPhase(StrEnum):
    """How far an idle reclaim got."""

    #: the node is tainted; the decompose is pending
    TAINTED = "Tainted"
    #: the GPUs were decomposed; the taint is lifted once the node stops advertising them
    DECOMPOSED = "Decomposed"


@dataclass(frozen=True, slots=True)
class Reclaim:
    """An idle reclaim in progress (value of the ``reclaim`` annotation).

    Attributes:
        devices: the composer-managed devices being given back.
        phase: see :class:`ReclaimPhase`.
        since: when ``phase`` was entered (seconds since the epoch).
    """

    devices: tuple[str, ...]
    phase: ReclaimPhase = ReclaimPhase.TAINTED
    since: float = 0.0


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """The composer's annotations of one node, decoded.

    ``hold``: the composer's autoscaler annotations are on the node (see :func:`with_hold`).
    ``idle_since``: the ``idle-since`` annotation (seconds since the epoch; None = absent).
    """

    devices: frozenset[str] = frozenset()
    intents: dict[str, Intent] = field(default_factory=dict)
    reclaim: Reclaim | None = None
    hold: bool = False
    idle_since: float | None = None


def holds_gpus(record: NodeRecord) -> bool:
    """True while the node holds composer-managed GPUs, or has an intent with devices or a
    reclaim open: then node autoscalers must leave it alone."""
    if record.devices or record.reclaim is not None:
        return True
    return any(it.devices for it in record.intents.values())


def with_hold(record: NodeRecord) -> NodeRecord:
    """``record`` with ``hold`` as it should be (:func:`holds_gpus`)."""
    want = holds_gpus(record)
    return record if record.hold == want else replace(record, hold=want)


def hold_changes(hold: bool) -> dict[str, str | None]:
    """Annotation patch that sets (``hold``) or removes the autoscaler annotations and marker."""
    value = "true" if hold else None
    return {AUTOSCALER_HOLD: value, **{k: value for k in AUTOSCALER_ANNOTATIONS}}


def decode(annotations: dict[str, str] | None) -> NodeRecord:
    """Decode the composer's annotations; malformed values decode as absent (never raise)."""
    a = annotations or {}
    devices = frozenset(d for d in (a.get(DEVICES) or "").split(",") if d.strip())
    intents: dict[str, Intent] = {}
    try:
        raw = json.loads(a.get(INTENTS) or "{}")
        for uid, v in raw.items():
            intents[uid] = Intent(
                pod=str(v["pod"]),
                resource=str(v["resource"]),
                units=int(v["units"]),
                model=str(v["model"]),
                devices=tuple(v.get("devices") or ()),
                phase=IntentPhase(v.get("phase", "Composing")),
                since=float(v.get("since", 0.0)),
                retry_at=float(v.get("retry_at", 0.0)),
                plugin_restarts=int(v.get("plugin_restarts", 0)),
                until=float(v.get("until", 0.0)),
            )
    except (ValueError, TypeError, KeyError, AttributeError):
        intents = {}
    reclaim: Reclaim | None = None
    try:
        r = json.loads(a[RECLAIM]) if a.get(RECLAIM) else None
        if r:
            phase = ReclaimPhase(r.get("phase", ReclaimPhase.TAINTED))
            reclaim = Reclaim(tuple(r["devices"]), phase, float(r.get("since", 0.0)))
    except (ValueError, TypeError, KeyError, AttributeError):
        reclaim = None
    try:
        idle_since = float(a[IDLE_SINCE]) if a.get(IDLE_SINCE) else None
    except ValueError:
        idle_since = None
    return NodeRecord(devices, intents, reclaim, a.get(AUTOSCALER_HOLD) == "true", idle_since)


def encode_devices(devices: frozenset[str] | set[str]) -> str | None:
    """Annotation value for the managed device set (None deletes the annotation)."""
    return ",".join(sorted(devices)) if devices else None


def encode_intents(intents: dict[str, Intent]) -> str | None:
    """Annotation value for the intents (None deletes the annotation)."""
    if not intents:
        return None
    out = {}
    for uid in sorted(intents):
        d = asdict(intents[uid])
        d["devices"] = list(d["devices"])
        d["phase"] = str(d["phase"])
        if not d["until"]:
            del d["until"]  # only gated pods' reservations have a deadline
        out[uid] = d
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def encode_idle_since(since: float | None) -> str | None:
    """Annotation value for the idle timer's start (None deletes the annotation)."""
    return None if since is None else f"{since:.3f}"


def encode_reclaim(reclaim: Reclaim | None) -> str | None:
    """Annotation value for a reclaim in progress (None deletes the annotation)."""
    if reclaim is None:
        return None
    return json.dumps(
        {"devices": list(reclaim.devices), "phase": str(reclaim.phase), "since": reclaim.since},
        sort_keys=True,
        separators=(",", ":"),
    )
