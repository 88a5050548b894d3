"""The composer: attaches fabric GPUs to nodes when pods need them and reclaims idle ones.

A Kubernetes controller (``python -m composer``) for LIQID composable GPU fabrics:
it watches unschedulable pods that request NVIDIA GPU resources, plans which free GPUs go to
which host (:func:`composer.decide.planner.plan`, pure), composes them through the Director, waits
until the node advertises them (restarting its device plugin if needed), and gives idle GPUs
back to the free pool. Shipped as the Helm chart ``charts/composer``.

Modules, one concern each; imports point one way (checked by ``tests/composer/test_layering.py``):

- pure data and decisions: ``models`` (values), ``scheduling`` (scheduler filters),
  ``planner`` (the plan), ``annotations`` (node annotation names and codecs), ``podspec`` /
  ``nodestate`` (API JSON -> values), ``fabric`` (Director view and client protocol),
  ``decide`` (one round's decisions), ``config`` (settings);
- I/O: ``kube`` (the only Kubernetes API user), ``act`` (executes node jobs), ``leader``
  (Lease election), ``health`` (probes and metrics endpoint), ``metrics``;
- loop and entry point: ``controller``, ``__main__``.

Annotations, labels and the taint it writes use the prefix ``composer.liqid.io/``
(:mod:`composer.model.annotations`).
"""
