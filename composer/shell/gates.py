"""Executing the gate decisions: release (pin + ungate) and ungate patches on pods.

Runs on the controller's loop thread (a patch is one small API call). A refused patch (the pod
changed, went away, or a ``test`` operation failed) is logged and left to the next round, which
decides again from what is there; nothing is retried here. An applied patch's answer (the pod as
the API server stored it) is handed to ``assume`` (the watch cache's overlay), so the next round
does not see the pod still gated and send the release again, whose ``test`` of the gate list the
API server then refuses (422).

Nominations (``status.nominatedNodeName``, see :mod:`composer.decide.gating`) are sent from one
background thread, in order, so they never delay a round or a compose; a failed one is logged
and counted (``composer_gate_patch_failures_total{kind="nominate"}``); the controller sends it
again after ``NOMINATION_RESEND_SECONDS`` (:mod:`composer.run.controller`) while the watch does
not show it, since until the pod is released a pod the gate does not hold may take its
advertised GPUs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from composer.decide.gating import PodAction
from composer.model.models import EventSpec
from composer.shell.kube import KubeError
from composer.shell.lazy_pool import LazyPool
from composer.shell.metrics import Metrics

log = logging.getLogger(__name__)


class PodWrites(Protocol):
    """The Kubernetes calls used here (:class:`composer.shell.kube.KubeApi` provides them)."""

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> Mapping[str, Any]: ...

    def nominate_pod(self, namespace: str, name: str, node: str | None) -> None: ...


@dataclass
class GateExecutor:
    """Applies :class:`PodAction` objects.

    Attributes:
        kube: Kubernetes writes.
        metrics: ``time_gated`` (by outcome), ``gate_patch_failures``.
        emit: records an Event (the node executor's ``emit``: logged, never raises).
        clock: seconds since the epoch.
        assume: called with each applied patch's answer (the Pod JSON), e.g.
            :meth:`composer.shell.cache.ClusterCache.assume_pod`; None: nothing to tell.
    """

    kube: PodWrites
    metrics: Metrics
    emit: Callable[[EventSpec], None]
    clock: Callable[[], float] = time.time
    nominate: bool = False
    assume: Callable[[Mapping[str, Any]], None] | None = None
    _nominator: LazyPool = field(
        default_factory=lambda: LazyPool(1, "composer-nominate"), init=False, repr=False
    )

    def apply(self, action: PodAction, *, nominated: str = "") -> bool:
        """Patch the pod; on success emit the action's Event. Returns True when applied.

        ``nominated``: the pod's ``status.nominatedNodeName``; when nominating, an ``ungate``
        (the pod leaves unchanged, for the scheduler or an autoscaler to place) also clears it
        (from the nomination thread).
        """
        ns, _, name = action.key.partition("/")
        if self.nominate and nominated and action.kind == "ungate":
            self._submit(action.key, None)
        try:
            answer = self.kube.patch_pod(ns, name, list(action.patch))
        except KubeError as exc:
            self.metrics.gate_patch_failures.labels(action.kind).inc()
            log.info("%s of %s not applied (next round decides again): %s", action.kind, action.key, exc)
            return False
        if self.assume is not None:
            self.assume(answer)
        if action.created > 0:
            self.metrics.time_gated.labels(action.kind).observe(max(0.0, self.clock() - action.created))
        self.emit(action.event)
        return True

    def nominate_reserved(self, key: str, node: str) -> None:
        """Nominate the pod ``key`` (``namespace/name``) onto ``node``, where its GPUs are
        reserved, from the background thread (no-op unless ``nominate``)."""
        if self.nominate:
            self._submit(key, node)

    def _submit(self, key: str, node: str | None) -> None:
        # One thread: a pod's nominations and clears reach the API server in the order decided.
        self._nominator.submit(self._send_nomination, key, node)

    def _send_nomination(self, key: str, node: str | None) -> None:
        ns, _, name = key.partition("/")
        try:
            self.kube.nominate_pod(ns, name, node)
        except KubeError as exc:
            self.metrics.gate_patch_failures.labels("nominate").inc()
            log.info("nominatedNodeName of %s not %s: %s", key, "set" if node else "cleared", exc)

    def close(self) -> None:
        """Wait for nominations in flight."""
        self._nominator.close()
