"""Carries out the soak's fault draws (:class:`bench.soak.plan.FaultDraw`) on a running lab.

Each fault runs in its own thread (a fault that lasts, such as a partition, sleeps and then
heals); every fault is logged as a :class:`FaultLog` with its planned time, the wall-clock time
it started and ended, its parameters and what really happened (``outcome``: ``done``,
``skipped`` with the reason, e.g. no GPU attached to detach, or ``error`` with the exception).
Director faults go through the simulator's test-control API (``/_sim/faults``, ``/_sim/detach``,
``/_sim/attach``; ``lab/director_sim/app.py``), connection faults through the relay
(:mod:`bench.soak.proxy`), process faults through the harness's processes and
``lab.controlplane.restart_apiserver``.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench.soak.plan import FaultDraw
from bench.soak.proxy import Relay


class Lab(Protocol):
    """What the injector needs from the run (:class:`bench.soak.run.SoakLab`)."""

    relay: Relay
    owner_tag: str

    def sim(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any: ...
    def node_of(self, host: str) -> str: ...
    def hosts(self) -> list[str]: ...
    def kill_composer(self) -> str: ...
    def start_composer(self) -> str: ...
    def stop_agent(self) -> None: ...
    def start_agent(self, advertise_delay: float | None = None) -> None: ...
    def restart_apiserver(self) -> float: ...
    def delete_node(self, node: str) -> None: ...
    def add_node(self, node: str) -> None: ...


@dataclass
class FaultLog:
    """What one fault draw did (times: seconds since the epoch): planned ``at``, ``fired`` (the
    draw's turn came), ``started`` (it acted: later than ``fired`` for a process fault queued
    behind another one), ``ended`` (healed)."""

    index: int
    kind: str
    at: float
    params: dict[str, Any]
    fired: float = 0.0
    started: float = 0.0
    ended: float | None = None
    outcome: str = "pending"
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _rule(kind: str, p: dict[str, Any]) -> dict[str, Any]:
    """The ``/_sim/faults`` rule of a Director fault draw."""
    if kind in ("director_5xx", "director_401"):
        return {
            "kind": "error",
            "path": p["path"],
            "status": p["status"],
            "times": p["times"],
            "message": f"soak: injected {p['status']}",
        }
    if kind == "director_slow_answer":
        return {"kind": "delay", "path": p["path"], "delay_seconds": p["seconds"], "after": True, "times": 1}
    if kind == "director_job_long":
        return {"kind": "async", "path": p["path"], "delay_seconds": p["seconds"], "times": p["times"]}
    if kind == "director_job_fail":
        return {"kind": "async", "path": p["path"], "delay_seconds": p["seconds"], "fail": True, "times": 1}
    if kind == "director_job_stuck":
        return {"kind": "async", "path": p["path"], "delay_seconds": p["seconds"], "times": 1}
    if kind == "director_reprogram_half":
        return {"kind": "reprogram_half", "times": 1}
    raise ValueError(kind)


def _gpus(state: dict[str, Any]) -> list[dict[str, Any]]:
    mach = {m["mach_id"]: m["name"] for m in state["machines"]}
    return [dict(g, machine=mach.get(g.get("mach_id"))) for g in state["gpus"]]


def hand_attachable(state: dict[str, Any], *, owner_tag: str) -> dict[str, list[str]]:
    """The GPUs an operator could attach by hand, each with the machines it could go to, from
    one ``GET /_sim/state`` answer. Pure.

    A GPU qualifies when it is online, attached nowhere, does not carry the composer's owner tag
    (a tagged free GPU is the composer's, being given back), and is in no open edit (a pending
    relation or pool move: an operator's attach racing the composer's own edit is not this
    fault). A GPU in a group's pool goes to that group's machines, as a Director attaches from
    the machine's group pool; one in the system free pool to any machine.

    Returns:
        GPU name -> machine names (sorted), only GPUs with at least one machine.
    """
    busy = {d for e in state.get("edits", {}).values() for k in ("attach", "detach") for d in e.get(k, ())}
    busy |= {d for e in state.get("pool_edits", {}).values() for k in ("add", "remove") for d in e.get(k, ())}
    machines = sorted((m["name"], m.get("grp_id")) for m in state["machines"])
    out: dict[str, list[str]] = {}
    for g in state["gpus"]:
        if g.get("mach_id") is not None or g["name"] in busy or g.get("udesc") == owner_tag:
            continue
        if "online" not in str(g.get("state", "")):
            continue
        grp = g.get("grp_id")
        names = [n for n, mg in machines if grp is None or mg == grp]
        if names:
            out[g["name"]] = names
    return out


class Injector:
    """Runs fault draws against ``lab``; :attr:`log` holds one :class:`FaultLog` per draw."""

    def __init__(self, lab: Lab, *, say: Callable[[str], None] = print) -> None:
        self.lab = lab
        self.say = say
        self.log: list[FaultLog] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._process_lock = threading.Lock()  # one composer/agent/apiserver fault at a time

    def fire(self, draw: FaultDraw, t0: float) -> FaultLog:
        """Start ``draw`` now (``t0``: the run's start, for the log's planned time)."""
        now = time.time()
        entry = FaultLog(draw.index, draw.kind, t0 + draw.at, dict(draw.params), fired=now, started=now)
        with self._lock:
            self.log.append(entry)
        th = threading.Thread(target=self._run, args=(draw, entry), name=f"fault-{draw.index}", daemon=True)
        th.start()
        self._threads.append(th)
        return entry

    def busy(self) -> bool:
        """Some fault is still acting or healing."""
        return any(th.is_alive() for th in self._threads)

    def wait(self, timeout: float) -> None:
        """Wait for every fault thread (each heals what it broke before it ends)."""
        deadline = time.monotonic() + timeout
        for th in self._threads:
            th.join(max(0.0, deadline - time.monotonic()))

    def _run(self, draw: FaultDraw, entry: FaultLog) -> None:
        try:
            entry.detail = self._do(draw.kind, draw.params, entry) or ""
            entry.outcome = "skipped" if entry.detail.startswith("skipped") else "done"
        except Exception as exc:  # noqa: BLE001 - a fault that fails is logged, the run goes on
            entry.outcome, entry.detail = "error", f"{type(exc).__name__}: {exc}"
            entry.extra["traceback"] = traceback.format_exc(limit=5)
        entry.ended = time.time()
        self.say(f"fault #{draw.index} {draw.kind} {draw.params}: {entry.outcome} {entry.detail}")

    def _do(self, kind: str, p: dict[str, Any], entry: FaultLog) -> str:
        lab = self.lab
        if kind.startswith("director_"):
            lab.sim("POST", "faults", _rule(kind, p))
            return "rule armed"
        if kind == "connection_reset":
            lab.relay.reset()
            return "open connections reset"
        if kind == "partition":
            lab.relay.cut(p["mode"])
            time.sleep(p["seconds"])
            lab.relay.heal(p["mode"])
            return f"{p['mode']} for {p['seconds']} s"
        if kind == "gpu_detach_by_hand":
            ours = [
                g for g in _gpus(lab.sim("GET", "state")) if g["machine"] and g.get("udesc") == lab.owner_tag
            ]
            if not ours:
                return "skipped: no composer GPU attached"
            g = sorted(ours, key=lambda x: x["name"])[int(p["pick"] * len(ours))]
            lab.sim("POST", "detach", {"device": g["name"]})
            entry.extra.update(gpu=g["name"], machine=g["machine"])
            return f"{g['name']} pulled off {g['machine']}"
        if kind == "gpu_attach_by_hand":
            return self._attach_by_hand(p, entry)
        with self._process_lock:
            entry.started = time.time()
            return self._process_fault(kind, p)

    def _attach_by_hand(self, p: dict[str, Any], entry: FaultLog) -> str:
        lab = self.lab
        hosts = set(lab.hosts())
        free = {
            name: targets
            for name, targets in hand_attachable(lab.sim("GET", "state"), owner_tag=lab.owner_tag).items()
            if any(t in hosts for t in targets)
        }
        if not free:
            return "skipped: no free GPU outside the composer's edits"
        name = sorted(free)[int(p["pick"] * len(free))]
        targets = [t for t in free[name] if t in hosts]
        machine = targets[int(p["host_pick"] * len(targets))]
        lab.sim("POST", "attach", {"device": name, "machine": machine})
        entry.extra.update(gpu=name, machine=machine)
        time.sleep(p["seconds"])
        now = {x["name"]: x for x in _gpus(lab.sim("GET", "state"))}[name]
        if now["machine"] == machine and now.get("udesc") != lab.owner_tag:
            lab.sim("POST", "detach", {"device": name})
            return f"{name} attached to {machine} by hand for {p['seconds']} s, then detached"
        return (
            f"{name} attached to {machine} by hand; after {p['seconds']} s on {now['machine']} "
            f"tagged {now.get('udesc')!r}: left"
        )

    def _process_fault(self, kind: str, p: dict[str, Any]) -> str:
        lab = self.lab
        if kind == "leader_kill":
            killed = lab.kill_composer()
            time.sleep(p["seconds"])
            started = lab.start_composer()
            return f"{killed} SIGKILLed, {started} started {p['seconds']} s later"
        if kind == "apiserver_restart":
            took = lab.restart_apiserver()
            return f"kube-apiserver restarted, ready after {took:.1f} s"
        if kind == "node_recreate":
            node = lab.node_of(p["host"])
            lab.delete_node(node)
            time.sleep(p["seconds"])
            lab.add_node(node)
            return f"Node {node} deleted, created again {p['seconds']} s later"
        if kind == "agent_down":
            lab.stop_agent()
            time.sleep(p["seconds"])
            lab.start_agent()
            return f"GPU-Operator stand-in down for {p['seconds']} s"
        if kind == "agent_slow":
            lab.stop_agent()
            lab.start_agent(advertise_delay=p["delay"])
            time.sleep(p["seconds"])
            lab.stop_agent()
            lab.start_agent()
            return f"GPU-Operator stand-in advertising {p['delay']} s late for {p['seconds']} s"
        raise ValueError(f"unknown fault kind {kind!r}")
