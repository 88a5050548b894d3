"""Executing the gate decisions: release (pin + ungate) and ungate patches on pods.

Runs on the controller's loop thread (a patch is one small API call). A refused patch (the pod
changed, went away, or a ``test`` operation failed) is logged and left to the next round, which
decides again from what is there; nothing is retried here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from composer.gating import PodAction
from composer.kube import KubeError
from composer.metrics import Metrics
from composer.models import EventSpec

log = logging.getLogger(__name__)


class PodWrites(Protocol):
    """The Kubernetes calls used here (:class:`composer.kube.KubeApi` provides them)."""

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> Mapping[str, Any]: ...


@dataclass
class GateExecutor:
    """Applies :class:`PodAction` objects.

    Attributes:
        kube: Kubernetes writes.
        metrics: ``time_gated`` (by outcome), ``gate_patch_failures``.
        emit: records an Event (the node executor's ``emit``: logged, never raises).
        clock: seconds since the epoch.
    """

    kube: PodWrites
    metrics: Metrics
    emit: Callable[[EventSpec], None]
    clock: Callable[[], float] = time.time

    def apply(self, action: PodAction) -> bool:
        """Patch the pod; on success emit the action's Event. Returns True when applied."""
        ns, _, name = action.key.partition("/")
        try:
            self.kube.patch_pod(ns, name, list(action.patch))
        except KubeError as exc:
            self.metrics.gate_patch_failures.labels(action.kind).inc()
            log.info("%s of %s not applied (next round decides again): %s", action.kind, action.key, exc)
            return False
        if action.created > 0:
            self.metrics.time_gated.labels(action.kind).observe(max(0.0, self.clock() - action.created))
        self.emit(action.event)
        return True
