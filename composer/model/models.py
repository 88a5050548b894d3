"""Plain data the composer decides over: pending GPU requests, hosts, free GPUs, plans.

Everything here is an immutable value with no I/O. The Kubernetes adapter
(:mod:`composer.model.podspec`, :mod:`composer.model.nodestate`) and the fabric adapter
(:mod:`composer.model.fabric`) build these from the API objects; the planner
(:mod:`composer.decide.planner`) turns them into a :class:`Plan`.

Units: CPU in millicores, memory in bytes, time in seconds since the epoch.
Names of Kubernetes labels and resources follow NVIDIA GPU Feature Discovery and the
NVIDIA device plugin (declared in :mod:`domain.labels`; docs/domain.md "GPU Feature Discovery").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from domain.gpu_sharing import Offer, is_passthrough_resource

# Resource and label names are declared once in domain.labels; re-exported for the composer.
from domain.labels import COUNT_LABEL as COUNT_LABEL
from domain.labels import GPU_RESOURCE as GPU_RESOURCE
from domain.labels import HOSTNAME_LABEL as HOSTNAME_LABEL
from domain.labels import NVIDIA_RESOURCE_PREFIX as NVIDIA_RESOURCE_PREFIX
from domain.labels import PRODUCT_LABEL as PRODUCT_LABEL

#: Model sentinel for a host that already carries GPUs of more than one model (statically
#: composed by hand): such a host never receives more GPUs from the composer.
MIXED_MODELS = "<mixed>"


def is_gpu_resource(name: str) -> bool:
    """True for NVIDIA GPU resource names: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared``
    (time-slicing/MPS with ``renameByDefault``), MIG slices ``nvidia.com/mig-<profile>`` and the
    sandbox device plugin's passthrough resources ``nvidia.com/<chip>_<name>`` that a KubeVirt
    virt-launcher pod asks for (:func:`domain.gpu_sharing.is_passthrough_resource`)."""
    return (name == GPU_RESOURCE or name.startswith(("nvidia.com/gpu.", "nvidia.com/mig-"))
            or is_passthrough_resource(name))


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (core/v1 ``Toleration``). Empty strings mean "not set"."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint (core/v1 ``Taint``); ``effect`` is NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One node-selector requirement (core/v1 ``NodeSelectorRequirement``).

    ``operator`` is one of In, NotIn, Exists, DoesNotExist, Gt, Lt; ``values`` as in the API.
    A plain ``nodeSelector`` entry ``k: v`` is ``LabelRequirement(k, "In", (v,))``.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What one unschedulable pod needs from the fabric.

    Attributes:
        key: ``namespace/name`` of the pod.
        uid: the pod's UID (intents are keyed on it).
        pool: the pool (tenant or cluster) the pod belongs to; it may only use hosts of this
            pool and GPUs of this pool or of the shared pool.
        resource: the GPU resource name requested (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``,
            ``nvidia.com/mig-1g.5gb``, ...).
        units: how many units of ``resource`` the pod requests (>= 1).
        units_per_gpu: how many units of ``resource`` one physical GPU yields once advertised on
            a host without a sharing setting (1 for whole GPUs; ``unitsPerGpu`` configured by hand).
            A host with one (:class:`HostSharing`) counts by its own offers.
        plain_hosts: hosts without a sharing setting may serve it (False for a resource only
            sharing settings offer, such as ``nvidia.com/gpu.shared``: such hosts never advertise it).
        most_units_per_gpu: the most units of ``resource`` one GPU yields on any host (0: as
            ``units_per_gpu``); :attr:`gpus` is then the fewest GPUs that may serve the pod.
        models: allowed GPU models (GFD product names of the GPUs themselves), or None for any model.
        products: the ``nvidia.com/gpu.product`` values the pod selects, as written (GFD's
            ``-SHARED`` / ``-MIG-<profile>`` suffixes included), or None: the node's label must be
            one of them, which a host's sharing decides (rule 8 of :mod:`composer.decide.planner`).
        hosts: allowed hosts (node names), or None for any host.
        cpu_millis: the pod's CPU request (millicores).
        memory_bytes: the pod's memory request (bytes).
        tolerations: the pod's tolerations.
        node_requirements: other node-label requirements, all of which must hold.
        priority: the pod's priority (higher is planned first).
        created: pod creation time (seconds since the epoch), for first-come ordering.
    """

    key: str
    uid: str
    units: int
    pool: str = "default"
    resource: str = GPU_RESOURCE
    units_per_gpu: int = 1
    plain_hosts: bool = True
    most_units_per_gpu: int = 0
    models: frozenset[str] | None = None
    products: frozenset[str] | None = None
    hosts: frozenset[str] | None = None
    cpu_millis: int = 0
    memory_bytes: int = 0
    tolerations: tuple[Toleration, ...] = ()
    node_requirements: tuple[LabelRequirement, ...] = ()
    priority: int = 0
    created: float = 0.0

    @property
    def namespace(self) -> str:
        """The pod's namespace (the first part of :attr:`key`)."""
        return self.key.split("/", 1)[0]

    @property
    def gpus(self) -> int:
        """Physical GPUs needed when nothing spare is reused, on the host whose GPUs yield the
        most units: ceil(units / max(units_per_gpu, most_units_per_gpu)) (a lower bound)."""
        return -(-self.units // max(1, self.units_per_gpu, self.most_units_per_gpu))


@dataclass(frozen=True, slots=True)
class HostSharing:
    """How a host's GPUs are shared (time-slicing, MPS or MIG): the composer's resource model of it.

    Written by the Pulumi program from the stack's sharing settings (chart value
    ``composer.sharing``; :func:`components.composer.composer_sharing`, both sides derived by
    :mod:`domain.gpu_sharing`). A host without one serves whole GPUs (``nvidia.com/gpu``, one unit
    each) and the resources configured by hand in ``unitsPerGpu``.

    Attributes:
        name: the setting's name (the device-plugin config ``nvidia.com/device-plugin.config``).
        strategy: ``time-slicing``, ``mps`` or ``mig``.
        offers: GPU model (GFD product name) -> what one GPU of it yields on the host, per
            resource; a model missing here is never composed onto the host.
        tenant: the tenant whose setting it is (for messages), or None.
        namespaces: the only namespaces whose pods may get the host's GPUs, or None for any: set
            for time-slicing and MPS, which share every GPU of the node between its pods with no
            memory or fault isolation, so no pod of another tenant may join them.
    """

    name: str
    strategy: str
    offers: Mapping[str, tuple[Offer, ...]] = field(default_factory=dict)
    tenant: str | None = None
    namespaces: frozenset[str] | None = None

    def admits(self, namespace: str) -> bool:
        """A pod of ``namespace`` may get the host's GPUs."""
        return self.namespaces is None or namespace in self.namespaces

    def offer(self, model: str, resource: str) -> Offer | None:
        """What one GPU of ``model`` yields of ``resource`` on the host, or None if nothing."""
        return next((o for o in self.offers.get(model, ()) if o.resource == resource), None)

    def resources(self) -> frozenset[str]:
        """Every resource the host's GPUs may be advertised as."""
        return frozenset(o.resource for offers in self.offers.values() for o in offers)


@dataclass(frozen=True, slots=True)
class HostState:
    """A bare-metal worker (a Kubernetes Node that is also a Director machine) as seen now.

    Attributes:
        name: node name == Director machine name.
        pool: pool the host belongs to.
        cpu_free_millis: allocatable CPU minus requests of pods bound or about to be bound.
        memory_free_bytes: allocatable memory minus such requests.
        model: the GPU model the host carries now (from the Director's attached GPUs or in-flight
            intents), None when it has none, :data:`MIXED_MODELS` if it has several.
        attached: number of GPUs attached now (composer-managed, static and in flight).
        max_gpus: how many GPUs the host can take at most (PCIe slots), None for no limit.
        spare: resource name -> units advertised or in flight but not requested by any pod.
        labels: node labels.
        taints: node taints.
        schedulable: False when cordoned, not Ready or being reclaimed.
        group: the Director group of the machine; GPUs sitting in a group's pool can only be
            composed onto machines of that group (Director ``predevice`` semantics).
        static_gpus: GPUs attached to the host that the composer did not attach (static
            compositions of the Pulumi program, or attached by hand). A host with any is not a
            composition target: the composer composes nothing onto it, and its spare units serve
            only pods of the host's own pool (rule 2 of :mod:`composer.decide.planner`).
        sharing: how the host shares its GPUs (None: whole GPUs, see :class:`HostSharing`).
    """

    name: str
    pool: str = "default"
    cpu_free_millis: int = 0
    memory_free_bytes: int = 0
    model: str | None = None
    attached: int = 0
    max_gpus: int | None = None
    spare: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    schedulable: bool = True
    group: str | None = None
    static_gpus: int = 0
    sharing: HostSharing | None = None


@dataclass(frozen=True, slots=True)
class FreeGpu:
    """A GPU in the Director's free pool.

    Attributes:
        name: Director device name (``gpu7``).
        model: GFD-style product name (``Tesla-T4``).
        switch: PCIe switch id (Director ``swit_gid``), as a string.
        pool: pool the GPU is reserved to, or None for the shared pool.
        group: Director group whose free pool holds it (only that group's machines may take
            it), or None for the system free pool (any machine).
    """

    name: str
    model: str
    switch: str = ""
    pool: str | None = None
    group: str | None = None


class Reason(StrEnum):
    """Why a request got no placement: the reason of the pod's Warning Event (one per cause).

    ``TooManyGpus`` (more GPUs than one host of its pool can take, or than its pool has) and
    ``ModelNotInPool`` (none of its GPU models is in its pool) are decided before planning
    (:mod:`composer.decide.capacity`); the others by the planner.
    """

    INVALID = "InvalidRequest"
    TOO_MANY_GPUS = "TooManyGpus"
    NO_SUCH_MODEL = "ModelNotInPool"
    NO_FREE_GPUS = "NoFreeGpus"
    QUOTA_EXCEEDED = "QuotaExceeded"
    UNKNOWN_HOST = "UnknownHost"
    MODEL_CONFLICT = "ModelConflict"
    NO_HOST_FITS = "NoHostFits"


@dataclass(frozen=True, slots=True)
class Placement:
    """A planned placement of one request.

    Attributes:
        key / uid: the pod (as in :class:`GpuRequest`).
        host: the chosen host.
        model: the GPU model the pod will run on.
        devices: free GPUs to compose onto ``host`` (may be empty when spare units suffice).
        spare_units: units of the request served by units already on the host.
        switches: distinct PCIe switches of ``devices``, in order.
    """

    key: str
    uid: str
    host: str
    model: str
    devices: tuple[str, ...]
    spare_units: int = 0
    switches: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the planner could not place, with a reason and a human message."""

    key: str
    uid: str
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's output: placements and refusals, each in planning order."""

    placements: tuple[Placement, ...] = ()
    refusals: tuple[Refusal, ...] = ()


@dataclass(frozen=True, slots=True)
class EventSpec:
    """A Kubernetes Event to emit about a Pod, a Node or the composer's Lease.

    ``series``: emitted again (by this replica or the next leader), the Event is counted on the
    one Event object of its (object, type, reason), with the message it carries now, instead of
    being created anew (``count``/``lastTimestamp``, as client-go's event correlator does).
    """

    kind: str
    namespace: str
    name: str
    uid: str
    type: str
    reason: str
    message: str
    series: bool = False
