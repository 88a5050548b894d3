"""The reboot wait against a fake runner that behaves like a real host going down slowly:
it still answers with the old boot id right after ``reboot``, then drops the connection,
then refuses connections, then comes back with a new boot id. (The lab's reboot stand-in
is instant, so only this test covers that path.)"""

from __future__ import annotations

import pytest

from dynamic_providers.ssh import operations
from dynamic_providers.ssh.client import CommandResult
from dynamic_providers.ssh.errors import SshTimeoutError, SshUnavailableError
from dynamic_providers.ssh.kernel import (
    BLACKLIST_FILE,
    GRUB_DEFAULTS,
    PROC_CMDLINE,
    PROC_MODULES,
    blacklist_conf,
)
from dynamic_providers.ssh.models import HostKernelPrepSpec, SshTarget

TARGET = SshTarget(host="10.0.0.5", user="gpuprep", private_key="unused", host_key=(
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPk7QQyorUMUBNFyEv+OJflqKnT3t9VcSIjUW9bYs/ly"))


class SlowRebootHost:
    """Fake SshRunner: ``script`` says what each boot-id read after ``reboot`` does."""

    def __init__(self, script: list[str]) -> None:
        self.files = {
            GRUB_DEFAULTS: 'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt pci=realloc"\n',
            BLACKLIST_FILE: blacklist_conf(["nouveau"]),
            PROC_CMDLINE: "BOOT_IMAGE=/vmlinuz ro quiet\n",
            PROC_MODULES: "nouveau 1 0 - Live 0x0\n",
            operations.BOOT_ID: "old-boot\n",
        }
        self.script = script
        self.rebooted = False
        self.commands: list[list[str]] = []
        self.target = TARGET
        self.reconnects = 0

    def __call__(self, target: SshTarget, *, sudo: bool) -> SlowRebootHost:
        return self

    def __enter__(self) -> SlowRebootHost:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(self, argv: list[str], **_: object) -> CommandResult:
        self.commands.append(list(argv))
        if argv == ["reboot"]:
            self.rebooted = True
        return CommandResult(tuple(argv), 0, "")

    def read_file(self, path: str, **_: object) -> str | None:
        if path == operations.BOOT_ID and self.rebooted and self.script:
            step = self.script.pop(0)
            if step == "drop":
                raise SshUnavailableError("connection lost")
            if step == "new":
                self.files[PROC_CMDLINE] = "BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt pci=realloc\n"
                self.files[PROC_MODULES] = ""
                self.files[operations.BOOT_ID] = "new-boot\n"
        return self.files.get(path)

    def wait_until_back(self, *, timeout_seconds: float, poll_seconds: float) -> None:
        self.reconnects += 1


def test_waits_through_old_answers_and_dropped_connections_for_a_new_boot_id() -> None:
    host = SlowRebootHost(script=["old", "drop", "old", "new"])
    spec = HostKernelPrepSpec(allow_reboot=True)
    result = operations.prepare_host(TARGET, spec, runner=host, reboot_poll_seconds=0.01)
    assert result["rebooted"] is True and result["reboot_pending"] is False
    assert host.commands == [["reboot"]]  # files already right: only the reboot ran
    assert host.reconnects == 4


def test_a_host_that_never_reboots_times_out_with_a_clear_error() -> None:
    host = SlowRebootHost(script=["old"] * 1000)
    spec = HostKernelPrepSpec(allow_reboot=True, reboot_timeout_seconds=0.2)
    with pytest.raises(SshTimeoutError, match="did not come back rebooted within 0.2 s"):
        operations.prepare_host(TARGET, spec, runner=host, reboot_poll_seconds=0.01)


def test_no_reboot_without_opt_in() -> None:
    host = SlowRebootHost(script=[])
    result = operations.prepare_host(TARGET, HostKernelPrepSpec(), runner=host)
    assert result["reboot_pending"] is True and result["rebooted"] is False
    assert host.commands == []
