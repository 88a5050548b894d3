"""The driver's DeviceClass, and CEL selectors on its devices: pure builders of JSON-ready dicts.

A DeviceClass selects the driver's devices with a CEL expression on ``device.driver``; with
``extendedResourceName: nvidia.com/gpu`` (``DRAExtendedResource``, beta and on in 1.36) the
scheduler serves an unmodified pod's ``nvidia.com/gpu`` request from this class on nodes whose
allocatable ``nvidia.com/gpu`` is 0 (no device plugin advertises it there; docs/dra.md). Field
names and limits from ``k8s.io/api`` v0.36.3 ``resource/v1/types.go``: ``DeviceClassSpec``
(``selectors``, at most 32; ``extendedResourceName``), ``DeviceSelector.cel.expression`` (at most
10 Ki characters, ``CELSelectorExpressionMaxLength``); attributes a driver publishes without a
domain are read in CEL as ``device.attributes["<driver>"].<name>`` (``CELDeviceSelector``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from composer.dra.slices import DRIVER

#: The class name (the driver's name: one class per driver); the composer applies it at start in
#: mode ``dra`` (:mod:`composer.run.dra_start`).
CLASS_NAME = DRIVER
#: The extended resource unmodified pods ask for.
EXTENDED_RESOURCE = "nvidia.com/gpu"
#: ``resource/v1/types.go`` limits.
MAX_SELECTORS = 32
MAX_EXPRESSION_LENGTH = 10 * 1024

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _check_extended_resource(name: str) -> None:
    """An extended resource name as ``k8s.io/kubernetes`` ``pkg/apis/core/helper/helpers.go``
    ``IsExtendedResourceName`` accepts it: ``<DNS subdomain>/<name>``, not Kubernetes' own (no
    ``kubernetes.io/`` in it, ``IsNativeResource``), not starting with ``requests.``."""
    domain, slash, rest = name.partition("/")
    if not slash or not _SUBDOMAIN.match(domain) or len(domain) > 253 or not _NAME.match(rest):
        raise ValueError(f"extendedResourceName {name!r}: must be <DNS subdomain>/<name>")
    if "kubernetes.io/" in name or name.startswith("requests."):
        raise ValueError(f"extendedResourceName {name!r}: a native resource name (kubernetes.io/, requests.)")


def product_selector(products: Sequence[str], *, driver: str = DRIVER) -> str:
    """A CEL expression true for the driver's devices whose ``productName`` (the GFD product
    name, as in the node label ``nvidia.com/gpu.product``) is one of ``products``.

    Raises:
        ValueError: ``products`` is empty, or a product is not a label value (what GFD writes).
    """
    if not products:
        raise ValueError("products: at least one product name")
    bad = [p for p in products if not _LABEL_VALUE.match(p)]
    if bad:
        raise ValueError(f"products: {bad} are not label values (GFD product names are)")
    names = ", ".join(json.dumps(p) for p in sorted(set(products)))
    return f"device.attributes[{json.dumps(driver)}].productName in [{names}]"


def device_class(
    *,
    name: str = CLASS_NAME,
    extended_resource: str | None = EXTENDED_RESOURCE,
    products: Sequence[str] = (),
    driver: str = DRIVER,
) -> dict[str, Any]:
    """The ``resource.k8s.io/v1`` DeviceClass of the driver's devices.

    Args:
        name: the class name (a DNS subdomain).
        extended_resource: the extended resource name pods ask for (None: claims only).
        products: limit the class to these GFD product names (empty: every model).
        driver: the driver name.

    Raises:
        ValueError: ``name`` is not a DNS subdomain, ``extended_resource`` is no extended
            resource name, or a product is not a label value.
    """
    if not _SUBDOMAIN.match(name) or len(name) > 253:
        raise ValueError(f"name {name!r}: must be a DNS subdomain")
    expressions = [f"device.driver == {json.dumps(driver)}"]
    if products:
        expressions.append(product_selector(products, driver=driver))
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if extended_resource is not None:
        _check_extended_resource(extended_resource)
        spec["extendedResourceName"] = extended_resource
    meta = {"name": name}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta, "spec": spec}
