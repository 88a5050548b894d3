"""The composer's Kubernetes calls: a thin typed layer over the ``kubernetes`` client (the
watches that feed a round live in :mod:`composer.shell.cache`).

Lists are read as raw JSON (``_preload_content=False``; 10,000 pods deserialise an order of
magnitude faster than through the generated models) and handed to the parsers in
:mod:`composer.model.podspec` / :mod:`composer.model.nodestate`. Every call has an explicit timeout.
API failures raise :class:`KubeError` (method, resource, HTTP status, clipped message).

Verbs used here and by :mod:`composer.shell.cache` (the chart's RBAC grants exactly these): pods
list/watch/patch (cluster; patch only removes the composer's scheduling gate and pins the pod),
pods/status patch (cluster, only when nominating: ``status.nominatedNodeName``),
pods delete (device-plugin namespace), nodes list/watch/get/patch,
namespaces list/watch, events create (and get/patch: a repeated Event is counted on the one
object, :meth:`KubeApi.create_event`), leases get/create/update and configmaps get/create/patch
(own namespace: the orphan timers, :mod:`composer.shell.timers`). DRA mode (docs/dra.md):
resourceclaims list, resourceclaims/status patch, resourceslices list/patch (server-side
apply)/delete, deviceclasses patch (server-side apply).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from composer.model import annotations as ann
from composer.model.models import EventSpec, Taint

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
#: Seconds for each API call (connect, read).
REQUEST_TIMEOUT = (5.0, 30.0)
_MAX_MESSAGE = 300


class KubeError(Exception):
    """A Kubernetes API call failed.

    Attributes:
        method: what was attempted (``PATCH``), resource: ``nodes/blade-slot-1``,
        status: HTTP status or None (no answer), message: the API server's message (clipped).
    """

    def __init__(self, method: str, resource: str, status: int | None, message: str) -> None:
        self.method, self.resource, self.status = method, resource, status
        self.message = " ".join(message.split())[:_MAX_MESSAGE]
        super().__init__(
            f"{method} {resource} -> {status if status is not None else 'no answer'}: {self.message}"
        )

    @property
    def conflict(self) -> bool:
        """409: the object changed since it was read (optimistic concurrency)."""
        return self.status == 409


def _wrap(method: str, resource: str, exc: Exception) -> KubeError:
    if isinstance(exc, ApiException):
        msg = exc.reason or ""
        try:
            msg = json.loads(exc.body or "{}").get("message", msg)
        except (ValueError, AttributeError):
            pass
        return KubeError(method, resource, exc.status, msg)
    return KubeError(method, resource, None, f"{type(exc).__name__}: {exc}")


def _read_or_none(call: Callable[[], Any], resource: str) -> Any:
    """``call()`` (a GET of ``resource``), or None when the API server answers 404.

    Raises:
        KubeError: any other failure.
    """
    try:
        return call()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise _wrap("GET", resource, exc) from exc
    except Exception as exc:
        raise _wrap("GET", resource, exc) from exc


def _patch(call: Callable[..., Any], resource: str, *args: Any, content_type: str) -> dict[str, Any]:
    """PATCH through ``call(*args)`` (a generated ``patch_*`` method) with ``content_type``
    (:data:`MERGE_PATCH` or :data:`JSON_PATCH`); returns the object JSON the API server answered.

    Raises:
        KubeError: any failure, the API server's status and message kept (409 -> ``conflict``).
    """
    try:
        resp = call(
            *args,
            _content_type=content_type,
            _request_timeout=REQUEST_TIMEOUT,
            _preload_content=False,
        )
        return dict(json.loads(resp.data))
    except Exception as exc:
        raise _wrap("PATCH", resource, exc) from exc


#: apiVersion of the kinds Events are about that are not core/v1.
_API_VERSIONS = {"Lease": "coordination.k8s.io/v1", "ResourceClaim": "resource.k8s.io/v1"}


def series_name(ev: EventSpec) -> str:
    """The Event object name of a ``series`` Event: its object's name and a digest of what
    makes it the same cause (object kind, namespace, name and UID, type, reason)."""
    key = "/".join((ann.COMPONENT, ev.kind, ev.namespace, ev.name, ev.uid, ev.type, ev.reason))
    return f"{ev.name[:200]}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def api_client(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from a kubeconfig file, or the in-cluster ServiceAccount when None."""
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    cfg = client.Configuration()
    config.load_incluster_config(client_configuration=cfg)
    return client.ApiClient(cfg)


class KubeApi:
    """The Kubernetes calls the composer makes. Thread-safe (the client's pool is)."""

    def __init__(self, api: client.ApiClient, *, instance: str = ann.COMPONENT) -> None:
        """``instance``: this replica's identity, written as the Events' ``reportingInstance``."""
        self.api = api
        self.instance = instance
        self.core = client.CoreV1Api(api)
        self.coord = client.CoordinationV1Api(api)
        self.resource = client.ResourceV1Api(api)

    # -- reads --------------------------------------------------------------------------------
    def _list(self, fn: Any, resource: str, **kw: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = None
        while True:
            try:
                resp = fn(
                    limit=1000,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                    **kw,
                )
                body = json.loads(resp.data)
            except Exception as exc:
                raise _wrap("LIST", resource, exc) from exc
            items.extend(body.get("items") or ())
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items

    def list_pods(self) -> list[dict[str, Any]]:
        """Every pod that is not Succeeded/Failed, cluster-wide (pod JSON objects)."""
        return self._list(
            self.core.list_pod_for_all_namespaces,
            "pods",
            field_selector="status.phase!=Succeeded,status.phase!=Failed",
        )

    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        """Nodes matching ``label_selector`` (node JSON objects)."""
        return self._list(self.core.list_node, "nodes", label_selector=label_selector or None)

    def node_exists(self, node: str) -> bool:
        """True when a Node named ``node`` exists (any labels).

        Raises:
            KubeError: the API server answered anything but the Node or 404.
        """
        return _read_or_none(
            lambda: self.core.read_node(node, _request_timeout=REQUEST_TIMEOUT), f"nodes/{node}"
        ) is not None

    def namespace_pools(self) -> dict[str, str]:
        """Namespace -> pool, for namespaces labelled ``composer.liqid.io/pool``."""
        items = self._list(self.core.list_namespace, "namespaces", label_selector=ann.POOL_LABEL)
        return {n["metadata"]["name"]: n["metadata"]["labels"][ann.POOL_LABEL] for n in items}

    def gpu_pods_on_node(self, node: str) -> list[str]:
        """``namespace/name`` of non-terminal pods bound to ``node`` that request a GPU resource."""
        from composer.model.podspec import pod_view  # local: keeps this module's import surface small

        items = self._list(
            self.core.list_pod_for_all_namespaces,
            "pods",
            field_selector=f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed",
        )
        return [v.key for v in map(pod_view, items) if v.wants_gpu]

    # -- writes -------------------------------------------------------------------------------
    def patch_node_annotations(self, node: str, changes: Mapping[str, str | None]) -> dict[str, Any] | None:
        """Set (or, with None, delete) annotations on ``node`` with a JSON merge patch.

        Returns the Node JSON as the API server answered (None when there was nothing to write).
        """
        return self._patch_node_metadata(node, "annotations", changes)

    def patch_node_labels(self, node: str, changes: Mapping[str, str | None]) -> dict[str, Any] | None:
        """Set (or, with None, delete) labels on ``node`` with a JSON merge patch; returns as
        :meth:`patch_node_annotations`."""
        return self._patch_node_metadata(node, "labels", changes)

    def _patch_node_metadata(
        self, node: str, field: str, changes: Mapping[str, str | None]
    ) -> dict[str, Any] | None:
        if not changes:
            return None
        return _patch(
            self.core.patch_node, f"nodes/{node}", node, {"metadata": {field: dict(changes)}},
            content_type=MERGE_PATCH,
        )

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> dict[str, Any]:
        """Apply an RFC 6902 JSON patch to a pod (``test`` operations make it fail as a whole).

        Returns the Pod JSON as the API server answered.

        Raises:
            KubeError: refused (422 when a ``test`` failed or the change is not allowed, 404 when
                the pod is gone).
        """
        return _patch(
            self.core.patch_namespaced_pod, f"{namespace}/pods/{name}", name, namespace, patch,
            content_type=JSON_PATCH,
        )

    def nominate_pod(self, namespace: str, name: str, node: str | None) -> None:
        """Set (or, with None, clear) the pod's ``status.nominatedNodeName`` with a JSON merge
        patch on the ``status`` subresource (KEP-5278: components other than the scheduler may
        set it to say where they expect the pod to run).

        Raises:
            KubeError: refused (404 when the pod is gone).
        """
        try:
            self.core.patch_namespaced_pod_status(
                name,
                namespace,
                {"status": {"nominatedNodeName": node}},
                _content_type=MERGE_PATCH,
                _request_timeout=REQUEST_TIMEOUT,
                _preload_content=False,
            )
        except Exception as exc:
            raise _wrap("PATCH", f"{namespace}/pods/{name}/status", exc) from exc

    def server_version(self) -> tuple[int, int]:
        """The API server's (major, minor) version from ``GET /version`` (a ``minor`` such as
        ``"35+"`` counts as 35).

        Raises:
            KubeError: unreadable, or not a number.
        """
        try:
            info = client.VersionApi(self.api).get_code(_request_timeout=REQUEST_TIMEOUT)
            return int(info.major), int("".join(ch for ch in info.minor if ch.isdigit()))
        except ValueError as exc:
            raise KubeError("GET", "version", None, f"not a version number: {exc}") from exc
        except Exception as exc:
            raise _wrap("GET", "version", exc) from exc

    def set_taint(self, node: str, taint: Taint, present: bool, *, attempts: int = 5) -> dict[str, Any]:
        """Add or remove ``taint`` (matched by key and effect) on ``node``.

        Read-modify-write with the resourceVersion as precondition, retried on conflicts.
        Returns the Node JSON after the change (as read, when nothing had to change).
        """
        for i in range(attempts):
            try:
                obj = json.loads(
                    self.core.read_node(node, _preload_content=False, _request_timeout=REQUEST_TIMEOUT).data
                )
            except Exception as exc:
                raise _wrap("GET", f"nodes/{node}", exc) from exc
            taints = [
                t
                for t in (obj.get("spec") or {}).get("taints") or ()
                if not (t.get("key") == taint.key and t.get("effect") == taint.effect)
            ]
            had = len(taints) != len((obj.get("spec") or {}).get("taints") or ())
            if had == present:
                return dict(obj)
            if present:
                taints.append(
                    {
                        "key": taint.key,
                        "value": taint.value,
                        "effect": taint.effect,
                        "timeAdded": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                )
            body = {
                "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "spec": {"taints": taints or None},
            }
            try:
                return _patch(self.core.patch_node, f"nodes/{node}", node, body, content_type=MERGE_PATCH)
            except KubeError as err:
                if not err.conflict or i == attempts - 1:
                    raise
                time.sleep(0.05 * (i + 1))
        raise KubeError("PATCH", f"nodes/{node}", None, "no attempts made")

    def restart_daemonset_pods(self, node: str, namespace: str, selector: str) -> list[str]:
        """Delete the pods matching label ``selector`` in ``namespace`` on ``node`` (the device
        plugin's, the mig-manager's: their DaemonSet recreates them); a pod already gone is
        skipped.

        Returns the names deleted.

        Raises:
            KubeError: listing or a delete failed (other than 404).
        """
        items = self._list(
            self.core.list_namespaced_pod,
            f"{namespace}/pods",
            namespace=namespace,
            label_selector=selector,
            field_selector=f"spec.nodeName={node}",
        )
        deleted = []
        for p in items:
            name = p["metadata"]["name"]
            try:
                self.core.delete_namespaced_pod(name, namespace, _request_timeout=REQUEST_TIMEOUT)
                deleted.append(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise _wrap("DELETE", f"{namespace}/pods/{name}", exc) from exc
        return deleted

    def create_event(self, ev: EventSpec, *, namespace_for_node_events: str = "default") -> None:
        """Create a core/v1 Event about a Pod, a Node or the composer's Lease (``kubectl
        describe`` shows it).

        An ``ev.series`` Event has a name of its own (:func:`series_name`): when it exists
        already (emitted before, by this replica or an earlier leader) its ``count`` goes up by
        one, with this ``message`` and ``lastTimestamp``, instead of a second Event.

        Raises:
            KubeError: the API server refused.
        """
        now = datetime.now(UTC)
        namespaced = ev.kind != "Node"
        ns = ev.namespace if namespaced else namespace_for_node_events
        name = {"name": series_name(ev)} if ev.series else {"generateName": f"{ev.name}."}
        body = {
            "metadata": {**name, "namespace": ns},
            "involvedObject": {
                "kind": ev.kind,
                "apiVersion": _API_VERSIONS.get(ev.kind, "v1"),
                "name": ev.name,
                **({"uid": ev.uid} if ev.uid else {}),
                **({"namespace": ev.namespace} if namespaced else {}),
            },
            "type": ev.type,
            "reason": ev.reason,
            "message": ev.message[:1024],
            "source": {"component": ann.COMPONENT, "host": self.instance[:128]},
            "reportingComponent": ann.COMPONENT,
            "reportingInstance": self.instance[:128],
            "firstTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "count": 1,
        }
        try:
            self.core.create_namespaced_event(ns, body, _request_timeout=REQUEST_TIMEOUT)
            return
        except ApiException as exc:
            if not (ev.series and exc.status == 409):
                raise _wrap("POST", f"{ns}/events", exc) from exc
        except Exception as exc:
            raise _wrap("POST", f"{ns}/events", exc) from exc
        self._count_again(ns, series_name(ev), body)

    def _count_again(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """Add one to the ``count`` of Event ``namespace/name`` (a repeat of ``body``)."""
        resource = f"{namespace}/events/{name}"
        resp = _read_or_none(
            lambda: self.core.read_namespaced_event(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            resource,
        )
        if resp is None:  # expired between the POST and the GET (events have a TTL): make it again
            try:
                self.core.create_namespaced_event(namespace, dict(body), _request_timeout=REQUEST_TIMEOUT)
            except Exception as exc:
                raise _wrap("POST", f"{namespace}/events", exc) from exc
            return
        old = json.loads(resp.data)
        patch = {
            "count": int(old.get("count") or 1) + 1,
            "lastTimestamp": body["lastTimestamp"],
            "message": body["message"],
            "metadata": {"resourceVersion": old["metadata"]["resourceVersion"]},
        }
        _patch(self.core.patch_namespaced_event, resource, name, namespace, patch, content_type=MERGE_PATCH)

    # -- DRA mode: resource.k8s.io/v1 ----------------------------------------------------------
    def list_resource_claims(self) -> list[dict[str, Any]]:
        """Every ResourceClaim (all namespaces), as JSON."""
        return self._list(self.resource.list_resource_claim_for_all_namespaces, "resourceclaims")

    def patch_resource_claim_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        """JSON merge patch of a claim's ``status`` subresource (with ``metadata.resourceVersion``
        in ``patch`` it is conditional: 409 when the claim changed).

        Raises:
            KubeError: any failure (``conflict`` on 409).
        """
        resource = f"{namespace}/resourceclaims/{name}/status"
        return _patch(
            self.resource.patch_namespaced_resource_claim_status, resource, name, namespace, dict(patch),
            content_type=MERGE_PATCH,
        )

    def list_resource_slices(self, driver: str) -> list[dict[str, Any]]:
        """The ResourceSlices of ``driver`` (field selector ``spec.driver``,
        ``ResourceSliceSelectorDriver`` in ``k8s.io/api`` ``resource/v1/types.go``)."""
        selector = f"spec.driver={driver}"
        return self._list(self.resource.list_resource_slice, "resourceslices", field_selector=selector)

    def apply_resource_slice(self, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Create or replace a ResourceSlice by server-side apply (field manager: this
        component, conflicts forced: the composer is the slices' only writer). ``dry_run``:
        ``dryRun=All``, the API server's answer without storing anything."""
        return self._apply(self.resource.patch_resource_slice, "resourceslices", body, dry_run)

    def apply_device_class(self, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Create or replace a DeviceClass by server-side apply (as :meth:`apply_resource_slice`)."""
        return self._apply(self.resource.patch_device_class, "deviceclasses", body, dry_run)

    def _apply(
        self, call: Callable[..., Any], plural: str, body: Mapping[str, Any], dry_run: bool
    ) -> dict[str, Any]:
        name = str(body["metadata"]["name"])
        extra = {"dry_run": "All"} if dry_run else {}
        try:
            resp = call(
                name,
                dict(body),
                field_manager=ann.COMPONENT,
                force=True,
                _content_type=APPLY_PATCH,
                _request_timeout=REQUEST_TIMEOUT,
                _preload_content=False,
                **extra,
            )
            return dict(json.loads(resp.data))
        except Exception as exc:
            raise _wrap("APPLY", f"{plural}/{name}", exc) from exc

    def delete_resource_slice(self, name: str) -> None:
        """Delete a ResourceSlice; one already gone is no error.

        Raises:
            KubeError: any other failure.
        """
        try:
            self.resource.delete_resource_slice(
                name, _request_timeout=REQUEST_TIMEOUT, _preload_content=False
            )
        except ApiException as exc:
            if exc.status != 404:
                raise _wrap("DELETE", f"resourceslices/{name}", exc) from exc
        except Exception as exc:
            raise _wrap("DELETE", f"resourceslices/{name}", exc) from exc

    # -- the composer's ConfigMap ------------------------------------------------------------
    def read_configmap_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ``data`` of ConfigMap ``namespace/name``, or None when it does not exist.

        Raises:
            KubeError: any other failure.
        """
        resp = _read_or_none(
            lambda: self.core.read_namespaced_config_map(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            f"{namespace}/configmaps/{name}",
        )
        return None if resp is None else dict(json.loads(resp.data).get("data") or {})

    def write_configmap_data(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None:
        """Set (or, with None, delete) keys of ConfigMap ``namespace/name``'s ``data`` with a JSON
        merge patch, creating the ConfigMap when it does not exist.

        Raises:
            KubeError: refused (a 409 when another writer created it meanwhile: try again).
        """
        resource = f"{namespace}/configmaps/{name}"
        try:
            _patch(self.core.patch_namespaced_config_map, resource, name, namespace, {"data": dict(data)},
                   content_type=MERGE_PATCH)
            return
        except KubeError as exc:
            if exc.status != 404:
                raise
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": ann.COMPONENT},
            },
            "data": {k: v for k, v in data.items() if v is not None},
        }
        try:
            self.core.create_namespaced_config_map(namespace, body, _request_timeout=REQUEST_TIMEOUT)
        except Exception as exc:
            raise _wrap("POST", f"{namespace}/configmaps", exc) from exc

    # -- leases -------------------------------------------------------------------------------
    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Lease as JSON, or None when it does not exist."""
        resp = _read_or_none(
            lambda: self.coord.read_namespaced_lease(
                name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            ),
            f"{namespace}/leases/{name}",
        )
        return None if resp is None else dict(json.loads(resp.data))

    def create_lease(self, namespace: str, body: dict[str, Any]) -> None:
        """Create a Lease (409 -> KubeError with ``conflict``)."""
        try:
            self.coord.create_namespaced_lease(namespace, body, _request_timeout=REQUEST_TIMEOUT)
        except Exception as exc:
            raise _wrap("POST", f"{namespace}/leases", exc) from exc

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        """Replace a Lease; ``body`` carries the resourceVersion read (409 on a lost race)."""
        try:
            self.coord.replace_namespaced_lease(name, namespace, body, _request_timeout=REQUEST_TIMEOUT)
        except Exception as exc:
            raise _wrap("PUT", f"{namespace}/leases/{name}", exc) from exc
