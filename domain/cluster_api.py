"""Cluster API's kubeconfig Secret convention, the one fact the program and the lab both use.

Cluster API publishes each workload cluster's kubeconfig on the management cluster as Secret
``<cluster>-kubeconfig`` in the cluster's namespace, the kubeconfig under data key ``value``
(kubernetes-sigs/cluster-api ``util/secret/consts.go``: ``KubeconfigDataName = "value"``, purpose
``Kubeconfig = "kubeconfig"``; ``util/secret/secret.go`` ``Name(cluster, purpose)`` =
``<cluster>-<purpose>``). Dependency-free, like the rest of :mod:`domain`.
"""

from __future__ import annotations

#: Data key of the kubeconfig in a Cluster API kubeconfig Secret (``secret.KubeconfigDataName``).
KUBECONFIG_DATA_KEY = "value"


def kubeconfig_secret_name(cluster: str) -> str:
    """``<cluster>-kubeconfig``: the Secret Cluster API writes for workload cluster ``cluster``."""
    return f"{cluster}-kubeconfig"
