"""GPU sharing, one source of truth: what a node's device plugin is given, and what one GPU yields there.

One sharing setting (:class:`SharingSpec`: time-slicing, MPS or MIG) gives both

- the NVIDIA device plugin's config file (:meth:`SharingSpec.device_plugin_config`), which the
  program hands to the GPU Operator (``devicePlugin.config``) and selects per node with the label
  ``nvidia.com/device-plugin.config``; and
- what one GPU of a product composed onto such a node yields (:meth:`SharingSpec.offers`): the
  resource name the device plugin advertises, how many units of it, and the value GPU Feature
  Discovery (GFD) writes into the node's product label, which the composer counts and matches.

Facts, from the versions the project pins (GPU Operator ``v25.3.0``, the default of
``stack_config.models.CatalogConfig.gpu_operator``, whose ``deployments/gpu-operator/values.yaml``
runs ``k8s-device-plugin`` ``v0.17.1`` for both the device plugin and GFD, and ``k8s-mig-manager``
``v0.12.1``):

- Config file ``version: v1``; ``sharing.timeSlicing`` / ``sharing.mps`` with ``renameByDefault``,
  ``failRequestsGreaterThanOne`` (time-slicing only) and ``resources: [{name, replicas}]``; MIG
  strategy ``flags.migStrategy``. NVIDIA/k8s-device-plugin v0.17.1 ``README.md`` ("Shared Access
  to GPUs", "With CUDA Time-Slicing", "With CUDA MPS"), ``api/config/v1/sharing.go``,
  ``api/config/v1/replicas.go``; GPU Operator docs "Time-Slicing GPUs in Kubernetes"
  (docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html).
- ``replicas`` units per GPU: each replica is one unit of the resource (README: "8 GPUs ... 80
  ``nvidia.com/gpu``"); ``renameByDefault: true`` advertises ``<name>.shared``
  (``api/config/v1/consts.go`` ``DefaultSharedResourceNameSuffix = ".shared"``).
- A container's request for more than one shared unit fails at allocation when
  ``failRequestsGreaterThanOne`` is true (time-slicing), and always with MPS (``internal/rm/rm.go``
  ``ValidateRequest``; ``api/config/v1/config.go`` sets it for MPS). The check is per container;
  the composer sees a pod's total, so it does not enforce it.
- GFD's product label (``internal/lm/resource.go`` ``getProductName``): the sanitised product name,
  ``-MIG-<profile>`` appended for a MIG device under the ``single`` strategy
  (``NewMIGResourceLabeler``), and ``-SHARED`` appended when the resource has more than one replica
  and is not renamed (``isShared() && !isRenamed()``). A MIG profile is spelt with ``+`` replaced by
  ``.`` (``internal/resource/nvml-mig-device.go`` ``GetName``).
- MIG strategies (``internal/lm/mig-strategy.go``, ``internal/rm/rm.go``): ``single`` advertises
  every MIG device as ``nvidia.com/gpu`` and labels ``nvidia.com/gpu.product`` =
  ``<product>-MIG-<profile>``; a node with MIG devices of more than one profile is labelled
  ``<product>-MIG-INVALID`` with count 0 (``newInvalidMigStrategyLabeler``). ``mixed`` advertises
  ``nvidia.com/mig-<profile>`` per profile and keeps ``nvidia.com/gpu.product`` = ``<product>``.
- How many MIG devices one GPU holds comes from the mig-parted config named by the node label
  ``nvidia.com/mig.config`` (mig-manager v0.12.1 ``cmd/nvidia-mig-manager/main.go``): the
  catalogue's ``mig_layouts`` (:mod:`stack_config.gpus`), read from the GPU Operator's
  ``default-mig-parted-config``.
- The GPU Operator's ClusterPolicy ``mig.strategy`` (chart default ``single``) is set as the
  ``MIG_STRATEGY`` environment variable of the device plugin and GFD (gpu-operator v25.3.0
  ``controllers/object_controls.go`` ``applyMIGConfiguration``), and a flag set from the
  environment wins over the config file's ``flags.migStrategy`` (k8s-device-plugin v0.17.1
  ``api/config/v1/flags.go`` ``updateFromCLIFlag``): one MIG strategy per cluster.

A host of a hypervisor cluster whose GPU workload mode is ``vm-passthrough`` shares nothing: its
GPUs go to KubeVirt VMs whole, bound to VFIO. What one GPU yields there is
:func:`passthrough_offer`: one unit of the product's passthrough resource, never ``nvidia.com/gpu``.
Facts: the GPU Operator reads the node label ``nvidia.com/gpu.workload.config`` (``container``,
``vm-passthrough``, ``vm-vgpu``; ClusterPolicy ``sandboxWorkloads.defaultWorkload`` when unset) and
deploys on a ``vm-passthrough`` node the sandbox (KubeVirt) device plugin, the VFIO manager and the
sandbox validator, not the container device plugin or GFD (gpu-operator
``controllers/state_manager.go``, ``gpuStateLabels``: only ``nvidia.com/gpu.deploy.sandbox-device-plugin``,
``vfio-manager``, ``sandbox-validator``, ``kata-manager``, ``cc-manager`` for ``vm-passthrough``).
The sandbox device plugin (NVIDIA/kubevirt-gpu-device-plugin) advertises each VFIO-bound GPU as one
unit of ``nvidia.com/<chip>_<PCI device name>`` (``nvidia.com/GA100_A100_PCIE_40GB``), the names the
catalogue holds as ``passthrough_resource`` (:mod:`stack_config.gpus`).

Pure, standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from domain.labels import GPU_RESOURCE, NVIDIA_RESOURCE_PREFIX

Strategy = Literal["time-slicing", "mps", "mig"]
#: The strategy of hosts whose GPUs are partitioned into MIG devices by mig-manager.
MIG: Strategy = "mig"
#: The ``composer.sharing`` strategy of hosts whose GPUs go to VMs whole (the GPU Operator's workload
#: config of the same name, node label ``nvidia.com/gpu.workload.config``).
PASSTHROUGH = "vm-passthrough"
#: How the sandbox device plugin spells a passthrough resource, ``nvidia.com/<chip>_<PCI device
#: name>`` upper-cased, spaces as ``_`` (``nvidia.com/GA100_A100_PCIE_40GB``); vGPU type resources
#: (``nvidia.com/GRID_T4-1Q``) carry a ``-`` and do not match.
PASSTHROUGH_RESOURCE_PATTERN = r"^nvidia\.com/[A-Z0-9_]+$"
_PASSTHROUGH_RESOURCE = re.compile(PASSTHROUGH_RESOURCE_PATTERN)


def is_passthrough_resource(name: str) -> bool:
    """``name`` is a passthrough resource of the sandbox device plugin (one VFIO-bound GPU each)."""
    return _PASSTHROUGH_RESOURCE.match(name) is not None
MigStrategy = Literal["single", "mixed"]

#: Suffix of a renamed shared resource (k8s-device-plugin ``DefaultSharedResourceNameSuffix``).
SHARED_RESOURCE_SUFFIX = ".shared"
#: Word GFD appends to the product label of a shared, not renamed resource.
SHARED_PRODUCT_WORD = "SHARED"
#: Word GFD puts between the product and the MIG profile under the ``single`` strategy.
MIG_PRODUCT_WORD = "MIG"
#: Prefix of the per-profile resources of the ``mixed`` strategy.
MIG_RESOURCE_PREFIX = NVIDIA_RESOURCE_PREFIX + "mig-"

#: ``<product>[-MIG-<profile>][-SHARED]``: how GFD builds ``nvidia.com/gpu.product``.
_PRODUCT_VARIANT = re.compile(
    rf"^(?P<base>.+?)(?:-{MIG_PRODUCT_WORD}-(?P<mig>.+?))?(?:-(?P<shared>{SHARED_PRODUCT_WORD}))?$"
)


class SharingError(ValueError):
    """A sharing setting GFD or the device plugin would not serve as the composer counts it."""


def mig_device_name(profile: str) -> str:
    """A MIG profile as the device plugin and GFD spell it: ``+`` becomes ``.``
    (``1g.5gb+me`` -> ``1g.5gb.me``)."""
    return profile.replace("+", ".")


def mig_resource(profile: str) -> str:
    """The ``mixed``-strategy resource of a MIG profile: ``nvidia.com/mig-1g.10gb``."""
    return MIG_RESOURCE_PREFIX + mig_device_name(profile)


def shared_product(product: str) -> str:
    """GFD's product label of a shared, not renamed GPU: ``Tesla-T4`` -> ``Tesla-T4-SHARED``."""
    return f"{product}-{SHARED_PRODUCT_WORD}"


def mig_product(product: str, profile: str) -> str:
    """GFD's product label under MIG ``single``: ``NVIDIA-A100-PCIE-40GB-MIG-1g.10gb``."""
    return f"{product}-{MIG_PRODUCT_WORD}-{mig_device_name(profile)}"


@dataclass(frozen=True, slots=True)
class ProductLabel:
    """A ``nvidia.com/gpu.product`` value taken apart.

    Attributes:
        base: the GPU's own product name (``Tesla-T4``).
        shared: GFD appended ``-SHARED`` (time-slicing or MPS, not renamed).
        mig: the MIG profile GFD appended (``1g.10gb``, device-plugin spelling), or None.
    """

    base: str
    shared: bool = False
    mig: str | None = None

    @property
    def plain(self) -> bool:
        """The label names a whole, unshared GPU."""
        return not self.shared and self.mig is None


def parse_product_label(value: str) -> ProductLabel:
    """Take a GFD product label apart: ``Tesla-T4-SHARED`` -> ``(Tesla-T4, shared)``,
    ``NVIDIA-A100-PCIE-40GB-MIG-1g.10gb`` -> ``(NVIDIA-A100-PCIE-40GB, mig 1g.10gb)``; a value
    without either suffix is its own base."""
    m = _PRODUCT_VARIANT.match(value)
    if m is None:  # only the empty string
        return ProductLabel(value)
    return ProductLabel(m["base"], shared=m["shared"] is not None, mig=m["mig"])


@dataclass(frozen=True, slots=True)
class Offer:
    """What one GPU composed onto a node yields there, for one resource.

    Attributes:
        resource: the extended resource the device plugin advertises (``nvidia.com/gpu``,
            ``nvidia.com/gpu.shared``, ``nvidia.com/mig-1g.10gb``).
        units: units of ``resource`` one GPU adds to the node's allocatable (>= 1).
        product: the node's ``nvidia.com/gpu.product`` label once GFD sees the GPU.
    """

    resource: str
    units: int
    product: str

    def to_json(self) -> dict[str, Any]:
        """The offer as the composer's settings (chart value ``composer.sharing``) hold it."""
        return {"resource": self.resource, "units": self.units, "product": self.product}


def plain_offer(product: str) -> Offer:
    """A whole, unshared GPU: one ``nvidia.com/gpu`` unit, labelled with its own product."""
    return Offer(GPU_RESOURCE, 1, product)


def passthrough_offer(product: str, resource: str) -> Offer:
    """What one GPU of ``product`` yields on a ``vm-passthrough`` host: one unit of ``resource``,
    its passthrough resource (catalogue ``passthrough_resource``, ``nvidia.com/GA100_A100_PCIE_40GB``),
    advertised by the sandbox device plugin; no ``nvidia.com/gpu`` (the container device plugin does
    not run there). ``product`` stays the model's own name: GFD does not run on such a node either,
    so no pod can select a product label there.

    Raises:
        SharingError: ``resource`` is not an ``nvidia.com/`` resource or is ``nvidia.com/gpu``.
    """
    if not is_passthrough_resource(resource):
        raise SharingError(
            f"{resource!r} is not a passthrough resource of {product} (nvidia.com/<chip>_<name>)"
        )
    return Offer(resource, 1, product)


@dataclass(frozen=True, slots=True)
class SharingSpec:
    """One GPU sharing setting of a set of nodes.

    Attributes:
        strategy: ``time-slicing``, ``mps`` or ``mig``.
        replicas: units per GPU (time-slicing, MPS), >= 2 there; ignored with MIG.
        rename_by_default: advertise ``nvidia.com/gpu.shared`` instead of ``nvidia.com/gpu``.
        fail_requests_greater_than_one: time-slicing: the device plugin fails a request for
            more than one shared unit (MPS always does).
        mig_config: the mig-parted config of the nodes (``nvidia.com/mig.config``), MIG only.
        mig_strategy: ``single`` or ``mixed``, MIG only.
    """

    strategy: Strategy
    replicas: int = 2
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = True
    mig_config: str | None = None
    mig_strategy: MigStrategy = "single"

    @property
    def time_shared(self) -> bool:
        """Time-slicing or MPS: pods on one physical GPU, no memory or fault isolation."""
        return self.strategy != "mig"

    def device_plugin_config(self) -> dict[str, Any]:
        """The device plugin's config file (``version: v1``).

        time-slicing / MPS: ``sharing.<timeSlicing|mps>`` with ``renameByDefault`` and
        ``resources: [{name: nvidia.com/gpu, replicas}]`` (time-slicing also
        ``failRequestsGreaterThanOne``); MIG: ``flags.migStrategy`` (the layout comes from the
        ``nvidia.com/mig.config`` node label).
        """
        if self.strategy == "mig":
            return {"version": "v1", "flags": {"migStrategy": self.mig_strategy}}
        key = "timeSlicing" if self.strategy == "time-slicing" else "mps"
        body: dict[str, Any] = {"resources": [{"name": GPU_RESOURCE, "replicas": self.replicas}]}
        if self.strategy == "time-slicing":
            body["renameByDefault"] = self.rename_by_default
            body["failRequestsGreaterThanOne"] = self.fail_requests_greater_than_one
        else:
            body["renameByDefault"] = self.rename_by_default
        return {"version": "v1", "sharing": {key: body}}

    def offers(self, product: str, mig_layout: Mapping[str, int] | None = None) -> tuple[Offer, ...]:
        """What one GPU of ``product`` (a GFD product name) yields on a node with this setting.

        Args:
            product: the GPU's GFD product name (``Tesla-T4``).
            mig_layout: MIG only: profile -> instances one GPU of ``product`` holds in
                :attr:`mig_config` (the catalogue's ``mig_layouts``).

        Returns:
            One offer per resource, in resource order.

        Raises:
            SharingError: MIG without a layout (mig-parted cannot partition such a GPU as the
                node's config says, so the node does not serve it), or MIG ``single`` with a layout
                of more than one profile (GFD labels such a node ``<product>-MIG-INVALID`` with
                count 0).
        """
        if self.strategy != "mig":
            resource = GPU_RESOURCE + SHARED_RESOURCE_SUFFIX if self.rename_by_default else GPU_RESOURCE
            label = product if self.rename_by_default else shared_product(product)
            return (Offer(resource, self.replicas, label),)
        layout = {p: n for p, n in (mig_layout or {}).items() if n > 0}
        if not layout:
            raise SharingError(
                f"no MIG layout of {self.mig_config!r} is known for {product}: a MIG node serves only "
                "GPUs whose layout of its config is known (gpu_products[].mig_layouts)"
            )
        if self.mig_strategy == "single":
            if len(layout) != 1:
                raise SharingError(
                    f"MIG strategy single needs one MIG profile per node; {self.mig_config!r} creates "
                    f"{', '.join(sorted(layout))} on {product} (GFD would label it "
                    f"{product}-{MIG_PRODUCT_WORD}-INVALID); use strategy mixed or an all-<profile> config"
                )
            ((profile, count),) = layout.items()
            return (Offer(GPU_RESOURCE, count, mig_product(product, profile)),)
        return tuple(
            sorted((Offer(mig_resource(p), n, product) for p, n in layout.items()), key=lambda o: o.resource)
        )


