"""The planner: which free GPUs go to which host for a batch of unschedulable pods.

A pure, deterministic function (:func:`plan`) over plain data from :mod:`composer.model.models`:
the same inputs, in any order, give the same :class:`~composer.model.models.Plan`. No I/O.

Rules, in the order they are applied to each request:

1. Requests are planned highest priority first, then pinned before unpinned, then larger
   before smaller (first-fit decreasing), then oldest first, then by ``namespace/name``.
2. A request may use only hosts of its own pool, and GPUs reserved to its pool or shared;
   a pool quota caps the composer-managed GPUs attached to the pool's hosts. A host that carries
   GPUs the composer did not attach (``static_gpus``: a static composition) is not a composition
   target: nothing is composed onto it; its spare units (static GPUs no pod uses) serve pods of
   its own pool only, like every host's.
3. A host carries one GPU model at a time (the GFD product label is per node): a host that
   has GPUs only receives more of the same model.
4. A pinned request (``kubernetes.io/hostname``) only goes to its host(s); every host must
   fit the pod's CPU, memory, taints and node-label requirements, exactly as the scheduler
   will check them (:mod:`composer.decide.scheduling`).
5. Reuse first: units already on a host and not requested by any pod (``spare``) are used
   before composing; then a host that already carries the model (tightest GPU-slot fit);
   only then an empty host (the smallest that fits, leaving big hosts for big pods).
6. The GPUs for one placement come from one PCIe switch when one switch has enough (the
   switch with the fewest free GPUs that still fits); otherwise from the fullest switches.
7. Within a batch no GPU is planned twice and host capacity is consumed as planned.
8. What one GPU yields depends on the host (:func:`units_on`): a host with a GPU sharing setting
   (:class:`~composer.model.models.HostSharing`: time-slicing, MPS or MIG) serves a resource with
   a model only if the setting offers it, with the offer's units per GPU; a host without one serves
   ``r.units_per_gpu`` units per GPU, and no resource that only sharing settings offer. A pod that
   selects ``nvidia.com/gpu.product`` values gets a host whose label will be one of them: GFD
   writes ``<product>-SHARED`` on a time-sliced or MPS node (not renamed) and
   ``<product>-MIG-<profile>`` on a MIG ``single`` node, the plain product elsewhere. A host
   that time-shares its GPUs (time-slicing, MPS) for one tenant serves only pods of that tenant's
   namespaces: no GPU is time-shared between two tenants' pods.

Complexity: O((H + G) log(H + G) + P log P) to build the indexes and order the requests,
then amortised O(1) dictionary operations per request in the common case (bucketed hosts
and switches); worst case O(H) per request when many hosts fail the pod's taint/label/CPU
filters. Measured in ``tests/composer/test_planner.py::test_scale``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from composer.decide.scheduling import labels_match, tolerates
from composer.model.models import (
    MIXED_MODELS,
    PRODUCT_LABEL,
    FreeGpu,
    GpuRequest,
    HostState,
    Placement,
    Plan,
    Reason,
    Refusal,
    Taint,
    Toleration,
)

#: Hosts with at least this many free GPU slots share one bucket (and "no limit" is this).
_SLOT_CAP = 64
_UNLIMITED = 1 << 30


def _name_key(name: str) -> tuple[int, str]:
    """Natural-enough order for device names of one prefix: gpu2 < gpu10."""
    return (len(name), name)


def request_order(r: GpuRequest) -> tuple[int, int, int, float, str]:
    """Sort key of rule 1: priority, pinned first, larger first, oldest first, name."""
    return (-r.priority, 0 if r.hosts is not None else 1, -r.gpus, r.created, r.key)


class _Switch:
    """Free GPUs of one (pool, model) on one PCIe switch; names kept so pop() is the smallest."""

    __slots__ = ("name", "names")

    def __init__(self, name: str, names: list[str]) -> None:
        self.name = name
        self.names = names


class _FreeSet:
    """Free GPUs of one (pool, group, model), bucketed by switch occupancy for best-fit selection."""

    __slots__ = ("pool", "count", "switches", "buckets")

    def __init__(self, pool: str | None, gpus: list[FreeGpu]) -> None:
        self.pool = pool
        by_switch: dict[str, list[str]] = {}
        for g in gpus:
            by_switch.setdefault(g.switch, []).append(g.name)
        self.switches: dict[str, _Switch] = {}
        self.buckets: dict[int, dict[str, None]] = {}
        self.count = 0
        for sw in sorted(by_switch):
            names = sorted(by_switch[sw], key=_name_key, reverse=True)
            self.switches[sw] = _Switch(sw, names)
            self.buckets.setdefault(len(names), {})[sw] = None
            self.count += len(names)

    def _take_from(self, sw: str, k: int) -> list[str]:
        s = self.switches[sw]
        before = len(s.names)
        bucket = self.buckets[before]
        del bucket[sw]
        if not bucket:
            del self.buckets[before]
        out = [s.names.pop() for _ in range(k)]
        if s.names:
            self.buckets.setdefault(len(s.names), {})[sw] = None
        self.count -= k
        return out

    def take(self, k: int) -> list[tuple[str, str]]:
        """Remove and return ``k`` (device, switch) pairs; caller checked ``k <= count``."""
        fits = [c for c in self.buckets if c >= k]
        if fits:
            sw = next(iter(self.buckets[min(fits)]))
            return [(d, sw) for d in self._take_from(sw, k)]
        out: list[tuple[str, str]] = []
        while len(out) < k:
            c = max(self.buckets)
            sw = next(iter(self.buckets[c]))
            out.extend((d, sw) for d in self._take_from(sw, min(c, k - len(out))))
        return out


class _Host:
    """Mutable planning view of one host."""

    __slots__ = (
        "name",
        "pool",
        "group",
        "model",
        "free_slots",
        "cpu",
        "mem",
        "spare",
        "labels",
        "taints",
        "taint_id",
        "schedulable",
        "slot_bucket",
        "spare_keys",
        "static",
        "sharing",
    )

    def __init__(self, h: HostState) -> None:
        self.name = h.name
        self.pool = h.pool
        self.group = h.group
        self.model = h.model
        self.free_slots = _UNLIMITED if h.max_gpus is None else max(0, h.max_gpus - h.attached)
        self.cpu = h.cpu_free_millis
        self.mem = h.memory_free_bytes
        self.spare = {k: v for k, v in h.spare.items() if v > 0} if h.model else {}
        self.labels = h.labels
        self.taints = h.taints
        self.taint_id = 0  # set by the planner: 0 means "no taints"
        self.schedulable = h.schedulable
        self.slot_bucket: tuple[dict[int, dict[str, None]], int] | None = None
        self.spare_keys: list[tuple[dict[int, dict[str, None]], int]] = []
        self.static = h.static_gpus
        self.sharing = h.sharing


@dataclass
class _Index:
    """Hosts bucketed for O(1) candidate lookup; see the module docstring."""

    hosts: dict[str, _Host] = field(default_factory=dict)
    #: pool -> free-slot bucket -> ordered set of empty host names
    empty: dict[str, dict[int, dict[str, None]]] = field(default_factory=dict)
    #: (pool, model) -> free-slot bucket -> ordered set of host names carrying that model
    warm: dict[tuple[str, str], dict[int, dict[str, None]]] = field(default_factory=dict)
    #: (pool, resource) -> spare-units bucket -> ordered set of host names with that many spare
    spare: dict[tuple[str, str], dict[int, dict[str, None]]] = field(default_factory=dict)

    def add(self, h: _Host) -> None:
        if not h.schedulable or h.cpu <= 0 or h.mem <= 0 or h.model == MIXED_MODELS:
            return
        if h.free_slots > 0 and not h.static:
            buckets = (
                self.empty.setdefault(h.pool, {})
                if h.model is None
                else self.warm.setdefault((h.pool, h.model), {})
            )
            slot = min(h.free_slots, _SLOT_CAP)
            buckets.setdefault(slot, {})[h.name] = None
            h.slot_bucket = (buckets, slot)
        for res, n in h.spare.items():
            if n > 0:
                buckets = self.spare.setdefault((h.pool, res), {})
                amount = min(n, _SLOT_CAP)
                buckets.setdefault(amount, {})[h.name] = None
                h.spare_keys.append((buckets, amount))

    def remove(self, h: _Host) -> None:
        if h.slot_bucket is not None:
            buckets, slot = h.slot_bucket
            members = buckets[slot]
            del members[h.name]
            if not members:
                del buckets[slot]
            h.slot_bucket = None
        for buckets, amount in h.spare_keys:
            members = buckets[amount]
            del members[h.name]
            if not members:
                del buckets[amount]
        h.spare_keys = []


def _quota_message(r: GpuRequest, budget: int, need: int) -> str:
    return f"pool {r.pool!r} has {budget} GPU(s) of quota left, the pod needs {need}"


def _no_offer_message(h: _Host, r: GpuRequest, models: Iterable[str]) -> str:
    """Why ``h`` serves ``r`` with none of ``models`` (rule 8)."""
    models = tuple(models)
    wanted = "/".join(sorted(r.products or ()))
    selects = "" if r.products is None else f"; the pod selects {PRODUCT_LABEL} {wanted}"
    if h.sharing is None:
        if not r.plain_hosts:
            return (f"host {h.name} shares no GPUs, so it never advertises {r.resource} "
                    "(only hosts with a GPU sharing setting do)")
        labels = "/".join(models) or "by their model"
        return f"host {h.name} shares no GPUs: GFD labels them {labels}{selects}"
    if not h.sharing.admits(r.namespace):
        whose = f"tenant {h.sharing.tenant!r}" if h.sharing.tenant else "its namespaces"
        return (f"host {h.name} time-shares its GPUs by {h.sharing.strategy} ({h.sharing.name}) between "
                f"pods of {whose} ({', '.join(sorted(h.sharing.namespaces or ()))}); a pod of namespace "
                f"{r.namespace!r} may not share them")
    offers = [o for m in models if (o := h.sharing.offer(m, r.resource)) is not None]
    if offers:
        return (f"host {h.name} shares its GPUs by {h.sharing.strategy} ({h.sharing.name}): GFD labels "
                f"them {'/'.join(sorted({o.product for o in offers}))}{selects}")
    return (f"host {h.name} shares its GPUs by {h.sharing.strategy} ({h.sharing.name}) and offers no "
            f"{r.resource} for {'/'.join(models) or 'any model'}")


@dataclass(frozen=True, slots=True)
class _Option:
    host: _Host
    model: str
    need: int
    spare_use: int
    #: units of the request's resource one GPU of ``model`` yields on ``host``
    per: int = 1


def units_on(h: _Host, r: GpuRequest, model: str) -> int | None:
    """Rule 8: units of ``r.resource`` one GPU of ``model`` yields on ``h``, or None when ``h``
    cannot serve ``r`` with ``model``: a host with a sharing setting counts by its offer for the
    model and resource, and serves a pod selecting product labels only if the offer's label
    (``Tesla-T4-SHARED``, ``<product>-MIG-<profile>``) is one of them; one without, by
    ``r.units_per_gpu``, labelled with the model's own name, unless only sharing settings offer the
    resource. A host that time-shares its GPUs between the pods of one tenant's namespaces
    (``HostSharing.namespaces``) serves no pod of another namespace."""
    if h.sharing is None:
        ok = r.plain_hosts and (r.products is None or model in r.products)
        return r.units_per_gpu if ok else None
    if not h.sharing.admits(r.namespace):
        return None
    offer = h.sharing.offer(model, r.resource)
    if offer is None or (r.products is not None and offer.product not in r.products):
        return None
    return offer.units


def _ceil(units: int, per: int) -> int:
    return -(-units // max(1, per))


@dataclass
class _Planner:
    index: _Index
    free: dict[tuple[str | None, str | None, str], _FreeSet]
    totals: dict[tuple[str | None, str], int]
    models: tuple[str, ...]
    remaining: dict[str, int]
    placements: list[Placement] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    #: interned taint sets and toleration sets, and the memo of tolerates() over their ids
    taint_ids: dict[tuple[Taint, ...], int] = field(default_factory=dict)
    tol_ids: dict[tuple[Toleration, ...], int] = field(default_factory=dict)
    tol_memo: dict[tuple[int, int], bool] = field(default_factory=dict)
    taint_sets: list[tuple[Taint, ...]] = field(default_factory=lambda: [()])
    #: toleration-set id of the request being planned
    cur_tol: int = 0

    def intern_taints(self, h: _Host) -> None:
        if h.taints:
            h.taint_id = self.taint_ids.setdefault(h.taints, len(self.taint_sets))
            if h.taint_id == len(self.taint_sets):
                self.taint_sets.append(h.taints)

    def fits(self, h: _Host, r: GpuRequest) -> bool:
        """CPU, memory, taints and node-label requirements (the scheduler's filters)."""
        if h.cpu < r.cpu_millis or h.mem < r.memory_bytes:
            return False
        if h.taint_id:
            key = (self.cur_tol, h.taint_id)
            ok = self.tol_memo.get(key)
            if ok is None:
                ok = self.tol_memo[key] = tolerates(r.tolerations, h.taints)
            if not ok:
                return False
        return not r.node_requirements or labels_match(r.node_requirements, h.labels)

    # -- free pool ---------------------------------------------------------------------------
    def _sets(self, pool: str, model: str, group: str | None) -> list[_FreeSet]:
        """Free sets a host of ``group`` may draw from for ``pool``, in preference order: the
        group's own pool first (only its machines can use it), the pool's reserved GPUs first."""
        keys: list[tuple[str | None, str | None, str]] = (
            [(pool, group, model), (None, group, model)] if group is not None else [])
        keys += [(pool, None, model), (None, None, model)]
        return [fs for k in keys if (fs := self.free.get(k)) is not None and fs.count]

    def reach(self, pool: str, model: str, group: str | None) -> int:
        """Free GPUs of ``model`` a request of ``pool`` may get on a host of Director ``group``."""
        return sum(fs.count for fs in self._sets(pool, model, group))

    def upper(self, pool: str, model: str) -> int:
        """Free GPUs of ``model`` a request of ``pool`` may get on some host (any group)."""
        return self.totals.get((pool, model), 0) + self.totals.get((None, model), 0)

    def take(self, pool: str, model: str, group: str | None, k: int) -> list[tuple[str, str]]:
        """Take ``k`` GPUs: from one set when one has enough (one switch if possible), else in
        preference order."""
        sets = self._sets(pool, model, group)
        whole = next((fs for fs in sets if fs.count >= k), None)
        out: list[tuple[str, str]] = []
        for fs in [whole] if whole is not None else sets:
            n = min(k - len(out), fs.count)
            out += fs.take(n)
            self.totals[(fs.pool, model)] -= n
            if len(out) == k:
                break
        return out

    # -- options ------------------------------------------------------------------------------
    def option_on(
        self, h: _Host, r: GpuRequest, models: tuple[str, ...], budget: int
    ) -> _Option | tuple[Reason, str]:
        """Can ``r`` go to ``h``? The option, or (reason, message) why not."""
        if h.pool != r.pool:
            return Reason.NO_HOST_FITS, f"host {h.name} belongs to pool {h.pool!r}, the pod to {r.pool!r}"
        if not h.schedulable:
            return Reason.NO_HOST_FITS, f"host {h.name} is cordoned, not Ready or being reclaimed"
        if h.model == MIXED_MODELS:
            return Reason.MODEL_CONFLICT, f"host {h.name} already carries GPUs of several models"
        if h.model is not None and h.model not in models:
            return Reason.MODEL_CONFLICT, (
                f"host {h.name} carries {h.model}; a node holds one GPU model "
                f"and the pod wants {'/'.join(models) or 'another model'}"
            )
        if not self.fits(h, r):
            return Reason.NO_HOST_FITS, (
                f"host {h.name} does not fit the pod (CPU {h.cpu}m / memory "
                f"{h.mem} B free, or taints/labels do not match)"
            )
        if h.model is not None:
            per = units_on(h, r, h.model)
            if per is None:
                return Reason.NO_HOST_FITS, _no_offer_message(h, r, (h.model,))
            spare_use = min(h.spare.get(r.resource, 0), r.units)
            need = _ceil(r.units - spare_use, per)
            if need and h.static:
                return Reason.NO_HOST_FITS, (
                    f"host {h.name} carries {h.static} statically composed GPU(s); the composer composes "
                    f"no GPUs onto it (the pod needs {need} more than its {spare_use} spare unit(s))"
                )
            if need > h.free_slots:
                return Reason.NO_HOST_FITS, f"host {h.name} has {h.free_slots} free GPU slot(s), needs {need}"
            if need > budget:
                return Reason.QUOTA_EXCEEDED, _quota_message(r, budget, need)
            if need and self.reach(r.pool, h.model, h.group) < need:
                return Reason.NO_FREE_GPUS, self._no_free_message(r, (h.model,), need)
            return _Option(h, h.model, need, spare_use, per)
        # an empty host: the model with the most free GPUs it may take
        offered = [(m, per, _ceil(r.units, per)) for m in models if (per := units_on(h, r, m)) is not None]
        if models and not offered:
            return Reason.NO_HOST_FITS, _no_offer_message(h, r, models)
        # no model known at all (no free GPU anywhere): the free pool is what is short
        fewest = min((need for _, _, need in offered), default=_ceil(r.units, r.units_per_gpu))
        if fewest > h.free_slots:
            return Reason.NO_HOST_FITS, f"host {h.name} has {h.free_slots} free GPU slot(s), needs {fewest}"
        if fewest > budget:
            return Reason.QUOTA_EXCEEDED, _quota_message(r, budget, fewest)
        ranked = sorted(
            (
                (m, per, need)
                for m, per, need in offered
                if need <= h.free_slots and need <= budget and self.reach(r.pool, m, h.group) >= need
            ),
            key=lambda o: (-self.reach(r.pool, o[0], h.group), o[0]),
        )
        if not ranked:
            return Reason.NO_FREE_GPUS, self._no_free_message(r, models, fewest)
        model, per, need = ranked[0]
        return _Option(h, model, need, 0, per)

    def _no_free_message(self, r: GpuRequest, models: Iterable[str], need: int) -> str:
        """Why no free GPUs serve ``r``: the free count of each model it names, or of each
        model with free GPUs when it names none (so the text depends on the free pool only,
        not on which hosts were described)."""
        counts = [(m, self.upper(r.pool, m)) for m in models]
        if r.models is None:
            counts = [(m, n) for m, n in counts if n]
        have = ", ".join(f"{m}: {n}" for m, n in counts) or "no free GPU"
        wanted = "/".join(sorted(r.models or [])) or "any model"
        return f"needs {need} free GPU(s) of {wanted}; free pool has {have}"

    def find(self, r: GpuRequest, budget: int) -> _Option | tuple[Reason, str]:
        """Best option for ``r`` by rules 4-5, or why there is none."""
        models = tuple(sorted(r.models)) if r.models is not None else self.models
        if r.hosts is not None:
            return self._find_pinned(r, models, budget)
        g = r.gpus
        spare = self.index.spare.get((r.pool, r.resource))
        if spare:
            opt = self._find_spare(r, models, budget, spare)
            if opt is not None:
                return opt
        if g > budget:
            return Reason.QUOTA_EXCEEDED, _quota_message(r, budget, g)
        ok = sorted(
            (m for m in models if self.upper(r.pool, m) >= g), key=lambda m: (-self.upper(r.pool, m), m)
        )
        if not ok:
            return Reason.NO_FREE_GPUS, self._no_free_message(r, models, g)
        # 5b. hosts that already carry the model: tightest free-slot bucket first (g is the fewest
        # GPUs any host needs; a host's own count follows from what one GPU yields there, rule 8)
        for m in ok:
            buckets = self.index.warm.get((r.pool, m))
            if not buckets:
                continue
            for slot in sorted(s for s in buckets if s >= g):
                for name in buckets[slot]:
                    h = self.index.hosts[name]
                    opt = self._compose_on(h, r, m, budget)
                    if opt is not None:
                        return opt
        # 5c. empty hosts: smallest free-slot bucket that fits, then name order
        buckets = self.index.empty.get(r.pool)
        if buckets:
            for slot in sorted(s for s in buckets if s >= g):
                for name in buckets[slot]:
                    h = self.index.hosts[name]
                    if h.free_slots >= g and self.fits(h, r):
                        fit = next((o for m in ok if (o := self._compose_on(h, r, m, budget))), None)
                        if fit is not None:
                            return fit
        return Reason.NO_HOST_FITS, (
            f"no schedulable host of pool {r.pool!r} with {g} free GPU slot(s) "
            f"fits the pod's CPU/memory/tolerations/node selector "
            f"and offers {r.resource} for a model with free GPUs ({'/'.join(ok)})"
        )

    def _compose_on(self, h: _Host, r: GpuRequest, model: str, budget: int) -> _Option | None:
        """``r`` served on ``h`` by composing GPUs of ``model`` (no spare units), or None when the
        host does not offer the resource for the model, lacks slots, or does not fit, or the
        quota or the free pool is short."""
        per = units_on(h, r, model)
        if per is None:
            return None
        need = _ceil(r.units, per)
        if need <= h.free_slots and need <= budget and self.fits(h, r) and self.reach(
            r.pool, model, h.group
        ) >= need:
            return _Option(h, model, need, 0, per)
        return None

    def _find_spare(
        self, r: GpuRequest, models: tuple[str, ...], budget: int, spare: dict[int, dict[str, None]]
    ) -> _Option | None:
        """Rule 5a: a host with spare units of the resource; whole fits (best fit) first, then
        the most spare topped up with composed GPUs of the host's model."""
        wanted = frozenset(models)
        for amount in sorted(a for a in spare if a >= r.units or a == _SLOT_CAP):
            for name in spare[amount]:
                h = self.index.hosts[name]
                if (
                    h.spare[r.resource] >= r.units
                    and h.model in wanted
                    and (per := units_on(h, r, h.model)) is not None
                    and self.fits(h, r)
                ):
                    return _Option(h, h.model, 0, r.units, per)
        if budget < 1:
            return None
        for amount in sorted((a for a in spare if a < r.units), reverse=True):
            for name in spare[amount]:
                h = self.index.hosts[name]
                if h.model not in wanted or (per := units_on(h, r, h.model)) is None:
                    continue
                have = h.spare[r.resource]
                need = _ceil(r.units - have, per)
                if (
                    0 < need <= budget
                    and not h.static
                    and need <= h.free_slots
                    and self.reach(r.pool, h.model, h.group) >= need
                    and self.fits(h, r)
                ):
                    return _Option(h, h.model, need, have, per)
        return None

    def _find_pinned(
        self, r: GpuRequest, models: tuple[str, ...], budget: int
    ) -> _Option | tuple[Reason, str]:
        assert r.hosts is not None
        known = [self.index.hosts[n] for n in sorted(r.hosts) if n in self.index.hosts]
        if not known:
            return Reason.UNKNOWN_HOST, (
                f"pinned host {'/'.join(sorted(r.hosts))} is not a composable host "
                "(not a Director machine managed by this composer)"
            )
        best: _Option | None = None
        first_no: tuple[Reason, str] | None = None
        for h in known:
            opt = self.option_on(h, r, models, budget)
            if isinstance(opt, _Option):
                if best is None or opt.need < best.need:
                    best = opt
            elif first_no is None:
                first_no = opt
        if best is not None:
            return best
        assert first_no is not None
        return first_no

    # -- apply ---------------------------------------------------------------------------------
    def place(self, r: GpuRequest, opt: _Option) -> None:
        h = opt.host
        taken = self.take(r.pool, opt.model, h.group, opt.need) if opt.need else []
        self.index.remove(h)
        h.model = opt.model
        h.free_slots -= opt.need
        h.cpu -= r.cpu_millis
        h.mem -= r.memory_bytes
        left = h.spare.get(r.resource, 0) - opt.spare_use + opt.need * opt.per - (r.units - opt.spare_use)
        if left > 0:
            h.spare[r.resource] = left
        else:
            h.spare.pop(r.resource, None)
        if opt.need and h.sharing is not None:  # the new GPUs' other resources (MIG mixed: the other
            for o in h.sharing.offers.get(opt.model, ()):  # profiles of the layout) are spare too
                if o.resource != r.resource:
                    h.spare[o.resource] = h.spare.get(o.resource, 0) + opt.need * o.units
        self.index.add(h)
        if r.pool in self.remaining:
            self.remaining[r.pool] -= opt.need
        switches = tuple(dict.fromkeys(sw for _, sw in taken))
        self.placements.append(
            Placement(r.key, r.uid, h.name, opt.model, tuple(d for d, _ in taken), opt.spare_use, switches)
        )


#: Reuse a refusal for later requests of the same shape within a round (see :func:`plan`).
MEMOIZE_REFUSALS = True


def pinned_hosts(requests: Iterable[GpuRequest]) -> frozenset[str] | None:
    """The hosts a batch may be placed on when every request is pinned (the union of their
    ``hosts``); None when any request may go to any host.

    :func:`plan` gives the same plan for such a batch whether it is handed every host or only
    these (``tests/composer/test_planner.py`` checks it on generated worlds), so a round at
    1,000 nodes need not describe the hosts nobody asked for.
    """
    out: set[str] = set()
    for r in requests:
        if r.hosts is None:
            return None
        out |= r.hosts
    return frozenset(out)


def plan(
    requests: Iterable[GpuRequest],
    hosts: Iterable[HostState],
    free_gpus: Iterable[FreeGpu],
    *,
    quotas: Mapping[str, int] | None = None,
    usage: Mapping[str, int] | None = None,
    excluded: Collection[str] = frozenset(),
) -> Plan:
    """Plan a batch of requests onto hosts and free GPUs.

    Args:
        requests: unschedulable pods' GPU needs; requests already being served (an intent is
            in flight for them) must be left out by the caller.
        hosts: composable hosts (Kubernetes nodes that are Director machines).
        free_gpus: the Director's free pool (``GET status/gpu`` joined with ``device/info/gpu``).
        quotas: pool -> most composer-managed GPUs the pool may hold at once (absent = no limit).
        usage: pool -> composer-managed GPUs the pool holds now.
        excluded: device names never to plan (GPUs the program composes statically).

    Returns:
        A :class:`Plan`; every request appears exactly once, as a placement or a refusal.
        Requests with duplicate keys are planned once (the first by :func:`request_order`).

    Raises:
        Nothing for bad data: a request with ``units < 1`` is refused with ``InvalidRequest``.
    """
    excluded_set = frozenset(excluded)
    by_key: dict[tuple[str | None, str | None, str], list[FreeGpu]] = {}
    seen_gpus: set[str] = set()
    for g in sorted(free_gpus, key=lambda g: (g.pool or "", g.group or "", g.model, g.switch, g.name)):
        if g.name in excluded_set or g.name in seen_gpus:
            continue
        seen_gpus.add(g.name)
        by_key.setdefault((g.pool, g.group, g.model), []).append(g)
    free = {k: _FreeSet(k[0], v) for k, v in by_key.items()}
    totals: dict[tuple[str | None, str], int] = {}
    for (pool, _, model), fs in free.items():
        totals[(pool, model)] = totals.get((pool, model), 0) + fs.count

    index = _Index()
    models: set[str] = {m for _, _, m in by_key}
    for hs in sorted(hosts, key=lambda h: h.name):
        if hs.name in index.hosts:
            continue
        h = _Host(hs)
        index.hosts[h.name] = h
        index.add(h)
        if hs.model is not None and hs.model != MIXED_MODELS:
            models.add(hs.model)

    remaining = {p: max(0, q - (usage or {}).get(p, 0)) for p, q in (quotas or {}).items()}
    planner = _Planner(index, free, totals, tuple(sorted(models)), remaining)
    for h in index.hosts.values():
        planner.intern_taints(h)
    seen: set[str] = set()
    # Within a round capacity only shrinks (GPUs, slots, CPU, memory, quota; a host's model only
    # narrows), so a request shaped like one already refused is refused for the same reason.
    # The exception is a placement of a shared resource (more than one unit per GPU), which can leave
    # spare units behind: it clears the memo. This keeps refusal-heavy rounds near-linear.
    # The memo reuses the first refusal's reason; a later twin might by then also lack free GPUs
    # (NoFreeGpus rather than NoHostFits): both are true, placements are identical.
    refused: dict[tuple[object, ...], tuple[Reason, str]] = {}
    for r in sorted(requests, key=request_order):
        if r.key in seen:
            continue
        seen.add(r.key)
        shape = (r.pool, r.resource, r.units, r.units_per_gpu, r.plain_hosts, r.most_units_per_gpu,
                 r.models, r.products, r.hosts, r.cpu_millis, r.memory_bytes, r.tolerations,
                 r.node_requirements, r.namespace)
        if MEMOIZE_REFUSALS and shape in refused:
            planner.refusals.append(Refusal(r.key, r.uid, *refused[shape]))
            continue
        if r.units < 1 or r.units_per_gpu < 1:
            planner.refusals.append(
                Refusal(
                    r.key,
                    r.uid,
                    Reason.INVALID,
                    f"requests {r.units} unit(s) of {r.resource} ({r.units_per_gpu} per GPU)",
                )
            )
            continue
        budget = planner.remaining.get(r.pool, _UNLIMITED)
        planner.cur_tol = planner.tol_ids.setdefault(r.tolerations, len(planner.tol_ids))
        found = planner.find(r, budget)
        if isinstance(found, _Option):
            planner.place(r, found)
            if found.per > 1:
                refused.clear()
        else:
            refused[shape] = (found[0], found[1])
            planner.refusals.append(Refusal(r.key, r.uid, found[0], found[1]))
    return Plan(tuple(planner.placements), tuple(planner.refusals))
