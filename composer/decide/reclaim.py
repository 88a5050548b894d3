"""Idle reclaim and orphan clean-up decisions, one node at a time. No I/O.

- :func:`reclaim_step`: the next :class:`~composer.decide.round_types.ReclaimStep` of a node, a small
  state machine over the node's :class:`~composer.model.annotations.ReclaimPhase` (none -> ``START``
  once idle for ``idle_timeout_seconds``, counted from the node's ``idle-since`` annotation;
  ``TAINTED`` -> ``DECOMPOSE``, or ``ABORT`` when a GPU pod arrived; ``DECOMPOSED`` -> ``FINISH``
  once the node stops advertising the GPUs or after ``advertise_timeout_seconds``; a taint
  without a record -> ``FINISH``);
- :func:`gpu_reclaim_step`: DRA mode's step, per GPU: each composer GPU no allocated claim holds
  has its own idle timer, and those whose timer reached ``idle_timeout_seconds`` are given back
  alone, the node untainted, while other claims on the node go on; an open reclaim goes on as in
  :func:`reclaim_step`;
- :class:`ReclaimGuards`: holds a ``START`` back (``do-not-reclaim``, reclaim windows, the pool's
  budget) and turns a ``DECOMPOSE`` of an opted-out node into ``ABORT``, with one
  ``ReclaimHeld`` Event per reason change (:mod:`composer.decide.reclaim_guard`);
- :func:`orphan_jobs`: composer-tagged GPUs on machines with no Node, and tagged free GPUs,
  handed back after ``orphan_grace_seconds``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from composer.decide import reclaim_guard as guard
from composer.decide.round_types import (
    FREE_POOL,
    Memory,
    NodeJob,
    Policy,
    ReclaimKind,
    ReclaimStep,
    Snapshot,
    lease_event,
    node_event,
)
from composer.model import annotations as ann
from composer.model.annotations import NodeRecord, ReclaimPhase
from composer.model.models import EventSpec
from composer.model.nodestate import NodeView


def reclaim_step(
    node: NodeView,
    record: NodeRecord,
    *,
    attached: Mapping[str, str],
    busy: bool,
    now: float,
    policy: Policy,
    memory: Memory,
) -> tuple[ReclaimStep | None, float | None]:
    """The next reclaim step for a node (see module docstring), and the node's idle timer.

    The idle timer is ``record.idle_since`` (the node's ``idle-since`` annotation, written by
    whichever replica first saw the node idle, so a new leader goes on counting from there):
    kept while the node stays idle with reclaimable GPUs (also when its reclaim starts: a failed
    one is retried after ``memory.reclaim_retry_at``, not after another idle timeout), set to
    ``now`` when it becomes so (or when it names a time to come), None when the node is busy, has
    nothing to reclaim, or a reclaim is under way (its record takes over).

    Returns:
        (step or None, the idle-since time to record, seconds since the epoch, or None).
    """
    if record.reclaim is None:
        if node.reclaim_tainted:
            return ReclaimStep(ReclaimKind.FINISH), None  # taint left behind without a reclaim record
        reclaimable = tuple(sorted((record.devices & attached.keys()) - policy.excluded))
        if busy or not reclaimable:
            return None, None
        since = record.idle_since
        if since is None or not math.isfinite(since) or since > now:  # a time to come: from now on
            since = now
        if now - since >= policy.idle_timeout_seconds and now >= memory.reclaim_retry_at.get(node.name, 0.0):
            return ReclaimStep(ReclaimKind.START, reclaimable), since
        return None, since
    rc = record.reclaim
    if rc.phase is ReclaimPhase.TAINTED:
        if busy:
            return ReclaimStep(ReclaimKind.ABORT), None
        return ReclaimStep(
            ReclaimKind.DECOMPOSE, tuple(d for d in rc.devices if d in attached and d not in policy.excluded)
        ), None
    # DECOMPOSED: lift the taint once the node no longer advertises them
    if node.advertised_gpus <= len(attached) or now - rc.since >= policy.advertise_timeout_seconds:
        return ReclaimStep(ReclaimKind.FINISH), None
    return None, None


def gpu_reclaim_step(
    node: NodeView,
    record: NodeRecord,
    *,
    attached: Mapping[str, str],
    held: frozenset[str],
    now: float,
    policy: Policy,
    memory: Memory,
) -> tuple[ReclaimStep | None, dict[str, float]]:
    """DRA mode's next reclaim step for a node, and its GPUs' idle timers (no I/O, ``memory``
    only read).

    A composer GPU of the node (in ``record.devices``, attached there, not excluded) that no
    allocated claim holds (not in ``held``) and no open reclaim gives back is idle; its timer is
    kept from ``memory.idle_gpus`` (else it starts at ``now``), and a GPU held again loses it, so
    a claim allocated to it before the timeout resets it. With no reclaim open, the GPUs whose
    timer reached ``idle_timeout_seconds`` (and not before ``memory.reclaim_retry_at``) are
    given back by one ``START`` of those devices only (:attr:`ReclaimStep.node_taint` False),
    whatever claims hold the node's other GPUs. An open reclaim (one per node at a time: GPUs
    due meanwhile wait for its ``FINISH``) goes on as :func:`reclaim_step` says, aborted when a
    claim holds one of its GPUs; its steps lift a node taint only where the node carries one
    (left by device-plugin mode).

    Args:
        node: the node as observed.
        record: its record, reconciled.
        attached: Director device name -> model, of the GPUs attached to the node.
        held: GPUs of the node allocated claims hold (or a compose of this round is for).
        now: seconds since the epoch.
        policy: settings (``idle_timeout_seconds``, ``excluded``, ``advertise_timeout_seconds``).
        memory: the controller's memory (``idle_gpus``, ``reclaim_retry_at``).

    Returns:
        (step or None, GPU -> idle since, of the node's idle GPUs: the timers to keep).
    """
    rc = record.reclaim
    giving_back = frozenset(rc.devices) if rc is not None else frozenset()
    idle = (record.devices & attached.keys()) - policy.excluded - held - giving_back
    before = memory.idle_gpus.get(node.name, {})
    timers = {d: before.get(d, now) for d in sorted(idle)}
    if rc is None and not node.reclaim_tainted:
        due = tuple(d for d, since in timers.items() if now - since >= policy.idle_timeout_seconds)
        if due and now >= memory.reclaim_retry_at.get(node.name, 0.0):
            return ReclaimStep(ReclaimKind.START, due, node_taint=False), timers
        return None, timers
    step, _ = reclaim_step(
        node, record, attached=attached, busy=bool(giving_back & held), now=now, policy=policy, memory=memory
    )
    if step is None:
        return None, timers
    return replace(step, node_taint=node.reclaim_tainted), timers


class ReclaimGuards:
    """The reclaim guards of one round (pool sizes and reclaims under way are counted lazily:
    only rounds where a reclaim would start need them)."""

    def __init__(
        self,
        snapshot: Snapshot,
        composable: list[NodeView],
        records: Mapping[str, NodeRecord],
        policy: Policy,
    ) -> None:
        self.snapshot, self.composable, self.records, self.policy = snapshot, composable, records, policy
        self._opted: dict[str, str] | None = None
        self._reclaiming: dict[str, int] | None = None
        self._size: dict[str, int] = {}

    def _pool(self, node: NodeView) -> str:
        return node.labels.get(ann.POOL_LABEL, self.policy.default_pool)

    def opted_out(self, node: NodeView) -> str:
        """What holds ``node`` by the ``do-not-reclaim`` annotation ("" = nothing)."""
        if node.do_not_reclaim:
            return f"node {node.name}"
        if self._opted is None:
            self._opted = {}
            for p in self.snapshot.pods:
                if p.node_name and not p.terminal and guard.opted_out(p.annotations, ann.DO_NOT_RECLAIM):
                    self._opted.setdefault(p.node_name, f"pod {p.key}")
        return self._opted.get(node.name, "")

    def _counts(self) -> dict[str, int]:
        if self._reclaiming is None:
            self._reclaiming = {}
            for n in self.composable:
                if self.records[n.name].reclaim is not None or n.reclaim_tainted:
                    self._reclaiming[self._pool(n)] = self._reclaiming.get(self._pool(n), 0) + 1
            for n in self.snapshot.hidden:
                if n.name in self.snapshot.hidden_reclaiming:
                    self._reclaiming[self._pool(n)] = self._reclaiming.get(self._pool(n), 0) + 1
            for n in (*self.composable, *self.snapshot.hidden):
                self._size[self._pool(n)] = self._size.get(self._pool(n), 0) + 1
        return self._reclaiming

    def check(
        self,
        node: NodeView,
        step: ReclaimStep | None,
        memory: Memory,
        events: list[EventSpec],
        *,
        idle: bool,
    ) -> ReclaimStep | None:
        """``step`` if no guard holds it; None (or ``abort``) and a ``ReclaimHeld`` Event otherwise.
        ``idle``: the node's idle timer runs (:func:`reclaim_step`)."""
        if step is None or step.kind not in (ReclaimKind.START, ReclaimKind.DECOMPOSE):
            if step is None and not idle:
                memory.held.pop(node.name, None)  # not idle any more: a later hold is news again
            return step
        opted = self.opted_out(node)
        if step.kind is ReclaimKind.DECOMPOSE:
            if not opted:
                return step
            text = f"{opted} is annotated do-not-reclaim; reclaim aborted"
            self._report(node, step, guard.Hold.DO_NOT_RECLAIM, text, memory, events)
            return replace(step, kind=ReclaimKind.ABORT, devices=())
        pool = self._pool(node)
        counts = self._counts()
        budget = self.policy.budget_of(pool)
        held = guard.held_by(
            do_not_reclaim=opted,
            now=self.snapshot.now,
            windows=self.policy.reclaim_windows,
            reclaiming=counts.get(pool, 0),
            allowed=None if budget is None else budget.allowed(self._size.get(pool, 0)),
        )
        if held is not None:
            why, text = held
            if why == guard.Hold.BUDGET:
                text += f" (reclaim budget of pool {pool!r}: {budget})"
            self._report(node, step, why, text, memory, events)
            return None
        counts[pool] = counts.get(pool, 0) + 1
        memory.held.pop(node.name, None)
        return step

    @staticmethod
    def _report(
        node: NodeView, step: ReclaimStep, why: guard.Hold, text: str, memory: Memory, events: list[EventSpec]
    ) -> None:
        """One ``ReclaimHeld`` Event per reason change, naming the GPUs ``step`` gives back."""
        if memory.held.get(node.name) == why:
            return
        memory.held[node.name] = why
        events.append(
            node_event(
                node.name,
                "Normal",
                "ReclaimHeld",
                f"idle GPUs {', '.join(sorted(step.devices))} not reclaimed ({why}): {text}",
            )
        )

    def held_counts(self, memory: Memory) -> dict[str, int]:
        """Guard -> nodes it holds now (for the ``reclaims_held`` gauge)."""
        out = {str(h): 0 for h in guard.Hold}
        for why in memory.held.values():
            out[why] = out.get(why, 0) + 1
        return out


def orphan_jobs(
    snapshot: Snapshot,
    records: Mapping[str, NodeRecord],
    planned: frozenset[str],
    policy: Policy,
    memory: Memory,
    events: list[EventSpec],
) -> list[NodeJob]:
    """Jobs decomposing the composer-tagged GPUs of Director machines with no Node once they
    were seen so for ``orphan_grace_seconds`` (a Node that comes back in time keeps them), and
    one clearing the tag of free GPUs no intent names (left by a crash between detach and untag,
    or by a failed compose) after the same time."""
    tagged = snapshot.fabric.tagged(policy.owner_tag)
    if not tagged and not memory.orphan_since:
        return []  # most rounds: nothing to look at
    nodes = {n.name for n in snapshot.nodes} | {n.name for n in snapshot.hidden}
    found: dict[str, list[str]] = {}
    free = [g.name for g in tagged if g.machine is None and g.name not in planned]  # planned: keeps its tag
    for g in tagged:
        if g.machine is not None and g.machine not in nodes:
            found.setdefault(g.machine, []).append(g.name)
    if free:
        intended = {d for rec in records.values() for it in rec.intents.values() for d in it.devices}
        stale = [d for d in free if d not in intended]
        if stale:
            found[FREE_POOL] = stale
    seen = {d for ds in found.values() for d in ds}
    for d in [d for d in memory.orphan_since if d not in seen]:
        del memory.orphan_since[d]
    jobs = []
    for machine, devices in sorted(found.items()):
        fresh = [d for d in devices if d not in memory.orphan_since]
        for d in devices:
            memory.orphan_since.setdefault(d, snapshot.now)
        if fresh and machine != FREE_POOL:
            events.append(
                lease_event(
                    policy,
                    "Warning",
                    "OrphanedGpus",
                    f"{', '.join(sorted(fresh))} attached by this composer to machine {machine}, which "
                    f"has no Node; giving them back to the free pool in {policy.orphan_grace_seconds:.0f} s "
                    f"unless Node {machine} comes back",
                )
            )
        grace = policy.orphan_grace_seconds
        due = tuple(sorted(d for d in devices if snapshot.now - memory.orphan_since[d] >= grace))
        if due:
            for d in due:  # timed again from now: a failed job is retried after another grace period
                memory.orphan_since[d] = snapshot.now
            if machine == FREE_POOL:
                jobs.append(NodeJob(machine, NodeRecord(), NodeRecord(), untag=due))
            else:
                jobs.append(NodeJob(machine, NodeRecord(), NodeRecord(), orphans=due))
    return jobs
