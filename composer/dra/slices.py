"""The driver's ResourceSlices from one read of the fabric: pure functions returning JSON-ready dicts.

Every free fabric GPU the composer may hand out (:meth:`composer.model.fabric.FabricView.free`: healthy,
on no machine, without an owner tag, not excluded) is one device of the driver :data:`DRIVER` in
the pool :data:`POOL`. A device carries the GPU's identity and attributes, ``bindsToNode: true``,
the binding conditions :data:`BINDING_CONDITIONS` (the composer sets them True once the GPU is
attached to the chosen node and the node sees it) and the failure condition
:data:`BINDING_FAILURE_CONDITIONS` (set when the attach failed). The scheduler then records the
node in the claim's ``allocation.nodeSelector`` and waits in PreBind until every binding
condition is True (docs/dra.md "Binding conditions").

Node selection: a GPU can go to the hosts that reach the fabric (nodes the caller serves in DRA
mode that are also Director machines), that its Director group allows (a GPU in a group's pool
only to machines of that group, as the Director's ``predevice`` allows) and that its pool allows
(a GPU reserved to a pool only to hosts of that pool; a shared GPU to any host), the planner's
rules (:mod:`composer.decide.planner`). Devices with the same allowed hosts share slices whose
``spec.nodeSelector`` lists those hosts by ``kubernetes.io/hostname`` (the label the composer's
gate release also pins pods with). The API's per-device selection
(``perDeviceNodeSelection``) would express the same, but it repeats the host list on every device
(at 1,000 hosts about 2 MB for 128 devices, over etcd's 1.5 MiB request limit) and needs the
``DRAPartitionableDevices`` gate, which is off before 1.36.

Slices hold at most :data:`MAX_DEVICES` devices, :data:`MAX_DEVICES_WITH_TAINTS` when any device of
the slice carries a taint (``k8s.io/api`` v0.36.3 ``resource/v1/types.go``
``ResourceSliceMaxDevices``, ``ResourceSliceMaxDevicesWithAdvancedFeatures``). All slices of the
pool carry one generation and the pool's slice count; :func:`plan_rewrite` raises the generation
when the content changes, so consumers drop the old slices (``ResourcePool.generation``), and names
the old slices to delete.
"""

from __future__ import annotations

import copy
import re
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

#: API limits, ``k8s.io/api`` v0.36.3 ``resource/v1/types.go``.
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS = 64
MAX_ATTRIBUTE_VALUE_LENGTH = 64
MAX_NAME_LENGTH = 253

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
    """How to bring the pool's ResourceSlices from what is stored to what is wanted.

    Attributes:
        generation: the pool generation the wanted slices carry.
        apply: slices to create or replace (every wanted slice when anything changed, else none).
        delete: names of stored slices of the pool that are not wanted any more.
    """

    generation: int
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
        generation: the pool generation every slice carries (>= 0).
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
        pool: the pool name (a DNS label).

    Returns:
        The slices, named ``<driver>-<pool>-<n>`` from 0, in that order; devices sorted by name
        within a slice, slices by their host list; and the free GPUs left out, with why.

    Raises:
        ValueError: ``generation`` is negative, ``pool`` is not a DNS label, or a slice name would
            be longer than 253 characters.
    """
    if generation < 0:
        raise ValueError(f"generation must be >= 0, got {generation}")
    if not _DNS_LABEL.match(pool):
        raise ValueError(f"pool {pool!r} is not a DNS label")
    facts = facts or {}
    tainted = tainted or {}
    reach = {h: p for h, p in hosts.items() if h in view.machines}
    omitted: dict[str, str] = {}
    seen: dict[str, str] = {}
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    free = view.free(excluded=frozenset(excluded), device_pools=device_pools or {})
    pinned: dict[str, tuple[str, ...]] = {}
    for g in view.gpus:
        if not g.healthy or g.name in excluded:
            continue
        host = (idle or {}).get(g.name)
        if host is not None and g.machine == host and host in reach:
            pinned[g.name] = (host,)
        elif not (own_tag and g.machine is None and g.owner_tag == own_tag):
            continue
        free.append(FreeGpu(g.name, g.model, g.switch, (device_pools or {}).get(g.name), g.group))
    for gpu in sorted(free, key=lambda g: _natural(g.name)):
        name = device_name(gpu.name)
        if name is None:
            omitted[gpu.name] = "the name makes no DNS label"
            continue
        if name in seen:
            omitted[gpu.name] = f"device name {name!r} is also {seen[name]!r}'s"
            continue
        targets = pinned.get(gpu.name) or tuple(
            allowed_hosts(gpu, reach=reach, machine_groups=view.machine_groups)
        )
        if not targets:
            omitted[gpu.name] = "no host that reaches the fabric may take it"
            continue
        device, why = _device(gpu, name, facts.get(gpu.name, GpuFacts()), tainted.get(gpu.name))
        if device is None:
            omitted[gpu.name] = str(why)
            continue
        seen[name] = gpu.name
        groups.setdefault(targets, []).append(device)
    chunks: list[tuple[tuple[str, ...], list[dict[str, Any]]]] = []
    for targets in sorted(groups, key=lambda t: [_natural(h) for h in t]):
        devices = groups[targets]
        size = MAX_DEVICES_WITH_TAINTS if any("taints" in d for d in devices) else MAX_DEVICES
        chunks.extend((targets, devices[i : i + size]) for i in range(0, len(devices), size))
    slices = []
    for index, (targets, devices) in enumerate(chunks):
        name = f"{driver}-{pool}-{index}"
        if len(name) > MAX_NAME_LENGTH:
            raise ValueError(f"slice name {name[:40]}... is longer than {MAX_NAME_LENGTH} characters")
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": name},
                "spec": {
                    "driver": driver,
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": len(chunks)},
                    "nodeSelector": _node_selector(targets),
                    "devices": devices,
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


def plan_rewrite(stored: Sequence[Mapping[str, Any]], wanted: SliceSet) -> Rewrite:
    """What to write so the pool holds ``wanted``.

    Args:
        stored: the ResourceSlices of the driver's pool as read from the API (dicts with
            ``metadata.name`` and ``spec.pool.generation``); slices of other drivers or pools must
            not be passed.
        wanted: :func:`build_slices` output (any generation).

    Returns:
        Unchanged content (same names, same specs but the generation, all stored slices at one
        generation): the stored generation and nothing to write. Otherwise the wanted slices at one
        more than the highest stored generation (0 when nothing is stored), and the stored names
        not wanted. A half-written pool (slices at different generations) is written again.
    """
    generations = {int(s["spec"]["pool"]["generation"]) for s in stored}
    current = max(generations, default=-1)
    if len(generations) == 1 and _content(stored) == _content(wanted.slices):
        return Rewrite(generation=current)
    generation = current + 1
    apply = []
    for wanted_slice in wanted.slices:
        new = copy.deepcopy(wanted_slice)
        new["spec"]["pool"]["generation"] = generation
        apply.append(new)
    names = {str(s["metadata"]["name"]) for s in wanted.slices}
    gone = {str(s["metadata"]["name"]) for s in stored} - names
    delete = tuple(sorted(gone, key=_natural))
    return Rewrite(generation=generation, apply=tuple(apply), delete=delete)
