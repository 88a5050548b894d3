"""Part 2: reaction time on the lab, composer vs a periodic-scan baseline.

For each fleet size N (10, 100, 1,000 kwok Nodes ``blade-slot-1..N``) the benchmark starts an
isolated control plane (:mod:`bench.labctl`), then per mode (:data:`MODES`: ``plain`` and
``gating`` = ``python -m composer`` in device-plugin mode without and with the gating webhook,
``dra`` = ``python -m composer --mode dra``, ``baseline`` = ``python -m bench.baseline``, the
same code on a 10 s scan grid):

1. the Director simulator with a tap (:mod:`bench.director_tap`) on a free port, loaded with a
   generated inventory (:func:`inventory`: N machines, ``max(N, pods + 8)`` Tesla T4 in the
   system free pool, 16 per PCIe switch) and a fixed hot-plug latency ``L`` per reprogram;
2. the GPU-Operator stand-in (``python -m lab.gpu_agent``) polling every ``agent_interval``
   (0.1 s: the stand-in's polling jitter is not the composer's overhead, so it is kept small; a
   poll is one ``GET predevice``, Nodes come from a watch) and advertising a change
   ``D`` = ``advertise_delay`` after it first sees it on the Director (with ``--dra`` in DRA
   mode: GFD's labels only, no ``nvidia.com/gpu`` allocatable);
3. the controller (admin kubeconfig, no leader election, ``--max-gpus-per-node 8``);
4. ``pods`` pods of one ``nvidia.com/gpu`` each, created with seeded exponential gaps (mean
   ``mean_interarrival``), then waits until all run (bounded by ``settle_timeout``).

Each composer run is made with the pod-gating admission webhook off and on (``gating`` in the
run's config): on, the composer serves the webhook over HTTPS on 127.0.0.1 and the chart's
``templates/webhook.yaml`` (rendered with ``webhook.url``) registers it with the API server, so
every pod is created gated and released by the composer onto its reserved GPUs.

In DRA mode (``dra`` in the run's config) the composer is the DRA driver ``gpu.composer.liqid.io``
(``docs/dra.md``): no webhook; the same unmodified pods ask ``nvidia.com/gpu``, which the
scheduler serves through the DeviceClass's extended resource: it allocates one of the driver's
devices and waits in PreBind until the composer sets the binding conditions. After the run the
driver's ResourceSlices and DeviceClass are deleted, so the next mode on the same control plane
sees no extended-resource class.

Timestamps (``time.time()`` on this machine, one clock for every process): ``submitted`` (just
before the pod is created: the pod's creation), ``unschedulable``
(the pod watch first sees ``PodScheduled=False, reason Unschedulable``), ``gate_removed`` (the pod
watch first sees a pod that was gated without gates), ``intent`` (the node
watch first sees the pod's UID in the node annotation ``composer.liqid.io/intents``, written
just before the Director is called), ``issued`` (the Director receives ``POST fabric/edit`` for
that node), ``attached`` (the Director answers ``POST fabric/reprogram``), ``advertised`` (the
node's allocatable ``nvidia.com/gpu`` changes; in DRA mode its label ``nvidia.com/gpu.count``),
``bound`` (``spec.nodeName`` set), ``running`` (phase Running); in DRA mode also ``allocated``,
``prebind`` and ``visible`` (:mod:`bench.dra_times`), and the intent is the claim's (the
composer keys its intents by claim UID in DRA mode).

Derived per pod (seconds), every mode from the pod's creation (a gated pod is never
unschedulable): ``to_issue`` = issued - submitted (the composer alone),
``to_running`` = running - submitted, ``overhead`` = to_running - L - D (everything that is
not the simulated hardware: the composer, the Director call beyond ``L``, the agent's polling,
the scheduler and kwok), and the breakdown ``director`` = attached - issued,
``advertise`` = advertised - attached, ``schedule`` = bound - advertised,
``start`` = running - bound; in DRA mode also ``to_allocated``, ``visible_lag``,
``prebind_wait``, ``poll_wait``, ``after_poll`` and ``overhead_beyond_poll`` (defined in
:mod:`bench.dra_times`).
GPUs taken by another pod: the composer's ``composer_gpus_taken_by_another_pod_total`` in
device-plugin mode, :func:`bench.dra_times.taken_by_another` in DRA mode.

Each run also records ``load``: the machine's 1-minute load average sampled every 5 s from the
first pod's creation until all run (:class:`bench.machine.LoadSampler`); each gated run records
``wait_steps``: every gated pod's wait from creation to compose sent, split into steps from the
bench's create call, the composer's ``pod-step`` log lines and the Director tap
(:mod:`bench.wait_steps`).
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import requests
import yaml

from bench import dra_times
from bench.labctl import free_port, isolated_control_plane
from bench.machine import LoadSampler, commit
from bench.pod_times import PodTimes, span, summarize
from lab.scenario import local_gating_webhook, webhook_flags

ROOT = Path(__file__).resolve().parents[1]
#: The code this part measures: a change under these paths makes its run "dirty".
REACTION_PATHS = ("composer", "bench", "charts")
SIM_USER, SIM_PASSWORD = "admin", "bench-director-password"
INTENTS = "composer.liqid.io/intents"
GPU = "nvidia.com/gpu"
#: cluster-autoscaler's published scalability SLO (unschedulable -> scale-up decision).
#: The modes measured per fleet size and workload, in run order (see the module docstring); DRA
#: mode runs after device-plugin mode's, whose pods it would otherwise serve through the
#: DeviceClass it leaves until its clean-up.
MODES = ("plain", "gating", "dra", "baseline")
CA_SLO = {
    "max_seconds": 60,
    "average_seconds": 15,
    "nodes": "100-1000",
    "source": "kubernetes/autoscaler cluster-autoscaler FAQ, 'What are the Service Level "
    "Objectives for Cluster Autoscaler?'",
}


@dataclass(frozen=True)
class ReactionConfig:
    """One run's settings (seconds unless named otherwise)."""

    nodes: int
    pods: int
    mean_interarrival: float = 1.5
    hotplug_latency: float = 2.0
    advertise_delay: float = 1.0
    agent_interval: float = 0.1
    max_gpus_per_node: int = 8
    scan_interval: float = 10.0
    settle_timeout: float = 60.0
    seed: int = 7
    workload: str = "pinned"
    gating: bool = False
    dra: bool = False


def inventory(nodes: Sequence[str], gpus: int, *, per_switch: int = 16) -> dict[str, Any]:
    """A Director-simulator inventory (``lab.director_sim.inventory`` shape): ``nodes`` as
    machines of group ``gpu-pool`` and ``gpus`` Tesla T4 in the system free pool."""
    switches = max(1, math.ceil(gpus / per_switch))
    return {
        "fabric_id": 0,
        "switches": [{"name": f"sw{i}"} for i in range(switches)],
        "groups": [{"name": "gpu-pool"}],
        "machines": [
            {"name": n, "group": "gpu-pool", "switch": f"sw{i % switches}"} for i, n in enumerate(nodes)
        ],
        "gpus": [
            {"name": f"gpu{i}", "model": "Tesla T4", "switch": f"sw{i // per_switch}"} for i in range(gpus)
        ],
    }


def arrivals(n: int, mean_gap: float, seed: int) -> list[float]:
    """Offsets (seconds from the first pod) of ``n`` pods with exponential gaps of mean ``mean_gap``."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(1 / mean_gap) if mean_gap > 0 else 0.0
    return out


@dataclass
class _Observed:
    pods: dict[str, PodTimes] = field(default_factory=dict)
    intents: dict[str, tuple[float, str]] = field(default_factory=dict)  # uid -> (t, node)
    alloc: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # node -> changes
    last_intent: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid -> latest intent seen
    composed_for: dict[str, str] = field(default_factory=dict)  # GPU -> first intent UID naming it
    prebind_starts: dict[str, list[float]] = field(default_factory=dict)  # pod name -> PreBind starts
    allocations: dict[str, tuple[str, ...]] = field(default_factory=dict)  # claim UID -> devices
    withdrawn: set[str] = field(default_factory=set)  # pods whose claim was ready, then not, unbound
    lock: threading.Lock = field(default_factory=threading.Lock)


def derive(p: PodTimes, cfg: ReactionConfig) -> dict[str, float | None]:
    """Per-pod intervals from the pod's creation (``submitted``; ``unschedulable`` for records
    without it), see the module docstring; None where a timestamp is missing."""
    d = span
    created = p.submitted if p.submitted is not None else p.unschedulable
    total = d(created, p.running)
    overhead = None if total is None else total - cfg.hotplug_latency - cfg.advertise_delay
    out = {
        "to_issue": d(created, p.issued),
        "to_running": total,
        "overhead": overhead,
        "director": d(p.issued, p.attached),
        "advertise": d(p.attached, p.advertised),
        "schedule": d(p.advertised, p.bound),
        "start": d(p.bound, p.running),
    }
    return {**out, **dra_times.derive_dra(p, overhead)} if cfg.dra else out


def match_director(obs: _Observed, tap: list[dict[str, Any]], machines: dict[int, str]) -> None:
    """Fill ``node``/``intent``/``issued``/``attached``/``advertised`` of each pod from the node
    watch and the Director tap: the first ``fabric/edit`` on the pod's node at or after its
    intent (the intent of its claim in DRA mode), the first ``fabric/reprogram`` answer after
    that, the first advertised change after that; and in DRA mode ``prebind``
    (:func:`bench.dra_times.prebind_for`)."""
    edits: dict[str, list[float]] = {}
    reprograms: dict[str, list[float]] = {}
    for r in tap:
        name = machines.get(r.get("mach_id")) if r.get("mach_id") is not None else None
        if name is None or r.get("status", 200) >= 400:
            continue
        if r["path"] == "fabric/edit":
            edits.setdefault(name, []).append(r["t0"])
        elif r["path"] == "fabric/reprogram":
            reprograms.setdefault(name, []).append(r["t1"])
    for p in obs.pods.values():
        if p.name in obs.prebind_starts:
            p.prebind = dra_times.prebind_for(obs.prebind_starts[p.name], p.visible)
        seen = obs.intents.get(p.claim or p.uid)
        if seen is None:
            continue
        p.intent, p.node = seen
        slack = 0.5  # the annotation write and the edit race by a few ms; watch delivery lags
        p.issued = next((t for t in sorted(edits.get(p.node, [])) if t >= p.intent - slack), None)
        if p.issued is not None:
            p.attached = next((t for t in sorted(reprograms.get(p.node, [])) if t >= p.issued), None)
        if p.attached is not None:
            p.advertised = next((t for t, _ in obs.alloc.get(p.node, []) if t >= p.attached), None)


def stuck(pods: Iterable[dict[str, Any]], last_intent: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods (``asdict(PodTimes)``) not Running, each with the last intent seen for it: keyed
    by its claim's UID in DRA mode, else by its own."""
    return [
        {"pod": p["name"], "last_intent": last_intent.get(p.get("claim") or p["uid"])}
        for p in pods
        if not p["running"]
    ]


class _Procs:
    """Processes this run started (each in its own session), stopped by pid only."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{name}.log").open("ab") as log:
            p = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                start_new_session=True,
            )
        self.procs[name] = p
        return p

    def stop(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    def tail(self, name: str, n: int = 30) -> str:
        f = self.log_dir / f"{name}.log"
        return "\n".join(f.read_text(errors="replace").splitlines()[-n:]) if f.exists() else ""


def _wait_for(pred: Any, timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def _stream(list_fn: Any, *args: Any, on_object: Any, stop: threading.Event, **kwargs: Any) -> None:
    """Call ``on_object(object, seen)`` for every object a watch of ``list_fn(*args)`` delivers
    (plain JSON; ``seen`` = ``time.time()`` on arrival) until ``stop`` is set; the watch resumes
    from its last resource version, or from a new list after an error (expired version,
    reconnect)."""
    from kubernetes import watch

    rv = ""
    while not stop.is_set():
        w = watch.Watch()
        try:
            for ev in w.stream(
                list_fn,
                *args,
                timeout_seconds=5,
                resource_version=rv or None,
                deserialize=False,  # plain JSON: the observer must not lag behind the events
                **kwargs,
            ):
                now = time.time()
                obj = ev["object"]
                rv = obj["metadata"]["resourceVersion"]
                on_object(obj, now)
                if stop.is_set():
                    w.stop()
        except Exception:  # noqa: BLE001 - resume the watch (expired resource version, reconnects)
            rv = ""
            stop.wait(0.2)


def _watch_pods(core: Any, ns: str, obs: _Observed, stop: threading.Event) -> None:
    def seen(pod: dict[str, Any], now: float) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        with obs.lock:
            p = obs.pods.get(meta["name"])
            if p is None:
                return
            p.uid = meta["uid"]
            if spec.get("schedulingGates"):
                p.gated = p.gated or now
            elif p.gated is not None and p.gate_removed is None:
                p.gate_removed = now
            for c in status.get("conditions") or []:
                if (c.get("type"), c.get("status"), c.get("reason")) == (
                    "PodScheduled",
                    "False",
                    "Unschedulable",
                ):
                    p.unschedulable = p.unschedulable or now
            if spec.get("nodeName") and p.bound is None:
                p.bound = now
            if status.get("phase") == "Running" and p.running is None:
                p.running = now

    _stream(core.list_namespaced_pod, ns, on_object=seen, stop=stop, allow_watch_bookmarks=False)


def _watch_nodes(core: Any, obs: _Observed, stop: threading.Event, *, dra: bool = False) -> None:
    last_alloc: dict[str, int] = {}

    def seen(node: dict[str, Any], now: float) -> None:
        meta = node["metadata"]
        name = meta["name"]
        raw = (meta.get("annotations") or {}).get(INTENTS)
        alloc = dra_times.advertised_count(node, dra=dra)
        with obs.lock:
            if raw:
                try:
                    for uid, intent in json.loads(raw).items():
                        obs.intents.setdefault(uid, (now, name))
                        if isinstance(intent, dict):
                            obs.last_intent[uid] = {
                                "node": name,
                                "phase": intent.get("phase"),
                                "devices": intent.get("devices"),
                            }
                            for dev in intent.get("devices") or ():
                                obs.composed_for.setdefault(dev, uid)
                except (ValueError, TypeError, AttributeError):
                    pass
            if last_alloc.get(name, 0) != alloc:
                obs.alloc.setdefault(name, []).append((now, alloc))
            last_alloc[name] = alloc

    _stream(core.list_node, on_object=seen, stop=stop)


def _watch_claims(resource: Any, ns: str, obs: _Observed, stop: threading.Event) -> None:
    """DRA mode: each pod's claim UID, ``allocated`` and ``visible``, and every claim's devices."""
    from composer.dra.claims import claim_view

    def seen(claim: dict[str, Any], now: float) -> None:
        view = claim_view(claim)
        owner = dra_times.claim_owner(claim)
        with obs.lock:
            obs.allocations[view.uid] = view.devices
            p = obs.pods.get(owner) if owner else None
            if p is None:
                return
            p.claim = view.uid
            if view.devices and p.allocated is None:
                p.allocated = now
            if dra_times.visibility_withdrawn(p, view):
                obs.withdrawn.add(p.name)
            if p.visible is None and dra_times.binding_ready(view):
                p.visible = now

    _stream(resource.list_namespaced_resource_claim, ns, on_object=seen, stop=stop)


def _watch_events(events: Any, ns: str, obs: _Observed, stop: threading.Event) -> None:
    """DRA mode: the scheduler's ``BindingConditionsPending`` Events, as PreBind starts per pod."""

    def seen(event: dict[str, Any], _now: float) -> None:
        pod, starts = dra_times.prebind_starts(event)
        if pod is not None and starts:
            with obs.lock:
                obs.prebind_starts.setdefault(pod, []).extend(starts)

    _stream(events.list_namespaced_event, ns, on_object=seen, stop=stop)


def _pod_body(name: str, host: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "bench-reaction"}},
        "spec": {
            **({"nodeSelector": {"kubernetes.io/hostname": host}} if host else {}),
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:stand-in",
                    "resources": {"limits": {GPU: "1", "cpu": "100m", "memory": "64Mi"}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }


def controller_argv(
    kind: str,
    *,
    director_url: str,
    kubeconfig: Path,
    ns: str,
    plugin_ns: str,
    probe_port: int,
    cfg: ReactionConfig,
    webhook: tuple[int, Path, Path] | None = None,
) -> list[str]:
    """Command line of the controller under test (``composer`` or ``baseline``); ``webhook``
    = (port, certificate file, key file) makes the composer serve the gating webhook;
    ``cfg.dra`` runs the composer as the DRA driver (``--mode dra``)."""
    flags = [
        "--director-url",
        director_url,
        "--director-username",
        SIM_USER,
        "--kubeconfig",
        str(kubeconfig),
        "--no-leader-election",
        "--namespaces",
        json.dumps([ns]),
        "--max-gpus-per-node",
        str(cfg.max_gpus_per_node),
        "--idle-timeout-seconds",
        "3600",
        "--advertise-timeout-seconds",
        "60",
        "--schedule-timeout-seconds",
        "600",
        "--device-plugin-namespace",
        plugin_ns,
        "--probe-address",
        "127.0.0.1",
        "--probe-port",
        str(probe_port),
        "--log-level",
        "INFO",
    ]
    if webhook is not None:
        flags += webhook_flags(*webhook)
    if cfg.dra:
        if kind != "composer" or webhook is not None:
            raise ValueError("DRA mode is a composer mode without the webhook")
        flags += ["--mode", "dra"]
    if kind == "composer":
        return [sys.executable, "-m", "composer", *flags]
    return [
        sys.executable,
        "-m",
        "bench.baseline",
        "--scan-interval-seconds",
        str(cfg.scan_interval),
        "--",
        *flags,
    ]


def _scrape(port: int) -> dict[str, float]:
    """Sums and counts of the composer's histograms from its /metrics (empty if unreachable)."""
    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except requests.RequestException:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(
            (
                "composer_round_seconds_sum",
                "composer_round_seconds_count",
                "composer_rounds_total",
                "composer_compositions_total ",
                "composer_gpus_taken_by_another_pod_total",
                "composer_reservations_expired_total",
                "composer_pods_gated_total",
            )
        ):
            k, _, v = line.partition(" ")
            out[k] = float(v)
    return out


def _remove_dra_objects(api: Any) -> None:
    """Delete the DRA driver's ResourceSlices and DeviceClass (the composer leaves both when it
    stops: ``docs/dra.md``), so the modes run after DRA mode see no extended-resource class."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from domain.composer_mode import DRA_DRIVER

    resource = client.ResourceV1Api(api)
    resource.delete_collection_resource_slice(field_selector=f"spec.driver={DRA_DRIVER}")
    try:
        resource.delete_device_class(DRA_DRIVER)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _cleanup_cluster(core: Any, ns: str, touched: Iterable[str]) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    except ApiException:
        pass
    _wait_for(lambda: not core.list_namespaced_pod(ns).items, 120, "bench pods deleted", 0.5)
    for node in touched:
        try:
            core.patch_node_status(node, {"status": {"capacity": {GPU: None}, "allocatable": {GPU: None}}})
            n = core.read_node(node)
            ann = {k: None for k in (n.metadata.annotations or {}) if k.startswith("composer.liqid.io/")}
            lab = {k: None for k in (n.metadata.labels or {}) if k.startswith("nvidia.com/")}
            if ann or lab:
                core.patch_node(node, {"metadata": {"annotations": ann or None, "labels": lab or None}})
        except ApiException:
            pass


def run_one(
    kind: str, lab_kubeconfig: Path, node_names: Sequence[str], cfg: ReactionConfig, work: Path
) -> dict[str, Any]:
    """One controller on one fleet; returns per-pod timestamps, derived stats and diagnostics."""
    from kubernetes import client, config

    from bench.wait_steps import run_steps  # it imports this module

    api = config.new_client_from_config(config_file=str(lab_kubeconfig))
    core = client.CoreV1Api(api)
    sid = uuid.uuid4().hex[:6]
    ns, plugin_ns = f"bench-{kind}-{sid}", f"bench-gpu-operator-{sid}"
    for n in (ns, plugin_ns):
        core.create_namespace({"metadata": {"name": n}})
    _wait_for(lambda: _has_default_sa(core, ns), 60, "default ServiceAccount")
    suffix = "-gated" if cfg.gating else "-dra" if cfg.dra else ""
    run_dir = work / f"{kind}-{cfg.workload}-{cfg.nodes}{suffix}"
    run_dir.mkdir(parents=True, exist_ok=True)
    inv = run_dir / "inventory.yaml"
    inv.write_text(yaml.safe_dump(inventory(node_names, max(cfg.nodes, cfg.pods + 8))))
    tap_file, url_file = run_dir / "tap.jsonl", run_dir / "director.url"
    procs = _Procs(run_dir)
    obs = _Observed()
    stop = threading.Event()
    watchers: list[threading.Thread] = []
    probe = free_port()
    result: dict[str, Any] = {
        "controller": kind,
        "workload": cfg.workload,
        "gating": cfg.gating,
        "dra": cfg.dra,
        "nodes": cfg.nodes,
        "pods": cfg.pods,
    }
    hook: tuple[int, Path, Path, str] | None = None
    try:
        if cfg.gating:
            if kind != "composer":
                raise ValueError("gating is a composer mode (the baseline has no webhook)")
            hook = local_gating_webhook(api, namespace=ns, release=f"bench-{sid}", out_dir=run_dir)
        procs.start(
            "director",
            [
                sys.executable,
                "-m",
                "bench.director_tap",
                "--inventory",
                str(inv),
                "--hotplug-latency",
                str(cfg.hotplug_latency),
                "--tap-file",
                str(tap_file),
                "--url-file",
                str(url_file),
                "--username",
                SIM_USER,
            ],
            {"DIRECTOR_SIM_PASSWORD": SIM_PASSWORD},
        )
        url = _wait_for(lambda: url_file.exists() and url_file.read_text().strip(), 60, "director tap")
        procs.start(
            "agent",
            [
                sys.executable,
                "-m",
                "lab.gpu_agent",
                "--kubeconfig",
                str(lab_kubeconfig),
                "--director-url",
                url,
                "--interval",
                str(cfg.agent_interval),
                "--advertise-delay",
                str(cfg.advertise_delay),
                "--plugin-namespace",
                plugin_ns,
                "--log-level",
                "WARNING",
                *(["--dra"] if cfg.dra else []),
            ],
            {"GPU_AGENT_DIRECTOR_PASSWORD": SIM_PASSWORD},
        )
        procs.start(
            kind,
            controller_argv(
                kind,
                director_url=url,
                kubeconfig=lab_kubeconfig,
                ns=ns,
                plugin_ns=plugin_ns,
                probe_port=probe,
                cfg=cfg,
                webhook=hook[:3] if hook else None,
            ),
            {"COMPOSER_DIRECTOR_PASSWORD": SIM_PASSWORD},
        )
        targets = [
            lambda: _watch_pods(core, ns, obs, stop),
            lambda: _watch_nodes(core, obs, stop, dra=cfg.dra),
        ]
        if cfg.dra:
            resource, events = client.ResourceV1Api(api), client.EventsV1Api(api)
            targets += [
                lambda: _watch_claims(resource, ns, obs, stop),
                lambda: _watch_events(events, ns, obs, stop),
            ]
        for target in targets:
            t = threading.Thread(target=target, daemon=True)
            t.start()
            watchers.append(t)
        if kind == "composer":
            _wait_for(
                lambda: _scrape(probe).get("composer_rounds_total", 0) >= 1, 120, "first composer round", 0.5
            )
        else:
            _wait_for(lambda: "baseline running" in procs.tail(kind), 60, "baseline start", 0.5)
        time.sleep(1.0)
        with LoadSampler() as load:
            t_start = time.time()
            for i, off in enumerate(arrivals(cfg.pods, cfg.mean_interarrival, cfg.seed)):
                delay = t_start + off - time.time()
                if delay > 0:
                    time.sleep(delay)
                name = f"gpu-pod-{i:04d}"
                with obs.lock:
                    obs.pods[name] = PodTimes(name, submitted=time.time())
                host = node_names[i % len(node_names)] if cfg.workload == "pinned" else None
                core.create_namespaced_pod(ns, _pod_body(name, host))
            deadline = time.monotonic() + cfg.settle_timeout  # counted from the last arrival
            while time.monotonic() < deadline:
                with obs.lock:
                    if all(p.running for p in obs.pods.values()):
                        break
                for name in (kind, "agent", "director"):
                    p = procs.procs.get(name)
                    if p is not None and p.poll() is not None:
                        raise RuntimeError(f"{name} exited with {p.returncode}:\n{procs.tail(name)}")
                time.sleep(0.5)
        time.sleep(1.0)  # let the node watch catch the last changes
        result["metrics"] = _scrape(probe)
        state = requests.get(f"{url}/_sim/state", timeout=30).json()
        machines = {m["mach_id"]: m["name"] for m in state.get("machines", [])}
        tap = [json.loads(x) for x in tap_file.read_text().splitlines() if x.strip()]
        with obs.lock:
            match_director(obs, tap, machines)
            pods = [asdict(p) for p in obs.pods.values()]
            derived = [derive(p, cfg) for p in obs.pods.values()]
        result["per_pod"] = pods
        result["not_running"] = sum(1 for p in pods if not p["running"])
        result["stuck"] = stuck(pods, obs.last_intent)
        result["never_unschedulable"] = sum(1 for p in pods if not p["unschedulable"])
        result["gated"] = sum(1 for p in pods if p["gated"])
        if cfg.dra:
            with obs.lock:
                result["gpus_taken_by_another_pod"] = dra_times.taken_by_another(
                    obs.composed_for, obs.allocations
                )
            result["poll_share"] = dra_times.poll_share(derived)
            result["missed_polls"] = dra_times.missed_polls(derived)
            result["visible_withdrawn"] = len(obs.withdrawn)
            result["never_visible"] = sum(1 for p in pods if not p["visible"])
        else:
            result["gpus_taken_by_another_pod"] = (result["metrics"] or {}).get(
                "composer_gpus_taken_by_another_pod_total"
            )
        result["stats"] = (
            {k: summarize(x[k] for x in derived if x[k] is not None) for k in derived[0]} if derived else {}
        )
        result["composes"] = sum(1 for r in tap if r["path"] == "fabric/edit")
        result["load"] = load.summary()
        if cfg.gating:
            with obs.lock:
                pods_seen = list(obs.pods.values())
            result["wait_steps"] = run_steps(pods_seen, ns, run_dir / f"{kind}.log", tap, machines)
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["logs"] = {n: procs.tail(n) for n in (kind, "agent", "director")}
    finally:
        stop.set()
        if hook is not None:
            try:
                client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(hook[3])
            except Exception as exc:  # noqa: BLE001 - reported; the control plane is thrown away anyway
                result.setdefault("cleanup_error", str(exc))
        procs.stop(kind)
        procs.stop("agent")
        procs.stop("director")
        for t in watchers:
            t.join(10)
        touched = {p.node for p in obs.pods.values() if p.node} | set(obs.alloc)
        try:
            _cleanup_cluster(core, ns, touched)
            if cfg.dra:
                _remove_dra_objects(api)
            for n in (ns, plugin_ns):
                core.delete_namespace(n)
        except Exception as exc:  # noqa: BLE001 - report, the control plane is thrown away anyway
            result.setdefault("cleanup_error", str(exc))
        api.close()
    return result


def _has_default_sa(core: Any, ns: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespaced_service_account("default", ns)
        return True
    except ApiException:
        return False


def compare(composer: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Baseline / composer ratios of mean, p50 and p99 for ``to_issue`` and ``to_running``."""
    out: dict[str, Any] = {}
    for key in ("to_issue", "to_running"):
        a = (composer.get("stats") or {}).get(key) or {}
        b = (baseline.get("stats") or {}).get(key) or {}
        out[key] = {
            q: (round(b[q] / a[q], 2) if a.get(q) and b.get(q) else None) for q in ("mean", "p50", "p99")
        }
    return out


def run(
    *,
    quick: bool = False,
    sizes: Sequence[int] | None = None,
    pods: int | None = None,
    workloads: Sequence[str] | None = None,
    modes: Sequence[str] = MODES,
    work_dir: Path | None = None,
    cfg_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run part 2 for each fleet size and workload; returns JSON-ready results (``runs`` and
    ``comparison``).

    Workloads: ``pinned`` (pod i has the node selector ``kubernetes.io/hostname`` of node
    ``i mod N``, so a GPU composed for a pod can only serve pods of that
    host: the composer's overhead is measured cleanly) and ``unpinned`` (any host: the
    scheduler may bind a freshly advertised GPU to another pending pod than the one it was
    composed for). Default: both, ``pinned`` only with ``quick``.

    ``modes``: a subset of :data:`MODES`, run in that order (the composer once per composer
    mode, the baseline once); ``comparison`` pairs the baseline with each composer mode.

    Raises:
        ValueError: an unknown mode.
    """
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise ValueError(f"unknown reaction mode(s) {unknown}; known: {', '.join(MODES)}")
    order = tuple(m for m in MODES if m in modes)
    measured = commit(REACTION_PATHS)  # before the runs: the code that is measured
    explicit_sizes = bool(sizes)
    sizes = tuple(sizes or ((3,) if quick else (10, 100, 1000)))
    kinds = tuple(workloads or (("pinned",) if quick else ("pinned", "unpinned")))
    work = Path(work_dir or tempfile.mkdtemp(prefix="bench-reaction-"))
    runs: list[dict[str, Any]] = []
    comparison: list[dict[str, Any]] = []
    for n in sizes:
        names = tuple(f"blade-slot-{i}" for i in range(1, n + 1))
        try:
            with isolated_control_plane(work / f"lab-{n}", names) as lab:
                for workload in kinds:
                    cfg = _config(n, pods, workload, quick, cfg_overrides)
                    by_mode: dict[str, dict[str, Any]] = {}
                    for mode in order:
                        kind = "baseline" if mode == "baseline" else "composer"
                        mode_cfg = replace(cfg, gating=mode == "gating", dra=mode == "dra")
                        r = run_one(kind, lab.kubeconfig, names, mode_cfg, work)
                        r["config"] = asdict(mode_cfg)
                        r["lab_start_seconds"] = round(lab.start_seconds, 1)
                        runs.append(r)
                        by_mode[mode] = r
                    base = by_mode.get("baseline")
                    for mode, mine in by_mode.items():
                        if mode != "baseline" and base is not None:
                            comparison.append(
                                {
                                    "nodes": n,
                                    "workload": workload,
                                    "gating": mode == "gating",
                                    "mode": mode,
                                    "baseline_over_composer": compare(mine, base),
                                }
                            )
        except Exception as exc:  # noqa: BLE001 - a size that cannot start is reported, not fatal
            runs.append({"nodes": n, "error": f"{type(exc).__name__}: {exc}"})
    return {
        "part": "reaction",
        "commit": measured,
        "quick": quick,
        "runs": runs,
        "comparison": comparison,
        "ca_slo": CA_SLO,
        "target": {
            "overhead_p99_seconds": 1.0,
            "at_nodes": 1000,
            "dra_beyond_poll_p99_seconds": dra_times.BEYOND_POLL_TARGET_SECONDS,
        },
        "prebind_poll_seconds": dra_times.PREBIND_POLL_SECONDS,
        "composer_share_target": {"p99_seconds": 0.3, "at_nodes": 5000},
        "composer_timing": composer_timing(),
        "command": "python -m bench --only reaction"
        + (" --quick" if quick else "")
        + (f" --nodes {','.join(map(str, sizes))}" if explicit_sizes else "")
        + (f" --pods {pods}" if pods else "")
        + (f" --workloads {','.join(kinds)}" if workloads else "")
        + (f" --modes {','.join(order)}" if order != MODES else ""),
    }


def composer_timing() -> dict[str, float]:
    """The composer's own waits the runs used (its defaults: the bench passes none of them):
    the pause after a change before a round, and the gated-pod batch window, seconds."""
    from composer.run.loop import DEBOUNCE_SECONDS
    from composer.shell.config import Settings

    fields = Settings.model_fields
    return {
        "round_after_change_seconds": DEBOUNCE_SECONDS,
        "batch_idle_seconds": float(fields["batch_idle_seconds"].default),
        "batch_max_seconds": float(fields["batch_max_seconds"].default),
    }


def _config(
    n: int, pods: int | None, workload: str, quick: bool, overrides: dict[str, Any] | None
) -> ReactionConfig:
    n_pods = pods or (4 if quick else min(100, 6 * n))
    base: dict[str, Any] = {"nodes": n, "pods": n_pods, "workload": workload}
    if quick:
        base.update(
            mean_interarrival=0.5,
            hotplug_latency=0.2,
            advertise_delay=0.2,
            agent_interval=0.2,
            scan_interval=2.0,
            settle_timeout=60.0,
        )
    return ReactionConfig(**{**base, **(overrides or {})})
