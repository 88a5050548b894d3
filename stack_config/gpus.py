"""The GPU products the estate knows, keyed by their GPU Feature Discovery product name.

The key is the value GFD writes into the node label ``nvidia.com/gpu.product`` (product name
with spaces replaced by ``-``), which is also the ``model`` the Director client reports.
Sources:

- PCI IDs: the PCI ID repository (vendor ``10de`` NVIDIA; ``1eb8`` TU104GL [Tesla T4],
  ``20f1`` GA100 [A100 PCIe 40GB]).
- Passthrough resource names: the GPU Operator's sandbox device plugin advertises
  ``nvidia.com/<DEVICE>_<NAME>`` from pci.ids (GPU Operator docs, "GPU Operator with
  KubeVirt", e.g. ``nvidia.com/GA100_A100_PCIE_40GB``, ``nvidia.com/TU104GL_TESLA_T4``).
- vGPU types: NVIDIA vGPU software user guide, "Virtual GPU Types for Supported GPUs"
  (mdev names such as ``GRID T4-1Q``; KubeVirt resource name replaces spaces with ``_``).
- MIG: only A100-class GPUs partition; configs are mig-parted's ``all-<profile>`` names
  (GPU Operator docs, "GPU Operator with MIG").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProduct:
    """Facts about one GPU product.

    Attributes:
        product: GFD product name (``nvidia.com/gpu.product``), e.g. ``Tesla-T4``.
        pci_id: ``vendor:device`` in lower-case hex, e.g. ``10de:1eb8``.
        passthrough_resource: extended resource name for VFIO passthrough into KubeVirt VMs.
        vgpu_types: vGPU (mediated device) type names, smallest first.
        memory_mib: frame-buffer size in MiB (``nvidia.com/gpu.memory``).
        mig_configs: valid ``nvidia.com/mig.config`` values; empty when MIG is unsupported.
    """

    product: str
    pci_id: str
    passthrough_resource: str
    vgpu_types: tuple[str, ...]
    memory_mib: int
    mig_configs: tuple[str, ...] = ()

    @property
    def mig_capable(self) -> bool:
        """True when the product supports Multi-Instance GPU partitioning."""
        return bool(self.mig_configs)


def vgpu_resource_name(vgpu_type: str) -> str:
    """KubeVirt resource name of a vGPU type: ``GRID T4-1Q`` -> ``nvidia.com/GRID_T4-1Q``."""
    return "nvidia.com/" + vgpu_type.replace(" ", "_")


GPU_PRODUCTS: dict[str, GpuProduct] = {
    p.product: p
    for p in (
        GpuProduct(
            product="Tesla-T4",
            pci_id="10de:1eb8",
            passthrough_resource="nvidia.com/TU104GL_TESLA_T4",
            vgpu_types=("GRID T4-1Q", "GRID T4-2Q", "GRID T4-4Q", "GRID T4-8Q", "GRID T4-16Q"),
            memory_mib=15360,
        ),
        GpuProduct(
            product="NVIDIA-A100-PCIE-40GB",
            pci_id="10de:20f1",
            passthrough_resource="nvidia.com/GA100_A100_PCIE_40GB",
            vgpu_types=(
                "GRID A100-4C",
                "GRID A100-5C",
                "GRID A100-8C",
                "GRID A100-10C",
                "GRID A100-20C",
                "GRID A100-40C",
            ),
            memory_mib=40960,
            mig_configs=(
                "all-disabled",
                "all-enabled",
                "all-1g.5gb",
                "all-2g.10gb",
                "all-3g.20gb",
                "all-7g.40gb",
                "all-balanced",
            ),
        ),
    )
}
"""Known products by GFD product name."""
