"""In-memory fakes of the composer's two I/O surfaces (Kubernetes and the Director).

``FakeKube`` keeps Nodes and Pods as API JSON dicts, so the real parsers run on them;
``FakeFabric`` keeps GPUs and machines and can fail on demand with the Director's own errors.
``FakeWorld.agent_step`` plays the GPU Operator (advertise what is attached) and
``FakeWorld.schedule`` plays the scheduler (bind pending pods that now fit).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import jsonpointer

from composer.decide.decide import EventSpec
from composer.model import annotations as ann
from composer.model.models import Taint
from composer.model.podspec import pod_view
from dynamic_providers.director.errors import DirectorConflictError, DirectorError


def node(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "128Gi",
    gpus: int = 0,
    product: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110"}
    lab = {"kubernetes.io/hostname": name, **(labels or {})}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
        lab["nvidia.com/gpu.product"] = product or "Tesla-T4"
        lab["nvidia.com/gpu.count"] = str(gpus)
    return {
        "metadata": {
            "name": name,
            "labels": lab,
            "annotations": dict(annotations or {}),
            "resourceVersion": "1",
        },
        "spec": {"taints": list(taints or [])},
        "status": {
            "allocatable": dict(alloc),
            "capacity": dict(alloc),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    gpus: int = 1,
    *,
    ns: str = "ml",
    uid: str | None = None,
    node_name: str = "",
    product: str | None = None,
    host: str | None = None,
    resource: str = "nvidia.com/gpu",
    cpu: str = "500m",
    memory: str = "1Gi",
    phase: str = "Pending",
    unschedulable: bool | None = None,
    created: str = "2026-01-01T00:00:00Z",
    gated: bool = False,
) -> dict[str, Any]:
    sel = {}
    if product:
        sel["nvidia.com/gpu.product"] = product
    if host:
        sel["kubernetes.io/hostname"] = host
    limits = {"cpu": cpu, "memory": memory}
    if gpus:
        limits[resource] = str(gpus)
    unsched = (not node_name and not gated) if unschedulable is None else unschedulable
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid or f"uid-{name}",
            "creationTimestamp": created,
        },
        "spec": {
            "nodeName": node_name or None,
            "nodeSelector": sel,
            "containers": [{"name": "c", "resources": {"limits": limits}}],
            **({"schedulingGates": [{"name": ann.GATE}]} if gated else {}),
        },
        "status": {
            "phase": phase,
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
            if unsched
            else [],
        },
    }


@dataclass
class FakeGpu:
    """A GPU as ``DirectorClient.gpus`` returns it; ``director_model`` "" and ``memory_mib`` None
    are a GPU without a ``device/info/gpu`` record."""

    name: str
    model: str = "Tesla-T4"
    swit_gid: str = "sw0"
    machine: str | None = None
    group_id: int | None = None
    owner_tag: str | None = None
    device_state: str = "ON"
    director_model: str = ""
    memory_mib: int | None = None
    fabr_id: int = 0

    @property
    def healthy(self) -> bool:
        return self.device_state == "ON"


@dataclass
class FakeMachine:
    mach_name: str
    grp_id: int = 1


@dataclass
class FakeFabric:
    """A Director with GPUs and machines; ``fail`` holds errors raised by the next calls."""

    gpu_list: list[FakeGpu]
    machine_names: list[str]
    fail: dict[str, list[DirectorError]] = field(default_factory=dict)
    calls: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    #: owner-tag writes (``("tag" | "untag", tag, devices)``), apart from ``calls``
    tag_calls: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)

    def _maybe_fail(self, op: str) -> None:
        errs = self.fail.get(op)
        if errs:
            raise errs.pop(0)

    def gpus(self) -> list[FakeGpu]:
        self._maybe_fail("gpus")
        return [copy.copy(g) for g in self.gpu_list]

    def machines(self) -> list[FakeMachine]:
        return [FakeMachine(m) for m in self.machine_names]

    def by(self, name: str) -> FakeGpu:
        return next(g for g in self.gpu_list if g.name == name)

    def compose(
        self,
        machine: str,
        device_names: list[str],
        *,
        owner_tag: str | None = None,
        before_change: Callable[[], object] | None = None,
    ) -> None:
        if before_change is not None:  # as the real client: after its reads, before any change
            before_change()
        if owner_tag is not None:  # the real client tags before it changes the fabric
            self.set_owner_tag(device_names, owner_tag)
        self.calls.append(("compose", machine, tuple(device_names)))
        self._maybe_fail("compose")
        for d in device_names:
            g = self.by(d)
            if g.machine not in (None, machine):
                raise DirectorConflictError(
                    f"GPU {d} is attached to machine {g.machine}", machine=machine, device=d
                )
        for d in device_names:
            self.by(d).machine = machine

    def decompose(self, machine: str, device_names: list[str]) -> None:
        self.calls.append(("decompose", machine, tuple(device_names)))
        self._maybe_fail("decompose")
        for d in device_names:
            if self.by(d).machine == machine:
                self.by(d).machine = None

    def release_to_system_pool(self, device_names: list[str]) -> list[str]:
        self.released.extend(device_names)
        return list(device_names)

    def cancel_edit(self, machine: str) -> None:
        self.cancelled.append(machine)

    def set_owner_tag(self, device_names: list[str], tag: str) -> None:
        self.tag_calls.append(("tag", tag, tuple(device_names)))
        self._maybe_fail("tag")
        for d in device_names:
            self.by(d).owner_tag = tag

    def clear_owner_tag(self, device_names: list[str], *, only_if: str | None = None) -> None:
        self.tag_calls.append(("untag", only_if or "", tuple(device_names)))
        for d in device_names:
            if only_if is None or self.by(d).owner_tag == only_if:
                self.by(d).owner_tag = None

    def close(self) -> None:
        pass

    def attached(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for g in self.gpu_list:
            if g.machine:
                out.setdefault(g.machine, []).append(g.name)
        return {k: sorted(v) for k, v in out.items()}


@dataclass
class FakeKube:
    """Nodes and pods as JSON dicts, with the composer's read and write calls."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    pools: dict[str, str] = field(default_factory=dict)
    events: list[EventSpec] = field(default_factory=list)
    writes: list[tuple[str, str, Any]] = field(default_factory=list)
    plugin_restarts: list[str] = field(default_factory=list)
    #: (node, label selector) of every pod deletion by selector (device plugin, mig-manager)
    pod_restarts: list[tuple[str, str]] = field(default_factory=list)
    #: pods to "appear" on a node when gpu_pods_on_node is called (a race during reclaim)
    late_pods: dict[str, list[str]] = field(default_factory=dict)
    #: ``count`` of each series Event object, by its name
    event_counts: dict[str, int] = field(default_factory=dict)
    #: ConfigMaps' data by ``namespace/name``
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)

    def add_node(self, n: dict[str, Any]) -> None:
        self.nodes[n["metadata"]["name"]] = n

    def add_pod(self, p: dict[str, Any]) -> None:
        self.pods[f"{p['metadata']['namespace']}/{p['metadata']['name']}"] = p

    # reads
    def list_pods(self) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(p)
            for p in self.pods.values()
            if p["status"]["phase"] not in ("Succeeded", "Failed")
        ]

    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        """Nodes matching ``label_selector``: comma-separated ``key``, ``key=value`` and
        ``key!=value`` terms, as the API server reads them."""
        return [copy.deepcopy(n) for n in self.nodes.values()
                if _selects(label_selector, n["metadata"].get("labels") or {})]

    def namespace_pools(self) -> dict[str, str]:
        return dict(self.pools)

    def gpu_pods_on_node(self, node_name: str) -> list[str]:
        late = self.late_pods.pop(node_name, [])
        views = [pod_view(p) for p in self.pods.values()]
        bound = [v.key for v in views if v.node_name == node_name and v.wants_gpu and not v.terminal]
        return bound + late

    # writes
    def _written(self, node_name: str) -> dict[str, Any]:
        """Bump the node's resourceVersion (as the API server does) and answer a copy."""
        meta = self.nodes[node_name]["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        return copy.deepcopy(self.nodes[node_name])

    def _patch_metadata(
        self, node_name: str, field: str, changes: Mapping[str, str | None]
    ) -> dict[str, Any]:
        """A JSON merge patch of the node's ``metadata.<field>`` (None deletes), recorded in
        ``writes`` as ``(field, node, changes)``."""
        self.writes.append((field, node_name, dict(changes)))
        meta = self.nodes[node_name]["metadata"].setdefault(field, {})
        for k, v in changes.items():
            if v is None:
                meta.pop(k, None)
            else:
                meta[k] = v
        return self._written(node_name)

    def patch_node_annotations(self, node_name: str, changes: Mapping[str, str | None]) -> dict[str, Any]:
        return self._patch_metadata(node_name, "annotations", changes)

    def patch_node_labels(self, node_name: str, changes: Mapping[str, str | None]) -> dict[str, Any]:
        return self._patch_metadata(node_name, "labels", changes)

    def set_taint(self, node_name: str, taint: Taint, present: bool) -> dict[str, Any]:
        self.writes.append(("taint", node_name, present))
        taints = [t for t in self.nodes[node_name]["spec"].get("taints") or [] if t["key"] != taint.key]
        if present:
            taints.append({"key": taint.key, "value": taint.value, "effect": taint.effect})
        self.nodes[node_name]["spec"]["taints"] = taints
        return self._written(node_name)

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> dict[str, Any]:
        """RFC 6902 patch, all-or-nothing like the API server (a failed ``test`` -> 422)."""
        from composer.shell.kube import KubeError

        key = f"{namespace}/{name}"
        self.writes.append(("pod", key, patch))
        if key not in self.pods:
            raise KubeError("PATCH", f"{key}", 404, "not found")
        try:
            self.pods[key] = jsonpatch.apply_patch(self.pods[key], patch)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise KubeError("PATCH", f"{key}", 422, str(exc)) from exc
        meta = self.pods[key]["metadata"]  # the API server bumps resourceVersion on every write
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        return copy.deepcopy(self.pods[key])

    def nominate_pod(self, namespace: str, name: str, node: str | None) -> None:
        """Merge-patch ``status.nominatedNodeName`` (None clears it); 404 for a missing pod."""
        from composer.shell.kube import KubeError

        key = f"{namespace}/{name}"
        self.writes.append(("nominate", key, node))
        if key not in self.pods:
            raise KubeError("PATCH", f"{key}/status", 404, "not found")
        status = self.pods[key]["status"]
        if node is None:
            status.pop("nominatedNodeName", None)
        else:
            status["nominatedNodeName"] = node

    def restart_daemonset_pods(self, node_name: str, namespace: str, selector: str) -> list[str]:
        self.pod_restarts.append((node_name, selector))
        if selector != "app=nvidia-device-plugin-daemonset":
            return [f"{selector.split('=')[-1]}-{node_name}"]
        self.plugin_restarts.append(node_name)
        return [f"nvidia-device-plugin-{node_name}"]

    def create_event(self, ev: EventSpec) -> None:
        """As the API server holds Events: a repeated ``series`` Event (same object, type and
        reason, :func:`composer.shell.kube.series_name`) adds to the one object's count in
        ``event_counts`` instead of appending to ``events``."""
        from composer.shell.kube import series_name

        if ev.series:
            name = series_name(ev)
            self.event_counts[name] = self.event_counts.get(name, 0) + 1
            if self.event_counts[name] > 1:
                return
        self.events.append(ev)

    def event_count(self, ev: EventSpec) -> int:
        """The ``count`` of the Event object ``ev`` was recorded as (1 for a non-series Event)."""
        from composer.shell.kube import series_name

        return self.event_counts.get(series_name(ev), 0) if ev.series else 1

    def read_configmap_data(self, namespace: str, name: str) -> dict[str, str] | None:
        data = self.configmaps.get(f"{namespace}/{name}")
        return None if data is None else dict(data)

    def write_configmap_data(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None:
        self.writes.append(("configmap", f"{namespace}/{name}", dict(data)))
        cm = self.configmaps.setdefault(f"{namespace}/{name}", {})
        for k, v in data.items():
            if v is None:
                cm.pop(k, None)
            else:
                cm[k] = v

    def node_exists(self, node_name: str) -> bool:
        return node_name in self.nodes

    # helpers
    def record(self, node_name: str) -> ann.NodeRecord:
        return ann.decode(self.nodes[node_name]["metadata"].get("annotations"))

    def intents_json(self, node_name: str) -> dict[str, Any]:
        return json.loads(self.nodes[node_name]["metadata"]["annotations"].get(ann.INTENTS) or "{}")

    def reasons(self, name: str) -> list[str]:
        return [e.reason for e in self.events if e.name == name]


@dataclass
class FakeWorld:
    """Kubernetes + Director fakes, with the GPU Operator's and scheduler's parts."""

    kube: FakeKube
    fabric: FakeFabric

    def agent_step(self) -> None:
        """Advertise on every node exactly what the Director has attached to it."""
        att = self.fabric.attached()
        for name, n in self.kube.nodes.items():
            gpus = att.get(name, [])
            for key in ("allocatable", "capacity"):
                if gpus:
                    n["status"][key]["nvidia.com/gpu"] = str(len(gpus))
                else:
                    n["status"][key].pop("nvidia.com/gpu", None)
            labels = n["metadata"]["labels"]
            if gpus:
                labels["nvidia.com/gpu.product"] = self.fabric.by(gpus[0]).model
                labels["nvidia.com/gpu.count"] = str(len(gpus))
            else:
                labels.pop("nvidia.com/gpu.product", None)
                labels.pop("nvidia.com/gpu.count", None)

    def schedule(self) -> None:
        """Bind each pending GPU pod (not gated, in name order) to the first node by name that
        advertises enough free GPUs and matches its selector.

        GPUs of pods bound to a node are used; so are those of pods nominated onto it
        (``status.nominatedNodeName``, gated or not) of equal or higher priority than the pod
        being placed, as kube-scheduler's filter counts them (k8s.io/kubernetes v1.34.4
        ``pkg/scheduler/framework/runtime/framework.go``, ``addGENominatedPods``)."""
        for _, p in sorted(self.kube.pods.items()):
            v = pod_view(p)
            if v.node_name or not v.wants_gpu or v.gates or v.phase != "Pending":
                continue
            want = v.gpu.get("nvidia.com/gpu", 0)
            prio = p["spec"].get("priority") or 0
            for name, n in sorted(self.kube.nodes.items()):
                if any(t["key"] == ann.RECLAIM_TAINT_KEY for t in n["spec"].get("taints") or []):
                    continue
                if v.constraints.hosts and name not in v.constraints.hosts:
                    continue
                if v.constraints.models and n["metadata"]["labels"].get("nvidia.com/gpu.product") not in (
                    v.constraints.models
                ):
                    continue
                used = sum(
                    pod_view(q).gpu.get("nvidia.com/gpu", 0)
                    for q in self.kube.pods.values()
                    if q["spec"].get("nodeName") == name
                    or (
                        not q["spec"].get("nodeName")
                        and q["status"].get("nominatedNodeName") == name
                        and q is not p
                        and (q["spec"].get("priority") or 0) >= prio
                    )
                )
                if int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) - used >= want:
                    p["spec"]["nodeName"] = name
                    p["status"] = {"phase": "Running", "conditions": []}
                    break

    def finish(self, key: str) -> None:
        """The pod completes (phase Succeeded)."""
        self.kube.pods[key]["status"]["phase"] = "Succeeded"


def probe_at_first_change(fabric: Any, probe: Callable[[str], object]) -> None:
    """Wrap ``fabric.compose`` so that ``probe(machine)`` runs at the compose's first change on
    the Director (right after its ``before_change``): what was durable by then."""
    real = fabric.compose

    def compose(machine: str, names: Any, *, before_change: Callable[[], object] | None = None,
                **kw: Any) -> None:
        def first_change() -> None:
            if before_change is not None:
                before_change()
            probe(machine)

        real(machine, names, before_change=first_change, **kw)

    fabric.compose = compose


class Clock:
    """A settable clock (seconds since the epoch) for the controller and its executor."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def tick(self, s: float) -> None:
        self.t += s


def _selects(selector: str, labels: dict[str, str]) -> bool:
    """Whether ``labels`` match the label selector's ``key``, ``key=value`` and ``key!=value``
    terms (the equality-based selectors of the Kubernetes API)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key) != value.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True
