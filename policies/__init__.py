"""Tenant-isolation policy pack for the composable-GPU Pulumi program.

Run it with ``pulumi preview --policy-pack policies`` (see ``policies/README.md``). Layout:

- ``rules/``: the rules, pure functions over plain resource records (no Pulumi imports);
- ``adapter.py``: turns pulumi-policy's arguments into those records and the rules into
  policies;
- ``__main__.py``: the entry point the language host runs (``python -u policies``);
- ``config/``: per-environment ``--policy-pack-config`` files.
"""
