"""Pure parsing and planning: mlxconfig query output, command lines, GRUB and modprobe files.

The query fixtures follow the published layout of ``mlxconfig``/``mstconfig`` output
(mstflint ``mlxconfig_ui.cpp``; public dumps of ``mstconfig -d 4b:00.0 q``), quirks included:
``*``/``RO`` markers, ``LABEL(n)`` values, ``Array[..]`` rows, trailing blanks and footers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dynamic_providers.ssh import kernel, mlxconfig
from dynamic_providers.ssh.errors import ToolOutputError
from dynamic_providers.ssh.models import MlxconfigRow

FIXTURES = Path(__file__).parent / "fixtures"


def test_query_with_default_and_current_columns() -> None:
    rows = mlxconfig.parse_query((FIXTURES / "mlxconfig_query_e.txt").read_text())
    assert rows["PCI_SWITCH_EMULATION_NUM_PORT"] == MlxconfigRow(
        name="PCI_SWITCH_EMULATION_NUM_PORT", default=16, current=16, next_boot=10)
    assert rows["VIRTIO_NET_EMULATION_ENABLE"] == MlxconfigRow(
        name="VIRTIO_NET_EMULATION_ENABLE", default=0, current=1, next_boot=1)
    assert rows["VIRTIO_NET_EMULATION_NUM_PF"].current == 10  # "*RO" marker stripped
    assert rows["INTERNAL_CPU_MODEL"].next_boot == 1  # LABEL(n)
    assert "PCI_DOWNSTREAM_PORT_OWNER" not in rows  # arrays are not managed


def test_query_with_next_boot_only() -> None:
    rows = mlxconfig.parse_query((FIXTURES / "mlxconfig_query.txt").read_text())
    assert rows["PCI_SWITCH_EMULATION_NUM_PORT"] == MlxconfigRow(
        name="PCI_SWITCH_EMULATION_NUM_PORT", default=None, current=None, next_boot=16)
    assert rows["MEMIC_SIZE_LIMIT"].next_boot == 1
    assert rows["PCI_ATOMIC_MODE"].next_boot == 0


def test_query_stops_at_the_next_device_section() -> None:
    text = (FIXTURES / "mlxconfig_query_e.txt").read_text()
    changed_row = "16" + " " * 18 + "10"
    assert changed_row in text
    second = text.replace("Device #1", "Device #2").replace(changed_row, "16" + " " * 18 + "16")
    rows = mlxconfig.parse_query(text + second)
    assert rows["PCI_SWITCH_EMULATION_NUM_PORT"].next_boot == 10


@pytest.mark.parametrize("text", [
    "-E- Failed to open the device: /dev/mst/nope",
    "Configurations:          Default\n        X   1\n",
    "Configurations:          Next Boot\n        X   1   2\n",
    "Configurations:          Next Boot\n        X   N/A\n",
])
def test_unexpected_output_raises_tool_output_error(text: str) -> None:
    with pytest.raises(ToolOutputError):
        mlxconfig.parse_query(text)


def test_command_lines_follow_the_real_tools() -> None:
    dev = "/dev/mst/mt41692_pciconf0"
    assert mlxconfig.query_argv(dev, ["A", "B"]) == ["mlxconfig", "-d", dev, "-e", "query", "A", "B"]
    assert mlxconfig.set_argv(dev, {"A": 1, "B": 10}) == ["mlxconfig", "-d", dev, "-y", "set", "A=1", "B=10"]
    assert mlxconfig.mlxfwreset_argv(dev, 3) == ["mlxfwreset", "-d", dev, "--level", "3", "-y", "reset"]
    with pytest.raises(ValueError):
        mlxconfig.set_argv(dev, {})


DEBIAN_GRUB = """\
# If you change this file, run 'update-grub' afterwards
GRUB_DEFAULT=0
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX="console=ttyS0,115200 iommu=pt"
#GRUB_TERMINAL=console
"""
WANTED = ["intel_iommu=on", "iommu=pt", "pci=realloc"]


def test_grub_args_are_added_once_and_other_lines_kept() -> None:
    new = kernel.with_grub_args(DEBIAN_GRUB, WANTED)
    assert kernel.grub_args(new) == ["console=ttyS0,115200", "iommu=pt", "intel_iommu=on", "pci=realloc"]
    assert new.replace('GRUB_CMDLINE_LINUX="console=ttyS0,115200 iommu=pt intel_iommu=on pci=realloc"',
                       'GRUB_CMDLINE_LINUX="console=ttyS0,115200 iommu=pt"') == DEBIAN_GRUB
    assert kernel.with_grub_args(new, WANTED) is new  # idempotent: nothing to write


def test_grub_variable_missing_or_unquoted() -> None:
    assert kernel.grub_args("GRUB_DEFAULT=0\n") == []
    added = kernel.with_grub_args("GRUB_DEFAULT=0", ["iommu=pt"])
    assert added == 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="iommu=pt"\n'
    assert kernel.grub_args("GRUB_CMDLINE_LINUX=quiet\nGRUB_CMDLINE_LINUX='a b'  # last wins\n") == ["a", "b"]
    with pytest.raises(ValueError, match="GRUB_CMDLINE_LINUX"):
        kernel.grub_args('GRUB_CMDLINE_LINUX="unterminated\n')


def test_blacklist_and_proc_parsing() -> None:
    conf = kernel.blacklist_conf(["nouveau", "nouveau"])
    assert conf.splitlines()[1:] == ["blacklist nouveau", "options nouveau modeset=0"]
    assert kernel.loaded_modules("nouveau 2797568 0 - Live 0x0\nvfio_pci 16384 0 - Live 0x0\n") == {
        "nouveau", "vfio_pci"}
    assert kernel.missing_args(WANTED, "BOOT_IMAGE=/vmlinuz ro iommu=pt".split()) == ["intel_iommu=on",
                                                                                     "pci=realloc"]


def test_blacklisted_modules_reads_only_blacklist_lines() -> None:
    conf = kernel.blacklist_conf(["nouveau", "radeon"])
    assert kernel.blacklisted_modules(conf) == ["nouveau", "radeon"]
    edited = ("# blacklist old\nblacklist  nvidiafb  # framebuffer\n"
              "options nouveau modeset=0\ninstall x /bin/true\n")
    assert kernel.blacklisted_modules(edited) == ["nvidiafb"]
    assert kernel.blacklisted_modules(None) == [] and kernel.blacklisted_modules("") == []
