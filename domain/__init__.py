"""Domain facts of composable GPU infrastructure, declared once (standard library only).

This package imports nothing of the project (``tests/test_layering_domain.py``), so every other
package (components, policies, stack_config, composer, dynamic_providers, ops) may import it.

Modules:

- :mod:`domain.contract`: the component contract, one typed definition per
  ``composable:infra:*`` resource token (property names and types);
- :mod:`domain.labels`: Kubernetes label, annotation, taint and gate names the project writes or reads;
- :mod:`domain.settings`: the composer's settings, one default and one bound each;
- :mod:`domain.reclaim`: the composer's reclaim budgets, UTC windows and owner tag: shape and rules;
- :mod:`domain.gfd`: GPU Feature Discovery product-name normalisation;
- :mod:`domain.gpu_sharing`: GPU sharing (time-slicing, MPS, MIG): the device plugin's config and
  what one GPU yields on a shared node, from one setting;
- :mod:`domain.mlxconfig`: the BlueField-3 mlxconfig parameters this project manages, and their rules.

The external facts behind them (vendor files and pages) are collected in ``docs/domain.md``.
"""
