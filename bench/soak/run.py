"""Runs a soak timeline (:mod:`bench.soak.plan`) against a running scenario of the composer's
lab harness (``tests.composer.harness.Scenario``: the Director simulator, kwok Nodes, the
GPU-Operator stand-in and the composer as processes), injecting faults (:mod:`bench.soak.inject`),
observing (:mod:`bench.soak.observe`) and checking the invariants (:mod:`bench.soak.invariants`)
every ``check_every`` seconds and once more after the settle phase.

Phases: *faulty* (``cfg.seconds``: pods created and deleted as drawn, faults fired as drawn);
*settle* (rules cleared, faults healed, every pod already deleted; wait up to
``cfg.settle_seconds`` for every composed GPU to be back in a pool); final checks.
"""

from __future__ import annotations

import heapq
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from bench.pod_times import summarize
from bench.soak import invariants as inv
from bench.soak.inject import Injector
from bench.soak.observe import GATING_LABEL, Observer, history
from bench.soak.plan import SoakConfig, Timeline
from bench.soak.proxy import Relay
from lab import controlplane
from lab.settings import LabConfig
from tests.composer import harness

#: The composer's settings in the soak (seconds), short so that reclaims and reservations
#: happen many times in a run; the checkers' bounds derive from them.
COMPOSER_SETTINGS = {
    "idle_timeout_seconds": 20.0,
    "reservation_timeout_seconds": 45.0,
    "unserved_wait_seconds": 20.0,
    "orphan_grace_seconds": 30.0,
    # The per-request timeout the plan draws slow answers past (SoakConfig.director_timeout).
    "director_timeout_seconds": 5.0,
    # The longest wait for a 202 job, and how long an edit left open (a lost answer, a job still
    # running) is left alone before it is cancelled; the plan draws stuck jobs on both sides of it
    # (SoakConfig.job_timeout).
    "director_job_timeout_seconds": 30.0,
}
RECLAIM_SLACK = 40.0  # reclaim's own time: taint, decompose (retries under faults), pool moves
WAIT_SLACK = 15.0
#: After an edit's last move (its opening or last accepted change), the composer may wait for that
#: change's job (the job timeout), then the job timeout again once it left the edit open (a job
#: still running, a lost answer): by then the edit falls due to be cancelled (EDIT_DUE), and the
#: next opening or the sweep (every 5 s) cancels it; plus 30 s for requests and retries.
EDIT_DUE = 2 * COMPOSER_SETTINGS["director_job_timeout_seconds"]
EDIT_BOUND = EDIT_DUE + 30.0


def soak_config(**fields: Any) -> SoakConfig:
    """A :class:`bench.soak.plan.SoakConfig` whose Director timeouts are the composer's own in
    :data:`COMPOSER_SETTINGS`, so the plan draws slow answers and stuck jobs past the timeouts the
    composer runs with; ``fields`` sets the rest."""
    return SoakConfig(
        director_timeout=COMPOSER_SETTINGS["director_timeout_seconds"],
        job_timeout=COMPOSER_SETTINGS["director_job_timeout_seconds"],
        **fields,
    )


@dataclass
class SoakLab:
    """The scenario, its relay and its processes, as the injector drives them."""

    sc: harness.Scenario
    lab_cfg: LabConfig
    relay: Relay
    composer_flags: list[str]
    probe_port: int
    owner_tag: str = "gpu-composer"
    started: list[str] = field(default_factory=list)
    restarts: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _down: bool = False

    def sim(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.sc.sim(method, path, body)

    def hosts(self) -> list[str]:
        return sorted(self.sc.hosts.values())

    def node_of(self, host: str) -> str:
        return host

    def start_composer(self) -> str:
        """Start the next composer process (``composer-<n>``); returns its name."""
        with self._lock:
            name = f"composer-{len(self.started) + 1}"
            self.sc.start_composer(
                *self.composer_flags, name=name, probe_port=self.probe_port, director_url=self.relay.url
            )
            self.started.append(name)
            self._down = False
            return name

    def kill_composer(self) -> str:
        """SIGKILL the newest composer, as a crash would; :meth:`supervise` leaves it down until the
        injector's :meth:`start_composer`."""
        with self._lock:
            name = self.started[-1]
            self._down = True
            self.sc.procs[name].kill()
            return name

    def supervise(self) -> str | None:
        """Start a new composer when the newest one exited by itself (it exits when it loses its Lease,
        e.g. while kube-apiserver restarts), as its Deployment's ReplicaSet would; not while the
        injector holds it down. Returns the new composer's name, or None; each restart is recorded in
        :attr:`restarts` (``{"exited": name, "code": exit status, "at": epoch s, "started": name}``)."""
        with self._lock:
            if self._down or not self.started:
                return None
            name = self.started[-1]
            code = self.sc.procs[name].popen.poll()
            if code is None:
                return None
        started = self.start_composer()
        self.restarts.append({"exited": name, "code": code, "at": time.time(), "started": started})
        return started

    def stop_agent(self) -> None:
        self.sc.procs["agent"].stop()

    def start_agent(self, advertise_delay: float | None = None) -> None:
        self.sc.start_agent(*(["--advertise-delay", str(advertise_delay)] if advertise_delay else []))

    def restart_apiserver(self) -> float:
        return controlplane.restart_apiserver(self.lab_cfg)

    def delete_node(self, node: str) -> None:
        try:
            self.sc.core.delete_node(node)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def add_node(self, node: str) -> None:
        harness.add_kwok_nodes(self.sc.core, [node], self.sc.sid)


def check_all(
    obs: Observer,
    *,
    end: float,
    final: bool,
    composed: set[str],
    owner_tag: str,
    cut_off: list[tuple[float, float]],
) -> list[inv.Violation]:
    """Every checker over what ``obs`` saw until ``end``; with ``final`` also convergence.
    ``cut_off``: when the relay kept the composer from the Director (left out of an edit's age once the
    edit falls due to be cancelled, EDIT_DUE)."""
    samples, pods, events, metrics = obs.snapshot()
    s = COMPOSER_SETTINGS
    out = inv.double_attachments(history(obs.last_state), end=end) if obs.last_state else []
    out += inv.unaccounted_gpus(
        samples,
        events,
        metrics,
        owner_tag=owner_tag,
        bound=max(s["idle_timeout_seconds"], s["orphan_grace_seconds"]) + RECLAIM_SLACK,
    )
    out += inv.unexplained_waits(
        pods, events, reservation=s["reservation_timeout_seconds"], slack=WAIT_SLACK, end=end
    )
    edits = inv.open_transactions(samples, bound=EDIT_BOUND, cut_off=cut_off, excuse_after=EDIT_DUE)
    out += edits if final else [v for v in edits if "at the end" not in v.detail]
    if final and samples:
        running: dict[str, int] = {}
        for p in pods:
            if p.running is not None and p.gone is None and p.node:
                running[p.node] = running.get(p.node, 0) + 1
        out += inv.not_converged(samples[-1], composed, owner_tag=owner_tag, running_on=running)
    return out


def _composed(obs: Observer, owner_tag: str) -> set[str]:
    """GPUs the Director ever showed tagged by the composer (samples and attach history)."""
    samples, _, _, _ = obs.snapshot()
    seen = {g.name for s in samples for g in s.gpus if g.udesc == owner_tag}
    for m in obs.last_state.get("machines", []):
        seen |= {str(h["name"]) for h in m.get("history", []) if h.get("udesc") == owner_tag}
    return seen


def soak(
    lab: SoakLab,
    tl: Timeline,
    cfg: SoakConfig,
    *,
    out_dir: Path,
    check_every: float = 30.0,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run ``tl`` on ``lab`` (its agent and composer not started yet); returns the run's data
    (also written to ``out_dir/soak-<seed>.json``)."""
    sc = lab.sc
    lab.start_agent()
    lab.start_composer()
    obs = Observer(
        sim=lambda m, p: sc.sim(m, p),
        core=sc.core,
        namespace=sc.ns,
        node_selector=f"{harness.E2E_LABEL}={sc.sid}",
        composer_instance=f"e2e-{sc.sid}-",
        metrics_url=lambda: f"http://127.0.0.1:{lab.probe_port}/metrics",
    )
    inj = Injector(lab, say=say)
    t0 = time.time()
    queue: list[tuple[float, int, str, Any]] = []
    for i, p in enumerate(tl.pods):
        heapq.heappush(queue, (p.at, i, "create", p))
        heapq.heappush(queue, (p.delete_at, i, "delete", p))
    for f in tl.faults:
        heapq.heappush(queue, (f.at, 100000 + f.index, "fault", f))
    obs.start()
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    checks_run = 0
    retries = 0

    def violations(final: bool) -> list[inv.Violation]:
        return check_all(
            obs,
            end=time.time(),
            final=final,
            composed=_composed(obs, lab.owner_tag),
            owner_tag=lab.owner_tag,
            cut_off=lab.relay.cut_off(),
        )

    def check(final: bool = False) -> None:
        nonlocal checks_run
        checks_run += 1
        for v in violations(final):
            key = (v.check, v.subject, v.detail.split(":")[0] if v.check == "unaccounted_gpu" else v.detail)
            if key not in found:
                found[key] = dict(asdict(v), seed=tl.seed, found_at=time.time() - t0, final=final)
                say(f"VIOLATION seed={tl.seed} {v.check} {v.subject}: {v.detail}")

    next_check = t0 + check_every

    def supervise() -> None:
        restarted = lab.supervise()
        if restarted:
            say(f"composer exited by itself ({lab.restarts[-1]}): started {restarted}")

    while queue:
        supervise()
        at, i, what, item = queue[0]
        now = time.time()
        if now < t0 + at:
            time.sleep(min(t0 + at - now, max(0.0, next_check - now), 1.0))
            if time.time() >= next_check:
                check()
                next_check = time.time() + check_every
            continue
        heapq.heappop(queue)
        try:
            if what == "create":
                labels = {} if item.gated else {GATING_LABEL: "disabled"}
                sc.gpu_pod(item.name, item.count, product=item.model, host=item.host, labels=labels)
            elif what == "delete":
                try:
                    sc.core.delete_namespaced_pod(item.name, sc.ns, grace_period_seconds=0)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            else:
                inj.fire(item, t0)
        except Exception as exc:  # noqa: BLE001 - API server restarting: try again in a second
            if isinstance(exc, ApiException) and exc.status == 409:
                continue  # created already (an earlier try's answer was lost)
            retries += 1
            heapq.heappush(queue, (time.time() - t0 + 1.0, i, what, item))
    faulty_end = time.time()
    say("faulty phase over: clearing Director rules, waiting for faults to heal")
    heal_deadline = time.time() + 300
    while inj.busy() and time.time() < heal_deadline:
        supervise()
        time.sleep(1)
    for _ in range(30):
        try:
            sc.sim("DELETE", "faults")
            break
        except Exception:  # noqa: BLE001
            time.sleep(1)
    settle_deadline = time.time() + cfg.settle_seconds
    while time.time() < settle_deadline:
        time.sleep(5)
        supervise()
        if obs.samples and not [v for v in violations(True) if v.check == "not_converged"]:
            break
    settled = time.time()
    obs.sample()
    obs.stop()
    check(final=True)
    samples, pods, events, metrics = obs.snapshot()
    ttr = [p.running - p.created for p in pods if p.running is not None]
    by_kind: dict[str, dict[str, int]] = {}
    for e in inj.log:
        by_kind.setdefault(e.kind, {}).setdefault(e.outcome, 0)
        by_kind[e.kind][e.outcome] += 1
    data = {
        "seed": tl.seed,
        "config": asdict(cfg),
        "composer_settings": COMPOSER_SETTINGS,
        "started": t0,
        "faulty_seconds": round(faulty_end - t0, 1),
        "settle_seconds": round(settled - faulty_end, 1),
        "pods_created": len(pods),
        "pods_running": len(ttr),
        "time_to_running": summarize(ttr),
        "faults": [asdict(e) for e in inj.log],
        "faults_by_kind": by_kind,
        "checks_run": checks_run,
        "samples": len(samples),
        "samples_missed": obs.missed,
        "director_cut_off": [[round(a, 3), round(b, 3)] for a, b in lab.relay.cut_off()],
        # what the open-edit check would have found had no cut-off time been excused
        "edits_past_bound_counting_cut_off": [
            {"subject": v.subject, "detail": v.detail}
            for v in inv.edits_past_bound(samples, bound=EDIT_BOUND)[0]
        ],
        "pod_op_retries": retries,
        "composer_self_restarts": lab.restarts,
        "violations": sorted(found.values(), key=lambda v: v["t"]),
        "composed_gpus": sorted(_composed(obs, lab.owner_tag)),
        "composer_warnings": _count([(e.reason) for e in events if e.composer and e.type == "Warning"]),
        "metrics_last": metrics[-1][1] if metrics else {},
        "director_counters": obs.last_state.get("counters", {}),
        "timeline": tl.as_dict(),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"soak-{tl.seed}.json").write_text(json.dumps(data, indent=1, default=str))
    return data


def _count(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
