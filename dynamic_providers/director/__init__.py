"""LIQID Director: typed client, composition planning, and the ``GpuComposition`` dynamic provider.

Layers (imports point one way): ``errors`` <- ``liqid`` (LIQID's wire facts as data) <- ``models``
<- ``_transport`` <- ``api.*`` (one module per API resource) <- ``client`` <- ``planning`` (pure)
<- ``provider``.

Public names::

    from dynamic_providers.director import DirectorClient, Gpu, GpuComposition, DirectorError

The exception tree is drawn in :mod:`dynamic_providers.director.errors`. The lab stand-in for
the Director is ``lab.director_sim``.
"""

from __future__ import annotations

from .client import DirectorClient
from .errors import (
    CompositionError,
    DirectorAuthError,
    DirectorConflictError,
    DirectorError,
    DirectorJobFailedError,
    DirectorJobRunningError,
    DirectorNotFoundError,
    DirectorProtocolError,
    DirectorRequestError,
    DirectorServerError,
    DirectorTimeoutError,
    DirectorUnavailableError,
    InsufficientGpusError,
    UnknownModelError,
)
from .models import Gpu, Group, Machine, gfd_product_name
from .planning import CompositionPlan, owned_gpus, plan_composition

__all__ = [
    "CompositionError",
    "CompositionPlan",
    "DirectorAuthError",
    "DirectorClient",
    "DirectorConflictError",
    "DirectorError",
    "DirectorJobFailedError",
    "DirectorJobRunningError",
    "DirectorNotFoundError",
    "DirectorProtocolError",
    "DirectorRequestError",
    "DirectorServerError",
    "DirectorTimeoutError",
    "DirectorUnavailableError",
    "Gpu",
    "GpuComposition",
    "Group",
    "InsufficientGpusError",
    "Machine",
    "UnknownModelError",
    "gfd_product_name",
    "owned_gpus",
    "plan_composition",
]


def __getattr__(name: str) -> object:
    # The provider imports pulumi; load it only when asked for, so the composer and the lab
    # can use the client without the Pulumi SDK's import cost.
    if name == "GpuComposition":
        from .provider import GpuComposition

        return GpuComposition
    raise AttributeError(name)
