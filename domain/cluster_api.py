"""Cluster API's kubeconfig Secret convention and kcm's Ready condition: facts the program and the lab share.

Cluster API publishes each workload cluster's kubeconfig on the management cluster as Secret
``<cluster>-kubeconfig`` in the cluster's namespace, the kubeconfig under data key ``value``
(kubernetes-sigs/cluster-api ``util/secret/consts.go``: ``KubeconfigDataName = "value"``, purpose
``Kubeconfig = "kubeconfig"``; ``util/secret/secret.go`` ``Name(cluster, purpose)`` =
``<cluster>-<purpose>``). Dependency-free, like the rest of :mod:`domain`.
"""

from __future__ import annotations

#: Condition type of a ClusterDeployment's readiness as k0rdent kcm reports it (its CRD's printer
#: column ``Ready`` is ``.status.conditions[?(@.type=="Ready")].status``, k0rdent/kcm
#: ``templates/provider/kcm/templates/crds/k0rdent.mirantis.com_clusterdeployments.yaml``); the lab's
#: Cluster API stand-in sets it after it has written the kubeconfig Secret.
READY_CONDITION = "Ready"

#: Data key of the kubeconfig in a Cluster API kubeconfig Secret (``secret.KubeconfigDataName``).
KUBECONFIG_DATA_KEY = "value"


def kubeconfig_secret_name(cluster: str) -> str:
    """``<cluster>-kubeconfig``: the Secret Cluster API writes for workload cluster ``cluster``."""
    return f"{cluster}-kubeconfig"
