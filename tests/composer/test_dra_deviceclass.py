"""The driver's DeviceClass and CEL product selectors (composer.dra.deviceclass), on plain data."""

from __future__ import annotations

import pytest

from composer.dra import deviceclass
from composer.dra.slices import DRIVER


def test_the_class_selects_the_drivers_devices_and_serves_nvidia_gpu():
    dc = deviceclass.device_class()
    assert dc == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.composer.liqid.io"},
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "gpu.composer.liqid.io"'}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }
    assert "extendedResourceName" not in deviceclass.device_class(extended_resource=None)["spec"]


def test_a_class_limited_to_products_adds_a_cel_selector_on_product_name():
    dc = deviceclass.device_class(name="t4.gpu.composer.liqid.io", extended_resource=None,
                                  products=["Tesla-T4", "NVIDIA-A100-PCIE-40GB", "Tesla-T4"])
    exprs = [s["cel"]["expression"] for s in dc["spec"]["selectors"]]
    assert exprs == [
        f'device.driver == "{DRIVER}"',
        f'device.attributes["{DRIVER}"].productName in ["NVIDIA-A100-PCIE-40GB", "Tesla-T4"]',
    ]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"name": "Not_A_Subdomain"}, "name 'Not_A_Subdomain': must be a DNS subdomain"),
        ({"extended_resource": "gpu"}, "must be <DNS subdomain>/<name>"),
        ({"extended_resource": "kubernetes.io/gpu"}, "a native resource name"),
        ({"extended_resource": "example.kubernetes.io/gpu"}, "a native resource name"),
        ({"extended_resource": "requests.example.com/gpu"}, "a native resource name"),
        ({"products": ['T4" || true || "']}, "are not label values"),
    ],
)
def test_bad_input_is_refused_naming_the_key(kw, match):
    with pytest.raises(ValueError, match=match):
        deviceclass.device_class(**kw)


def test_a_product_selector_needs_a_product():
    with pytest.raises(ValueError, match="at least one product"):
        deviceclass.product_selector([])
