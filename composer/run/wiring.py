"""Build the controller from settings: the one place that wires Kubernetes, Director, metrics,
the executor and the controller together (used by ``python -m composer`` and by the periodic-scan
baseline in ``bench/baseline.py``).

Settings ``mode`` picks the controller (:mod:`domain.composer_mode`): ``deviceplugin``
(:func:`build_controller`, a :class:`composer.run.controller.Controller`) or ``dra``
(:func:`build_dra`, a :class:`composer.run.dra_loop.DraController` over the
:class:`composer.run.dra.DraDriver`); both return a :class:`Wired` and run in
:func:`composer.run.loop.run_loop`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from composer.decide.gating import nomination_enabled
from composer.decide.round_types import Policy
from composer.model import annotations as ann
from composer.model.fabric import DirectorFactory, FabricFactory
from composer.run.controller import Controller
from composer.run.dra import DraDriver, DraKube, DraSource
from composer.run.dra_loop import DraController
from composer.shell.act import Executor, KubeWrites
from composer.shell.cache import ClusterCache, DraCache
from composer.shell.config import Settings
from composer.shell.kube import KubeApi, KubeError, api_client
from composer.shell.metrics import Metrics

log = logging.getLogger(__name__)


#: The loop's controller of each mode.
ControllerT = TypeVar("ControllerT", Controller, DraController)
#: The watch cache of each mode.
CacheT = TypeVar("CacheT", ClusterCache, DraCache)


@dataclass(frozen=True)
class Wired(Generic[ControllerT, CacheT]):
    """The wired pieces of either mode: the Kubernetes client, the metrics registry, the loop's
    controller (:class:`Controller` or :class:`DraController`) and its watch cache
    (:class:`ClusterCache` or :class:`DraCache`; None when ``watch_cache`` is off; the caller
    starts and stops it)."""

    kube: KubeApi
    metrics: Metrics
    controller: ControllerT
    cache: CacheT | None = None


def _kube_and_cache(
    settings: Settings,
    cache_type: type[CacheT],
    *,
    instance: str,
    on_change: Callable[[], None] | None,
) -> tuple[KubeApi, CacheT | None]:
    """The Kubernetes client and, when ``watch_cache`` is on, a ``cache_type`` watch cache on it."""
    kube = KubeApi(api_client(settings.kubeconfig), instance=instance)
    cache = None
    if settings.watch_cache:
        cache = cache_type(
            kube.api,
            node_selector=settings.node_selector,
            on_change=on_change,
            resync_seconds=settings.cache_resync_seconds,
        )
    return kube, cache


def build_controller(
    settings: Settings,
    *,
    instance: str = ann.COMPONENT,
    on_change: Callable[[], None] | None = None,
) -> Wired[Controller, ClusterCache]:
    """Wire device-plugin mode's :class:`Controller` from ``settings``.

    Args:
        settings: the composer's settings (:mod:`composer.shell.config`).
        instance: the replica identity written as the Events' ``reportingInstance``.
        on_change: called by the watch cache when pods, nodes or pool namespaces changed, and
            when a node job ends (wakes the loop).
    Raises:
        Whatever the Kubernetes client raises for an unreadable kubeconfig.
    """
    kube, cache = _kube_and_cache(settings, ClusterCache, instance=instance, on_change=on_change)
    policy = settings.policy()
    metrics = Metrics()
    factory = fabric_factory(settings)
    executor = _executor(settings, kube, factory, policy, metrics)
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


def build_dra(
    settings: Settings,
    *,
    instance: str = ann.COMPONENT,
    on_change: Callable[[], None] | None = None,
) -> Wired[DraController, DraCache]:
    """Wire DRA mode from ``settings`` (``mode: dra``): the Kubernetes client, the watch cache
    (pods, nodes, pool namespaces, ResourceClaims, the driver's ResourceSlices) and
    :func:`wire_dra`. Args and errors as :func:`build_controller`."""
    kube, cache = _kube_and_cache(settings, DraCache, instance=instance, on_change=on_change)
    controller = wire_dra(settings, kube, fabric_factory(settings), source=cache, on_job_done=on_change)
    return Wired(kube, controller.metrics, controller, cache)


class DraModeKube(DraKube, KubeWrites, Protocol):
    """What DRA mode calls of the Kubernetes API (both the driver's and the node jobs')."""


def build(
    settings: Settings,
    *,
    instance: str = ann.COMPONENT,
    on_change: Callable[[], None] | None = None,
) -> Wired[Controller, ClusterCache] | Wired[DraController, DraCache]:
    """The controller of the settings' ``mode``: :func:`build_dra` for ``dra``, else
    :func:`build_controller`. Args and errors as :func:`build_controller`."""
    if settings.mode == "dra":
        return build_dra(settings, instance=instance, on_change=on_change)
    return build_controller(settings, instance=instance, on_change=on_change)


def wire_dra(
    settings: Settings,
    kube: DraModeKube,
    factory: FabricFactory,
    *,
    source: DraSource | None = None,
    metrics: Metrics | None = None,
    clock: Callable[[], float] = time.time,
    on_job_done: Callable[[], None] | None = None,
) -> DraController:
    """The DRA driver and its loop controller over given clients (``python -m composer`` passes
    the real ones through :func:`build_dra`; tests pass in-memory fakes).

    Args:
        settings: the composer's settings (mode ``dra``).
        kube: Kubernetes reads and writes.
        factory: builds Director clients.
        source: the watch cache (None: list every round).
        metrics: where to count (None: a new registry).
        clock: seconds since the epoch.
        on_job_done: called when a node job ends (wakes the loop); ``compose_workers`` node
            jobs run at once, one per node.
    """
    policy = settings.policy()
    metrics = metrics or Metrics()
    executor = _executor(settings, kube, factory, policy, metrics, clock=clock)
    driver = DraDriver(
        kube,
        executor,
        policy,
        node_selector=settings.node_selector,
        source=source,
        clock=clock,
        workers=settings.compose_workers,
        on_job_done=on_job_done,
        fabric_max_age_seconds=settings.director_resync_seconds,
    )
    return DraController(driver, metrics, clock=clock)


def fabric_factory(settings: Settings) -> FabricFactory:
    """Director clients with the composer's URL, credentials, timeout, retries and job timeout."""
    return DirectorFactory(
        settings.director_url,
        username=settings.director_username,
        password=settings.password(),
        timeout=settings.director_timeout_seconds,
        retries=settings.director_retries,
        job_timeout=settings.director_job_timeout_seconds,
    )


def _executor(
    settings: Settings,
    kube: KubeWrites,
    factory: FabricFactory,
    policy: Policy,
    metrics: Metrics,
    *,
    clock: Callable[[], float] = time.time,
) -> Executor:
    return Executor(
        kube,
        factory,
        policy,
        metrics,
        plugin_namespace=settings.device_plugin_namespace,
        plugin_selector=settings.device_plugin_selector,
        mig_manager_selector=settings.mig_manager_selector,
        release_to_system_pool=settings.release_to_system_pool,
        clock=clock,
        async_events=True,
        write_workers=settings.compose_workers,
    )
