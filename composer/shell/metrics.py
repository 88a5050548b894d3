"""Prometheus metrics of the composer (``prometheus_client``), in a registry per instance.

Names (all prefixed ``composer_``):

- ``pending_to_composed_seconds`` (histogram): pod creation -> its GPUs attached by the Director.
- ``pending_to_advertised_seconds`` (histogram): pod creation -> the node advertises them.
- ``free_gpus{model,pool}`` (gauge): the Director's free pool as the planner sees it.
- ``pending_gpu_pods`` (gauge): unschedulable or gated pods requesting GPUs.
- ``compositions_total`` / ``composition_failures_total{reason}`` (counters): compose calls.
- ``decompositions_total`` / ``decomposition_failures_total{reason}`` (counters): decompose calls.
- ``composed_gpus_total`` / ``decomposed_gpus_total`` (counters): devices moved.
- ``device_plugin_restarts_total`` (counter).
- ``rounds_total`` / ``round_failures_total{stage}`` (counters), ``round_seconds`` (histogram).
- ``leader`` (gauge, 1 while this replica holds the Lease).

Scheduling gates (:mod:`composer.decide.gating`):

- ``pods_gated_total`` (counter): pods the admission webhook gated.
- ``gated_pods`` (gauge): pods held by the gate now (served namespaces).
- ``time_gated_seconds{outcome}`` (histogram): pod creation -> gate removed; ``outcome`` is
  ``release`` (pinned to its reserved GPUs) or ``ungate`` (handed over unchanged).
- ``reservations_active`` (gauge) / ``reservations_expired_total`` (counter).
- ``gpus_taken_by_another_pod_total`` (counter): GPUs composed for one pod bound to another.
- ``gate_patch_failures_total{kind}`` (counter): release/ungate patches the API server refused.

Reclaim guards and out-of-band changes (``docs/composer-reclaim.md``):

- ``reclaims_held{reason}`` (gauge): idle nodes whose reclaim a guard holds now (``reason``:
  ``do-not-reclaim``, ``window``, ``budget``).
- ``gpus_detached_out_of_band_total`` (counter): composer-managed GPUs the Director stopped
  showing attached to their node without a reclaim.
- ``orphaned_gpus_reclaimed_total`` (counter): composer-tagged GPUs decomposed from machines
  that had no Node.
- ``gpus_adopted_total`` (counter): composer-tagged GPUs attached to a Node that its record did
  not name, taken into the record (``AdoptedGpus``).
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600)


class Metrics:
    """The composer's metric objects, registered in :attr:`registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.pending_to_composed = Histogram(
            "composer_pending_to_composed_seconds",
            "Pod creation to GPUs attached by the Director, seconds",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.pending_to_advertised = Histogram(
            "composer_pending_to_advertised_seconds",
            "Pod creation to GPUs advertised by the node, seconds",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.free_gpus = Gauge(
            "composer_free_gpus", "Free GPUs in the Director pool", ["model", "pool"], registry=r
        )
        self.pending_pods = Gauge(
            "composer_pending_gpu_pods", "Unschedulable or gated pods requesting GPUs", registry=r
        )
        self.compositions = Counter("composer_compositions_total", "Successful compose calls", registry=r)
        self.composition_failures = Counter(
            "composer_composition_failures_total", "Failed compose calls", ["reason"], registry=r
        )
        self.decompositions = Counter(
            "composer_decompositions_total", "Successful decompose calls", registry=r
        )
        self.decomposition_failures = Counter(
            "composer_decomposition_failures_total", "Failed decompose calls", ["reason"], registry=r
        )
        self.composed_gpus = Counter("composer_composed_gpus_total", "GPUs attached", registry=r)
        self.decomposed_gpus = Counter("composer_decomposed_gpus_total", "GPUs given back", registry=r)
        self.plugin_restarts = Counter(
            "composer_device_plugin_restarts_total", "Device-plugin pods restarted", registry=r
        )
        self.rounds = Counter("composer_rounds_total", "Reconcile rounds completed", registry=r)
        self.round_failures = Counter(
            "composer_round_failures_total", "Reconcile rounds that failed", ["stage"], registry=r
        )
        self.round_seconds = Histogram(
            "composer_round_seconds",
            "Reconcile round duration, seconds",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.leader = Gauge("composer_leader", "1 while this replica holds the Lease", registry=r)
        self.pods_gated = Counter("composer_pods_gated_total", "Pods the admission webhook gated", registry=r)
        self.gated_pods = Gauge(
            "composer_gated_pods", "Pods held by the composer's scheduling gate", registry=r
        )
        self.time_gated = Histogram(
            "composer_time_gated_seconds",
            "Pod creation to scheduling gate removed, seconds",
            ["outcome"],
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
            registry=r,
        )
        self.reservations_active = Gauge(
            "composer_reservations_active", "GPU reservations (intents) open", registry=r
        )
        self.reservations_expired = Counter(
            "composer_reservations_expired_total", "Reservations of gated pods that expired", registry=r
        )
        self.gpus_taken = Counter(
            "composer_gpus_taken_by_another_pod_total",
            "Intents whose composed GPUs were bound to another pod",
            registry=r,
        )
        self.gate_patch_failures = Counter(
            "composer_gate_patch_failures_total", "Release/ungate patches refused", ["kind"], registry=r
        )
        self.reclaims_held = Gauge(
            "composer_reclaims_held", "Idle nodes whose reclaim a guard holds", ["reason"], registry=r
        )
        self.gpus_lost = Counter(
            "composer_gpus_detached_out_of_band_total",
            "Composer-managed GPUs no longer attached to their node, not by a reclaim",
            registry=r,
        )
        self.orphans_reclaimed = Counter(
            "composer_orphaned_gpus_reclaimed_total",
            "Composer-tagged GPUs given back from machines that had no Node",
            registry=r,
        )
        self.gpus_adopted = Counter(
            "composer_gpus_adopted_total",
            "Composer-tagged GPUs attached to a Node, taken into its record that did not name them",
            registry=r,
        )
        self._free_keys: set[tuple[str, str]] = set()

    def set_free(self, free_by_model: Mapping[tuple[str, str], int]) -> None:
        """Replace the free-pool gauge values (models that ran out drop to 0)."""
        for key in self._free_keys - set(free_by_model):
            self.free_gpus.labels(*key).set(0)
        for key, n in free_by_model.items():
            self.free_gpus.labels(*key).set(n)
        self._free_keys |= set(free_by_model)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
