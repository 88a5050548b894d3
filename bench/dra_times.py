"""What the reaction benchmark reads of a pod served in DRA mode, and what it derives from it.

In DRA mode (``python -m composer --mode dra``, ``docs/dra.md``) the composer is the DRA driver
``gpu.composer.liqid.io``: the kube-scheduler allocates one of the driver's devices to the pod's
claim (for an unmodified pod asking ``nvidia.com/gpu``, the claim the scheduler makes for the
DeviceClass's extended resource), records the Event ``BindingConditionsPending`` and waits in
PreBind until the composer has set the binding conditions ``Attached`` and ``VisibleOnNode`` True
on the claim. The scheduler's wait polls on a fixed grid: ``k8s.io/kubernetes`` v1.36.3
``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`` ``PreBind`` records the
Event, then calls ``wait.PollUntilContextTimeout(ctx, 5*time.Second, pl.bindingTimeout, true, ...)``
(``k8s.io/apimachinery`` v0.36.3 ``pkg/util/wait/poll.go``: immediate, not sliding, so the
condition runs at the start and then every 5 s), and each poll reads the claim from the
scheduler's informer (``isPodReadyForBinding``).

Timestamps of a pod (seconds since the epoch, this machine's clock, like every other one of
:class:`bench.pod_times.PodTimes`):

- ``allocated``: the benchmark's ResourceClaim watch first sees the pod's claim (owner reference
  to the pod) with one of the driver's devices allocated;
- ``prebind``: the start of the PreBind wait in which the pod was bound: the ``eventTime`` of the
  scheduler's Event ``BindingConditionsPending`` (``events.k8s.io/v1``, microseconds, stamped by
  the scheduler on this machine just before its first poll); when the pod went through PreBind
  more than once (an event series' ``lastObservedTime`` is a start too), the latest start at or
  before ``visible``;
- ``visible``: the claim watch first sees every device of the driver allocated to the claim with
  both binding conditions True and no failure condition True: what the scheduler's poll waits
  for. (The conditions' ``lastTransitionTime`` is written in whole seconds,
  ``composer.dra.claims.rfc3339``: too coarse against a 5 s grid.)
- ``advertised`` (in DRA mode): the node's GFD label ``nvidia.com/gpu.count`` first shows a new
  count after the attach (the GPU agent's ``--dra`` writes no ``nvidia.com/gpu`` allocatable).

Derived per pod (seconds; None where a timestamp is missing), :func:`derive_dra`:

- ``next_poll`` (a time, not an interval): the first poll of that PreBind wait at or after
  ``visible``, ``prebind + k * 5 s`` with the smallest ``k >= 0`` that is not before ``visible``;
- ``visible_lag`` = visible - advertised: from the node showing the GPU to the claim's binding
  conditions True (the composer's round that writes them);
- ``prebind_wait`` = bound - visible: the pod's wait once its GPU was visible;
- ``poll_wait`` = next_poll - max(visible, prebind): the part of that wait the 5 s poll grid
  forces, in [0, 5);
- ``after_poll`` = bound - next_poll: from the poll that could first see the conditions to the
  bind (the scheduler's informer lag, the binding call; a poll that missed the conditions adds
  5 s here);
- ``overhead_beyond_poll`` = overhead - poll_wait, with overhead = (creation -> Running) - L - D
  as in every mode (:func:`bench.reaction.derive`): everything that is neither the simulated
  hardware nor the poll grid. The target: its p99 at most 0.5 s (:data:`BEYOND_POLL_TARGET_SECONDS`),
  that is, a pod runs within 0.5 s of the first PreBind poll after its GPU is visible, plus the
  hardware's own time.

Per run: ``poll_share`` = sum(poll_wait) / sum(overhead) over the pods with both
(:func:`poll_share`); ``missed_polls``, the pods bound a poll or more after ``next_poll``
(:func:`missed_polls`); ``visible_withdrawn``, the pods whose claim was seen ready and then not
ready again before the bind (:func:`visibility_withdrawn`); GPUs taken by another pod = GPUs
composed for one claim that another claim holds at the end (:func:`taken_by_another`), the DRA
counterpart of device-plugin mode's ``composer_gpus_taken_by_another_pod_total``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from bench.pod_times import PodTimes, span
from composer.dra.claims import ClaimView
from composer.dra.slices import BINDING_CONDITIONS, BINDING_FAILURE_CONDITIONS, device_name

#: The interval of the scheduler's PreBind poll (``dynamicresources.go`` ``PreBind``, v1.36.3).
PREBIND_POLL_SECONDS = 5.0
#: The scheduler's Event reason at the start of a PreBind wait for binding conditions.
PREBIND_REASON = "BindingConditionsPending"
#: The target for ``overhead_beyond_poll`` at p99, seconds.
BEYOND_POLL_TARGET_SECONDS = 0.5
#: GFD's label of a node's GPU count (written by the GPU agent in every mode).
COUNT_LABEL = "nvidia.com/gpu.count"
GPU = "nvidia.com/gpu"


def parse_time(text: str | None) -> float | None:
    """An RFC 3339 time of the API (``2026-12-05T10:00:01.123456Z``, fraction optional) as seconds
    since the epoch; None for None, empty or unreadable text."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def claim_owner(claim: Mapping[str, Any]) -> str | None:
    """The name of the Pod a ResourceClaim JSON object belongs to (its owner reference of kind
    ``Pod``), or None."""
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == "Pod" and ref.get("name"):
            return str(ref["name"])
    return None


def binding_ready(view: ClaimView) -> bool:
    """True when the claim has devices of the driver and each has every binding condition True
    and no failure condition True (the scheduler's ``isClaimReadyForBinding`` for this driver)."""
    if not view.devices:
        return False
    for device in view.devices:
        true = {c.type for c in view.conditions.get(device, ()) if c.status == "True"}
        if not set(BINDING_CONDITIONS) <= true or true & set(BINDING_FAILURE_CONDITIONS):
            return False
    return True


def visibility_withdrawn(p: PodTimes, view: ClaimView) -> bool:
    """True when the pod's claim was seen ready (``p.visible``), the pod is not bound yet, and
    the claim, still allocated, is no longer ready: a poll now would not bind it. (The composer
    sets ``VisibleOnNode`` False on every claim of a node while the node sees fewer GPUs than
    are attached to it, ``composer.dra.binding``, so a GPU composed for another claim on the same
    node withdraws it.)"""
    return p.visible is not None and p.bound is None and bool(view.devices) and not binding_ready(view)


def prebind_starts(event: Mapping[str, Any]) -> tuple[str | None, list[float]]:
    """(pod name, PreBind start times) of one ``events.k8s.io/v1`` Event JSON object: its
    ``eventTime`` and its series' ``lastObservedTime`` for a ``BindingConditionsPending`` Event
    about a Pod; (None, []) for any other Event."""
    regarding = event.get("regarding") or {}
    if event.get("reason") != PREBIND_REASON or regarding.get("kind") != "Pod":
        return None, []
    times = [event.get("eventTime"), (event.get("series") or {}).get("lastObservedTime")]
    return regarding.get("name"), [t for t in map(parse_time, times) if t is not None]


def prebind_for(starts: Iterable[float], visible: float | None) -> float | None:
    """The start of the PreBind wait that saw ``visible``: the latest start at or before it (the
    latest start when ``visible`` is unknown, the earliest when every start is after it); None
    without starts."""
    s = sorted(set(starts))
    if not s:
        return None
    if visible is None:
        return s[-1]
    before = [t for t in s if t <= visible]
    return before[-1] if before else s[0]


def next_poll(prebind: float, visible: float, interval: float = PREBIND_POLL_SECONDS) -> float:
    """The first poll at or after ``visible`` of a PreBind wait started at ``prebind`` (polls at
    ``prebind + k * interval``, k = 0, 1, ...)."""
    if visible <= prebind:
        return prebind
    return prebind + interval * math.ceil((visible - prebind) / interval - 1e-9)


def derive_dra(
    p: PodTimes, overhead: float | None, interval: float = PREBIND_POLL_SECONDS
) -> dict[str, float | None]:
    """``to_allocated``, ``visible_lag``, ``prebind_wait``, ``poll_wait``, ``after_poll`` and
    ``overhead_beyond_poll`` of one pod (see the module docstring); None where a timestamp is
    missing."""
    if p.prebind is None or p.visible is None:
        poll = None
        wait = after = None
    else:
        poll = next_poll(p.prebind, p.visible, interval)
        wait = poll - max(p.visible, p.prebind)
        after = span(poll, p.bound)
    return {
        "to_allocated": span(p.submitted, p.allocated),
        "visible_lag": span(p.advertised, p.visible),
        "prebind_wait": span(p.visible, p.bound),
        "poll_wait": wait,
        "after_poll": after,
        "overhead_beyond_poll": None if overhead is None or wait is None else overhead - wait,
    }


def poll_share(derived: Iterable[Mapping[str, float | None]]) -> float | None:
    """sum(poll_wait) / sum(overhead) over the pods that have both; None without such pods or
    with a total overhead of 0 or less."""
    pairs = [
        (d["poll_wait"], d["overhead"])
        for d in derived
        if d.get("poll_wait") is not None and d.get("overhead") is not None
    ]
    total = sum(o for _, o in pairs if o is not None)
    if not pairs or total <= 0:
        return None
    return round(sum(w for w, _ in pairs if w is not None) / total, 3)


def missed_polls(
    derived: Iterable[Mapping[str, float | None]], interval: float = PREBIND_POLL_SECONDS
) -> int:
    """Pods bound at least one poll after ``next_poll`` (``after_poll >= interval``): the poll
    that could first have seen the conditions did not (the scheduler's informer had not yet)."""
    return sum(1 for d in derived if (d.get("after_poll") or 0.0) >= interval)


def taken_by_another(composed_for: Mapping[str, str], allocations: Mapping[str, Sequence[str]]) -> int:
    """GPUs composed for one claim that another claim holds.

    Args:
        composed_for: Director GPU name -> UID of the claim it was first composed for (the
            composer's ``composer.liqid.io/intents`` on the node, keyed by claim UID in DRA mode).
        allocations: claim UID -> the driver's devices allocated to it, as last seen (DRA device
            names: the Director's name made a DNS label, ``composer.dra.slices.device_name``).
    """
    holder = {dev: uid for uid, devs in allocations.items() for dev in devs}
    return sum(1 for gpu, uid in composed_for.items() if holder.get(device_name(gpu) or gpu, uid) != uid)


def advertised_count(node: Mapping[str, Any], *, dra: bool) -> int:
    """The GPUs a Node JSON object advertises: its allocatable ``nvidia.com/gpu`` (device-plugin
    mode), or in DRA mode GFD's ``nvidia.com/gpu.count`` label; 0 when absent or unreadable."""
    if dra:
        raw = ((node.get("metadata") or {}).get("labels") or {}).get(COUNT_LABEL)
    else:
        raw = ((node.get("status") or {}).get("allocatable") or {}).get(GPU)
    try:
        return int(raw or 0)
    except ValueError:
        return 0
