"""The GPU-Operator stand-in's logic (lab only; see the package docstring).

:class:`DirectorReader` reads which GPUs each machine holds (LIQID REST API, see docs/domain.md
"LIQID Director REST API": envelope ``{"response": {"code", "errors", "data"}}``,
``GET device/info/gpu`` for the model, ``GET predevice?dev_type=gpu&grp_id=`` per group for the
machine holding each GPU).
:class:`GpuAgent` reflects that into Nodes, one :meth:`GpuAgent.step` per poll.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import requests
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.informer import ADDED, DELETED, MODIFIED, SharedInformer, _meta_namespace_key

from domain import labels
from domain.gfd import gfd_product_name
from domain.labels import MIG_CONFIG_STATE_LABEL, MIG_PENDING, MIG_SUCCESS
from lab.gpu_agent.device_files import DeviceFiles
from lab.gpu_agent.nvidia import (
    VM_PASSTHROUGH,
    MigStrategy,
    NodeView,
    PluginConfig,
    node_view,
    passthrough_view,
)

log = logging.getLogger("lab.gpu_agent")

GPU = labels.GPU_RESOURCE
PRODUCT = labels.PRODUCT_LABEL
COUNT = labels.COUNT_LABEL
PRESENT = labels.PRESENT_LABEL
PLUGIN_CONFIG = labels.DEVICE_PLUGIN_CONFIG_LABEL
MIG_CONFIG = labels.MIG_CONFIG_LABEL
WORKLOAD = labels.GPU_WORKLOAD_LABEL
MIG_FAILED = "failed"
MERGE = "application/merge-patch+json"
PLUGIN_NAMESPACE = "gpu-operator"
PLUGIN_LABELS = {"app": "nvidia-device-plugin-daemonset"}
#: The GPU Operator's mig-manager DaemonSet pods
#: (gpu-operator ``assets/state-mig-manager/0600_daemonset.yaml``).
MIG_MANAGER_LABELS = {"app": "nvidia-mig-manager"}


class DirectorReadError(RuntimeError):
    """The Director could not be read (message: method, path, status or transport error)."""


@dataclass(frozen=True)
class AttachedGpu:
    """A GPU attached to a machine: its Director name (``GPU_7``) and GFD product name."""

    name: str
    product: str


def products(attached: Mapping[str, list[AttachedGpu]]) -> dict[str, list[str]]:
    """Machine -> the product names of its GPUs, in the same order."""
    return {m: [g.product for g in gpus] for m, gpus in attached.items()}


class DirectorReader:
    """Reads machine -> attached GPU models from a Director over its REST API (HTTP Basic).

    Args:
        base_url: ``http://host:port`` of the Director.
        username / password: credentials.
        timeout_seconds: per-request timeout.
    """

    def __init__(self, base_url: str, *, username: str, password: str, timeout_seconds: float = 5.0) -> None:
        self.root = base_url.rstrip("/") + "/liqid/api/v2/"
        self.session = requests.Session()
        self.session.auth = (username, password)
        self.timeout = timeout_seconds
        self._models: dict[str, str] = {}

    def _get(self, path: str, **params: str) -> list[dict[str, Any]]:
        try:
            r = self.session.get(self.root + path, params=params, timeout=self.timeout)
        except requests.RequestException as exc:
            raise DirectorReadError(f"GET {path}: {type(exc).__name__}") from exc
        if r.status_code != 200:
            raise DirectorReadError(f"GET {path} -> HTTP {r.status_code}")
        body = (r.json() or {}).get("response") or {}
        if body.get("code") or body.get("errors"):
            raise DirectorReadError(f"GET {path}: {body.get('errors')}")
        return list(body.get("data") or [])

    def attached_gpus(self) -> dict[str, list[AttachedGpu]]:
        """Machine name -> the GPUs attached to it (Director name and GFD product name).

        ``GET group``, then one ``GET predevice?grp_id=`` per group (the Director wants
        ``grp_id``; ``mname`` is ``"n/a"`` for a device not on a machine, liqidinc/liqidsdk-java
        ``PreDevice.java:136-171``); ``GET device/info/gpu`` (the models) only when a GPU
        name not seen before shows up (a GPU's model does not change while it is installed).
        """
        out: dict[str, list[AttachedGpu]] = {}
        held = [
            p
            for g in self._get("group")
            for p in self._get("predevice", dev_type="gpu", grp_id=str(g["grp_id"]))
            if p.get("mname") not in (None, "", "n/a")  # "n/a": in the group's free pool
        ]
        if any(p["name"] not in self._models for p in held):
            self._models = {
                i["name"]: gfd_product_name(i.get("model") or "") for i in self._get("device/info/gpu")
            }
        for p in held:
            gpu = AttachedGpu(p["name"], self._models.get(p["name"], "unknown"))
            out.setdefault(p["mname"], []).append(gpu)
        return out

    def attached(self) -> dict[str, list[str]]:
        """Machine name -> GFD product names of the GPUs attached to it (one per GPU); one
        :meth:`attached_gpus` read."""
        return products(self.attached_gpus())

    def close(self) -> None:
        """Close the HTTP session."""
        self.session.close()


@dataclass(frozen=True)
class Advert:
    """What a node should advertise: GPU count and product (None when it has none)."""

    count: int = 0
    product: str | None = None


def advert_for(models: list[str]) -> Advert:
    """The advertisement for a machine's GPU models (GFD labels the most common one)."""
    if not models:
        return Advert()
    product = max(sorted(set(models)), key=models.count)
    return Advert(len(models), product)


def current_advert(node: Mapping[str, Any]) -> Advert:
    """What a Node advertises now: capacity ``nvidia.com/gpu``, else (a node served through DRA,
    which has no such capacity) GFD's ``nvidia.com/gpu.count`` label; and the product label."""
    cap = (node.get("status") or {}).get("capacity") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    try:
        count = int(cap.get(GPU) or labels.get(COUNT) or 0)
    except ValueError:
        count = 0
    return Advert(count, labels.get(PRODUCT) if count else None)


#: A node's ``nvidia.com/device-plugin.config``, ``nvidia.com/mig.config`` and
#: ``nvidia.com/gpu.workload.config`` labels.
Selection = tuple[str | None, str | None, str | None]


def selection(node: Mapping[str, Any]) -> Selection:
    """The node's ``nvidia.com/device-plugin.config``, ``nvidia.com/mig.config`` and
    ``nvidia.com/gpu.workload.config`` labels."""
    lbl = (node.get("metadata") or {}).get("labels") or {}
    return lbl.get(PLUGIN_CONFIG), lbl.get(MIG_CONFIG), lbl.get(WORKLOAD)


@dataclass(frozen=True)
class MigState:
    """The stand-in mig-manager's work on one node.

    Attributes:
        config: the ``nvidia.com/mig.config`` value it last ran for.
        partitioned: GPUs its last run partitioned.
        state: ``pending``, ``success`` or ``failed`` (the ``nvidia.com/mig.config.state`` label).
        started: when the last run started (clock seconds).
    """

    config: str
    partitioned: int = 0
    state: str = MIG_PENDING
    started: float = 0.0


class NodeAdverts:
    """What each Node advertises now, kept by a watch (the client's ``SharedInformer``), so a
    poll does not list every Node (1,000 nodes: ~0.2 s of API time per poll otherwise).

    Args:
        api: ApiClient of the lab cluster.
        label_selector: the Nodes to follow ("" = all).
    """

    def __init__(self, api: client.ApiClient, label_selector: str = "") -> None:
        self._lock = threading.Lock()
        self._adverts: dict[str, Advert] = {}
        self._selections: dict[str, Selection] = {}
        list_node = client.CoreV1Api(api).list_node

        def listing(**kw: Any) -> Any:
            # Plain JSON, no model objects: the list is read undecoded and the Watch is told
            # (by the docstring line below) to deserialize events into ``object``, a dict.
            if kw.get("watch"):
                return list_node(**kw)
            body = json.loads(list_node(_preload_content=False, **kw).data)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            meta = SimpleNamespace(resource_version=rv)
            return SimpleNamespace(items=body.get("items") or [], metadata=meta)

        listing.__doc__ = ":rtype: object"
        self._informer = SharedInformer(listing, label_selector=label_selector or None)
        self._informer.add_event_handler(ADDED, self._put)
        self._informer.add_event_handler(MODIFIED, self._put)
        self._informer.add_event_handler(DELETED, self._delete)

    def _put(self, raw: Any) -> None:
        with self._lock:
            self._adverts[raw["metadata"]["name"]] = current_advert(raw)
            self._selections[raw["metadata"]["name"]] = selection(raw)

    def _delete(self, obj: Any) -> None:
        with self._lock:
            self._adverts.pop(_meta_namespace_key(obj), None)  # a Node's key is its name
            self._selections.pop(_meta_namespace_key(obj), None)

    def selections(self) -> dict[str, Selection]:
        """Node name -> its device-plugin, MIG and workload config labels (:func:`selection`), a copy."""
        with self._lock:
            return dict(self._selections)

    def __call__(self) -> dict[str, Advert]:
        """Node name -> its current advert (a copy)."""
        with self._lock:
            return dict(self._adverts)

    def start(self) -> None:
        """Start watching."""
        self._informer.start()

    def stop(self) -> None:
        """Stop watching."""
        self._informer.stop()


@dataclass
class GpuAgent:
    """Reflects the Director's attachments into Nodes (lab stand-in for the GPU Operator).

    Attributes:
        core: CoreV1Api of the lab cluster (admin).
        director: where attachments are read.
        node_selector: label selector of the Nodes to manage ("" = all).
        advertise_delay_seconds: how long after the Director shows a change the node
            advertises it (the GPU Operator's reaction time).
        plugin_restart_quirk: more GPUs are advertised only after the node's device-plugin
            pod was (re)created after they appeared.
        plugin_configs: sharing mode when set: device-plugin config name -> its config
            (:func:`lab.gpu_agent.nvidia.parse_plugin_config`), the one a node's
            ``nvidia.com/device-plugin.config`` label names (else ``default_config``) decides what
            the node advertises (:func:`lab.gpu_agent.nvidia.node_view`). None: whole GPUs only,
            GFD's product, count and present labels.
        default_config: the config of a node without the label (the GPU Operator's
            ``devicePlugin.config.default``); None: no sharing there.
        mig_strategy: the cluster's MIG strategy (ClusterPolicy ``mig.strategy``, given to the
            device plugin and GFD as ``MIG_STRATEGY``, winning over a config's
            ``flags.migStrategy``); None: each config's own.
        mig_layouts: mig-parted config name -> GPU product -> profile -> MIG devices per GPU.
        mig_apply_seconds: how long a mig-parted run takes (``nvidia.com/mig.config.state``
            ``pending`` that long, then ``success``).
            The stand-in mig-manager keeps one fake pod per node with a ``nvidia.com/mig.config``
            (``nvidia-mig-manager-<node>`` in ``plugin_namespace``, label
            ``app=nvidia-mig-manager``, recreated when deleted, as its DaemonSet would) and, like
            mig-manager v0.12.1, runs mig-parted when that pod starts and when the label changes,
            never on a hot-plug (``cmd/nvidia-mig-manager/main.go``: ``start`` applies the label
            the informer's add handler read, ``ContinuouslySyncMigConfigChanges`` updates it only
            on a change). A GPU hot-plugged onto a MIG node stays whole until something restarts
            that pod (the composer does).
        dra: the node's GPUs reach pods through DRA (NVIDIA's DRA driver takes the device
            plugin's place): only GFD's labels are written, no ``nvidia.com/gpu`` capacity (the
            scheduler sends ``nvidia.com/gpu`` requests to DRA only where that capacity is 0).
        passthrough_resources: GPU product -> the sandbox device plugin's resource for it (the
            catalogue's ``passthrough_resource``); when set (sharing mode), a node labelled
            ``nvidia.com/gpu.workload.config=vm-passthrough`` advertises its GPUs under it and
            nothing else (:func:`lab.gpu_agent.nvidia.passthrough_view`). Empty: such a node is
            served like any other.
        plugin_namespace: namespace of the fake device-plugin pods (quirk mode) and mig-manager
            pods.
        clock: monotonic seconds.
        adverts: node name -> current advert (e.g. a :class:`NodeAdverts`); None = list the
            Nodes every poll.
        device_files: when set, each poll also keeps a device file per attached GPU under its
            root (:class:`lab.gpu_agent.device_files.DeviceFiles`), at once (not after the
            advertise delay), for every machine the Director names, whatever the node selector.
    """

    core: client.CoreV1Api
    director: DirectorReader
    node_selector: str = ""
    advertise_delay_seconds: float = 1.0
    plugin_restart_quirk: bool = False
    plugin_configs: Mapping[str, PluginConfig] | None = None
    default_config: str | None = None
    mig_strategy: MigStrategy | None = None
    mig_layouts: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    mig_apply_seconds: float = 1.0
    dra: bool = False
    passthrough_resources: Mapping[str, str] = field(default_factory=dict)
    plugin_namespace: str = PLUGIN_NAMESPACE
    clock: Callable[[], float] = time.monotonic
    adverts: Callable[[], Mapping[str, Advert]] | None = None
    device_files: DeviceFiles | None = None
    _seen: dict[str, tuple[Advert, float]] = field(default_factory=dict)
    _plugin_started: dict[str, float] = field(default_factory=dict)
    _mig_manager_started: dict[str, float] = field(default_factory=dict)
    _physical: dict[str, Advert] = field(default_factory=dict)
    _views: dict[str, NodeView] = field(default_factory=dict)
    _mig: dict[str, MigState] = field(default_factory=dict)

    def step(self) -> dict[str, Advert]:
        """One poll: read the Director and the Nodes, patch what is due. Returns node -> advert
        applied in this step."""
        gpus = self.director.attached_gpus()
        if self.device_files is not None:
            self.device_files.sync({m: [g.name for g in gs] for m, gs in gpus.items()})
        attached = products(gpus)
        applied: dict[str, Advert] = {}
        now = self.clock()
        current = self._current()
        names: Iterable[str] = current
        if not self.plugin_restart_quirk:  # only a node with GPUs (had or to have) can change
            # (in sharing mode a node's GPUs may show under none of GFD's labels: passthrough)
            names = [n for n in current if n in attached or n in self._seen or current[n].count
                     or (n in self._physical and self._physical[n].count)]
        for name in names:
            have = current[name] if self.plugin_configs is None else self._physical.get(name, Advert())
            if self.plugin_restart_quirk:
                self._ensure_pod(name, now, PLUGIN_LABELS, self._plugin_started)
            want = advert_for(attached.get(name, []))
            if want == have:
                self._seen.pop(name, None)
                continue
            seen = self._seen.get(name)
            if seen is None or seen[0] != want:
                self._seen[name] = seen = (want, now)
            if now - seen[1] < self.advertise_delay_seconds:
                continue
            if (
                self.plugin_restart_quirk
                and want.count > have.count
                and self._plugin_started.get(name, 0.0) <= seen[1]
            ):
                continue  # hot-plugged GPUs wait for a device-plugin restart
            self._apply(name, want)
            self._seen.pop(name, None)
            applied[name] = want
        if self.plugin_configs is not None:
            self._share(now)
        return applied

    def next_due(self, interval: float) -> float:
        """Seconds to wait before the next :meth:`step`: ``interval``, or less when a change
        seen earlier becomes due sooner (so a node advertises ``advertise_delay_seconds`` after
        the change was seen, not up to one poll ``interval`` later). A change already due that
        the last step held back (the device-plugin quirk) waits a whole ``interval``."""
        now = self.clock()
        due = [seen + self.advertise_delay_seconds - now for _, seen in self._seen.values()]
        return min([interval, *(d for d in due if d > 0)])

    def _current(self) -> Mapping[str, Advert]:
        if self.adverts is not None:
            return self.adverts()
        nodes = self.core.list_node(label_selector=self.node_selector or None, _preload_content=False)
        return {n["metadata"]["name"]: current_advert(n) for n in json.loads(nodes.data)["items"]}

    def _apply(self, node: str, a: Advert) -> None:
        if self.plugin_configs is not None:  # sharing mode: :meth:`_share` writes the node
            self._physical[node] = a
            return
        value: str | None = str(a.count) if a.count else None
        resources: dict[str, str | None] = {GPU: value}
        if not self.dra:
            self.core.patch_node_status(
                node, {"status": {"capacity": resources, "allocatable": resources}}, _content_type=MERGE
            )
        labels = {PRODUCT: a.product, COUNT: value, PRESENT: "true" if a.count else None}
        self.core.patch_node(node, {"metadata": {"labels": labels}}, _content_type=MERGE)
        log.info("node %s advertises %d GPU(s) %s", node, a.count, a.product or "")

    def _selections(self) -> Mapping[str, Selection]:
        if isinstance(self.adverts, NodeAdverts):
            return self.adverts.selections()
        nodes = self.core.list_node(label_selector=self.node_selector or None, _preload_content=False)
        return {n["metadata"]["name"]: selection(n) for n in json.loads(nodes.data)["items"]}

    def _share(self, now: float) -> None:
        """Sharing mode: run the stand-in mig-manager, then write each node's resources and labels
        as the device plugin and GFD would (:func:`lab.gpu_agent.nvidia.node_view`); a node labelled
        ``nvidia.com/gpu.workload.config=vm-passthrough`` as the sandbox device plugin would
        (:func:`lab.gpu_agent.nvidia.passthrough_view`)."""
        assert self.plugin_configs is not None
        for name, (config_name, mig_config, workload) in self._selections().items():
            a = self._physical.get(name, Advert())
            if workload == VM_PASSTHROUGH and self.passthrough_resources:
                self._write(name, passthrough_view(
                    gpus=a.count, resource=self.passthrough_resources.get(a.product or "")))
                continue
            mig = self._run_mig_manager(name, mig_config, a, now)
            config = self.plugin_configs.get(config_name or self.default_config or "", PluginConfig())
            if self.mig_strategy is not None:
                config = replace(config, mig_strategy=self.mig_strategy)
            view = NodeView()
            if a.count and a.product:
                layout = self.mig_layouts.get(mig.config, {}).get(a.product) if mig else None
                partitioned = mig.partitioned if mig and mig.state == MIG_SUCCESS else 0
                view = node_view(gpus=a.count, product=a.product, config=config, mig_layout=layout,
                                 partitioned=partitioned)
                view = NodeView(view.resources, {**view.labels, PRESENT: "true"})
            if mig is not None and mig.state == MIG_PENDING and name in self._views:
                view = self._views[name]  # mig-manager has paused the device plugin and GFD
            if mig is not None:
                view = NodeView(view.resources, {**view.labels, MIG_CONFIG_STATE_LABEL: mig.state})
            self._write(name, view)

    def _run_mig_manager(self, node: str, config: str | None, a: Advert, now: float) -> MigState | None:
        """The node's mig-manager state after this poll: a run starts (``pending``) when the
        node's ``nvidia.com/mig.config`` is first seen or changes, or its mig-manager pod
        started after the last run started, and ends ``mig_apply_seconds`` later: ``success``
        with every GPU partitioned, or ``failed`` when the config has no layout for the node's
        product (mig-parted v0.12.1 ``reconfigure-mig.sh``)."""
        st = self._mig.get(node)
        if config is None:
            self._mig.pop(node, None)
            return None
        started = self._ensure_pod(node, now, MIG_MANAGER_LABELS, self._mig_manager_started)
        if st is None or st.config != config or (st.state != MIG_PENDING and started > st.started):
            st = MigState(config, st.partitioned if st else 0, MIG_PENDING, now)
        elif st.state == MIG_PENDING and now - st.started >= self.mig_apply_seconds:
            known = a.product is not None and a.product in self.mig_layouts.get(config, {})
            done = MIG_SUCCESS if known or not a.count else MIG_FAILED
            st = MigState(config, a.count if known else 0, done, st.started)
        self._mig[node] = st
        return st

    def _write(self, node: str, view: NodeView) -> None:
        """Patch what differs from the view last written (keys no longer in it removed)."""
        old = self._views.get(node)
        if old == view:
            return
        before = old or NodeView()
        res: dict[str, str | None] = {k: None for k in before.resources if k not in view.resources}
        res |= {k: str(v) for k, v in view.resources.items()}
        if old is None:  # first write since the stand-in started: clear whole-GPU capacity too
            res.setdefault(GPU, None)
        lbl: dict[str, str | None] = {k: None for k in before.labels if k not in view.labels}
        lbl |= dict(view.labels)
        if old is None:
            for k in (PRODUCT, COUNT, PRESENT):
                lbl.setdefault(k, None)
        if res and (old is None or dict(old.resources) != dict(view.resources)):
            self.core.patch_node_status(node, {"status": {"capacity": res, "allocatable": res}},
                                        _content_type=MERGE)
        if lbl and (old is None or dict(old.labels) != dict(view.labels)):
            self.core.patch_node(node, {"metadata": {"labels": lbl}}, _content_type=MERGE)
        self._views[node] = view
        log.info("node %s: %s", node, dict(view.resources) or "no GPUs")

    def _ensure_pod(
        self, node: str, now: float, labels: Mapping[str, str], started: dict[str, float]
    ) -> float:
        """Keep ``node``'s fake GPU Operator pod of ``labels`` (``<app>-<node>`` in
        ``plugin_namespace``) as its DaemonSet would: recreate it when gone, recording the time
        in ``started``. Returns when it last started (``now`` if first seen this run)."""
        app = labels["app"].removesuffix("-daemonset")
        name = f"{app}-{node}"
        try:
            self.core.read_namespaced_pod(name, self.plugin_namespace)
            return started.setdefault(node, now)
        except ApiException as exc:
            if exc.status != 404:
                raise
        try:
            self.core.read_namespace(self.plugin_namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.core.create_namespace({"metadata": {"name": self.plugin_namespace}})
        body = {
            "metadata": {"name": name, "namespace": self.plugin_namespace, "labels": dict(labels)},
            "spec": {
                "nodeName": node,
                "containers": [{"name": app, "image": f"nvcr.io/nvidia/{app}:stand-in"}],
                "tolerations": [{"operator": "Exists"}],
            },
        }
        try:
            self.core.create_namespaced_pod(self.plugin_namespace, body)
        except ApiException as exc:
            if exc.status != 409:  # still terminating: try again next poll
                raise
            return started.get(node, 0.0)
        started[node] = now
        log.info("%s pod for %s (re)created", app, node)
        return now
