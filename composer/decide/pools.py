"""Pool membership from the composer's own configuration: which Nodes and namespaces serve which pool.

The Pulumi program writes the map into the chart's values (``composer.pools[].hosts`` and
``composer.pools[].namespaces``), which land in the composer's Deployment in the target cluster,
so membership needs no label written by anyone else on that cluster (``docs/composer-pools.md``).
The configured map wins over the labels ``composer.liqid.io/pool`` on Nodes and namespaces;
labels still place what the map does not name.

Pure functions; :meth:`composer.decide.round_types.Snapshot.with_pools` applies the map to each round's
snapshot before deciding, and the controller writes the label onto the Nodes :func:`label_changes` names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from composer.model import annotations as ann
from composer.model.nodestate import NodeView


@dataclass(frozen=True)
class PoolMap:
    """Configured pool membership.

    Attributes:
        hosts: Node name -> pool.
        namespaces: namespace -> pool.
    """

    hosts: Mapping[str, str] = field(default_factory=dict)
    namespaces: Mapping[str, str] = field(default_factory=dict)


def node_with_pool(node: NodeView, hosts: Mapping[str, str]) -> NodeView:
    """``node`` with the label ``composer.liqid.io/pool`` its configured pool (unchanged when the
    map does not name it or the label already says so)."""
    pool = hosts.get(node.name)
    if pool is None or node.labels.get(ann.POOL_LABEL) == pool:
        return node
    return replace(node, labels={**node.labels, ann.POOL_LABEL: pool})


def label_changes(nodes: Iterable[NodeView], hosts: Mapping[str, str]) -> dict[str, str]:
    """Node name -> configured pool, for the ``nodes`` whose label ``composer.liqid.io/pool`` differs
    (the composer writes it, so people and ``nodeSelector`` see the pool; Nodes the map does not
    name keep their label)."""
    wanted = ((n, hosts.get(n.name)) for n in nodes)
    return {n.name: pool for n, pool in wanted if pool is not None and n.labels.get(ann.POOL_LABEL) != pool}
