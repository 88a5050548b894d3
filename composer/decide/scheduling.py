"""Pure re-statements of the kube-scheduler filters the composer must respect.

The composer only composes onto a host the pod could then be scheduled on, so it repeats
the scheduler's TaintToleration and NodeAffinity filters over plain data
(Kubernetes docs "Taints and Tolerations" and "Assigning Pods to Nodes"; the matching rules
are those of ``k8s.io/component-helpers/scheduling/corev1``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from composer.model.models import LabelRequirement, Taint, Toleration

#: Taint effects that keep a pod off a node (PreferNoSchedule is only a preference).
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def toleration_matches(tol: Toleration, taint: Taint) -> bool:
    """True when ``tol`` tolerates ``taint``.

    An empty effect matches every effect; an empty key with operator Exists matches every
    taint; operator Exists ignores the value; Equal (the default) compares it.
    """
    if tol.effect and tol.effect != taint.effect:
        return False
    if not tol.key:
        return tol.operator == "Exists"
    if tol.key != taint.key:
        return False
    return tol.operator == "Exists" or tol.value == taint.value


def tolerates(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> bool:
    """True when every NoSchedule/NoExecute taint is tolerated by one of ``tolerations``."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(toleration_matches(t, taint) for t in tols):
            return False
    return True


def requirement_matches(req: LabelRequirement, labels: Mapping[str, str]) -> bool:
    """True when ``labels`` satisfy one node-selector requirement.

    Gt/Lt compare integers; a label that is missing or not an integer fails them.
    Unknown operators never match (fail closed).
    """
    op = req.operator
    if op == "In":
        return req.key in labels and labels[req.key] in req.values
    if op == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    if op in ("Gt", "Lt"):
        try:
            have, want = int(labels[req.key]), int(req.values[0])
        except (KeyError, IndexError, ValueError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def labels_match(requirements: Iterable[LabelRequirement], labels: Mapping[str, str]) -> bool:
    """True when every requirement holds on ``labels``."""
    return all(requirement_matches(r, labels) for r in requirements)
