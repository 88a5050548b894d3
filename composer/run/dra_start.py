"""DRA mode's start: check the API server supports it, then apply the driver's DeviceClass.

Run once by ``python -m composer`` in mode ``dra`` before it campaigns for the Lease (every
replica; both steps are idempotent). The composer applies the DeviceClass itself rather than the
chart rendering it: the class is built by :func:`composer.dra.deviceclass.device_class` (one
place for its CEL selector and the ``extendedResourceName`` rule), and the same start step is
where an API server without the feature is refused. The class stays when the chart is
uninstalled (``kubectl delete deviceclass gpu.composer.liqid.io`` removes it).

What "supports" means and how it is read: :mod:`composer.dra.support`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from composer.dra import support
from composer.dra.deviceclass import device_class
from composer.shell.kube import KubeError

log = logging.getLogger(__name__)


class DraUnsupported(Exception):
    """The API server cannot serve DRA mode (no ``resource.k8s.io/v1``, a feature gate off, or
    the composer not allowed to write what DRA mode writes). The message says which and what to do."""


class DraStartKube(Protocol):
    """The writes of DRA mode's start (:class:`composer.shell.kube.KubeApi`)."""

    def apply_device_class(self, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]: ...

    def apply_resource_slice(self, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]: ...


def start_dra(kube: DraStartKube) -> dict[str, Any]:
    """Check DRA support with two dry-run applies, then apply the DeviceClass.

    Returns:
        The DeviceClass as the API server stored it.

    Raises:
        DraUnsupported: ``resource.k8s.io/v1`` not served (404), not allowed (403: the chart's
            ``dra.mode: dra`` grants it), or a feature gate off (the fields came back dropped).
        KubeError: any other failure (no answer, a server error): the caller may start again.
    """
    try:
        cls = kube.apply_device_class(support.probe_device_class(), dry_run=True)
        probe = kube.apply_resource_slice(support.probe_slice(), dry_run=True)
    except KubeError as exc:
        if exc.status == 404:
            raise DraUnsupported(
                "mode dra: the API server does not serve resource.k8s.io/v1 deviceclasses and "
                f"resourceslices (DRA mode needs Kubernetes 1.36 or newer; use mode deviceplugin): {exc}"
            ) from exc
        if exc.status == 403:
            raise DraUnsupported(
                f"mode dra: the composer may not write DeviceClasses and ResourceSlices (the chart "
                f"grants it with dra.mode: dra): {exc}"
            ) from exc
        raise
    missing = support.missing_features(cls, probe)
    if missing:
        raise DraUnsupported(
            "mode dra: the API server dropped fields DRA mode needs, so a feature gate is off "
            "(beta and on by default from Kubernetes 1.36; use mode deviceplugin on older clusters): "
            + "; ".join(missing)
        )
    stored = kube.apply_device_class(device_class())
    log.info("DRA mode: DeviceClass %s applied", stored["metadata"]["name"])
    return stored
