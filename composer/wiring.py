"""Build the controller from settings: the one place that wires Kubernetes, Director, metrics,
the executor and the controller together (used by ``python -m composer`` and by the periodic-scan
baseline in ``bench/baseline.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from composer import annotations as ann
from composer.act import Executor
from composer.config import Settings
from composer.controller import Controller
from composer.fabric import director_factory
from composer.kube import KubeApi, api_client
from composer.metrics import Metrics


@dataclass(frozen=True)
class Wired:
    """The wired pieces: the Kubernetes client, the metrics registry and the controller."""

    kube: KubeApi
    metrics: Metrics
    controller: Controller


def build_controller(settings: Settings, *, instance: str = ann.COMPONENT) -> Wired:
    """Wire a :class:`Controller` from ``settings``.

    Args:
        settings: the composer's settings (:mod:`composer.config`).
        instance: the replica identity written as the Events' ``reportingInstance``.
    Raises:
        Whatever the Kubernetes client raises for an unreadable kubeconfig.
    """
    policy = settings.policy()
    metrics = Metrics()
    kube = KubeApi(api_client(settings.kubeconfig), instance=instance)
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
    )
    controller = Controller(
        kube,
        factory,
        policy,
        metrics,
        executor,
        node_selector=settings.node_selector,
        workers=settings.compose_workers,
    )
    return Wired(kube, metrics, controller)
