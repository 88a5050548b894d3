"""Watch-fed caches of pods, nodes and pool namespaces: the informer pattern.

Listing every pod and node each round costs, at 1,000 nodes, ~0.2 s of API time and JSON parsing
(~1 s on a loaded 2-core machine); instead each kind is kept by one
``kubernetes.informer.SharedInformer`` (the official client's list-then-watch loop: relists on
410 Gone, resumes from the last resourceVersion otherwise) and every change is parsed once, on
arrival, into the composer's own view (:func:`composer.model.podspec.pod_view`,
:func:`composer.model.nodestate.node_view`). A round reads those views from memory.

Objects arrive as the API's JSON: the list is read with ``_preload_content=False`` and the
watch is told to deserialize into ``object``, so no event goes through the client's model
classes (at 1,000 kwok nodes, turning node heartbeats into models and their timestamps into
``datetime`` was about 15 % of the composer's samples in a py-spy profile).

Three things the client's informer does not do, added here:

- **synced**: a round must never run on a half-filled cache (no pods seen = every node idle =
  reclaim GPUs in use). :attr:`ViewInformer.synced` is set once the first list is in the
  cache: the informer calls its list function a second time, with ``watch=True``, only after
  it populated the cache from the first call.
- **backoff**: the informer reconnects at once after a failed watch; an ERROR handler here
  waits (1 s doubling to 30 s, reset by the next event) so an API-server outage is not a
  busy loop.
- **read-your-writes**: a node the composer just patched may still be older in the cache than
  what the composer wrote (the watch event is in flight). :meth:`ClusterCache.assume` overlays
  the object returned by the write until the informer delivers that resourceVersion or a
  newer one, as client-go's ``MutationCache`` does. resourceVersions are compared as integers
  (etcd revisions; comparable per KEP-5504 "Comparable resource versions", Kubernetes 1.34).

DRA mode (:class:`DraCache`) adds ResourceClaims (all namespaces), parsed on arrival into
:class:`composer.dra.claims.ClaimView` and read by the rounds from memory, with the composer's
own status writes laid over (:meth:`DraCache.assume_claim`; a round acting on a claim older than
the API server's writes it conditionally, ``metadata.resourceVersion``, so a stale view costs a
409 and a round), and the ResourceSlices of :data:`composer.dra.slices.DRIVER`
(field selector ``spec.driver``), watched only to wake the loop when someone else changes or
deletes one (the composer's own slice writes wake it once more; that round finds nothing to
write); rounds list the slices afresh.

Wake-ups: ``on_change`` is called only when a parsed view actually changed (a kubelet or kwok
heartbeat that only moves timestamps does not wake the loop).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, Generic, TypeVar

from kubernetes import client
from kubernetes.informer import ADDED, DELETED, ERROR, MODIFIED, SharedInformer, _meta_namespace_key

from composer.dra.claims import ClaimView, claim_view
from composer.dra.slices import DRIVER
from composer.model import annotations as ann
from composer.model.nodestate import NodeView, node_view
from composer.model.podspec import PodView, pod_view

#: Longest wait of ``ClusterCache.stop`` for the watch threads, seconds (SIGTERM to exit < 1 s).
STOP_WAIT_SECONDS = 0.5

log = logging.getLogger(__name__)

V = TypeVar("V")

#: Pods the composer never needs (the API server drops them from the watch as DELETED).
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
_BACKOFF_FIRST, _BACKOFF_MAX = 1.0, 30.0


def resource_version(obj: Mapping[str, Any]) -> int:
    """``metadata.resourceVersion`` as an integer (0 when missing or not a number)."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class ViewInformer(Generic[V]):
    """One resource kind, watched, parsed into views keyed ``namespace/name`` (or ``name``).

    Args:
        list_func: a ``CoreV1Api`` list method (``list_node``, ``list_pod_for_all_namespaces``).
        parse: API JSON object -> view.
        name: for logs and the thread name.
        label_selector / field_selector: forwarded to the API server.
        resync_seconds: full relist period (0 = watch only).
        on_change: called (on the informer thread) after a view was added, changed or removed.
        echo: ``(key, resourceVersion, view) -> True`` when a changed view is one the composer
            already knows (its own write coming back on the watch): stored, no ``on_change``.
        stamp: ``(view, first seen) -> view``: gives every view of an object the time the watch
            first delivered that object (seconds since the epoch, ``clock``).
        clock: seconds since the epoch.
    """

    def __init__(
        self,
        list_func: Callable[..., Any],
        parse: Callable[[Mapping[str, Any]], V],
        *,
        name: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_seconds: float = 0.0,
        on_change: Callable[[], None] | None = None,
        echo: Callable[[str, int, V], bool] | None = None,
        stamp: Callable[[V, float], V] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self._echo = echo
        self._stamp = stamp
        self._clock = clock
        self._first_seen: dict[str, float] = {}
        self.synced = threading.Event()
        self._parse = parse
        self._on_change = on_change or (lambda: None)
        self._lock = threading.Lock()
        self._views: dict[str, tuple[int, V]] = {}
        self._stop = threading.Event()
        self._backoff = _BACKOFF_FIRST

        def listing(*args: Any, **kw: Any) -> Any:
            if kw.get("watch"):
                self.synced.set()  # the first list is in the cache: the informer watches now
                return list_func(*args, **kw)  # the Watch streams it (``_preload_content=False``)
            return _raw_list(list_func(*args, _preload_content=False, **kw))

        # The Watch picks the type it deserializes events into from this docstring line;
        # ``object`` keeps each event's object the API's JSON (a dict).
        listing.__doc__ = ":rtype: object"

        self._informer = SharedInformer(
            listing,
            resync_period=resync_seconds,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        self._informer.add_event_handler(ADDED, self._put)
        self._informer.add_event_handler(MODIFIED, self._put)
        self._informer.add_event_handler(DELETED, self._delete)
        self._informer.add_event_handler(ERROR, self._error)

    # -- informer callbacks (informer thread) ---------------------------------------------------
    def _put(self, obj: Any) -> None:
        raw: Mapping[str, Any] = obj
        key = _meta_namespace_key(raw)  # the informer's own key: namespace/name, or name
        view = self._parse(raw)
        rv = resource_version(raw)
        if self._stamp is not None:
            view = self._stamp(view, self._first_seen_of(key))
        with self._lock:
            old = self._views.get(key)
            self._views[key] = (rv, view)
        self._backoff = _BACKOFF_FIRST
        if (old is None or old[1] != view) and not (self._echo is not None and self._echo(key, rv, view)):
            self._on_change()

    def _first_seen_of(self, key: str) -> float:
        seen = self._first_seen.get(key)
        if seen is None:
            seen = self._first_seen[key] = self._clock()
            if len(self._first_seen) > 2 * len(self._views) + 100:  # objects gone without a DELETED
                with self._lock:
                    live = set(self._views)
                self._first_seen = {k: t for k, t in self._first_seen.items() if k in live or k == key}
        return seen

    def _delete(self, obj: Any) -> None:
        key = _meta_namespace_key(obj)
        self._first_seen.pop(key, None)
        with self._lock:
            gone = self._views.pop(key, None)
        if gone is not None:
            self._on_change()

    def _error(self, exc: Any) -> None:
        if self._stop.is_set():  # our own stop closed the watch: not a failure
            return
        log.warning("%s watch failed (%s); reconnecting in %.0f s", self.name, exc, self._backoff)
        self._stop.wait(self._backoff)
        self._backoff = min(_BACKOFF_MAX, self._backoff * 2)

    def lay_over(self, obj: Mapping[str, Any]) -> None:
        """Store an object the composer just wrote (the API server's answer) unless the watch
        already holds that resourceVersion or a newer one; wakes nobody (the loop planned the
        write), and the watch's echo of it, the same view, wakes nobody either."""
        key = _meta_namespace_key(obj)
        view, rv = self._parse(obj), resource_version(obj)
        with self._lock:
            old = self._views.get(key)
            if old is None or old[0] < rv:
                self._views[key] = (rv, view)

    # -- reads ----------------------------------------------------------------------------------
    def views(self) -> dict[str, tuple[int, V]]:
        """A copy: key -> (resourceVersion, view)."""
        with self._lock:
            return dict(self._views)

    def start(self) -> None:
        """Start the list-then-watch thread."""
        self._informer.start()

    def stop(self) -> None:
        """Stop watching (returns once the informer thread ended: at the watch's next event or
        timeout; ``ClusterCache.stop`` does not wait that long)."""
        self.stopping()
        self._informer.stop()

    def stopping(self) -> None:
        """Mark the watch as being stopped: its errors from now on are not reported."""
        self._stop.set()


def _raw_list(resp: Any) -> SimpleNamespace:
    """A list answer (urllib3 response of ``_preload_content=False``) as the informer reads it:
    ``items`` (the API's JSON objects, dicts) and ``metadata.resource_version``."""
    body = json.loads(resp.data)
    meta = body.get("metadata") or {}
    return SimpleNamespace(
        items=body.get("items") or [], metadata=SimpleNamespace(resource_version=meta.get("resourceVersion"))
    )


def _seen_at(view: PodView, first_seen: float) -> PodView:
    return view if view.seen_at == first_seen else replace(view, seen_at=first_seen)


def _pool(raw: Mapping[str, Any]) -> str:
    pool: str = ((raw.get("metadata") or {}).get("labels") or {}).get(ann.POOL_LABEL, "")
    return pool


class ClusterCache:
    """Pods (non-terminal, all namespaces), managed nodes and pool namespaces, kept by watches.

    Implements the controller's cluster source (:class:`composer.run.controller.ClusterSource`).

    Args:
        api: the ApiClient of :class:`composer.shell.kube.KubeApi`.
        node_selector: label selector of managed nodes ("" = all).
        on_change: called when anything the composer decides on changed (wakes the loop).
        resync_seconds: full relist period of each informer (0 = never).
    """

    def __init__(
        self,
        api: client.ApiClient,
        *,
        node_selector: str = "",
        on_change: Callable[[], None] | None = None,
        resync_seconds: float = 600.0,
    ) -> None:
        core = client.CoreV1Api(api)
        self.pods: ViewInformer[PodView] = ViewInformer(
            core.list_pod_for_all_namespaces,
            pod_view,
            name="pods",
            field_selector=LIVE_PODS,
            resync_seconds=resync_seconds,
            on_change=on_change,
            stamp=_seen_at,
        )
        self.nodes: ViewInformer[NodeView] = ViewInformer(
            core.list_node,
            node_view,
            name="nodes",
            label_selector=node_selector or None,
            resync_seconds=resync_seconds,
            on_change=on_change,
            echo=self._is_echo,
        )
        self.namespaces: ViewInformer[str] = ViewInformer(
            core.list_namespace,
            _pool,
            name="namespaces",
            label_selector=ann.POOL_LABEL,
            resync_seconds=resync_seconds,
            on_change=on_change,
        )
        extra = self._more_informers(api, on_change=on_change, resync_seconds=resync_seconds)
        self._all: tuple[ViewInformer[Any], ...] = (self.pods, self.nodes, self.namespaces, *extra)
        self._lock = threading.Lock()
        self._assumed: dict[str, tuple[int, NodeView]] = {}

    def _more_informers(
        self, api: client.ApiClient, *, on_change: Callable[[], None] | None, resync_seconds: float
    ) -> tuple[ViewInformer[Any], ...]:
        """Watches a subclass adds (started, stopped and waited for with the others); none here."""
        return ()

    def start(self) -> None:
        """Start all watches."""
        for inf in self._all:
            inf.start()

    def stop(self, *, wait_seconds: float = STOP_WAIT_SECONDS) -> bool:
        """Stop all watches, waiting at most ``wait_seconds`` for their threads.

        A watch thread blocks on its HTTP stream until the next event or the server's watch
        timeout, so it may end after this returns: the threads are daemons and hold nothing
        (the composer is exiting, or a test is done with the cache). Returns True when every
        thread ended in time.
        """
        for inf in self._all:
            inf.stopping()
        stoppers = [threading.Thread(target=inf.stop, name=f"stop-{inf.name}", daemon=True)
                     for inf in self._all]
        for t in stoppers:
            t.start()
        deadline = time.monotonic() + wait_seconds
        for t in stoppers:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in stoppers)

    def wait_synced(self, timeout: float) -> bool:
        """Wait until every kind has been listed once; True when synced."""
        return all(inf.synced.wait(timeout) for inf in self._all)

    @property
    def synced(self) -> bool:
        """Every kind has been listed once."""
        return all(inf.synced.is_set() for inf in self._all)

    def gated_seen(self) -> dict[str, float]:
        """Gated pod UID -> when the pod watch first delivered it (seconds since the epoch), for
        the pods in the cache that carry a scheduling gate. No API call."""
        return {v.uid: v.seen_at for _, v in self.pods.views().values() if v.gated and v.seen_at > 0}

    def assume_pod(self, pod: Mapping[str, Any]) -> None:
        """A Pod the composer just patched (the API server's answer: released or ungated): the
        next round plans on it, not on the gated view the watch has not replaced yet."""
        self.pods.lay_over(pod)

    def assume(self, node: Mapping[str, Any]) -> None:
        """Overlay a Node object the composer just wrote (the API server's answer to the write)
        until the watch delivers that resourceVersion or a newer one."""
        view, rv = node_view(node), resource_version(node)
        with self._lock:
            have = self._assumed.get(view.name)
            if have is None or have[0] < rv:
                self._assumed[view.name] = (rv, view)

    def _is_echo(self, name: str, rv: int, view: NodeView) -> bool:
        """The watch delivers a Node write of the composer's own that :meth:`assume` laid over
        already: the rounds have planned on it, so it wakes nobody (at 1,000 nodes every round
        saved is CPU given back to the compose in flight)."""
        with self._lock:
            have = self._assumed.get(name)
        return have is not None and have[0] == rv and have[1] == view

    def read(self) -> tuple[tuple[PodView, ...], tuple[NodeView, ...], dict[str, str]]:
        """(pods, nodes, namespace -> pool) as the watches last saw them, with the composer's
        own newer node writes laid over."""
        pods = tuple(v for _, v in self.pods.views().values())
        nodes = self.nodes.views()
        with self._lock:
            for name, (rv, view) in list(self._assumed.items()):
                seen = nodes.get(name)
                if seen is None or seen[0] >= rv:
                    del self._assumed[name]  # the watch caught up (or the node is gone)
                else:
                    nodes[name] = (rv, view)
        pools = {k: v for k, (_, v) in self.namespaces.views().items() if v}
        return pods, tuple(v for _, v in nodes.values()), pools


def _slice_spec(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = raw.get("spec") or {}
    return spec


class DraCache(ClusterCache):
    """Pods, nodes, pool namespaces, ResourceClaims and the driver's ResourceSlices, kept by
    watches (implements :class:`composer.run.dra.DraSource`). Args as :class:`ClusterCache`."""

    resource_claims: ViewInformer[ClaimView]
    resource_slices: ViewInformer[Mapping[str, Any]]

    def _more_informers(
        self, api: client.ApiClient, *, on_change: Callable[[], None] | None, resync_seconds: float
    ) -> tuple[ViewInformer[Any], ...]:
        resource = client.ResourceV1Api(api)
        self.resource_claims = ViewInformer(
            resource.list_resource_claim_for_all_namespaces,
            claim_view,
            name="resourceclaims",
            resync_seconds=resync_seconds,
            on_change=on_change,
        )
        self.resource_slices = ViewInformer(
            resource.list_resource_slice,
            _slice_spec,
            name="resourceslices",
            field_selector=f"spec.driver={DRIVER}",
            resync_seconds=resync_seconds,
            on_change=on_change,
        )
        return self.resource_claims, self.resource_slices

    def claims(self) -> list[ClaimView]:
        """Every ResourceClaim as the watch last saw it, or as the composer last wrote it."""
        return [v for _, v in self.resource_claims.views().values()]

    def assume_claim(self, claim: Mapping[str, Any]) -> None:
        """A ResourceClaim the composer just wrote (the answer to its status patch): the next
        round plans on it, not on the older view the watch has not replaced yet."""
        self.resource_claims.lay_over(claim)
