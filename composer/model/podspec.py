"""Pods as the composer sees them: parsed once from the API's JSON into :class:`PodView`.

Pure functions over the core/v1 Pod JSON (``GET /api/v1/pods``). Sources of the rules:

- effective requests: "Resource Management for Pods and Containers" and "Init Containers"
  (max of each init container, sum of app containers and restartable sidecars, plus
  ``spec.overhead``); a container limit without a request counts as the request;
- unschedulable: condition ``PodScheduled=False`` with reason ``Unschedulable`` while
  ``spec.nodeName`` is empty; pods with ``schedulingGates`` are not yet being scheduled;
- node constraints: ``spec.nodeSelector``, ``requiredDuringSchedulingIgnoredDuringExecution``
  node-affinity terms (ORed; expressions ANDed), ``matchFields`` on ``metadata.name``.

Limitations (documented, convergent): with several affinity terms the composer keeps only
what every term agrees on; ``NotIn``/``DoesNotExist`` on the GPU product label are not used to
pick a model. A pod composed for but still not scheduled is given up after
``scheduleTimeoutSeconds`` and its GPUs are reclaimed when idle.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from kubernetes.utils import parse_quantity

from composer.model.annotations import GATE
from composer.model.models import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    PRODUCT_LABEL,
    GpuRequest,
    LabelRequirement,
    Toleration,
    is_gpu_resource,
)
from domain.gpu_sharing import parse_product_label

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@lru_cache(maxsize=4096)
def quantity(text: str) -> Decimal:
    """A Kubernetes quantity (``500m``, ``512Mi``, ``1.5``) as a Decimal; bad text is 0."""
    try:
        value: Decimal = parse_quantity(text)
    except (ValueError, TypeError):
        return Decimal(0)
    return value


def _timestamp(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0


def _container_requests(c: Mapping[str, Any]) -> dict[str, Decimal]:
    res = c.get("resources") or {}
    merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return {k: quantity(str(v)) for k, v in merged.items()}


def effective_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Resource name -> effective request of the pod (the scheduler's arithmetic)."""
    total: dict[str, Decimal] = {}
    for c in spec.get("containers") or ():
        for k, v in _container_requests(c).items():
            total[k] = total.get(k, Decimal(0)) + v
    for c in spec.get("initContainers") or ():
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":  # sidecar: runs beside the app containers
            for k, v in req.items():
                total[k] = total.get(k, Decimal(0)) + v
        else:
            for k, v in req.items():
                total[k] = max(total.get(k, Decimal(0)), v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, Decimal(0)) + quantity(str(v))
    return total


@dataclass(frozen=True, slots=True)
class Constraints:
    """Node constraints of a pod, split into what the planner handles specially.

    ``models``/``hosts`` None mean unconstrained; ``requirements`` are the remaining node-label
    requirements (all must hold). ``models`` are the ``nvidia.com/gpu.product`` values as the pod
    writes them, GFD's suffixes included (``Tesla-T4-SHARED``, ``NVIDIA-A100-PCIE-40GB-MIG-1g.10gb``);
    :func:`gpu_request` takes them apart.
    """

    models: frozenset[str] | None = None
    hosts: frozenset[str] | None = None
    requirements: tuple[LabelRequirement, ...] = ()


def _term_constraints(term: Mapping[str, Any]) -> Constraints:
    models: frozenset[str] | None = None
    hosts: frozenset[str] | None = None
    reqs: list[LabelRequirement] = []
    for e in term.get("matchExpressions") or ():
        key, op, values = e.get("key", ""), e.get("operator", ""), tuple(e.get("values") or ())
        if key == PRODUCT_LABEL and op == "In":
            models = frozenset(values) if models is None else models & frozenset(values)
        elif key == HOSTNAME_LABEL and op == "In":
            hosts = frozenset(values) if hosts is None else hosts & frozenset(values)
        elif key == PRODUCT_LABEL:
            continue  # NotIn/Exists/...: not used to choose a model (module docstring)
        else:
            reqs.append(LabelRequirement(key, op, values))
    for f in term.get("matchFields") or ():
        if f.get("key") == "metadata.name" and f.get("operator") == "In":
            vals = frozenset(f.get("values") or ())
            hosts = vals if hosts is None else hosts & vals
    return Constraints(models, hosts, tuple(reqs))


def constraints(spec: Mapping[str, Any]) -> Constraints:
    """The node constraints of a pod spec (nodeSelector AND required node affinity)."""
    models: frozenset[str] | None = None
    hosts: frozenset[str] | None = None
    reqs: list[LabelRequirement] = []
    for k, v in sorted((spec.get("nodeSelector") or {}).items()):
        if k == PRODUCT_LABEL:
            models = frozenset({v})
        elif k == HOSTNAME_LABEL:
            hosts = frozenset({v})
        else:
            reqs.append(LabelRequirement(k, "In", (v,)))
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = [_term_constraints(t) for t in required.get("nodeSelectorTerms") or ()]
    if terms:
        t_models: frozenset[str] | None = frozenset()
        t_hosts: frozenset[str] | None = frozenset()
        common = set(terms[0].requirements)
        for t in terms:
            t_models = None if t_models is None or t.models is None else t_models | t.models
            t_hosts = None if t_hosts is None or t.hosts is None else t_hosts | t.hosts
            common &= set(t.requirements)
        if t_models is not None:
            models = t_models if models is None else models & t_models
        if t_hosts is not None:
            hosts = t_hosts if hosts is None else hosts & t_hosts
        reqs.extend(r for r in terms[0].requirements if r in common)
    return Constraints(models, hosts, tuple(reqs))


def tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """The pod's tolerations as values."""
    return tuple(
        Toleration(
            t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect") or ""
        )
        for t in spec.get("tolerations") or ()
    )


@dataclass(frozen=True, slots=True)
class PodView:
    """What the composer needs of one pod.

    Attributes:
        namespace / name / uid: identity.
        node_name: ``spec.nodeName`` ("" while unbound).
        nominated_node: ``status.nominatedNodeName`` ("" if none).
        phase: ``status.phase``.
        unschedulable: the scheduler reported it Unschedulable and it is not bound.
        deleting: ``metadata.deletionTimestamp`` is set.
        created: creation time (seconds since the epoch).
        gpu: GPU resource name -> units requested (only NVIDIA GPU resources).
        cpu_millis / memory_bytes: effective CPU (millicores) and memory (bytes) requests.
        labels: pod labels.
        constraints: node constraints; tolerations; priority (``spec.priority``, default 0).
        gates: names of ``spec.schedulingGates`` (the scheduler ignores the pod while any is set).
        node_selector: ``spec.nodeSelector`` as written.
        annotations: pod annotations.
        seen_at: when the composer's watch first delivered the pod (seconds since the epoch; 0
            = unknown, e.g. a listed pod); not part of the view's equality.
    """

    namespace: str
    name: str
    uid: str
    node_name: str = ""
    nominated_node: str = ""
    phase: str = "Pending"
    unschedulable: bool = False
    deleting: bool = False
    created: float = 0.0
    gpu: Mapping[str, int] = field(default_factory=dict)
    cpu_millis: int = 0
    memory_bytes: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    constraints: Constraints = field(default_factory=Constraints)
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0
    gates: tuple[str, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    seen_at: float = field(default=0.0, compare=False)

    @property
    def gated(self) -> bool:
        """Held by the composer's scheduling gate (``composer.liqid.io/compose``)."""
        return GATE in self.gates

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """Succeeded or Failed: holds no resources on its node any more."""
        return self.phase in TERMINAL_PHASES

    @property
    def wants_gpu(self) -> bool:
        """Requests any NVIDIA GPU resource."""
        return bool(self.gpu)


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """Parse one core/v1 Pod JSON object. Missing fields take their API defaults."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName") or ""
    unsched = (
        not node
        and not spec.get("schedulingGates")
        and any(
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
            for c in status.get("conditions") or ()
        )
    )
    req = effective_requests(spec)
    gpu = {k: int(v) for k, v in req.items() if is_gpu_resource(k) and v > 0}
    return PodView(
        namespace=meta.get("namespace") or "default",
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        node_name=node,
        nominated_node=status.get("nominatedNodeName") or "",
        phase=status.get("phase") or "Pending",
        unschedulable=unsched,
        deleting=bool(meta.get("deletionTimestamp")),
        created=_timestamp(meta.get("creationTimestamp")),
        gpu=gpu,
        cpu_millis=int(req.get("cpu", Decimal(0)) * 1000),
        memory_bytes=int(req.get("memory", Decimal(0))),
        labels=meta.get("labels") or {},
        constraints=constraints(spec),
        tolerations=tolerations(spec),
        priority=int(spec.get("priority") or 0),
        gates=tuple(str(g.get("name") or "") for g in spec.get("schedulingGates") or ()),
        node_selector=spec.get("nodeSelector") or {},
        annotations=meta.get("annotations") or {},
    )


class InvalidRequest(ValueError):
    """A GPU pod the composer cannot serve as written; the message says why (for an Event)."""


def gpu_request(
    pod: PodView,
    *,
    pool: str,
    units_per_gpu: Mapping[str, int] | None = None,
    resource_models: Mapping[str, frozenset[str]] | None = None,
    sharing_only: Collection[str] = frozenset(),
    most_units: Mapping[str, int] | None = None,
) -> GpuRequest:
    """The planner's view of an unschedulable GPU pod.

    Args:
        pod: the parsed pod (must request a GPU resource).
        pool: the pool of the pod's namespace.
        units_per_gpu: resource name -> units one GPU yields on a host without a sharing setting
            (absent = 1, i.e. conservative).
        resource_models: resource name -> GPU models that can provide it (e.g. MIG profiles
            only on A100-class GPUs); intersected with the pod's own model choice.

    The pod's ``nvidia.com/gpu.product`` values become ``products`` as written and ``models`` as
    the GPUs behind them (:func:`domain.gpu_sharing.parse_product_label`: ``Tesla-T4-SHARED`` is a
    Tesla-T4 on a node that shares it, ``NVIDIA-A100-PCIE-40GB-MIG-1g.10gb`` an A100 40GB on a
    node of MIG ``single`` strategy with 1g.10gb devices).
        sharing_only: resources only hosts with a sharing setting advertise.
        most_units: resource name -> the most units one GPU yields of it on a host with a
            sharing setting (:attr:`composer.decide.round_types.Policy.most_units`).

    Returns:
        The :class:`GpuRequest`.

    Raises:
        InvalidRequest: the pod asks for several GPU resources at once (not supported: one
            resource per pod).
    """
    if len(pod.gpu) != 1:
        raise InvalidRequest(
            f"requests several GPU resources ({', '.join(sorted(pod.gpu))}); one per pod is supported"
        )
    resource, units = next(iter(pod.gpu.items()))
    products = pod.constraints.models
    models = None if products is None else frozenset(parse_product_label(v).base for v in products)
    allowed = (resource_models or {}).get(resource)
    if allowed is not None:
        models = allowed if models is None else models & allowed
    return GpuRequest(
        key=pod.key,
        uid=pod.uid,
        units=units,
        pool=pool,
        resource=resource,
        units_per_gpu=1 if resource == GPU_RESOURCE else (units_per_gpu or {}).get(resource, 1),
        plain_hosts=resource not in sharing_only,
        most_units_per_gpu=(most_units or {}).get(resource, 0),
        models=models,
        products=products,
        hosts=pod.constraints.hosts,
        cpu_millis=pod.cpu_millis,
        memory_bytes=pod.memory_bytes,
        tolerations=pod.tolerations,
        node_requirements=pod.constraints.requirements,
        priority=pod.priority,
        created=pod.created,
    )
