"""How the lab's timing scales with the number of kwok Nodes it runs (pure arithmetic, no I/O).

kwok plays every Node's kubelet on the lab's 2 cores beside the API server: each Node renews its
Lease every quarter of the lease duration (``sigs.k8s.io/kwok`` v0.7.0
``pkg/kwok/controllers/controller.go``: ``renewInterval := leaseDuration / 4``), and
kube-controller-manager's node lifecycle controller taints a Node ``unreachable`` when neither its
Lease nor its status was renewed within ``--node-monitor-grace-period``. With a fixed 40 s lease,
5,000 Nodes ask for 500 Lease updates a second; on the lab machine the API server fell behind and
1,448 of 5,000 Nodes were tainted unreachable minutes after they were created. So the lease, the
grace period and the start-up wait grow with the fleet, and a fleet of up to 1,000 Nodes keeps the
values it always had.
"""

from __future__ import annotations

#: Nodes up to which the lab keeps kwok's 40 s lease and the lifecycle controller's 50 s grace.
BASE_FLEET = 1000
#: kwok's lease duration for up to :data:`BASE_FLEET` Nodes, seconds (renewed every 10 s).
BASE_LEASE_SECONDS = 40
#: kube-controller-manager's ``--node-monitor-grace-period`` default, seconds (``k8s.io/kubernetes``
#: v1.36.3 ``pkg/controller/nodelifecycle/config/v1alpha1/defaults.go``).
BASE_GRACE_SECONDS = 50
#: Seconds :func:`nodes_ready_wait` allows whatever the fleet size, and per Node on top.
NODES_READY_BASE_SECONDS = 60.0
#: Measured on the 2-core lab machine with 5,000 kwok Nodes: kube-controller-manager's node
#: lifecycle controller first observed new Nodes at 15 per second (its log's "Creating timestamp
#: entry for newly observed Node" lines) and removes the not-ready taint only after that; 0.1 s
#: per Node allows 10 per second.
NODES_READY_SECONDS_PER_NODE = 0.1


def nodes_ready_wait(count: int) -> tuple[float, float]:
    """``(timeout, poll interval)`` in seconds for waiting on ``count`` new kwok Nodes to be Ready
    and untainted: the timeout grows with the fleet (:data:`NODES_READY_BASE_SECONDS` plus
    :data:`NODES_READY_SECONDS_PER_NODE` per Node: 60 s for a few Nodes, 560 s for 5,000), and so
    does the interval between two checks (0.2 s, and one second per 2,000 Nodes above that: each
    check lists every Node, which at 5,000 Nodes is megabytes the API server and this process
    share the machine's cores with kwok for).

    Raises:
        ValueError: ``count`` is negative.
    """
    if count < 0:
        raise ValueError(f"node count must not be negative, got {count}")
    return NODES_READY_BASE_SECONDS + NODES_READY_SECONDS_PER_NODE * count, max(0.2, count / 2000)


def node_heartbeat(count: int) -> tuple[int, int]:
    """``(kwok lease duration, node-monitor grace period)`` in whole seconds for ``count`` Nodes.

    Up to :data:`BASE_FLEET` Nodes: 40 s and 50 s. Above, both grow in proportion, so the Lease
    updates per second stay at what 1,000 Nodes ask (100 a second) and the grace period keeps
    five renew intervals (5,000 Nodes: 200 s and 250 s).

    Raises:
        ValueError: ``count`` is negative.
    """
    if count < 0:
        raise ValueError(f"node count must not be negative, got {count}")
    scale = max(1.0, count / BASE_FLEET)
    return round(BASE_LEASE_SECONDS * scale), round(BASE_GRACE_SECONDS * scale)
