"""The composer: attaches fabric GPUs to nodes when pods need them and reclaims idle ones.

A Kubernetes controller (``python -m composer``) for LIQID composable GPU fabrics:
it watches unschedulable pods that request NVIDIA GPU resources, plans which free GPUs go to
which host (:func:`composer.decide.planner.plan`, pure), composes them through the Director, waits
until the node advertises them (restarting its device plugin if needed), and gives idle GPUs
back to the free pool. Shipped as the Helm chart ``charts/composer``.

Layering, written only here (:data:`LAYERS`, :data:`PURE`, :data:`FORBIDDEN_IN_PURE`; checked by
``tests/composer/test_layering.py``): the package is in folders, one layer each, lowest first.

- ``model``: values: what the composer reads of pods, nodes and the Director, its node annotations;
- ``decide`` and ``dra``, siblings: one round's pure decisions, ``decide`` for the device-plugin
  placement mode (and DRA mode's node jobs, :mod:`composer.decide.dra_round`, which reuse its
  phases), ``dra`` for Dynamic Resource Allocation (its ResourceSlices, claims, binding
  conditions, DeviceClass); siblings do not import each other;
- ``shell``: I/O: the Kubernetes API (only ``shell.kube`` calls, ``shell.cache`` watches), the
  Director read, node jobs, threads, the HTTP endpoints, settings;
- ``run``: the rounds, the control loop and the wiring of one replica.

A module may import its own folder and the folders of lower layers only; ``__main__`` (the entry
point) may import any. The folders in :data:`PURE` import none of :data:`FORBIDDEN_IN_PURE` at
their top level.

Annotations, labels and the taint it writes use the prefix ``composer.liqid.io/``
(:mod:`composer.model.annotations`).
"""

#: The composer's folders by layer, lowest first; each layer's folders are siblings.
LAYERS: tuple[tuple[str, ...], ...] = (("model",), ("decide", "dra"), ("shell",), ("run",))
#: Folders of pure code: no network, process or Kubernetes API client imported at top level.
PURE: frozenset[str] = frozenset({"model", "decide", "dra"})
#: Modules a pure folder may not import (a name or any module below it).
FORBIDDEN_IN_PURE: tuple[str, ...] = (
    "requests", "urllib3", "kubernetes.client", "kubernetes.config", "kubernetes.watch",
    "kubernetes.informer", "http", "socket", "subprocess", "dynamic_providers",
)
