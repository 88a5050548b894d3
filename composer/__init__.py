"""The composer: attaches fabric GPUs to nodes when pods need them and reclaims idle ones.

A Kubernetes controller (``python -m composer``) for LIQID composable GPU fabrics (issue 7):
it watches unschedulable pods that request NVIDIA GPU resources, plans which free GPUs go to
which host (:mod:`composer.planner`, pure), composes them through the Director, waits until
the node advertises them, and gives idle GPUs back to the free pool.

Layers (imports point one way): ``models`` / ``scheduling`` / ``planner`` / ``podspec`` /
``nodestate`` / ``decide`` (pure) <- ``fabric`` and ``kube`` (the only I/O) <- ``controller``
<- ``__main__``. Annotation and taint names are in :mod:`composer.annotations`.
"""
