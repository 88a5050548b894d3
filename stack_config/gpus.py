"""The GPU catalogue: the products the estate knows, keyed by their GPU Feature Discovery name.

One source of truth for every fact the program and the config rules use about a GPU product:
the stack config's own ``gpu_products`` (see :class:`GpuProduct`) extend the built-in entries
below, so a new GPU never needs a code change (:meth:`stack_config.models.EstateConfig.gpu_catalogue`
merges them; :mod:`stack_config.rules` rejects a declared product that repeats a built-in one).

The key is the value GFD writes into the node label ``nvidia.com/gpu.product``: the NVML product
name with blanks replaced by ``-`` (``NVIDIA H100 NVL`` -> ``NVIDIA-H100-NVL``; the same rule as
:func:`domain.gfd.gfd_product_name`). A name given with blanks is rejected
with the GFD form as a hint (:func:`gfd_name_problem`).

Sources of the facts (``GpuProduct.sources`` names the one behind each entry's fields):

- ``mig-guide``: NVIDIA Multi-Instance GPU User Guide, "Supported GPUs" and "Supported MIG
  Profiles" (docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html).
- ``mig-parted``: the GPU Operator's default mig-parted config (``default-mig-parted-config``,
  ``version: v1``): per-product ``device-filter`` PCI IDs (``0x232110DE`` = H100 NVL,
  ``0x233B10DE`` = H200 NVL, ``0x20B510DE`` = A100 80GB PCIe, ``0x20F110DE`` = A100 PCIe 40GB,
  ``0x2BB510DE`` = RTX PRO 6000 Blackwell Server Edition) and the ``all-<profile>`` config names
  (a ``+me`` profile is spelt ``.me`` in the config name); ``all-balanced`` exists for A100 40GB,
  A100 80GB and H100 NVL.
- ``vgpu-guide``: NVIDIA vGPU software user guide, "Virtual GPU Types for Supported GPUs", and
  NVIDIA AI Enterprise "vGPU types" reference pages (time-sliced ``-<n>C``/``-<n>Q`` and
  MIG-backed ``-<slices>-<n>C`` types; mediated-device names as ``nvidia-smi vgpu`` prints them,
  ``NVIDIA L40S-2Q``; older products keep the ``GRID `` prefix, ``GRID T4-1Q``).
- ``vgpu-dm``: NVIDIA vgpu-device-manager ``examples/config-example.yaml``: one config per vGPU
  type the vGPU Device Manager can create, named by the type without vendor prefix (``L40S-4Q``,
  ``H100L-1-24C``); the MIG-backed ``<n>-<size>C`` types there also confirm MIG profiles.
- ``pci-ids``: the PCI ID repository (vendor ``10de``), whose device names also give the GPU
  Operator sandbox device plugin's passthrough resource names ``nvidia.com/<chip>_<NAME>``
  (GPU Operator docs, "GPU Operator with KubeVirt": ``nvidia.com/GA100_A100_PCIE_40GB``).
- ``nvml``: frame-buffer size in MiB as NVML (``nvidia-smi``, and GFD's ``nvidia.com/gpu.memory``)
  reports it.

Not verified against those sources when this catalogue was written (kept because the pattern of
the verified neighbours makes them very likely; check before relying on them): the ``nvml``
memory sizes of L4, L40S and H200 NVL; the PCI IDs of L4 (``27b8``) and L40S
(``26b9``); the passthrough resource names of every product added after T4 / A100 40GB (derived
from their pci.ids names); the mediated-device name prefix (``GRID `` or ``NVIDIA ``) of A100 80GB
types. The H200 NVL and RTX PRO 6000 type lists hold only the types seen in those sources (the
full lists are longer).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from domain.gfd import GFD_PRODUCT_PATTERN, gfd_name_problem

#: PCI vendor ID of NVIDIA (pci-ids).
NVIDIA_PCI_VENDOR = "10de"
#: A MIG GPU-instance profile name (``1g.5gb``, ``1g.12gb+me``).
MIG_PROFILE_PATTERN = r"^[1-7]g\.[0-9]+gb(\+me)?$"
#: Configs the GPU Operator's mig-parted default config offers for every MIG-capable product.
BASE_MIG_CONFIGS: tuple[str, ...] = ("all-disabled", "all-enabled")

Fact = Literal["pci_device_id", "memory_mib", "mig_profiles", "vgpu_types", "passthrough_resource"]


def _gfd_product(value: str) -> str:
    problem = gfd_name_problem(value)
    if problem is not None:
        raise PydanticCustomError("gfd_product", problem, {})
    return value


GfdProductName = Annotated[
    str, AfterValidator(_gfd_product), Field(json_schema_extra={"pattern": GFD_PRODUCT_PATTERN})
]
"""A GPU product as GFD's ``nvidia.com/gpu.product`` label spells it (``NVIDIA-H100-NVL``); a name with
blanks is rejected with the corrected name in the message."""


def _digits_as_text(value: object) -> object:
    """An all-digit hex ID that YAML read as an integer (``2321``) back as its text."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class GpuProduct(BaseModel):
    """Facts about one GPU product (a built-in entry or one declared in ``gpu_products``).

    Example (stack config)::

        gpu_products:
          - product: NVIDIA-A30
            pci_device_id: 20b7
            memory_mib: 24576
            passthrough_resource: nvidia.com/GA100_A30_PCIE
            mig_profiles: [1g.6gb, 1g.6gb+me, 2g.12gb, 2g.12gb+me, 4g.24gb]
            mig_extra_configs: [all-balanced]
            vgpu_types: [NVIDIA A30-4C, NVIDIA A30-24C]
            sources: {mig_profiles: "NVIDIA MIG user guide, A30 profiles"}
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    product: GfdProductName
    """GFD product name (``nvidia.com/gpu.product``), e.g. ``NVIDIA-L40S``."""
    pci_device_id: Annotated[str, BeforeValidator(_digits_as_text)] = Field(pattern=r"^[0-9a-f]{4}$")
    """PCI device ID under vendor ``10de``, four lower-case hex digits (``2321`` = H100 NVL; YAML's
    unquoted ``2321`` is read as the text ``2321``)."""
    memory_mib: int = Field(gt=0)
    """Frame-buffer size in MiB as NVML reports it (GFD label ``nvidia.com/gpu.memory``)."""
    passthrough_resource: str = Field(pattern=r"^nvidia\.com/[A-Z0-9_]+$")
    """Extended resource the GPU Operator's sandbox device plugin advertises for VFIO passthrough
    (``nvidia.com/<chip>_<PCI_NAME>``, e.g. ``nvidia.com/GH100_H100_NVL``)."""
    mig_profiles: tuple[Annotated[str, Field(pattern=MIG_PROFILE_PATTERN)], ...] = ()
    """MIG GPU-instance profiles the product supports (``1g.12gb``, ``1g.12gb+me``); empty: no MIG."""
    mig_extra_configs: tuple[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.+-]*$")], ...] = ()
    """mig-parted configs beyond ``all-disabled``, ``all-enabled`` and ``all-<profile>`` that the
    GPU Operator's default config defines for the product (``all-balanced``)."""
    vgpu_types: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    """vGPU (mediated device) type names, as the vGPU manager names them (``NVIDIA L40S-4Q``)."""
    sources: dict[Fact, str] = Field(default_factory=dict)
    """Where each fact comes from (a document a reader can open); keys are field names."""

    @property
    def pci_id(self) -> str:
        """``vendor:device`` in lower-case hex, e.g. ``10de:2321``."""
        return f"{NVIDIA_PCI_VENDOR}:{self.pci_device_id}"

    @property
    def mig_capable(self) -> bool:
        """True when the product supports Multi-Instance GPU partitioning."""
        return bool(self.mig_profiles)

    @property
    def mig_configs(self) -> tuple[str, ...]:
        """Valid ``nvidia.com/mig.config`` values (mig-parted config names); empty without MIG.

        ``all-disabled``, ``all-enabled``, ``all-<profile>`` per profile (``+me`` spelt ``.me``, as
        in mig-parted's default config) and :attr:`mig_extra_configs`.
        """
        if not self.mig_capable:
            return ()
        per_profile = tuple(f"all-{p.replace('+me', '.me')}" for p in self.mig_profiles)
        return (*BASE_MIG_CONFIGS, *per_profile, *self.mig_extra_configs)


def vgpu_resource_name(vgpu_type: str) -> str:
    """KubeVirt resource name of a vGPU type: ``GRID T4-1Q`` -> ``nvidia.com/GRID_T4-1Q``.

    KubeVirt's ``mediatedDevicesConfiguration`` selects the type by its name; the device plugin
    advertises it with blanks replaced by ``_`` (KubeVirt user guide, "Mediated devices and
    virtual GPUs").
    """
    return "nvidia.com/" + vgpu_type.replace(" ", "_")


_MIG = "mig-guide"
_PARTED = "mig-parted"
_VGPU = "vgpu-guide"
_PCI = "pci-ids"
_NVML = "nvml"
_VGPU_DM = "vgpu-dm"
_UNVERIFIED = " (not verified, see module docstring)"


def _product(**fields: object) -> GpuProduct:
    return GpuProduct.model_validate(fields)


BUILTIN_GPU_PRODUCTS: dict[str, GpuProduct] = {
    p.product: p
    for p in (
        _product(
            product="Tesla-T4",
            pci_device_id="1eb8",
            memory_mib=15360,
            passthrough_resource="nvidia.com/TU104GL_TESLA_T4",
            vgpu_types=(
                "GRID T4-1Q",
                "GRID T4-2Q",
                "GRID T4-4C",
                "GRID T4-4Q",
                "GRID T4-8C",
                "GRID T4-8Q",
                "GRID T4-16C",
                "GRID T4-16Q",
            ),
            sources={
                "pci_device_id": f"{_PCI}: TU104GL [Tesla T4]",
                "memory_mib": _NVML,
                "passthrough_resource": "GPU Operator with KubeVirt",
                "vgpu_types": f"{_VGPU}: Tesla T4; {_VGPU_DM}: T4-*",
            },
        ),
        _product(
            product="NVIDIA-A100-PCIE-40GB",
            pci_device_id="20f1",
            memory_mib=40960,
            passthrough_resource="nvidia.com/GA100_A100_PCIE_40GB",
            mig_profiles=("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
            mig_extra_configs=("all-balanced",),
            vgpu_types=(
                "GRID A100-4C",
                "GRID A100-5C",
                "GRID A100-8C",
                "GRID A100-10C",
                "GRID A100-20C",
                "GRID A100-40C",
                "GRID A100-1-5C",
                "GRID A100-1-5CME",
                "GRID A100-1-10C",
                "GRID A100-2-10C",
                "GRID A100-3-20C",
                "GRID A100-4-20C",
                "GRID A100-7-40C",
            ),
            sources={
                "pci_device_id": f"{_PARTED}: 0x20F110DE A100-40GB",
                "memory_mib": _NVML,
                "passthrough_resource": "GPU Operator with KubeVirt",
                "mig_profiles": f"{_MIG}: A100-40GB; {_PARTED}",
                "vgpu_types": f"{_VGPU}: A100 PCIe 40GB; {_VGPU_DM}: A100-*",
            },
        ),
        _product(
            product="NVIDIA-A100-80GB-PCIe",
            pci_device_id="20b5",
            memory_mib=81920,
            passthrough_resource="nvidia.com/GA100_A100_PCIE_80GB",
            mig_profiles=("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
            mig_extra_configs=("all-balanced",),
            vgpu_types=(
                "GRID A100D-4C",
                "GRID A100D-8C",
                "GRID A100D-10C",
                "GRID A100D-16C",
                "GRID A100D-20C",
                "GRID A100D-40C",
                "GRID A100D-80C",
                "GRID A100D-1-10C",
                "GRID A100D-1-10CME",
                "GRID A100D-1-20C",
                "GRID A100D-2-20C",
                "GRID A100D-3-40C",
                "GRID A100D-4-40C",
                "GRID A100D-7-80C",
            ),
            sources={
                "pci_device_id": f"{_PARTED}: 0x20B510DE A100-80GB",
                "memory_mib": _NVML,
                "passthrough_resource": f"{_PCI}: GA100 [A100 PCIe 80GB]{_UNVERIFIED}",
                "mig_profiles": f"{_MIG}: A100-80GB profile names; {_PARTED}; {_VGPU_DM}: A100D-<n>-<size>C",
                "vgpu_types": f"{_VGPU_DM}: A100D-* (mediated-device name prefix{_UNVERIFIED})",
            },
        ),
        _product(
            product="NVIDIA-L4",
            pci_device_id="27b8",
            memory_mib=23034,
            passthrough_resource="nvidia.com/AD104GL_L4",
            vgpu_types=tuple(
                f"NVIDIA L4-{t}"
                for t in ("1Q", "2Q", "3Q", "4C", "4Q", "6C", "6Q", "8C", "8Q", "12C", "12Q", "24C", "24Q")
            ),
            sources={
                "pci_device_id": f"{_PCI}: AD104GL [L4]{_UNVERIFIED}",
                "memory_mib": f"{_NVML}{_UNVERIFIED}",
                "passthrough_resource": f"{_PCI}{_UNVERIFIED}",
                "vgpu_types": f"{_VGPU_DM}: L4-*",
            },
        ),
        _product(
            product="NVIDIA-L40S",
            pci_device_id="26b9",
            memory_mib=46068,
            passthrough_resource="nvidia.com/AD102GL_L40S",
            vgpu_types=tuple(
                f"NVIDIA L40S-{t}"
                for t in (
                    "1Q", "2Q", "3Q", "4C", "4Q", "6C", "6Q", "8C", "8Q", "12C", "12Q", "16C", "16Q", "24C",
                    "24Q", "48C", "48Q",
                )
            ),
            sources={
                "pci_device_id": f"{_PCI}: AD102GL [L40S]{_UNVERIFIED}",
                "memory_mib": f"{_NVML}{_UNVERIFIED}",
                "passthrough_resource": f"{_PCI}{_UNVERIFIED}",
                "vgpu_types": f"{_VGPU_DM}: L40S-*; names as nvidia-smi vgpu prints them (NVIDIA L40S-1Q)",
            },
        ),
        _product(
            product="NVIDIA-H100-NVL",
            pci_device_id="2321",
            memory_mib=95830,
            passthrough_resource="nvidia.com/GH100_H100_NVL",
            mig_profiles=("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
            mig_extra_configs=("all-balanced",),
            vgpu_types=tuple(
                f"NVIDIA H100L-{t}"
                for t in (
                    "4C", "6C", "11C", "15C", "23C", "47C", "94C", "1-12C", "1-12CME", "1-24C", "2-24C",
                    "3-47C", "4-47C", "7-94C",
                )
            ),
            sources={
                "pci_device_id": f"{_PARTED}: 0x232110DE H100 NVL",
                "memory_mib": _NVML,
                "passthrough_resource": f"{_PCI}: GH100 [H100 NVL]{_UNVERIFIED}",
                "mig_profiles": f"{_MIG}: H100-PCIE 94GB; {_PARTED}: all-1g.12gb..all-7g.94gb, all-balanced; "
                f"{_VGPU_DM}: H100L-1-24C",
                "vgpu_types": f"{_VGPU}: H100 PCIe 94GB (H100 NVL) = H100L; {_VGPU_DM}: H100L-*",
            },
        ),
        _product(
            product="NVIDIA-H200-NVL",
            pci_device_id="233b",
            memory_mib=143771,
            passthrough_resource="nvidia.com/GH100_H200_NVL",
            mig_profiles=("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
            vgpu_types=tuple(
                f"NVIDIA H200-{t}"
                for t in ("70C", "141C", "1-18C", "1-18CME", "1-35C", "2-35C", "3-71C", "4-71C", "7-141C")
            ),
            sources={
                "pci_device_id": f"{_PARTED}: 0x233B10DE H200 NVL",
                "memory_mib": f"{_NVML}{_UNVERIFIED}",
                "passthrough_resource": f"{_PCI}: GH100 [H200 NVL]{_UNVERIFIED}",
                "mig_profiles": f"{_MIG}: H200 NVL 141GB; {_PARTED}: 1g.18gb, 2g.35gb, 3g.71gb; {_VGPU}: "
                "MIG-backed types of H200 PCIe 141GB (H200 NVL), one per profile",
                "vgpu_types": f"{_VGPU}: H200 PCIe 141GB (H200 NVL): H200-<n>C, H200-<slices>-<n>C",
            },
        ),
        _product(
            product="NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
            pci_device_id="2bb5",
            memory_mib=97887,
            passthrough_resource="nvidia.com/GB202GL_RTX_PRO_6000_BLACKWELL_SERVER_EDITION",
            mig_profiles=("1g.24gb", "2g.48gb", "4g.96gb"),
            vgpu_types=tuple(
                f"NVIDIA RTX Pro 6000 Blackwell DC-{t}" for t in ("96Q", "1-12C", "1-24C", "4-96Q")
            ),
            sources={
                "pci_device_id": f"{_PARTED}: 0x2BB510DE",
                "memory_mib": f"{_NVML} (memory.total 97887 MiB as reported for the card)",
                "passthrough_resource": f"{_PCI}{_UNVERIFIED}",
                "mig_profiles": f"{_MIG}: RTX PRO 6000 Blackwell Server Edition, at most 4 instances; "
                f"{_PARTED}: 1g.24gb, 2g.48gb",
                "vgpu_types": f"{_VGPU}: Blackwell DC types (DC-<n>Q, DC-<slices>-<n>C); these four seen",
            },
        ),
    )
}
"""Built-in products by GFD product name."""


def merge_catalogue(declared: Iterable[GpuProduct]) -> dict[str, GpuProduct]:
    """The built-in products plus ``declared`` ones (a declared name that repeats a built-in one
    is reported by :func:`stack_config.rules.gpu_products_new`; here the built-in entry wins)."""
    catalogue = dict(BUILTIN_GPU_PRODUCTS)
    for p in declared:
        catalogue.setdefault(p.product, p)
    return catalogue


def unknown_product_message(name: str, catalogue: Mapping[str, GpuProduct]) -> str:
    """Error text for a product missing from ``catalogue``: a close known name, or the known names
    and how to declare a new one."""
    close = difflib.get_close_matches(name, list(catalogue), n=1, cutoff=0.75)
    if close:
        return f"unknown GPU model {name!r}; did you mean {close[0]!r}?"
    known = ", ".join(sorted(catalogue))
    return f"unknown GPU model {name!r} (known: {known}; declare others under gpu_products)"
