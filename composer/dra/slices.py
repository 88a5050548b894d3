"""The driver's ResourceSlices from one read of the fabric: pure functions returning JSON-ready dicts.

Every free fabric GPU the composer may hand out (:meth:`composer.model.fabric.FabricView.free`: healthy,
on no machine, without an owner tag, not excluded) is one device of the driver :data:`DRIVER`. A
device carries the GPU's identity and attributes, ``bindsToNode: true``, the binding conditions
:data:`BINDING_CONDITIONS` (the composer sets them True once the GPU is attached to the chosen node
and the node sees it) and the failure condition :data:`BINDING_FAILURE_CONDITIONS` (set when the
attach failed). The scheduler then records the node in the claim's ``allocation.nodeSelector``
and waits in PreBind until every binding condition is True (docs/dra.md "Binding conditions").

Node selection: a GPU can go to the hosts that reach the fabric (nodes the caller serves in DRA
mode that are also Director machines), that its Director group allows (a GPU in a group's pool
only to machines of that group, as the Director's ``predevice`` allows) and that its pool allows
(a GPU reserved to a pool only to hosts of that pool; a shared GPU to any host), the planner's
rules (:mod:`composer.decide.planner`). A slice's ``spec.nodeSelector`` selects those hosts by the
driver's node labels (:func:`reach_labels`: reaches the fabric, Director group, pool), which the
driver writes on the hosts before the slices; an idle composed GPU's slice names its node by
``kubernetes.io/hostname``. A host list would cost the scheduler a parse of the whole list for
every node it filters and every slice.

Pools: the scheduler's allocator takes no device from a pool it sees half rewritten (fewer slices
of the newest generation than ``resourceSliceCount``), so every change of a pool of many slices
would stop allocation from all of them until the last slice is written. Each pool is therefore one
slice (:func:`pool_name`): the free GPUs with the same allowed hosts are spread over
:func:`bucket_count` pools by a stable hash of their name, an idle composed GPU is in its node's
pool, and a compose, a taint or a reclaim rewrites the one pool it touches in one write.

A pool holds at most :data:`MAX_DEVICES` devices per slice, :data:`MAX_DEVICES_WITH_TAINTS` when any
device of the slice carries a taint (``k8s.io/api`` v0.36.3 ``resource/v1/types.go``
``ResourceSliceMaxDevices``, ``ResourceSliceMaxDevicesWithAdvancedFeatures``); a pool above that
(an uneven hash) takes more slices. All slices of a pool carry one generation and the pool's
slice count; :func:`plan_rewrite` raises a pool's generation when its content changes, so
consumers drop its old slices (``ResourcePool.generation``), and names the old slices to delete.
"""

from __future__ import annotations

import copy
import hashlib
import re
import zlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from composer.model.fabric import FabricView
from composer.model.models import HOSTNAME_LABEL, FreeGpu
from domain.composer_mode import DRA_DRIVER, dra_device_name

#: The driver name (:data:`domain.composer_mode.DRA_DRIVER`).
DRIVER = DRA_DRIVER
#: The one pool of the driver: the fabric the composer's Director manages.
POOL = "fabric"
#: Binding conditions, all of which the composer sets True on the claim's device status: the
#: Director attached the GPU to the allocated node, and the node advertises it.
ATTACHED = "Attached"
VISIBLE_ON_NODE = "VisibleOnNode"
BINDING_CONDITIONS: tuple[str, ...] = (ATTACHED, VISIBLE_ON_NODE)
#: Binding failure condition: the attach failed (the scheduler clears the allocation and retries).
ATTACH_FAILED = "AttachFailed"
BINDING_FAILURE_CONDITIONS: tuple[str, ...] = (ATTACH_FAILED,)
#: Taint key of a device kept from new claims (value: the reason), effect NoSchedule.
TAINT_KEY = DRIVER + "/unusable"
#: Node labels the driver writes on each host that reaches the fabric (:func:`reach_labels`), so
#: a slice selects its hosts by label: ``"true"``; the host's Director group; its pool.
REACH_LABEL = DRIVER + "/reaches-fabric"
GROUP_LABEL = DRIVER + "/director-group"
HOST_POOL_LABEL = DRIVER + "/pool"
DRIVER_LABELS: tuple[str, ...] = (REACH_LABEL, GROUP_LABEL, HOST_POOL_LABEL)

#: API limits, ``k8s.io/api`` v0.36.3 ``resource/v1/types.go``.
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS = 64
MAX_ATTRIBUTE_VALUE_LENGTH = 64
#: Free GPUs per pool, on average (:func:`bucket_count`): a pool is one slice, even when some of
#: its devices carry a taint (:data:`MAX_DEVICES_WITH_TAINTS`), but for a rare uneven spread.
DEVICES_PER_POOL = 32

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What the Director says of a GPU beyond :class:`composer.model.fabric.FabricGpu`.

    Attributes:
        director_model: the Director's own model string, the NVML name with blanks (``Tesla T4``,
            ``device/info/gpu`` ``model``); published as ``model``. Empty: not published.
        memory_mib: GPU memory in MiB (Director ``device/info/gpu`` ``dram_size``), published as
            the capacity ``memory``; None: not published.
        fabric: the Director's fabric id (``status/gpu`` ``fabr_id``), published as ``fabric``;
            None: not published.
    """

    director_model: str = ""
    memory_mib: int | None = None
    fabric: int | None = None


def gpu_facts(view: FabricView) -> dict[str, GpuFacts]:
    """Director device name -> :class:`GpuFacts`, for every GPU of ``view``, from the facts
    :func:`composer.model.fabric.read_fabric` kept (no request of its own)."""
    return {g.name: GpuFacts(g.director_model, g.memory_mib, g.fabric) for g in view.gpus}


@dataclass(frozen=True, slots=True)
class SliceSet:
    """The driver's slices for one read of the fabric.

    Attributes:
        slices: ResourceSlice objects (``resource.k8s.io/v1`` dicts), in name order.
        omitted: Director device name -> why the free GPU is not published (no host may take it,
            or its name or an attribute does not fit the API).
    """

    slices: tuple[dict[str, Any], ...] = ()
    omitted: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rewrite:
    """How to bring the driver's ResourceSlices from what is stored to what is wanted.

    Attributes:
        generations: pool name -> the generation its wanted slices carry (every wanted pool).
        apply: slices to create or replace: every slice of each pool whose content changed, the
            pools that lose a device before the others (a GPU moving from one pool to another is
            withdrawn before it is offered again).
        delete: names of stored slices that are not wanted any more (slices of pools that are
            gone, and a changed pool's surplus slices).
    """

    generations: Mapping[str, int] = field(default_factory=dict)
    apply: tuple[dict[str, Any], ...] = ()
    delete: tuple[str, ...] = ()


@lru_cache(maxsize=8192)
def _natural(name: str) -> tuple[Any, ...]:
    """Sort key putting ``gpu2`` before ``gpu10`` (kept per name: a round sorts every host once per
    free GPU)."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def device_name(director_name: str) -> str | None:
    """The device name (a DNS label) for a Director device name, or None when none can be made
    (:func:`domain.composer_mode.dra_device_name`); the Director's own name is published as the
    attribute ``directorName``."""
    return dra_device_name(director_name)


def binary_quantity(mebibytes: int) -> str:
    """``mebibytes`` MiB as the API server stores a quantity with a binary suffix: the largest
    suffix that keeps an integer (``15360`` -> ``15Gi``, ``1000`` -> ``1000Mi``), so a stored slice
    compares equal to a built one (seen on kube-apiserver v1.36.3: ``15360Mi`` is read back ``15Gi``).
    """
    if mebibytes == 0:
        return "0"
    value, suffix = mebibytes, "Mi"
    for bigger in ("Gi", "Ti", "Pi", "Ei"):
        if value % 1024:
            break
        value, suffix = value // 1024, bigger
    return f"{value}{suffix}"


def allowed_hosts(gpu: FreeGpu, *, reach: Mapping[str, str], machine_groups: Mapping[str, str]) -> list[str]:
    """The hosts that may take ``gpu``, sorted.

    Args:
        gpu: a free GPU.
        reach: host (node) name -> pool, of the hosts that reach the fabric.
        machine_groups: machine name -> Director group id (:attr:`FabricView.machine_groups`).
    """
    return sorted(
        (
            h
            for h, pool in reach.items()
            if (gpu.group is None or machine_groups.get(h) == gpu.group)
            and (gpu.pool is None or gpu.pool == pool)
        ),
        key=_natural,
    )


def _device(
    gpu: FreeGpu, name: str, facts: GpuFacts, taint: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """One device entry, or None and why it cannot be published."""
    strings = {
        "productName": gpu.model,
        "model": facts.director_model,
        "pcieSwitch": gpu.switch,
        "pool": gpu.pool or "",
        "directorName": gpu.name,
    }
    too_long = sorted(k for k, v in strings.items() if len(v) > MAX_ATTRIBUTE_VALUE_LENGTH)
    if too_long:
        return None, f"attribute {', '.join(too_long)} longer than {MAX_ATTRIBUTE_VALUE_LENGTH} characters"
    attributes: dict[str, Any] = {
        k: {"string": v} for k, v in strings.items() if v or k == "pool"
    }
    if facts.fabric is not None:
        attributes["fabric"] = {"int": facts.fabric}
    device: dict[str, Any] = {"name": name, "attributes": attributes}
    if facts.memory_mib is not None:
        device["capacity"] = {"memory": {"value": binary_quantity(facts.memory_mib)}}
    device["bindsToNode"] = True
    device["bindingConditions"] = list(BINDING_CONDITIONS)
    device["bindingFailureConditions"] = list(BINDING_FAILURE_CONDITIONS)
    if taint is not None:
        if not _LABEL_VALUE.match(taint):
            return None, f"taint value {taint!r} is not a label value"
        device["taints"] = [{"key": TAINT_KEY, "value": taint, "effect": "NoSchedule"}]
    return device, None


def _node_selector(hosts: Sequence[str]) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": list(hosts)}]}
        ]
    }


def _label_value(value: str | None) -> bool:
    return bool(value) and bool(_LABEL_VALUE.match(str(value)))


def reach_labels(view: FabricView, hosts: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Node name -> the driver's labels it should carry, for each host that reaches the fabric
    (a node of ``hosts`` that is a Director machine): :data:`REACH_LABEL` ``"true"``, its Director
    group as :data:`GROUP_LABEL` and its pool as :data:`HOST_POOL_LABEL` (each only when it is
    a label value)."""
    out: dict[str, dict[str, str]] = {}
    for host, pool in hosts.items():
        if host not in view.machines:
            continue
        labels = {REACH_LABEL: "true"}
        group = view.machine_groups.get(host)
        if group is not None and _label_value(group):
            labels[GROUP_LABEL] = group
        if _label_value(pool):
            labels[HOST_POOL_LABEL] = pool
        out[host] = labels
    return out


def label_changes(
    current: Mapping[str, Mapping[str, str]], wanted: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, str | None]]:
    """Node name -> JSON merge patch of its labels (None deletes) that brings the driver's labels
    of ``current`` (node name -> its labels, every node the driver serves) to ``wanted``
    (:func:`reach_labels`); nodes with nothing to change are left out."""
    out: dict[str, dict[str, str | None]] = {}
    for node, labels in current.items():
        want = wanted.get(node, {})
        change: dict[str, str | None] = {k: v for k, v in want.items() if labels.get(k) != v}
        change.update({k: None for k in DRIVER_LABELS if k in labels and k not in want})
        if change:
            out[node] = change
    return out


def _label_selector(group: str | None, pool: str | None) -> dict[str, Any] | None:
    """The hosts that reach the fabric, of ``group`` and ``pool`` when set, by the driver's node
    labels (:func:`reach_labels`); None when a value is no label value (the caller lists hosts).
    Few values per selector: the scheduler parses a slice's selector again for every node it
    filters (``k8s.io/dynamic-resource-allocation`` v0.36.3 ``NodeMatches`` calls
    ``nodeaffinity.NewNodeSelector``), so a 1,000-host list costs that much per node and slice."""
    exprs = [{"key": REACH_LABEL, "operator": "In", "values": ["true"]}]
    for key, value in ((GROUP_LABEL, group), (HOST_POOL_LABEL, pool)):
        if value is None:
            continue
        if not _label_value(value):
            return None
        exprs.append({"key": key, "operator": "In", "values": [value]})
    return {"nodeSelectorTerms": [{"matchExpressions": exprs}]}


def _segment(value: str) -> str:
    """``value`` as one segment of a pool name (a DNS label): itself when it is one, else ``x``
    and a digest of it (stable, so the pool's name is)."""
    if _DNS_LABEL.match(value):
        return value
    return "x" + hashlib.sha1(value.encode()).hexdigest()[:16]


def bucket_count(gpus: int) -> int:
    """How many pools the free GPUs that share one set of allowed hosts are spread over: one per
    :data:`DEVICES_PER_POOL` GPUs the Director shows (``gpus``: all of them, attached or not, so
    the count changes only when the fabric's hardware does), at least 1."""
    return max(1, -(-gpus // DEVICES_PER_POOL))


def pool_name(gpu: FreeGpu, *, buckets: int, node: str | None = None, prefix: str = POOL) -> str:
    """The pool a published GPU belongs to (a ``ResourcePool.name``: DNS labels joined by ``/``).

    A GPU offered to one node only (an idle composed GPU) is in ``<prefix>/node/<node>``; a free
    GPU in ``<prefix>[/group-<group>]/<pool-<pool> | shared>/b<k>``, ``k`` a stable hash of its
    Director name modulo ``buckets``: every GPU of a pool has the same allowed hosts (one slice
    node selector), and a GPU stays in the same pool while it stays free, so a claim's
    ``driver/pool/device`` keeps naming the same GPU.
    """
    if node is not None:
        return f"{prefix}/node/{_segment(node)}"
    parts = [prefix]
    if gpu.group is not None:
        parts.append("group-" + _segment(gpu.group))
    parts.append("pool-" + _segment(gpu.pool) if gpu.pool is not None else "shared")
    parts.append(f"b{zlib.crc32(gpu.name.encode()) % buckets}")
    return "/".join(parts)


def is_driver_pool(name: object, prefix: str = POOL) -> bool:
    """A pool name of the driver's fabric GPUs (:func:`pool_name`, or the one pool ``prefix``
    earlier versions published)."""
    return isinstance(name, str) and (name == prefix or name.startswith(prefix + "/"))


def slice_name(driver: str, pool: str, index: int) -> str:
    """The name of the ``index``-th slice of ``pool``: ``<driver>-<digest of the pool>-<index>``
    (a DNS subdomain whatever the pool's length; the pool name itself is in the spec)."""
    return f"{driver}-{hashlib.sha1(pool.encode()).hexdigest()[:12]}-{index}"


def build_slices(
    view: FabricView,
    *,
    hosts: Mapping[str, str],
    generation: int,
    device_pools: Mapping[str, str] | None = None,
    excluded: Collection[str] = frozenset(),
    facts: Mapping[str, GpuFacts] | None = None,
    tainted: Mapping[str, str] | None = None,
    idle: Mapping[str, str] | None = None,
    own_tag: str | None = None,
    driver: str = DRIVER,
    pool: str = POOL,
) -> SliceSet:
    """The driver's ResourceSlices for ``view``.

    Args:
        view: one read of the fabric.
        hosts: node name -> pool, of the nodes served in DRA mode; only those that are Director
            machines (``view.machines``) reach the fabric.
        generation: the pool generation every slice carries (>= 0; :func:`plan_rewrite` sets
            each pool's own).
        device_pools: Director device name -> pool it is reserved to (the composer's
            configuration); GPUs not named are shared.
        excluded: Director device names not to publish (reserved by the composer otherwise).
        facts: Director device name -> :class:`GpuFacts` (model string, memory, fabric).
        tainted: Director device name -> reason (a label value, ``ComposeFailed``): published with
            the taint :data:`TAINT_KEY` ``NoSchedule``, so no new claim gets it.
        idle: Director device name -> node, of GPUs the composer attached to that node that no
            claim holds: published for that node only (a claim allocated to one needs no
            compose), when the Director shows it healthy and attached there and the node is
            among ``hosts`` and a machine.
        own_tag: the composer's owner tag: a healthy GPU on no machine carrying it (left by a
            failed compose or an interrupted reclaim until the orphan clean-up clears it) is
            free like an untagged one, as the planner counts it.
        driver: the driver name (a DNS subdomain of at most 63 characters).
        pool: the prefix of the pool names (a DNS label; :func:`pool_name`).

    Returns:
        The slices, one per pool (more only when a pool holds more devices than a slice may),
        named by :func:`slice_name`, each pool's ``resourceSliceCount`` its own; devices sorted
        by name within a slice, slices by pool name; and the free GPUs left out, with why.

    Raises:
        ValueError: ``generation`` is negative, or ``pool`` is not a DNS label.
    """
    if generation < 0:
        raise ValueError(f"generation must be >= 0, got {generation}")
    if not _DNS_LABEL.match(pool):
        raise ValueError(f"pool {pool!r} is not a DNS label")
    facts = facts or {}
    tainted = tainted or {}
    reach = {h: p for h, p in hosts.items() if h in view.machines}
    buckets = bucket_count(len(view.gpus))
    omitted: dict[str, str] = {}
    seen: dict[str, str] = {}
    pools: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    free = view.free(excluded=frozenset(excluded), device_pools=device_pools or {})
    pinned: dict[str, str] = {}
    for g in view.gpus:
        if not g.healthy or g.name in excluded:
            continue
        host = (idle or {}).get(g.name)
        if host is not None and g.machine == host and host in reach:
            pinned[g.name] = host
        elif not (own_tag and g.machine is None and g.owner_tag == own_tag):
            continue
        free.append(FreeGpu(g.name, g.model, g.switch, (device_pools or {}).get(g.name), g.group))
    allowed: dict[tuple[str | None, str | None], tuple[str, ...]] = {}
    for gpu in sorted(free, key=lambda g: _natural(g.name)):
        name = device_name(gpu.name)
        if name is None:
            omitted[gpu.name] = "the name makes no DNS label"
            continue
        if name in seen:
            omitted[gpu.name] = f"device name {name!r} is also {seen[name]!r}'s"
            continue
        host = pinned.get(gpu.name)
        if host is not None:
            targets: tuple[str, ...] = (host,)
            selector = _node_selector(targets)
        else:
            key = (gpu.group, gpu.pool)
            if key not in allowed:  # the same for every GPU of a group and pool: sorted once
                allowed[key] = tuple(allowed_hosts(gpu, reach=reach, machine_groups=view.machine_groups))
            targets = allowed[key]
            selector = _label_selector(gpu.group, gpu.pool) or _node_selector(targets)
        if not targets:
            omitted[gpu.name] = "no host that reaches the fabric may take it"
            continue
        device, why = _device(gpu, name, facts.get(gpu.name, GpuFacts()), tainted.get(gpu.name))
        if device is None:
            omitted[gpu.name] = str(why)
            continue
        seen[name] = gpu.name
        pool_of = pool_name(gpu, buckets=buckets, node=host, prefix=pool)
        pools.setdefault(pool_of, (selector, []))[1].append(device)
    slices = []
    for pool_of in sorted(pools):
        selector, devices = pools[pool_of]
        size = MAX_DEVICES_WITH_TAINTS if any("taints" in d for d in devices) else MAX_DEVICES
        chunks = [devices[i : i + size] for i in range(0, len(devices), size)]
        for index, chunk in enumerate(chunks):
            slices.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": slice_name(driver, pool_of, index)},
                    "spec": {
                        "driver": driver,
                        "pool": {
                            "name": pool_of, "generation": generation, "resourceSliceCount": len(chunks)
                        },
                        "nodeSelector": copy.deepcopy(selector),
                        "devices": chunk,
                    },
                }
            )
    return SliceSet(tuple(slices), omitted)


def _content(slices: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Slice name -> spec without the pool generation and without what the API server adds (a
    taint's ``timeAdded``): what a rewrite compares."""
    out: dict[str, Any] = {}
    for s in slices:
        spec = dict(s.get("spec") or {})  # copied where changed only: a round compares every slice
        if isinstance(spec.get("pool"), Mapping):
            spec["pool"] = {k: v for k, v in spec["pool"].items() if k != "generation"}
        if spec.get("devices"):
            spec["devices"] = [_without_time_added(d) for d in spec["devices"]]
        out[str(s["metadata"]["name"])] = spec
    return out


def _without_time_added(device: Mapping[str, Any]) -> Mapping[str, Any]:
    """``device`` without its taints' ``timeAdded`` (a copy only when it has taints)."""
    taints = device.get("taints")
    if not taints:
        return device
    return {**device, "taints": [{k: v for k, v in t.items() if k != "timeAdded"} for t in taints]}


def _by_pool(slices: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for s in slices:
        out.setdefault(str(s["spec"]["pool"]["name"]), []).append(s)
    return out


def _device_names(slices: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(d.get("name")) for s in slices for d in (s.get("spec") or {}).get("devices") or ()}


def plan_rewrite(stored: Sequence[Mapping[str, Any]], wanted: SliceSet) -> Rewrite:
    """What to write so the driver's pools hold ``wanted``, pool by pool.

    Each pool is compared on its own (a pool of one slice is replaced by one write, so the
    scheduler never sees it half written: the allocator takes no device from an incomplete pool,
    ``k8s.io/dynamic-resource-allocation`` v0.36.3 ``structured/internal/*/allocator_*.go``).

    Args:
        stored: the driver's ResourceSlices as read from the API (dicts with ``metadata.name``,
            ``spec.pool.name`` and ``spec.pool.generation``); only the driver's fabric pools
            (:func:`is_driver_pool`) may be passed.
        wanted: :func:`build_slices` output (any generation).

    Returns:
        For a pool whose content is unchanged (same slice names, same specs but the generation,
        all stored slices at one generation): its stored generation and nothing to write.
        Otherwise its wanted slices at one more than its highest stored generation (0 when new);
        pools that lose a device come first in ``apply``. Stored slices not wanted are deleted.
    """
    old = _by_pool(stored)
    new = _by_pool(wanted.slices)
    generations: dict[str, int] = {}
    shrinking: list[dict[str, Any]] = []
    growing: list[dict[str, Any]] = []
    for pool_of, want in new.items():
        have = old.get(pool_of, [])
        gens = {int(s["spec"]["pool"]["generation"]) for s in have}
        current = max(gens, default=-1)
        if len(gens) == 1 and _content(have) == _content(want):
            generations[pool_of] = current
            continue
        generations[pool_of] = current + 1
        loses = bool(_device_names(have) - _device_names(want))
        for wanted_slice in want:
            body = copy.deepcopy(dict(wanted_slice))
            body["spec"]["pool"]["generation"] = current + 1
            (shrinking if loses else growing).append(body)
    names = {str(s["metadata"]["name"]) for s in wanted.slices}
    gone = {str(s["metadata"]["name"]) for s in stored} - names
    return Rewrite(
        generations=generations,
        apply=tuple(shrinking + growing),
        delete=tuple(sorted(gone, key=_natural)),
    )
