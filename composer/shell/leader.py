"""Leader election on a ``coordination.k8s.io/v1`` Lease, so two replicas never act at once.

Semantics follow client-go's ``tools/leaderelection`` (the Lease lock): a candidate takes the
Lease when it does not exist, when it already holds it, or when the holder has not renewed it
for ``leaseDurationSeconds`` *as observed on this candidate's own clock* (no trust in other
clocks); every write carries the resourceVersion read, so of two racing candidates one gets
409 and stays a follower. A leader that cannot renew within ``renew_deadline_seconds`` stops
acting (:attr:`LeaseElector.is_leader` turns False) and the controller process exits, as
controller-runtime managers do, so it never acts on a lost lease.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from composer.shell.kube import KubeError

if TYPE_CHECKING:
    from composer.shell.config import Settings

log = logging.getLogger(__name__)

#: Read-modify-write attempts of :meth:`LeaseElector.release` (each 409 reads the Lease again).
RELEASE_ATTEMPTS = 3


class LeaseApi(Protocol):
    """The Lease calls the elector needs (:class:`composer.shell.kube.KubeApi` provides them)."""

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_lease(self, namespace: str, body: dict[str, Any]) -> None: ...

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class Handover:
    """What a leader passes to the next through the Lease's annotations (see :class:`LeaseElector`)."""

    annotations: Callable[[], Mapping[str, str]]
    inherit: Callable[[Mapping[str, str]], None]


def _micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """One candidate in the election.

    Args:
        api: Lease reads and writes.
        settings: the composer's settings; the elector reads the Lease's ``namespace`` and
            ``lease_name``, this candidate's ``identity`` (its ``holderIdentity``),
            ``lease_duration_seconds`` (how long a holder's claim lasts without renewal) and
            ``lease_retry_seconds`` (pause between attempts / renewals).
        renew_deadline_seconds: a leader that has not renewed for this long stops acting
            (default two thirds of the duration).
        clock / monotonic: injectable time sources (seconds).
        handover: what a leader leaves for the next one: ``annotations()`` gives the Lease
            annotations written with every acquisition and renewal (replacing the previous
            holder's), and ``inherit(annotations)`` receives the Lease's annotations (the previous
            holder's last renewal) when this candidate is about to take the Lease from another
            holder, before its write.
    """

    def __init__(
        self,
        api: LeaseApi,
        settings: Settings,
        *,
        renew_deadline_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        handover: Handover | None = None,
    ) -> None:
        self.api = api
        self.namespace = settings.namespace
        self.name = settings.lease_name
        self.identity = settings.identity
        self.duration = settings.lease_duration_seconds
        self.retry = settings.lease_retry_seconds
        self.renew_deadline = renew_deadline_seconds or self.duration * 2 / 3
        self.clock = clock
        self.monotonic = monotonic
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # monotonic time of our last successful write
        self.lost = threading.Event()
        self.handover = handover

    @property
    def is_leader(self) -> bool:
        """True while this candidate holds the Lease and renewed it within the renew deadline."""
        return self._renewed_at is not None and self.monotonic() - self._renewed_at < self.renew_deadline

    def _spec(self, *, acquire: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(max(1, round(self.duration))),
            "acquireTime": acquire,
            "renewTime": _micro_time(self.clock()),
            "leaseTransitions": transitions,
        }

    def _annotations(self) -> dict[str, Any]:
        if self.handover is None:
            return {}
        return {"annotations": dict(self.handover.annotations())}

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards.

        Raises:
            composer.shell.kube.KubeError: the API server failed (other than a lost race).
        """
        now_iso = _micro_time(self.clock())
        lease = self.api.read_lease(self.namespace, self.name)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace, **self._annotations()},
                "spec": self._spec(acquire=now_iso, transitions=0),
            }
            try:
                self.api.create_lease(self.namespace, body)
            except KubeError as exc:
                if exc.conflict:
                    return False
                raise
            self._renewed_at = self.monotonic()
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, self.monotonic()
        duration = float(spec.get("leaseDurationSeconds") or self.duration)
        if holder and holder != self.identity and self.monotonic() - self._observed_at < duration:
            self._renewed_at = None
            return False
        if holder != self.identity and self.handover is not None:
            # Before the write, so that it carries them on (a lost race leaves them with a follower,
            # which opens no edit).
            self.handover.inherit(dict((lease.get("metadata") or {}).get("annotations") or {}))
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        acquire = spec.get("acquireTime") if holder == self.identity else now_iso
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "resourceVersion": lease["metadata"]["resourceVersion"],
                **self._annotations(),
            },
            "spec": self._spec(acquire=acquire or now_iso, transitions=transitions),
        }
        try:
            self.api.replace_lease(self.namespace, self.name, body)
        except KubeError as exc:
            if exc.conflict:
                self._renewed_at = None
                return False
            raise
        if holder != self.identity:
            log.info("acquired lease %s/%s (previous holder %r)", self.namespace, self.name, holder or None)
        self._renewed_at = self.monotonic()
        return True

    def release(self) -> None:
        """Give the Lease up (empty holder) so another replica takes over at once. Best effort.

        Read, then replace with that resourceVersion; a 409 (this replica's own renewal, still
        running on the election thread at shutdown, wrote in between) reads again, up to
        :data:`RELEASE_ATTEMPTS` times.
        """
        if self._renewed_at is None:
            return
        for attempt in range(1, RELEASE_ATTEMPTS + 1):
            try:
                lease = self.api.read_lease(self.namespace, self.name)
                if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                    lease["spec"]["holderIdentity"] = ""
                    lease["spec"]["leaseDurationSeconds"] = 1
                    self.api.replace_lease(self.namespace, self.name, lease)
                break
            except KubeError as exc:
                if exc.conflict and attempt < RELEASE_ATTEMPTS:
                    continue
                log.warning("could not release the lease: %s", exc)
                break
        self._renewed_at = None

    def run(self, stop: threading.Event, on_change: Callable[[bool], None] | None = None) -> None:
        """Campaign and renew until ``stop`` is set; sets :attr:`lost` when leadership is lost."""
        was = False
        while not stop.is_set():
            try:
                self.try_acquire_or_renew()
            except KubeError as exc:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            now = self.is_leader
            if now != was:
                if on_change:
                    on_change(now)
                if was and not now:
                    log.error("lost the lease %s/%s", self.namespace, self.name)
                    self.lost.set()
                was = now
            stop.wait(self.retry)
