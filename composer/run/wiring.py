"""Build the controller from settings: the one place that wires Kubernetes, Director, metrics,
the executor and the controller together (used by ``python -m composer`` and by the periodic-scan
baseline in ``bench/baseline.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from composer.decide.gating import nomination_enabled
from composer.model import annotations as ann
from composer.model.fabric import director_factory
from composer.run.controller import Controller
from composer.shell.act import Executor
from composer.shell.cache import ClusterCache
from composer.shell.config import Settings
from composer.shell.kube import KubeApi, KubeError, api_client
from composer.shell.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Wired:
    """The wired pieces: the Kubernetes client, the metrics registry, the controller and its
    watch cache (None when ``watch_cache`` is off; the caller starts and stops it)."""

    kube: KubeApi
    metrics: Metrics
    controller: Controller
    cache: ClusterCache | None = None


def build_controller(
    settings: Settings,
    *,
    instance: str = ann.COMPONENT,
    on_change: Callable[[], None] | None = None,
) -> Wired:
    """Wire a :class:`Controller` from ``settings``.

    Args:
        settings: the composer's settings (:mod:`composer.shell.config`).
        instance: the replica identity written as the Events' ``reportingInstance``.
        on_change: called by the watch cache when pods, nodes or pool namespaces changed, and
            when a node job ends (wakes the loop).
    Raises:
        Whatever the Kubernetes client raises for an unreadable kubeconfig.
    """
    policy = settings.policy()
    metrics = Metrics()
    kube = KubeApi(api_client(settings.kubeconfig), instance=instance)
    cache = None
    if settings.watch_cache:
        cache = ClusterCache(
            kube.api,
            node_selector=settings.node_selector,
            on_change=on_change,
            resync_seconds=settings.cache_resync_seconds,
        )
    factory = director_factory(
        settings.director_url,
        username=settings.director_username,
        password=settings.password(),
        timeout=settings.director_timeout_seconds,
        retries=settings.director_retries,
    )
    executor = Executor(
        kube,
        factory,
        policy,
        metrics,
        plugin_namespace=settings.device_plugin_namespace,
        plugin_selector=settings.device_plugin_selector,
        release_to_system_pool=settings.release_to_system_pool,
        async_events=True,
        write_workers=settings.compose_workers,
    )
    controller = Controller(
        kube,
        factory,
        policy,
        metrics,
        executor,
        node_selector=settings.node_selector,
        workers=settings.compose_workers,
        source=cache,
        fabric_max_age_seconds=settings.director_resync_seconds,
        on_job_done=on_change,
        nominate=_nominate(settings.nominate_node, kube),
    )
    return Wired(kube, metrics, controller, cache)


def _nominate(setting: str, kube: KubeApi) -> bool:
    """Resolve ``nominate_node`` (``auto`` reads the API server's version once, at start)."""
    version = None
    if setting == "auto":
        try:
            version = kube.server_version()
        except KubeError as exc:
            log.warning("API server version unreadable (%s): pods are not nominated", exc)
    on = nomination_enabled(setting, version)
    log.info("nominatedNodeName of reserved pods: %s (nominate_node=%s)", "set" if on else "not set", setting)
    return on
