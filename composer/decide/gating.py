"""Scheduling gates: which pods the webhook holds, and the pod patches that let them go. No I/O.

The composer decides which pending pod gets which freshly composed GPUs with Kubernetes' own
primitives instead of hoping the scheduler picks the right pod:

- **Gate** (KEP-3521 Pod Scheduling Readiness, GA in 1.30): the composer's mutating admission
  webhook adds the scheduling gate ``composer.liqid.io/compose`` to a new pod that requests an
  NVIDIA GPU resource (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``) in
  a namespace the composer serves. The scheduler ignores a gated pod, so it cannot be given
  GPUs composed for another pod, and no other gated pod can take its GPUs (pods the gate does
  not hold are kept off them by the nomination, below). Opt-out: the label or
  annotation ``composer.liqid.io/gating: disabled`` on the pod, or that label on the namespace
  (the webhook configuration's selectors also skip them, so the API server does not even call).
  Pods with ``spec.nodeName`` set bypass the scheduler and are never gated (the API server
  rejects gates on them).
- **Pin, then release** (KEP-3838 mutable pod scheduling directives while gated, GA in 1.30):
  once the pod's reserved GPUs are advertised on its node, one JSON patch adds
  ``nodeSelector: {kubernetes.io/hostname: <node>}`` (only an addition, which is what the API
  server accepts on a gated pod; a pod the user pinned to that node keeps its own selector) and
  removes the gate. ``test`` operations on the pod's UID and gate list make the patch fail
  instead of releasing a re-created pod or racing another writer.
- **Never strand a pod**: :func:`ungate_patch` removes only the gate (nothing else changes), for
  pods nothing can serve, so a node autoscaler (which ignores gated pods) can act.

- **Nominate** (KEP-5278, nominated node name for expectation): while a pod's GPUs are being
  composed, its ``status.nominatedNodeName`` names the reserved node, so the scheduler counts
  the pod on that node and a node autoscaler sees where it will run; :func:`nomination_enabled`
  says whether, :func:`nominations` which pods and when. This is what keeps the reserved GPUs
  from a pod the gate does not hold (admitted while the webhook did not answer,
  ``failurePolicy: Ignore``; ungated unchanged; in a namespace or with a label the webhook
  skips): once the node advertises them, the scheduler would bind
  such a pending pod there before the composer's next round releases the gated one. The
  scheduler of kubernetes/kubernetes v1.34.4 already counts a gated pod nominated by another
  writer, without the ``NominatedNodeNameForExpectation`` feature gate (alpha, off there; beta,
  on, from 1.35: ``pkg/features/kube_features.go``): the status update reaches
  ``PriorityQueue.Update`` (``pkg/scheduler/backend/queue/scheduling_queue.go``), which calls
  ``UpdateNominatedPod`` for a pod waiting in ``unschedulablePods``, where gated pods wait; the
  nominator files it under ``status.nominatedNodeName`` (``nominator.go``,
  ``addNominatedPodUnlocked``), and the filter places every pod nominated onto a node with equal
  or higher priority than the pod being scheduled on that node first
  (``pkg/scheduler/framework/runtime/framework.go``, ``addGENominatedPods``). Not covered: a
  pod of higher priority; a scheduler that starts while the pod is gated (its ``Add`` of a gated
  pod returns before ``AddNominatedPod``, so the nomination counts from the pod's next update).
  An ungated-unchanged pod has its nomination cleared.

Sources: kubernetes/enhancements ``keps/sig-scheduling/3521-pod-scheduling-readiness`` and
``keps/sig-scheduling/3838-pod-mutable-scheduling-directives`` (README "Design Details");
AdmissionReview v1 and JSONPatch responses: Kubernetes docs "Dynamic Admission Control".
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from composer.model.annotations import GATE, GATING_DISABLED, GATING_OPT_OUT, RESERVATION, Intent
from composer.model.models import HOSTNAME_LABEL, EventSpec, is_gpu_resource
from composer.model.podspec import PodView, effective_requests

#: What the webhook answers for a pod it does not change.
Patch = list[dict[str, Any]]


def _pointer(key: str) -> str:
    """One JSON-pointer path segment (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True, slots=True)
class GateDecision:
    """The webhook's verdict on one pod: ``patch`` (empty = unchanged) and why."""

    patch: tuple[dict[str, Any], ...]
    why: str

    @property
    def gated(self) -> bool:
        """The pod gets the gate."""
        return bool(self.patch)


def gate_decision(
    pod: Mapping[str, Any], *, namespace: str, namespaces: frozenset[str] = frozenset()
) -> GateDecision:
    """Should the webhook gate this new pod, and with which JSON patch.

    Args:
        pod: the core/v1 Pod JSON of an admission request (``request.object``).
        namespace: the request's namespace (a new pod's ``metadata.namespace`` may be empty).
        namespaces: the namespaces the composer serves (empty = all).

    Returns:
        A :class:`GateDecision`; its ``patch`` adds ``composer.liqid.io/compose`` to
        ``spec.schedulingGates`` (RFC 6902 operations), or is empty.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if namespaces and namespace not in namespaces:
        return GateDecision((), f"namespace {namespace} is not served by this composer")
    if (meta.get("labels") or {}).get(GATING_OPT_OUT) == GATING_DISABLED:
        return GateDecision((), f"pod label {GATING_OPT_OUT}={GATING_DISABLED}")
    if (meta.get("annotations") or {}).get(GATING_OPT_OUT) == GATING_DISABLED:
        return GateDecision((), f"pod annotation {GATING_OPT_OUT}={GATING_DISABLED}")
    if spec.get("nodeName"):
        return GateDecision((), "spec.nodeName is set (the pod bypasses the scheduler)")
    if not any(is_gpu_resource(r) and v > 0 for r, v in effective_requests(spec).items()):
        return GateDecision((), "requests no NVIDIA GPU resource")
    gates = spec.get("schedulingGates")
    if any((g or {}).get("name") == GATE for g in gates or ()):
        return GateDecision((), "already gated")
    if gates:
        return GateDecision(
            ({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}},), "gated"
        )
    return GateDecision(({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]},), "gated")


def admission_response(
    review: Mapping[str, Any], *, namespaces: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], GateDecision]:
    """The ``admission.k8s.io/v1`` AdmissionReview answering ``review``.

    Always allows the request (the webhook only adds a gate; ``failurePolicy: Ignore`` covers an
    outage). Anything but a Pod CREATE is allowed unchanged.

    Raises:
        ValueError: ``review`` has no ``request.uid`` (not an AdmissionReview).
    """
    req = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(req, Mapping) or not req.get("uid"):
        raise ValueError("not an AdmissionReview: request.uid missing")
    response: dict[str, Any] = {"uid": req["uid"], "allowed": True}
    kind = (req.get("kind") or {}).get("kind")
    obj = req.get("object")
    if req.get("operation") != "CREATE" or kind != "Pod" or not isinstance(obj, Mapping):
        verdict = GateDecision((), "not a pod creation")
    else:
        ns = req.get("namespace") or (obj.get("metadata") or {}).get("namespace") or "default"
        verdict = gate_decision(obj, namespace=ns, namespaces=namespaces)
    if verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(verdict.patch)).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}, verdict


def _gate_ops(pod: PodView) -> Patch:
    """Guard the pod's identity and gates, then remove the composer's gate (keep any other)."""
    rest = [{"name": g} for g in pod.gates if g != GATE]
    ops: Patch = [
        {"op": "test", "path": "/metadata/uid", "value": pod.uid},
        {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": g} for g in pod.gates]},
    ]
    if rest:
        ops.append({"op": "replace", "path": "/spec/schedulingGates", "value": rest})
    else:
        ops.append({"op": "remove", "path": "/spec/schedulingGates"})
    return ops


def ungate_patch(pod: PodView) -> Patch:
    """JSON patch removing only the composer's gate (the pod is otherwise unchanged)."""
    return _gate_ops(pod)


def release_patch(pod: PodView, *, node: str, reservation: Mapping[str, Any]) -> Patch:
    """JSON patch pinning ``pod`` to ``node`` and removing the composer's gate, in one update.

    Adds ``nodeSelector[kubernetes.io/hostname] = node`` unless the pod already selects that
    host (a pod the user pinned keeps its own selector), and records ``reservation`` in the
    annotation ``composer.liqid.io/reservation``.

    Raises:
        ValueError: the pod selects another host by ``nodeSelector`` (a planner bug: pinned
            pods are only planned onto their own host).
    """
    ops = _gate_ops(pod)
    have = pod.node_selector.get(HOSTNAME_LABEL)
    if have is not None and have != node:
        raise ValueError(f"{pod.key} selects {HOSTNAME_LABEL}={have}, not {node}")
    if have is None:
        if pod.node_selector:
            ops.append({"op": "add", "path": f"/spec/nodeSelector/{_pointer(HOSTNAME_LABEL)}", "value": node})
        else:
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": {HOSTNAME_LABEL: node}})
    value = json.dumps(dict(reservation), sort_keys=True, separators=(",", ":"))
    if pod.annotations:
        ops.append({"op": "add", "path": f"/metadata/annotations/{_pointer(RESERVATION)}", "value": value})
    else:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {RESERVATION: value}})
    return ops


@dataclass(frozen=True, slots=True)
class PodAction:
    """A gate removal the controller executes (:mod:`composer.shell.gates`).

    Attributes:
        kind: ``release`` (pinned to ``node`` and ungated) or ``ungate`` (gate removed only).
        uid / key: the pod (``namespace/name``).
        node: the node it is pinned to ("" for ``ungate``).
        patch: the RFC 6902 operations.
        event: the Event to emit once the patch succeeded.
        created: the pod's creation time (seconds since the epoch), for the time-gated histogram.
    """

    kind: str
    uid: str
    key: str
    node: str
    patch: tuple[dict[str, Any], ...]
    event: EventSpec
    created: float = 0.0


def batch_wait(
    first_seen: Mapping[str, float], *, now: float, idle_seconds: float, max_seconds: float
) -> float:
    """Seconds to keep collecting newly gated pods before planning them (0 = plan now).

    The batch closes once no new pod arrived for ``idle_seconds`` or its oldest pod has waited
    ``max_seconds`` (Karpenter's batching: 1 s idle, 10 s max by default; the composer's defaults
    are shorter because a compose already takes seconds).

    Args:
        first_seen: pod UID -> when the composer first saw it gated (seconds since the epoch).
    """
    if not first_seen:
        return 0.0
    idle_left = idle_seconds - (now - max(first_seen.values()))
    max_left = max_seconds - (now - min(first_seen.values()))
    return max(0.0, min(idle_left, max_left)) if idle_left > 0 and max_left > 0 else 0.0


#: First Kubernetes minor version (of major 1) whose scheduler is known to count a gated pod
#: nominated by the composer on its node (read in kubernetes/kubernetes v1.34.4, see the module
#: docstring; from 1.35 ``NominatedNodeNameForExpectation`` is on by default as well).
NOMINATION_AUTO_MINOR = 34


def nomination_enabled(setting: str, server_version: tuple[int, int] | None) -> bool:
    """Whether the composer sets ``status.nominatedNodeName`` on the pods it reserves GPUs for.

    Args:
        setting: ``on``, ``off`` or ``auto`` (on from Kubernetes 1.34, whose scheduler counts
            a nominated gated pod on its node; off below, where that was not checked, and when
            the version is unknown).
        server_version: the API server's (major, minor), None when it could not be read.

    Raises:
        ValueError: another ``setting``.
    """
    if setting in ("on", "off"):
        return setting == "on"
    if setting != "auto":
        raise ValueError(f"nominate_node must be auto, on or off, not {setting!r}")
    return server_version is not None and server_version >= (1, NOMINATION_AUTO_MINOR)


def _waiting(pod: PodView | None) -> bool:
    """The pod exists and is still to be bound (not bound, finished or being deleted)."""
    return pod is not None and not pod.node_name and not pod.terminal and not pod.deleting


def nominations(
    reserved: Mapping[str, Mapping[str, Intent]], pods: Mapping[str, PodView]
) -> dict[str, str]:
    """The gated pods to nominate now, each onto the node its GPUs are reserved on.

    The scheduler counts a nominated pod on its node before that pod's GPUs are advertised, so a
    nomination made while the node still has to bind a pod of an earlier reservation would hold
    that pod back until the later GPUs arrive too (and that one the next, on a node filled one
    compose at a time). A gated pod is therefore nominated once no other pod reserved on its node
    in an earlier round (an earlier ``until``; a reservation without one, of a pod that was never
    gated, counts as earlier) waits to be bound there; pods of one round share one compose and
    are nominated together. A pod nominated onto that node already is left out.

    Args:
        reserved: node name -> pod UID -> its intent on that node (what the node's record holds
            or is being written to hold).
        pods: pod UID -> pod.

    Returns:
        pod UID -> node name.
    """
    out: dict[str, str] = {}
    for node, intents in reserved.items():
        waiting = {uid: it for uid, it in intents.items() if _waiting(pods.get(uid))}
        for uid, it in waiting.items():
            pod = pods[uid]
            if not pod.gated or not it.until or pod.nominated_node == node:
                continue
            if any(o != uid and other.until < it.until for o, other in waiting.items()):
                continue  # an earlier reservation's pod is still to be bound here
            out[uid] = node
    return out


def time_gated(pod: PodView, now: float) -> float:
    """Seconds the pod has been gated (since its creation; the gate is added at creation)."""
    return max(0.0, now - pod.created) if pod.created > 0 else 0.0


__all__ = [
    "GateDecision",
    "PodAction",
    "admission_response",
    "batch_wait",
    "gate_decision",
    "nomination_enabled",
    "nominations",
    "release_patch",
    "time_gated",
    "ungate_patch",
]
