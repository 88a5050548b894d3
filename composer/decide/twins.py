"""Empty hosts the planner cannot tell apart: a batch needs only the first few of them.

At 5,000 nodes most composable hosts are empty and alike (same pool, Director group, free CPU
and memory, slot limit, labels but their own hostname, taints, sharing setting). For such
twins :func:`composer.decide.planner.plan` differs only in name order: an unpinned request
takes the first twin, in name order, that it fits (rule 5c: "empty hosts: smallest free-slot
bucket that fits, then name order"), and a twin it does not fit, it fits none of. A placement
turns its twin into a host carrying a model, so a batch of ``n`` requests uses at most the first
``n`` twins of each kind, and :func:`without_twins` keeps those and drops the rest: ``plan``
over the kept hosts gives the same plan as over all of them
(``tests/composer/test_twins.py`` checks it on generated worlds). The round then describes
and indexes a few hosts per kind instead of every host.

Kept whatever their kind: hosts that are not empty (they carry or await GPUs, have spare or
static units), hosts a request names (``GpuRequest.hosts``), and every host when a request's
node-label requirements name the hostname label (``HOSTNAME_LABEL``, the only label twins may
differ in: such requirements could tell twins apart). Pure, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Hashable, Iterable
from typing import TypeVar

from composer.model.models import HOSTNAME_LABEL, GpuRequest, HostState

H = TypeVar("H")


def empty_host_kind(h: HostState) -> Hashable | None:
    """What :func:`composer.decide.planner.plan` reads of an empty host, its name and hostname
    label aside; None for a host that is not empty (a model, attached or in-flight GPUs, spare
    units or static GPUs). Two hosts of one kind are twins. The sharing setting counts by
    identity (the policy gives one object per setting), so equal settings held in two objects
    make two kinds, never one."""
    if h.model is not None or h.attached or h.spare or h.static_gpus:
        return None
    labels = frozenset((k, v) for k, v in h.labels.items() if k != HOSTNAME_LABEL)
    return (
        h.pool,
        h.group,
        h.cpu_free_millis,
        h.memory_free_bytes,
        h.max_gpus,
        labels,
        h.taints,
        h.schedulable,
        None if h.sharing is None else id(h.sharing),
    )


def without_twins(
    requests: Collection[GpuRequest],
    hosts: Iterable[H],
    *,
    kind: Callable[[H], Hashable | None],
    name: Callable[[H], str],
) -> list[H]:
    """``hosts`` with each kind of twins cut to the first ``len(requests)`` by name (the
    planner's order: plain string order); see the module docstring for what is always kept.

    Args:
        requests: the batch to plan.
        hosts: the composable hosts (any type: ``kind`` and ``name`` read them).
        kind: a host's kind (:func:`empty_host_kind` for a ``HostState``), None when not empty.
        name: a host's name.

    Returns:
        The kept hosts: the ones of no kind first, in their given order, then each kind's.
    """
    if any(q.key == HOSTNAME_LABEL for r in requests for q in r.node_requirements):
        return list(hosts)
    named: set[str] = set()
    for r in requests:
        if r.hosts is not None:
            named |= r.hosts
    keep = len(requests)
    out: list[H] = []
    kinds: dict[Hashable, list[H]] = {}
    for h in hosts:
        k = kind(h)
        if k is None or name(h) in named:
            out.append(h)
        else:
            kinds.setdefault(k, []).append(h)
    for members in kinds.values():
        out += members if len(members) <= keep else heapq.nsmallest(keep, members, key=name)
    return out
