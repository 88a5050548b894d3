"""Typed models of the LIQID Director REST API payloads, and the joined :class:`Gpu` view.

Wire models mirror the Director's JSON field names (``mach_id``, ``grp_id``, ``fabr_gid``...)
and types as LIQID's SDK publishes them (``liqidinc/liqidsdk-go`` ``liqidsdk/types_gen.go``;
transcribed in ``tests/fixtures/director/sdk_types.json``). They keep unknown fields
(``extra="allow"``) so a record read from the Director can be sent back verbatim, which is what
``fabric/edit``, ``relate/gpu`` and ``predevice/gpu`` expect as request bodies.

The boundary parses what the SDK types as strings into typed values: the placeholder ``"n/a"``
(:data:`~.liqid.NA`) becomes ``None``, ``PreDevice.mach_id`` (a decimal string) and
``GPUDeviceInfo.dram_size`` become integers. Past the client, code only sees these models and
:class:`Gpu`, never raw dicts. Fixtures: ``tests/fixtures/director/*.json``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

from domain.gfd import gfd_product_name

from .liqid import HEALTHY_DEVICE_STATES, NA

__all__ = [
    "HEALTHY_DEVICE_STATES",
    "AsyncStatus",
    "Coordinates",
    "DeviceStatus",
    "DigestInfo",
    "ErrorMessage",
    "Envelope",
    "Gpu",
    "GpuInfo",
    "Group",
    "GroupGpuRelator",
    "GroupPool",
    "Machine",
    "MachineDetails",
    "MachineGpuRelator",
    "PreDevice",
    "UserDescription",
    "gfd_product_name",
]


def _absent(value: Any) -> Any:
    """``"n/a"`` (and ``""``) -> ``None``: the Director's way of saying "no value"."""
    if isinstance(value, str) and value.strip() in (NA, ""):
        return None
    return value


def _int_or_none(value: Any) -> Any:
    """A decimal string (``"12"``), an int, or an absent value -> ``int | None``; other text
    (a unit the SDK does not publish) -> ``None``."""
    value = _absent(value)
    if isinstance(value, str):
        text = value.strip()
        return int(text) if text.isdigit() else None
    return value


#: A string field where the Director writes ``"n/a"`` for "none".
OptionalText = Annotated[str | None, BeforeValidator(_absent)]
#: A number the SDK types as a string (``"12"``, or ``"n/a"``).
OptionalNumber = Annotated[int | None, BeforeValidator(_int_or_none)]


class _Wire(BaseModel):
    """Base of wire models: keep unknown fields, allow construction by field name."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def wire(self) -> dict[str, Any]:
        """The record as the Director's JSON (aliases, unknown fields kept)."""
        return self.model_dump(by_alias=True, mode="json")


class ErrorMessage(_Wire):
    """One ``errors[]`` entry of the envelope (LIQID Go SDK ``ErrorMessage``)."""

    code: int = 0
    message: str = ""
    type: str = ""


class _EnvelopeBody(_Wire):
    code: int = 0
    errors: list[ErrorMessage] | None = None
    data: list[Any] | None = None


class Envelope(_Wire):
    """``{"response": {"code": 0, "errors": null, "data": [...]}}``; non-zero code or errors = failure.

    A Director answers ``errors: null`` on success (the Go SDK fails a call whose ``errors`` is
    not nil, ``liqidsdk/client.go:491``); ``[]`` is read as success too, as the Java SDK does
    (``Wrapper.java:48-57``). ``data`` may be ``null`` on failure.
    """

    response: _EnvelopeBody

    @property
    def failed(self) -> bool:
        """True when the Director reports a failure (non-zero ``code`` or any ``errors``)."""
        return self.response.code != 0 or bool(self.response.errors)

    @property
    def data(self) -> list[Any]:
        """The ``data`` list (empty when absent)."""
        return list(self.response.data or [])


class Coordinates(_Wire):
    """Liqid coordinates ``{rack, shelf, node}`` (``GET coordinates``; ``types_gen.go:142-154``:
    rack and shelf obsolete, always 0)."""

    rack: int = 0
    shelf: int = 0
    node: int = 0


class GroupPool(_Wire):
    """Body and answer of ``pool/edit``, ``pool/done``, ``pool/cancel`` (LIQID ``GroupPool``,
    ``types_gen.go:1691-1703``): the group, the Director's coordinates and its fabric id."""

    coordinates: Coordinates
    fabr_id: int
    grp_id: int


class AsyncStatus(_Wire):
    """Poll answer of an asynchronous job (LIQID ``AsynchronousStatus``, ``types_gen.go:43-55``)."""

    command_execution_state: str
    device_id: str = ""
    execution_date: str = ""


class DeviceStatus(_Wire):
    """Live status of one device (``GET status``, ``GET status/gpu``; LIQID ``DeviceStatus``).

    Attributes:
        name: device name, unique on the fabric (``gpu7``, ``pcpu0``).
        dev_id: device id, hex string (``0x00000b07``); used in ``device/udesc`` paths.
        device_type: LIQID ``DeviceType``: ``gpu``, ``compute``... (``enums_gen.go:65-138``).
        device_state: ``active | online`` when healthy (see :data:`HEALTHY_DEVICE_STATES`).
        fabr_id: id of the fabric the device sits on.
        fabr_gid: the device's fabric-global id (hex string).
        swit_gid: global id of the PCIe switch the device hangs off (hex string).
        port_gid: global id of its switch port (hex string).
    """

    name: str
    dev_id: str
    device_type: str = "gpu"
    device_state: str = ""
    fabr_id: int = 0
    fabr_gid: str = ""
    swit_gid: str = ""
    port_gid: str = ""
    index: int = 0
    lanes: int | None = None
    location: Coordinates = Field(default_factory=Coordinates)
    owner: Coordinates = Field(default_factory=Coordinates)
    type: str = ""


class GpuInfo(_Wire):
    """Non-status facts of one GPU (``GET device/info/gpu``; LIQID ``GPUDeviceInfo``).

    Attributes:
        name: device name; joins to :class:`DeviceStatus` ``name``.
        vendor: ``NVIDIA Corporation``.
        model: NVML-style product name with blanks (``Tesla T4``).
        dram_size: GPU memory in MiB, or ``None``. A string in the SDK (``types_gen.go:1358``);
            the unit (MiB) is this project's assumption.
        udesc: user description, ``None`` when the Director says ``"n/a"``; this project writes
            its owner tag there.
    """

    name: str
    dev_id: str = ""
    vendor: str = ""
    model: str = ""
    dram_size: OptionalNumber = None
    udesc: OptionalText = None
    serial_num: str | None = None


class UserDescription(_Wire):
    """``{"udesc": "..."}`` (LIQID ``DeviceUserDescription``)."""

    udesc: str = ""


class Group(_Wire):
    """A group: a free device pool plus machines (LIQID ``Group``)."""

    grp_id: int
    group_name: str
    fabr_id: int = 0
    pod_id: int = -1


class Machine(_Wire):
    """A machine: one bare-metal host on the fabric (LIQID ``Machine``).

    ``mach_name`` equals the Kubernetes node name (``blade-slot-1``), a project convention.
    """

    mach_id: int
    mach_name: str
    grp_id: int
    fabr_id: int = 0
    p2p: str = "off"
    index: int | None = None
    comp_name: str | None = None
    fabr_gid: str | None = None
    port_gid: str | None = None
    swit_gid: str | None = None
    mtime: int | None = None


class MachineDetails(_Wire):
    """``GET machine/details/{id}`` (LIQID ``MachineDetails``); only the ids are typed."""

    mach_id: int
    mach_name: str
    gpu_count: int | None = Field(default=None, alias="gpu-count")


class PreDevice(_Wire):
    """A device assigned to a group (``GET predevice?grp_id=``; LIQID ``PreDevice``).

    On the wire ``mach_id`` is a decimal string, ``mname`` and ``owner_id`` strings, all three
    ``"n/a"`` while the device sits in the group's free pool (``PreDevice.java:136-186``), and
    ``index`` a string; here ``mach_id`` is an ``int`` and the absent ones ``None``.
    """

    name: str
    dev_type: str = "gpu"
    grp_id: int
    gname: str | None = None
    index: OptionalNumber = None
    mach_id: OptionalNumber = None
    mname: OptionalText = None
    owner_id: OptionalText = None
    fabr_gid: str | None = None
    swit_gid: str | None = None


class DigestInfo(_Wire):
    """``POST digest/{label}`` answer; ``digest_key`` is sent as ``X-API-Key`` afterwards."""

    digest_id: int | None = None
    digest_key: SecretStr
    digest_label: str


class GroupGpuRelator(_Wire):
    """Body of ``POST/DELETE predevice/gpu``: a GPU status record and a group."""

    device_status: DeviceStatus = Field(alias="deviceStatus")
    group: Group


class MachineGpuRelator(_Wire):
    """Body of ``POST/DELETE relate/gpu``: a group-GPU relator and the machine."""

    group_device_relator: GroupGpuRelator = Field(alias="groupDeviceRelator")
    machine: Machine


class Gpu(BaseModel):
    """One GPU as the rest of the project sees it: status, info and assignment joined.

    Built by ``DirectorClient.gpus()`` from ``status/gpu``, ``device/info/gpu`` and
    ``predevice`` (joined by ``name``), plus group and machine names.

    Attributes:
        name: device name (``gpu7``).
        dev_id: device id, hex string.
        model: GFD product name (``Tesla-T4``, ``NVIDIA-A100-PCIE-40GB``), see :func:`gfd_product_name`.
        director_model: the Director's own model string (``Tesla T4``).
        vendor: ``NVIDIA Corporation``.
        memory_mib: GPU memory in MiB, or ``None`` if the Director does not say.
        fabr_id: fabric id.
        fabr_gid: the device's fabric-global id.
        swit_gid: PCIe switch global id.
        port_gid: switch port global id.
        device_state: live state; healthy when in :data:`HEALTHY_DEVICE_STATES`.
        group_id / group: the group whose pool holds the device, or ``None`` (system free pool).
        machine_id / machine: the machine the device is attached to, or ``None``.
        owner_tag: the device's user description when set (this project's owner tag), else ``None``.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    dev_id: str
    model: str
    director_model: str
    vendor: str
    memory_mib: int | None = None
    fabr_id: int = 0
    fabr_gid: str = ""
    swit_gid: str = ""
    port_gid: str = ""
    device_state: str = "active | online"
    group_id: int | None = None
    group: str | None = None
    machine_id: int | None = None
    machine: str | None = None
    owner_tag: str | None = None

    @property
    def healthy(self) -> bool:
        """True when ``device_state`` is a working state."""
        return self.device_state in HEALTHY_DEVICE_STATES

    @property
    def attached(self) -> bool:
        """True when a machine holds the device."""
        return self.machine_id is not None

    @property
    def in_system_pool(self) -> bool:
        """True when no group holds the device (the Director's system free pool)."""
        return self.group_id is None and self.machine_id is None
