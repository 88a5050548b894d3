"""LIQID Director: typed client, composition planning, and the ``GpuComposition`` dynamic provider.

Layers (imports point one way): ``errors`` <- ``liqid`` (LIQID's wire facts as data) <- ``models``
<- ``_transport`` <- ``api.*`` (one module per API resource) <- ``client`` <- ``planning`` (pure)
<- ``provider``; ``known`` (status records the process's clients share) sits between ``models``
and ``client``.

Public names::

    from dynamic_providers.director import DirectorClient, Gpu, GpuComposition, DirectorError

The exception tree is drawn in :mod:`dynamic_providers.director.errors`. The lab stand-in for
the Director is ``lab.director_sim``.
"""

from __future__ import annotations

from . import errors
from .client import DirectorClient
from .errors import *  # noqa: F403 (the exception tree, errors.__all__)
from .models import Gpu, Group, Machine, gfd_product_name
from .planning import CompositionPlan, owned_gpus, plan_composition

__all__ = [
    "CompositionPlan",
    "DirectorClient",
    "Gpu",
    "GpuComposition",  # noqa: F405 (loaded by __getattr__ below)
    "Group",
    "Machine",
    "gfd_product_name",
    "owned_gpus",
    "plan_composition",
]
__all__ += errors.__all__


def __getattr__(name: str) -> object:
    # The provider imports pulumi; load it only when asked for, so the composer and the lab
    # can use the client without the Pulumi SDK's import cost.
    if name == "GpuComposition":
        from .provider import GpuComposition

        return GpuComposition
    raise AttributeError(name)
