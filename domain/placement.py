"""Which cluster each Kubernetes object of the program belongs to, and who acts on it there.

The estate spans clusters: the mothership (the k0rdent management cluster), the hypervisor
clusters it creates on the bare-metal hosts, the tenant clusters (VMs on a hypervisor cluster) and
the DPU cluster. Every object the program creates is in exactly one of them: the one whose
controller consumes it. :data:`PLACEMENTS` says which, per object (``object`` is the value of the
label :data:`OBJECT_LABEL` the program puts on the object, or names an object without labels of its
own: a Node patch, a Helm release); docs/architecture.md "Where each object lives" is the same table
(``tests/components/test_placement.py`` keeps the two in step and checks, under the Pulumi mocks,
that every object goes through a provider of its cluster).

Cluster roles (:data:`ClusterRole`):

- ``mothership``: the management cluster; its provider is built from ``mothership.kubeconfig``.
- ``hypervisor``: a hypervisor cluster, where the hosts are Nodes, the tenants' VMs and GPU pods run
  and the composer composes GPUs; its provider is built from its kubeconfig Secret on the
  mothership, or from an explicit kubeconfig (an adopted cluster). An object placed here names the
  cluster it goes to: the hypervisor cluster of a host, of a tenant's VMs, of a tenant's GPU pods
  (the composer's target cluster, which may be the mothership itself), or of shared GPUs.
- ``tenant`` and ``dpu``: the tenant clusters and the DPU cluster. The program creates nothing in them
  itself: kcm installs their services (``serviceSpec``), DPF its DPUServices; both are declared on
  the mothership.

Pure, standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

ClusterRole = Literal["mothership", "hypervisor", "tenant", "dpu"]

#: Every cluster role, in the order the docs list them.
CLUSTER_ROLES: Final[tuple[ClusterRole, ...]] = ("mothership", "hypervisor", "tenant", "dpu")

#: Label naming which entry of :data:`PLACEMENTS` an object is (``kubectl get -l``).
OBJECT_LABEL: Final = "composable-gpu.io/object"


@dataclass(frozen=True)
class Placement:
    """Where one kind of program object lives.

    Attributes:
        kind: the Kubernetes kind (``NodePatch`` for a server-side patch of a Node, ``Chart`` for a
            Helm release rendered by pulumi-kubernetes).
        cluster: the role of the cluster it is created in.
        consumer: the controller (or API server admission) that acts on it in that cluster.
    """

    kind: str
    cluster: ClusterRole
    consumer: str


#: Object -> its placement. Keys are the values of :data:`OBJECT_LABEL`.
PLACEMENTS: Final[dict[str, Placement]] = {
    "infra-namespace": Placement("Namespace", "mothership", "kube-apiserver (holds the platform objects)"),
    "bmc-credentials": Placement("Secret", "mothership", "Metal3 baremetal-operator (BMC login)"),
    "host-user-data": Placement("Secret", "mothership", "Metal3 (the host's cloud-init, via Ironic)"),
    "bare-metal-host": Placement(
        "BareMetalHost", "mothership", "Metal3 baremetal-operator; CAPM3 claims it for a cluster"
    ),
    "dpu-flavor": Placement("DPUFlavor", "mothership", "DPF operator"),
    "dpu-cluster": Placement("DPUCluster", "mothership", "DPF operator"),
    "bfb": Placement("BFB", "mothership", "DPF operator (downloads the BlueField bundle)"),
    "dpu-set": Placement("DPUSet", "mothership", "DPF operator (provisions the DPUs)"),
    "dpu-service": Placement("DPUService", "mothership", "DPF operator (installs it into the DPU cluster)"),
    "cluster-deployment": Placement(
        "ClusterDeployment", "mothership", "k0rdent kcm (renders the template: CAPI objects, services)"
    ),
    "cluster-template": Placement("ClusterTemplate", "mothership", "k0rdent kcm template controller"),
    "service-template": Placement("ServiceTemplate", "mothership", "k0rdent kcm template controller"),
    "helm-repository": Placement("HelmRepository", "mothership", "Flux source-controller"),
    "helm-repository-credentials": Placement("Secret", "mothership", "Flux source-controller"),
    "tenant-namespace": Placement(
        "Namespace", "mothership", "k0rdent kcm (holds the tenant's ClusterDeployments and templates)"
    ),
    "vxlan-segment": Placement("ConfigMap", "mothership", "none in this repository (the DPU flow record)"),
    "node-labels": Placement(
        "NodePatch", "hypervisor", "kube-scheduler, GPU Operator (lab only: mothership.label_nodes)"
    ),
    "tenant-workload-namespace": Placement(
        "Namespace", "hypervisor", "kube-apiserver; CAPK and KubeVirt (the tenant's VMs), the tenant's pods"
    ),
    "gpu-quota": Placement("ResourceQuota", "hypervisor", "kube-apiserver ResourceQuota admission"),
    "network-attachment": Placement(
        "NetworkAttachmentDefinition", "hypervisor", "Multus (when KubeVirt starts a VM's pod)"
    ),
    "gpu-sharing": Placement(
        "ConfigMap", "hypervisor", "people and tools (the device plugin reads the same config inline)"
    ),
    "composer-namespace": Placement("Namespace", "hypervisor", "kube-apiserver (the composer's Pods)"),
    "composer-director-credentials": Placement("Secret", "hypervisor", "the composer (Director login)"),
    "composer-release": Placement("Chart", "hypervisor", "the composer controller and its webhook"),
    "composer-lease-namespace": Placement(
        "Namespace", "hypervisor", "a composer running on the mothership (its Lease and orphan timers)"
    ),
    "hosted-composer-namespace": Placement(
        "Namespace", "mothership", "kube-apiserver (the Pods of a composer serving a child cluster)"
    ),
    "hosted-composer-director-credentials": Placement(
        "Secret", "mothership", "the composer (Director login)"
    ),
    "composer-target-kubeconfig": Placement(
        "Secret", "mothership", "the composer's Pods (their client of the child cluster)"
    ),
    "hosted-composer-release": Placement(
        "Chart", "mothership", "the composer controller, serving a child cluster (no webhook)"
    ),
}


def placement(obj: str) -> Placement:
    """The placement of program object ``obj``.

    Raises:
        KeyError: ``obj`` is not an object of :data:`PLACEMENTS` (a programming error).
    """
    return PLACEMENTS[obj]
