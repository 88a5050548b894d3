"""Skipping a round: one place for the log lines and the ``composer_round_failures_total`` stages
of a round that cannot start or whose reads failed, shared by device-plugin mode's
:meth:`composer.run.controller.Controller.round` and DRA mode's
:meth:`composer.run.dra_loop.DraController.round`.

A skipped round does nothing more; the next round starts from what is there. The stages are
:data:`OBSERVE_KUBERNETES` and :data:`OBSERVE_DIRECTOR` (the alert ``ComposerDirectorUnavailable``
and the dashboard read the second: ``charts/composer``); a watch cache that has not listed every
kind yet is logged, not counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from composer.shell.kube import KubeError
from dynamic_providers.director.errors import DirectorError

if TYPE_CHECKING:
    from composer.shell.metrics import Metrics

T = TypeVar("T")

#: ``round_failures`` stage: a Kubernetes read (in DRA mode also a slice write) failed.
OBSERVE_KUBERNETES = "observe-kubernetes"
#: ``round_failures`` stage: a Director read failed.
OBSERVE_DIRECTOR = "observe-director"


class Synced(Protocol):
    """A watch cache (:class:`composer.shell.cache.ClusterCache` and its DRA variant)."""

    @property
    def synced(self) -> bool:
        """Every kind listed once."""
        ...


def unsynced(source: Synced | None, log: logging.Logger) -> bool:
    """True, logged on ``log``, when ``source`` has not listed every kind once (a half-filled cache
    would show claims or pods without their nodes): the round is skipped. False for None (no
    cache: the round lists)."""
    if source is not None and not source.synced:
        log.info("round skipped: the watch cache has not listed everything yet")
        return True
    return False


def run_or_skip(
    step: Callable[[], T],
    metrics: Metrics,
    log: logging.Logger,
    *,
    round_name: str = "round",
    kubernetes_failed: str = "Kubernetes read failed",
) -> T | None:
    """``step()``'s result, or None when it raised a Kubernetes or Director error: the round is
    skipped, with the warning ``<round_name> skipped, <kubernetes_failed>: <error>`` or
    ``<round_name> skipped, Director read failed: <error>`` on ``log`` (the caller's logger) and
    ``metrics.round_failures`` counted at :data:`OBSERVE_KUBERNETES` or :data:`OBSERVE_DIRECTOR`.

    Raises:
        Any other exception of ``step`` (the loop counts it at the stage ``bug``).
    """
    try:
        return step()
    except KubeError as exc:
        log.warning("%s skipped, %s: %s", round_name, kubernetes_failed, exc)
        metrics.round_failures.labels(OBSERVE_KUBERNETES).inc()
    except DirectorError as exc:
        log.warning("%s skipped, Director read failed: %s", round_name, exc)
        metrics.round_failures.labels(OBSERVE_DIRECTOR).inc()
    return None
