"""The GPU catalogue: the products the estate knows, keyed by their GPU Feature Discovery name.

One source of truth for every fact the program and the config rules use about a GPU product:
the stack config's own ``gpu_products`` (see :class:`GpuProduct`) extend the built-in entries,
listed in the same form in ``gpu_products.yaml`` beside this module, so a new GPU never needs a
code change (:meth:`stack_config.models.EstateConfig.gpu_catalogue` merges them;
:mod:`stack_config.rules` rejects a declared product that repeats a built-in one).

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
- ``mig-layouts``: how many MIG devices of each profile one GPU holds in each mig-parted config
  (``mig_layouts``): the GPU Operator's ``default-mig-parted-config`` ConfigMap
  (NVIDIA/gpu-operator ``assets/state-mig-manager/0400_configmap.yaml``, tag ``v25.3.0``, the
  version :class:`stack_config.models.CatalogConfig` pins), the entry whose ``device-filter`` names
  the product's PCI ID, else the entry without a filter. RTX PRO 6000 Blackwell Server Edition:
  ``v25.3.0`` has no config for its profiles; its layouts are those of tag ``v26.7.0``.
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
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    model_validator,
)
from pydantic_core import PydanticCustomError

from domain.gfd import GFD_PRODUCT_PATTERN, gfd_name_problem
from domain.gpu_sharing import PASSTHROUGH_RESOURCE_PATTERN

#: PCI vendor ID of NVIDIA (pci-ids).
NVIDIA_PCI_VENDOR = "10de"
#: A MIG GPU-instance profile name (``1g.5gb``, ``1g.12gb+me``).
MIG_PROFILE_PATTERN = r"^[1-7]g\.[0-9]+gb(\+me)?$"
#: Configs the GPU Operator's mig-parted default config offers for every MIG-capable product.
BASE_MIG_CONFIGS: tuple[str, ...] = ("all-disabled", "all-enabled")

#: A count of at least one.
PositiveCount = Annotated[int, Field(ge=1)]

Fact = Literal[
    "pci_device_id", "memory_mib", "mig_profiles", "mig_layouts", "vgpu_types", "passthrough_resource"
]


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
    passthrough_resource: str = Field(pattern=PASSTHROUGH_RESOURCE_PATTERN)
    """Extended resource the GPU Operator's sandbox device plugin advertises for VFIO passthrough
    (``nvidia.com/<chip>_<PCI_NAME>``, e.g. ``nvidia.com/GH100_H100_NVL``)."""
    mig_profiles: tuple[Annotated[str, Field(pattern=MIG_PROFILE_PATTERN)], ...] = ()
    """MIG GPU-instance profiles the product supports (``1g.12gb``, ``1g.12gb+me``); empty: no MIG."""
    mig_extra_configs: tuple[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.+-]*$")], ...] = ()
    """mig-parted configs beyond ``all-disabled``, ``all-enabled`` and ``all-<profile>`` that the
    GPU Operator's default config defines for the product (``all-balanced``)."""
    mig_layouts: dict[str, dict[Annotated[str, Field(pattern=MIG_PROFILE_PATTERN)], PositiveCount]] = Field(
        default_factory=dict
    )
    """MIG devices one GPU holds in each mig-parted config: config name (one of :attr:`mig_configs`)
    -> profile (one of :attr:`mig_profiles`) -> count, e.g. ``{all-1g.10gb: {1g.10gb: 4}}``. The
    composer counts a GPU composed onto a MIG node by it (:mod:`domain.gpu_sharing`); MIG sharing
    with a config missing here is refused by the stack config rules."""
    vgpu_types: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    """vGPU (mediated device) type names, as the vGPU manager names them (``NVIDIA L40S-4Q``)."""
    sources: dict[Fact, str] = Field(default_factory=dict)
    """Where each fact comes from (a document a reader can open); keys are field names."""

    @model_validator(mode="after")
    def _layouts_known(self) -> GpuProduct:
        for config, layout in self.mig_layouts.items():
            if config not in self.mig_configs or config in BASE_MIG_CONFIGS:
                raise ValueError(
                    f"mig_layouts: {config!r} is not a MIG config of {self.product} "
                    f"(configs: {', '.join(c for c in self.mig_configs if c not in BASE_MIG_CONFIGS)})"
                )
            unknown = sorted(set(layout) - set(self.mig_profiles))
            if unknown:
                raise ValueError(f"mig_layouts[{config!r}]: {', '.join(unknown)} not in mig_profiles")
        return self

    def mig_layout(self, config: str) -> dict[str, int] | None:
        """Profile -> MIG devices one GPU holds in mig-parted config ``config``, or None when the
        catalogue does not know it."""
        layout = self.mig_layouts.get(config)
        return None if layout is None else dict(layout)

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


#: The built-in catalogue, in the form of the stack config's ``gpu_products``.
BUILTIN_PRODUCTS_FILE = Path(__file__).with_name("gpu_products.yaml")


def load_products(path: Path) -> dict[str, GpuProduct]:
    """The products listed in YAML file ``path`` (a list of :class:`GpuProduct` entries), keyed by
    product name in file order.

    Raises:
        OSError: ``path`` cannot be read.
        yaml.YAMLError: ``path`` is not YAML.
        pydantic.ValidationError: an entry is not a valid :class:`GpuProduct`.
    """
    entries = TypeAdapter(list[GpuProduct]).validate_python(yaml.safe_load(path.read_text(encoding="utf-8")))
    return {p.product: p for p in entries}


BUILTIN_GPU_PRODUCTS: dict[str, GpuProduct] = load_products(BUILTIN_PRODUCTS_FILE)
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
