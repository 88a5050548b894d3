"""Host and DPU preparation over SSH, as Pulumi dynamic providers.

Substitution: the design card names pulumi-command, whose provider plugin cannot be built
on this machine (its Go module is not served by the Go proxy here). The same behaviour is
implemented as Python dynamic providers that run the commands over SSH with paramiko.

Layers (imports point one way; the mlxconfig rules are :mod:`domain.mlxconfig`):
``errors`` / ``kernel`` (pure) ←
``models`` ← ``mlxconfig`` (pure parsing) ← ``client`` (the only I/O: SSH) ←
``operations`` (query → change what differs → report) ← ``provider`` (Pulumi glue).

Public names:

- :class:`~dynamic_providers.ssh.provider.HostKernelPrep`,
  :class:`~dynamic_providers.ssh.provider.DpuMlxconfig`,
  :class:`~dynamic_providers.ssh.provider.SshConnectionArgs` (the Pulumi resources);
- :mod:`domain.mlxconfig` (pure validation, usable by policies);
- :mod:`~dynamic_providers.ssh.errors` (exception tree).
"""
