"""GPU Feature Discovery (GFD) product names: how the Director's model string maps to GFD's label.

GFD labels a node ``nvidia.com/gpu.product=<name>`` with the NVML device name, blanks replaced
by ``-`` (``Tesla-T4``, ``NVIDIA-A100-PCIE-40GB``); the Director's ``device/info/gpu`` ``model``
carries the same name with blanks (``Tesla T4``). Sources: docs/domain.md "GPU Feature Discovery".
"""

from __future__ import annotations

import re

#: What a GFD product label value looks like (a Kubernetes label value without blanks).
GFD_PRODUCT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_GFD_PRODUCT = re.compile(GFD_PRODUCT_PATTERN)


def gfd_product_name(director_model: str) -> str:
    """The GFD product label value for a Director (NVML) model string: blanks become ``-``.

    Example: ``gfd_product_name("NVIDIA A100-PCIE-40GB") == "NVIDIA-A100-PCIE-40GB"``.
    """
    return re.sub(r"\s+", "-", director_model.strip())


def gfd_name_problem(name: str) -> str | None:
    """Why ``name`` is not a GFD product name (with the corrected name when one exists), or None.

    Example: ``gfd_name_problem("NVIDIA H100 NVL")`` ->
    ``"'NVIDIA H100 NVL' is not a GFD product name; write it as GFD labels nodes: 'NVIDIA-H100-NVL'"``.
    """
    if _GFD_PRODUCT.match(name):
        return None
    fixed = gfd_product_name(name)
    if fixed != name and _GFD_PRODUCT.match(fixed):
        return f"'{name}' is not a GFD product name; write it as GFD labels nodes: '{fixed}'"
    return f"'{name}' is not a GFD product name (letters, digits, '-', '_' and '.', no blanks)"
