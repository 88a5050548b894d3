"""Kubernetes names the project writes or reads: labels, annotations, taints, gates, resources.

Declared once here; :mod:`composer.model.annotations`, :mod:`composer.model.models`, :mod:`components.tenant`,
:mod:`components.manifests` and the lab import them. What each composer key holds (and the codecs
of its node annotations) is described in :mod:`composer.model.annotations`; the NVIDIA and autoscaler
names, with their sources, in docs/domain.md "Kubernetes names".
"""

from __future__ import annotations

# --- The composer's own keys (prefix ``composer.liqid.io/``) --------------------------------
PREFIX = "composer.liqid.io/"
#: Node annotation: comma-separated, sorted Director device names the composer attached.
DEVICES = PREFIX + "devices"
#: Node annotation: JSON, pod UID -> intent (a pod being served on the node).
INTENTS = PREFIX + "intents"
#: Node annotation: JSON, an idle reclaim in progress.
RECLAIM = PREFIX + "reclaim"
#: Node annotation: when the node was first seen idle with composer GPUs (seconds since the epoch).
IDLE_SINCE = PREFIX + "idle-since"
#: Node label (the host's pool) and namespace label (the pool of the namespace's pods).
POOL_LABEL = PREFIX + "pool"
#: Node label: PCIe slots the host has for fabric GPUs.
MAX_GPUS_LABEL = PREFIX + "max-gpus"
#: Taint written during an idle reclaim: ``composer.liqid.io/reclaiming=true:NoSchedule``.
RECLAIM_TAINT_KEY = PREFIX + "reclaiming"
RECLAIM_TAINT_VALUE = "true"
RECLAIM_TAINT_EFFECT = "NoSchedule"
#: Scheduling gate the webhook adds to new GPU pods (KEP-3521 Pod Scheduling Readiness).
GATE = PREFIX + "compose"
#: Pod annotation recording where the pod's GPUs were reserved (written at release).
RESERVATION = PREFIX + "reservation"
#: Opt-out label/annotation (pod) or label (namespace); value :data:`GATING_DISABLED`.
GATING_OPT_OUT = PREFIX + "gating"
GATING_DISABLED = "disabled"
#: Opt-out annotation (Node, or a pod bound to it): value ``"true"`` holds the node's GPUs.
DO_NOT_RECLAIM = PREFIX + "do-not-reclaim"
#: Marker: the composer set :data:`AUTOSCALER_ANNOTATIONS` on this node.
AUTOSCALER_HOLD = PREFIX + "autoscaler-hold"

# --- Node autoscalers ------------------------------------------------------------------------
#: Node annotations that keep node autoscalers from removing a node, each ``"true"``:
#: cluster-autoscaler and Karpenter (docs/domain.md "Kubernetes names").
AUTOSCALER_ANNOTATIONS: tuple[str, str] = (
    "cluster-autoscaler.kubernetes.io/scale-down-disabled",
    "karpenter.sh/do-not-disrupt",
)

# --- Kubernetes well-known labels ------------------------------------------------------------
#: Well-known node label with the node's host name.
HOSTNAME_LABEL = "kubernetes.io/hostname"

# --- NVIDIA device plugin, GPU Feature Discovery and GPU Operator ----------------------------
#: Prefix shared by every NVIDIA resource name (whole, shared/time-sliced, MIG).
NVIDIA_RESOURCE_PREFIX = "nvidia.com/"
#: Extended resource of whole GPUs advertised by the NVIDIA device plugin.
GPU_RESOURCE = NVIDIA_RESOURCE_PREFIX + "gpu"
#: Resource of shared (time-sliced / MPS) GPUs with ``renameByDefault``.
SHARED_GPU_RESOURCE = NVIDIA_RESOURCE_PREFIX + "gpu.shared"
#: GFD label: the product name of the node's GPUs (``Tesla-T4``, see :mod:`domain.gfd`).
PRODUCT_LABEL = NVIDIA_RESOURCE_PREFIX + "gpu.product"
#: GFD label: the number of GPUs on the node.
COUNT_LABEL = NVIDIA_RESOURCE_PREFIX + "gpu.count"
#: GPU Operator label: ``"true"`` on nodes with an NVIDIA GPU.
PRESENT_LABEL = NVIDIA_RESOURCE_PREFIX + "gpu.present"
#: GPU Operator node label selecting the workload type (``container``, ``vm-passthrough``, ``vm-vgpu``).
GPU_WORKLOAD_LABEL = NVIDIA_RESOURCE_PREFIX + "gpu.workload.config"
#: GPU Operator node label naming the device plugin's config (time-slicing/MPS).
DEVICE_PLUGIN_CONFIG_LABEL = NVIDIA_RESOURCE_PREFIX + "device-plugin.config"
#: GPU Operator (mig-manager) node label naming the MIG configuration.
MIG_CONFIG_LABEL = NVIDIA_RESOURCE_PREFIX + "mig.config"
#: mig-manager's node label of its last run: ``pending`` while mig-parted applies
#: ``nvidia.com/mig.config`` (the device plugin and GFD paused), then ``success`` or ``failed``
#: (mig-parted v0.12.1 ``deployments/container/reconfigure-mig.sh``).
MIG_CONFIG_STATE_LABEL = NVIDIA_RESOURCE_PREFIX + "mig.config.state"
#: The ``nvidia.com/mig.config.state`` of a run that partitioned every GPU of the node, and of one
#: under way.
MIG_SUCCESS, MIG_PENDING = "success", "pending"
