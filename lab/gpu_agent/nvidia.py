"""What NVIDIA's device plugin, GPU Feature Discovery (GFD) and mig-manager write on a node that
shares its GPUs (time-slicing, MPS, MIG): the stand-in's per-mode rules, pure.

The rules are transcribed from the versions the project pins (docs/gpu-sharing.md): NVIDIA
k8s-device-plugin ``v0.17.1`` (the device plugin and GFD) and mig-parted ``v0.12.1``
(``k8s-mig-manager``), run by gpu-operator ``v25.3.0``. They are written here on their own, not
taken from :mod:`domain.gpu_sharing` (the composer's side): the stand-in is checked against
NVIDIA's code, and the composer against the stand-in.

Inputs are those the real components read: the device plugin's config file selected by the node
label ``nvidia.com/device-plugin.config`` (:func:`parse_plugin_config`), the cluster-wide MIG
strategy, and the mig-parted config named by ``nvidia.com/mig.config`` (given per GPU product as
profile -> devices per GPU, the catalogue's ``mig_layouts``).

Rules, each with its source (k8s-device-plugin v0.17.1 unless named):

- Replicas: ``internal/rm/device_map.go`` ``updateDeviceMapWithReplicas`` advertises ``replicas``
  devices per GPU of a replicated resource, under its ``rename`` when set;
  ``api/config/v1/replicas.go`` sets ``rename`` to ``<name>.shared``
  (``api/config/v1/resources.go`` ``DefaultSharedRename``) when ``renameByDefault`` is true.
- Active strategy: ``api/config/v1/sharing.go`` ``SharingStrategy`` (MPS when ``sharing.mps`` is
  set and replicated, else time-slicing when replicated, else none) and ``ReplicatedResources``
  (``sharing.mps`` when set, else ``sharing.timeSlicing``).
- GFD labels of a resource: ``internal/lm/resource.go`` ``baseLabeler``: ``<resource>.product``,
  ``.count``, ``.replicas`` (``getReplicas``: 0 without sharing config, as for MIG-enabled parents;
  else the resource's replicas, 1 when not replicated) and ``.sharing-strategy`` (the active
  strategy when replicas > 1, else ``none``); ``getProductName`` appends ``-SHARED`` when the
  resource has replicas > 1 and is not renamed, and a MIG device's product is
  ``<parent>-MIG-<profile>``.
- ``nvidia.com/mps.capable``: ``internal/lm/nvml.go`` ``newSharingLabeler`` ("true" only under MPS;
  the stand-in's GPUs are all MPS capable).
- ``nvidia.com/mig.strategy``: ``internal/lm/strategy.go`` (written when the strategy is not
  ``none``). MIG labelling: ``internal/lm/mig-strategy.go``: ``newGPULabelers`` labels
  MIG-enabled parents without sharing, full GPUs after them (overriding); ``single`` relabels
  ``nvidia.com/gpu`` by its MIG devices, or ``<product>-MIG-INVALID`` with count, replicas and
  memory 0 and an empty sharing strategy (``newInvalidMigStrategyLabeler``) when a MIG-enabled GPU
  is empty, MIG-enabled and disabled GPUs are mixed, or the MIG devices have more than one profile;
  ``mixed`` labels ``nvidia.com/mig-<profile>.*`` per profile; labels merge later-wins
  (``internal/lm/list.go``). Resources: ``internal/rm/rm.go`` ``AddDefaultResourcesToConfig``
  (``single``: MIG devices as ``nvidia.com/gpu``; ``mixed``: ``nvidia.com/mig-<profile>`` with
  ``+`` spelt ``.``).
- ``nvidia.com/mig.config.state``: mig-parted v0.12.1 ``deployments/container/reconfigure-mig.sh``
  sets ``pending`` before it changes the GPUs and ``success`` (or ``failed``) when done.

- A node labelled ``nvidia.com/gpu.workload.config=vm-passthrough`` (KubeVirt passthrough): the GPU
  Operator deploys there the sandbox device plugin, the VFIO manager and the sandbox validator,
  not the container device plugin or GFD (gpu-operator ``controllers/state_manager.go``
  ``gpuStateLabels``: for ``vm-passthrough`` only ``nvidia.com/gpu.deploy.sandbox-device-plugin``,
  ``vfio-manager``, ``sandbox-validator``, ``kata-manager``, ``cc-manager``). The sandbox device
  plugin (NVIDIA kubevirt-gpu-device-plugin) advertises each VFIO-bound GPU as one unit of
  ``nvidia.com/<chip>_<PCI device name>`` (``nvidia.com/GA100_A100_PCIE_40GB``): given here per
  product (the catalogue's ``passthrough_resource``), no ``nvidia.com/gpu``, no GFD labels
  (:func:`passthrough_view`).

Not modelled: GFD's memory, architecture, CUDA and MIG attribute labels (nothing here reads them),
and an invalid ``single`` node's device plugin (the stand-in advertises no ``nvidia.com/gpu``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from domain.labels import GPU_RESOURCE

SharingStrategy = Literal["none", "time-slicing", "mps"]
MigStrategy = Literal["none", "single", "mixed"]

#: The GPU Operator's ``nvidia.com/gpu.workload.config`` value of KubeVirt passthrough nodes
#: (``controllers/state_manager.go`` ``gpuWorkloadConfigVMPassthrough``).
VM_PASSTHROUGH = "vm-passthrough"
#: GFD's label of the MIG strategy (``internal/lm/strategy.go``).
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
#: GFD's MPS label (``internal/lm/nvml.go``).
MPS_CAPABLE_LABEL = "nvidia.com/mps.capable"


class PluginConfigError(ValueError):
    """A device-plugin config file the stand-in cannot read (names the field)."""


@dataclass(frozen=True, slots=True)
class PluginConfig:
    """The parts of a device-plugin config file (``version: v1``) the stand-in acts on.

    Attributes:
        strategy: the active sharing strategy (``SharingStrategy``).
        replicas: replicas of ``nvidia.com/gpu`` in the active strategy's resources (1: none).
        rename: the name the replicas are advertised under (``nvidia.com/gpu.shared``), or None.
        mig_strategy: ``flags.migStrategy`` (``none`` when unset).
    """

    strategy: SharingStrategy = "none"
    replicas: int = 1
    rename: str | None = None
    mig_strategy: MigStrategy = "none"


def parse_plugin_config(doc: Mapping[str, Any]) -> PluginConfig:
    """Read a device-plugin config file (as parsed YAML/JSON).

    ``sharing.mps`` wins over ``sharing.timeSlicing`` (``ReplicatedResources``); the strategy is
    the active one only when some resource has replicas > 1 (``isReplicated``); only the
    ``nvidia.com/gpu`` entry is read; ``renameByDefault`` renames it ``nvidia.com/gpu.shared``.

    Raises:
        PluginConfigError: not ``version: v1``, or replicas below 1 or not an integer.
    """
    if doc.get("version", "v1") != "v1":
        raise PluginConfigError(f"version: {doc.get('version')!r}, only v1 is read")
    mig = str((doc.get("flags") or {}).get("migStrategy") or "none")
    if mig not in ("none", "single", "mixed"):
        raise PluginConfigError(f"flags.migStrategy: {mig!r} is not none, single or mixed")
    sharing = doc.get("sharing") or {}
    key = "mps" if sharing.get("mps") is not None else "timeSlicing"
    body = sharing.get(key) or {}
    resources = body.get("resources") or []
    gpu = next((r for r in resources if r.get("name") == GPU_RESOURCE), None)
    replicas = 1
    if gpu is not None:
        replicas = gpu.get("replicas", 1)
        if not isinstance(replicas, int) or replicas < 1:
            raise PluginConfigError(f"sharing.{key}.resources[{GPU_RESOURCE}].replicas: {replicas!r}")
    replicated = any(int(r.get("replicas") or 0) > 1 for r in resources)
    strategy: SharingStrategy = ("mps" if key == "mps" else "time-slicing") if replicated else "none"
    rename = GPU_RESOURCE + ".shared" if body.get("renameByDefault") and replicas > 1 else None
    return PluginConfig(strategy, replicas, rename, mig)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the GPU components write on a node.

    Attributes:
        resources: extended resource -> capacity (= allocatable) the device plugin advertises.
        labels: GFD / mig-manager label -> value.
    """

    resources: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)


def _resource_labels(
    resource: str, *, product: str, count: int, replicas: int, strategy: str
) -> dict[str, str]:
    """``baseLabeler`` of one resource: product, count, replicas, sharing-strategy."""
    return {
        f"{resource}.product": product,
        f"{resource}.count": str(count),
        f"{resource}.replicas": str(replicas),
        f"{resource}.sharing-strategy": strategy,
    }


def mig_device_resource(profile: str) -> str:
    """The ``mixed`` resource of a MIG profile (``+`` spelt ``.``): ``nvidia.com/mig-1g.5gb``."""
    return "nvidia.com/mig-" + profile.replace("+", ".")


def node_view(
    *,
    gpus: int,
    product: str,
    config: PluginConfig,
    mig_layout: Mapping[str, int] | None = None,
    partitioned: int = 0,
) -> NodeView:
    """What the device plugin and GFD advertise for ``gpus`` GPUs of ``product`` on a node.

    Args:
        gpus: GPUs on the node (>= 1).
        product: their GFD product name (``Tesla-T4``).
        config: the node's device-plugin config, its MIG strategy already the cluster's.
        mig_layout: profile -> MIG devices per GPU of the node's mig-parted config (MIG only).
        partitioned: how many of the GPUs mig-parted has partitioned by ``mig_layout`` (the
            others are full GPUs, MIG disabled).

    Returns:
        The resources and labels (the GPU Operator's ``nvidia.com/gpu.present`` not included).
    """
    layout = {p: n for p, n in (mig_layout or {}).items() if n > 0}
    mig_gpus = min(partitioned, gpus) if config.mig_strategy != "none" else 0
    full = gpus - mig_gpus
    labels: dict[str, str] = {}
    resources: dict[str, int] = {}
    if mig_gpus:  # MIG-enabled parents: labelled without sharing (replicas 0)
        labels |= _resource_labels(GPU_RESOURCE, product=product, count=mig_gpus, replicas=0, strategy="none")
    if full:
        shared = config.replicas > 1
        name = product + ("-SHARED" if shared and config.rename is None else "")
        strategy = config.strategy if shared else "none"
        labels |= _resource_labels(
            GPU_RESOURCE, product=name, count=full, replicas=config.replicas, strategy=strategy
        )
        resources[config.rename or GPU_RESOURCE] = full * config.replicas
    labels[MPS_CAPABLE_LABEL] = "true" if config.strategy == "mps" else "false"
    if config.mig_strategy == "none":
        return NodeView(resources, labels)
    labels[MIG_STRATEGY_LABEL] = config.mig_strategy
    if config.mig_strategy == "single" and mig_gpus:
        if full or not layout or len(layout) != 1:
            labels |= _resource_labels(
                GPU_RESOURCE, product=f"{product}-MIG-INVALID", count=0, replicas=0, strategy=""
            )
            labels[f"{GPU_RESOURCE}.memory"] = "0"
            resources.pop(GPU_RESOURCE, None)
            return NodeView(resources, labels)
        ((profile, per_gpu),) = layout.items()
        devices = per_gpu * mig_gpus
        spelt = profile.replace("+", ".")
        labels |= _resource_labels(
            GPU_RESOURCE, product=f"{product}-MIG-{spelt}", count=devices, replicas=1, strategy="none"
        )
        resources[GPU_RESOURCE] = devices
    elif config.mig_strategy == "mixed" and mig_gpus:
        for profile, per_gpu in sorted(layout.items()):
            res = mig_device_resource(profile)
            spelt = profile.replace("+", ".")
            labels |= _resource_labels(
                res, product=f"{product}-MIG-{spelt}", count=per_gpu * mig_gpus, replicas=1, strategy="none"
            )
            resources[res] = per_gpu * mig_gpus
    return NodeView(resources, labels)


def passthrough_view(*, gpus: int, resource: str | None) -> NodeView:
    """What a ``vm-passthrough`` node advertises for ``gpus`` GPUs: ``gpus`` units of ``resource``
    (the sandbox device plugin's name for their product), nothing when there are none or the
    product has no known resource; no labels (GFD does not run there)."""
    return NodeView({resource: gpus} if gpus and resource else {}, {})
