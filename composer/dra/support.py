"""Does the API server support DRA mode? Pure builders of the start-up probe and the reading of
the answers.

An API server whose feature gates are off does not refuse the fields DRA mode needs: it drops
them from what it stores (``k8s.io/kubernetes`` v1.36.3 ``pkg/registry/resource/deviceclass/strategy.go``
``dropDisabledDRAExtendedResourceFields``: ``extendedResourceName`` unless ``DRAExtendedResource``
is on; ``pkg/registry/resource/resourceslice/strategy.go``
``dropDisabledDRADeviceBindingConditionsFields``: ``bindsToNode``, ``bindingConditions`` and
``bindingFailureConditions`` unless ``DRADeviceBindingConditions`` and
``DRAResourceClaimDeviceStatus`` are on; both keep a field the stored object already uses). So
the check reads the answers to a DeviceClass and a ResourceSlice applied with ``dryRun=All``
under names never stored (validated, defaulted and stripped like a real write, stored nowhere;
always a create, so a gate that is off always shows, even when the real DeviceClass exists). An
API server that does not serve ``resource.k8s.io/v1`` answers 404.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composer.dra.deviceclass import device_class
from composer.dra.slices import BINDING_CONDITIONS, BINDING_FAILURE_CONDITIONS, DRIVER

#: Name of the dry-run ResourceSlice and DeviceClass (never stored).
PROBE_NAME = f"{DRIVER}-startup-probe"
#: Its pool (distinct from the published pool, so no reader mistakes it for one of it).
PROBE_POOL = "startup-probe"


def probe_slice(*, driver: str = DRIVER) -> dict[str, Any]:
    """A minimal ``resource.k8s.io/v1`` ResourceSlice with one device using every field DRA mode
    writes that a feature gate guards: ``bindsToNode``, ``bindingConditions``,
    ``bindingFailureConditions`` (``allNodes: true``, so it names no node)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": PROBE_NAME},
        "spec": {
            "driver": driver,
            "pool": {"name": PROBE_POOL, "generation": 0, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": [
                {
                    "name": "probe",
                    "bindsToNode": True,
                    "bindingConditions": list(BINDING_CONDITIONS),
                    "bindingFailureConditions": list(BINDING_FAILURE_CONDITIONS),
                }
            ],
        },
    }


def probe_device_class(*, driver: str = DRIVER) -> dict[str, Any]:
    """The driver's DeviceClass (:func:`composer.dra.deviceclass.device_class`, with
    ``extendedResourceName: nvidia.com/gpu``) under the probe's name, for a dry-run apply."""
    return device_class(name=PROBE_NAME, driver=driver)


def missing_features(device_class: Mapping[str, Any], probe: Mapping[str, Any]) -> tuple[str, ...]:
    """What the API server dropped from the answers, one sentence per missing feature gate.

    Args:
        device_class: the API server's answer to the dry-run apply of :func:`probe_device_class`.
        probe: its answer to the dry-run apply of :func:`probe_slice`.

    Returns:
        Empty when both features are there; else e.g. ``("DRAExtendedResource: the DeviceClass
        came back without spec.extendedResourceName",)``.
    """
    missing = []
    if not (device_class.get("spec") or {}).get("extendedResourceName"):
        missing.append("DRAExtendedResource: the DeviceClass came back without spec.extendedResourceName")
    devices = (probe.get("spec") or {}).get("devices") or [{}]
    dropped = [
        f for f in ("bindsToNode", "bindingConditions", "bindingFailureConditions") if not devices[0].get(f)
    ]
    if dropped:
        missing.append(
            "DRADeviceBindingConditions: a ResourceSlice device came back without " + ", ".join(dropped)
        )
    return tuple(missing)
