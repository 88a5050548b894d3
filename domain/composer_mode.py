"""How a composer serves ``nvidia.com/gpu``: one mode per composer, declared once.

- ``deviceplugin`` (default): the device-plugin path. The composer composes a GPU for a pending
  pod, waits until the node's NVIDIA device plugin advertises it, and (with the chart's admission
  webhook) holds new GPU pods at the scheduling gate ``composer.liqid.io/compose`` until then.
  Any Kubernetes version the project supports.
- ``dra``: the composer is the Dynamic Resource Allocation driver ``gpu.composer.liqid.io``
  (``docs/dra.md``): it publishes free fabric GPUs as ResourceSlice devices with binding
  conditions, applies its DeviceClass (``extendedResourceName: nvidia.com/gpu``) at start, and
  composes each allocated device onto the claim's node. No webhook, no scheduling gate. Needs an
  API server serving ``resource.k8s.io/v1`` with the gates ``DRADeviceBindingConditions`` and
  ``DRAExtendedResource`` on (beta and on by default from Kubernetes 1.36: ``k8s.io/kubernetes``
  v1.36.3 ``pkg/features/kube_features.go``); the composer checks that at start
  (:mod:`composer.run.dra_start`). A node is served by one mode only: the scheduler sends a pod's
  ``nvidia.com/gpu`` to DRA only on nodes whose allocatable ``nvidia.com/gpu`` is 0
  (``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go``), so the
  nodes a ``dra`` composer manages (``node_selector``) must run no NVIDIA device plugin.

Used by :class:`composer.shell.config.Settings` (``mode``), :class:`stack_config.models.ComposerConfig`
(``mode``) and the chart value ``dra.mode`` (its schema enum is checked against :data:`MODES` by
``tests/composer/test_dra_mode.py``).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

#: The DRA driver name of mode ``dra`` (a domain the project owns; the composer's keys live under
#: ``composer.liqid.io``): its ResourceSlices' ``spec.driver``, its DeviceClass's name, the
#: ``resourceclaims/driver`` resource name its RBAC allows.
DRA_DRIVER = "gpu.composer.liqid.io"
#: A composer's mode.
ComposerMode = Literal["deviceplugin", "dra"]
#: Every mode, in the order the docs list them.
MODES: tuple[str, ...] = get_args(ComposerMode)
#: The mode of a composer that names none.
DEFAULT_MODE: ComposerMode = "deviceplugin"

#: The first Kubernetes minor release on which mode ``dra`` works without feature-gate flags:
#: ``DRADeviceBindingConditions`` and ``DRAExtendedResource`` beta and on by default
#: (``k8s.io/kubernetes`` v1.36.3 ``pkg/features/kube_features.go``; ``docs/dra.md``).
DRA_MIN_KUBERNETES: tuple[int, int] = (1, 36)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")


def kubernetes_minor(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a Kubernetes or k0s version string (``v1.33.1``,
    ``v1.33.1+k0s.0``, ``1.36``); None when it is no such version."""
    m = _VERSION.match(version.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def dra_device_name(director_name: str) -> str | None:
    """The DRA device name (a DNS label) of a Director GPU, or None when none can be made.

    Lower case, other characters than letters, digits and ``-`` become ``-`` (``GPU_7`` ->
    ``gpu-7``). The composer publishes the GPU under this name (``composer/dra/slices.py``) and
    the node side finds the GPU's device file by it (the kubelet plugin's ``--device-dir``, filled
    in the lab by ``lab.gpu_agent --device-dir``).
    """
    name = re.sub(r"[^a-z0-9-]", "-", director_name.lower()).strip("-")
    return name if _DNS_LABEL.match(name) else None
