"""One round of DRA mode's node jobs: the claims' compositions and the idle reclaim. No I/O.

The driver's claim side (:func:`composer.dra.binding.plan_binding`) says which GPU to compose onto
which node for which ResourceClaim, and which GPUs allocated claims hold on each node. This
module turns that into the same :class:`~composer.decide.round_types.NodeJob` objects the
device-plugin mode runs (:mod:`composer.shell.act` composes, writes the ``Composing`` intent
first, tags the GPU with the composer's owner tag, records it in the node's
``composer.liqid.io/devices``), through the same phases of :mod:`composer.decide.decide`:

- :func:`~composer.decide.decide.reconcile`: each node's record against the Director (a claim's
  intent ends at once, as no pod has its UID; the GPUs it attached stay managed);
- the compositions, one :class:`~composer.decide.round_types.ComposeItem` per claim and node
  (``kind`` ``ResourceClaim``, not retried: a failure ends in the claim's failure condition, and
  the scheduler picks again);
- :func:`~composer.decide.decide.reclaim`: the idle reclaim per GPU
  (:func:`~composer.decide.reclaim.gpu_reclaim_step`): each composer GPU attached to a node and
  held by no allocated claim has its own idle timer (``Memory.idle_gpus``; a claim allocated to
  it resets it), and once it reached the idle timeout the GPU is given back alone, even while
  other claims hold GPUs of the same node, by a reclaim step of its devices only (the node is not
  tainted); the guards are device-plugin mode's, per node (``do-not-reclaim`` on the node or a
  pod on it, windows, per-pool budgets counting nodes with a reclaim open:
  :class:`~composer.decide.reclaim.ReclaimGuards`), one reclaim per node at a time;
- :func:`~composer.decide.decide.orphans`.

It also says what the slices publish beyond the free pool: each composer GPU attached to a node
and held by no allocated claim (``idle``, offered to that node only: a claim allocated to it
there needs no compose), those a reclaim gives back (``reclaiming``) with the ``NoSchedule``
taint, written before the decompose runs, so no new claim gets them; decomposed, they are free
and published untainted to every host that may take them (their pool's hosts when the GPU is
reserved to a pool).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from composer.decide.decide import Round, orphans, reclaim, reconcile
from composer.decide.round_types import ComposeItem, Decision, Memory, Policy, ReclaimKind, Snapshot
from composer.model.models import GpuRequest, Placement, Plan

#: The taint value of a GPU a reclaim gives back (a label value).
RECLAIMING = "Reclaiming"


@dataclass(frozen=True)
class DraDecision:
    """A DRA-mode round's output.

    Attributes:
        decision: the node jobs (compositions, record updates, reclaim steps, orphans), Events
            and reclaim-guard counts, as :func:`composer.decide.decide.decide` returns them.
        idle: Director GPU name -> node: composer GPUs attached there that no allocated claim
            holds (those a reclaim gives back among them).
        reclaiming: Director GPU name -> :data:`RECLAIMING`: GPUs this round's reclaim steps
            decompose (``START``, or ``DECOMPOSE`` of one under way), to publish tainted before
            the jobs run. GPUs of a node whose job runs (left out of the round) are published
            neither way.
    """

    decision: Decision
    idle: Mapping[str, str] = field(default_factory=dict)
    reclaiming: Mapping[str, str] = field(default_factory=dict)


def decide_dra(
    snapshot: Snapshot,
    memory: Memory,
    policy: Policy,
    *,
    composes: Mapping[str, tuple[Placement, ...]],
    claimed: Mapping[str, frozenset[str]],
) -> DraDecision:
    """Decide one DRA-mode round.

    Args:
        snapshot: what was observed (pods, nodes served in DRA mode, the Director).
        memory: the controller's memory (mutated: idle timers, held reclaims, orphan timers).
        policy: settings.
        composes: node -> placements to compose there
            (:attr:`composer.dra.binding.BindingPlan.composes`); only nodes among
            ``snapshot.nodes`` that are Director machines get a job.
        claimed: node -> GPUs allocated claims hold there (:attr:`composer.dra.binding.BindingPlan.claimed`):
            held, never reclaimed, their idle timers reset.

    Returns:
        The :class:`DraDecision`.
    """
    r = Round.start(snapshot, memory, policy)
    r.claimed = dict(claimed)
    reconcile(r)
    placements = []
    for host, pls in sorted(composes.items()):
        for pl in pls:
            request = GpuRequest(pl.key, pl.uid, len(pl.devices), created=snapshot.now)
            r.by_node.setdefault(host, []).append(ComposeItem(pl, request, kind="ResourceClaim", retry=False))
            placements.append(pl)
    r.plan = Plan(tuple(placements))
    reclaim(r)
    orphans(r)
    reclaiming: dict[str, str] = {}
    for job in r.jobs:
        if job.reclaim is not None and job.reclaim.kind in (ReclaimKind.START, ReclaimKind.DECOMPOSE):
            reclaiming.update((d, RECLAIMING) for d in job.reclaim.devices)
    idle: dict[str, str] = {}
    fabric = snapshot.fabric
    for node in r.composable:
        rec = r.records[node.name]
        attached = fabric.attached(node.name)
        for d in sorted(rec.devices - claimed.get(node.name, frozenset()) - policy.excluded):
            if d in attached:
                idle[d] = node.name
    decision = Decision(
        tuple(r.jobs), tuple(r.events), r.plan, 0, {}, held=r.held, lost=r.lost, adopted=r.adopted
    )
    return DraDecision(decision, idle, reclaiming)
