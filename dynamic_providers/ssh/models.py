"""Typed inputs of the SSH preparation providers (parsed at the provider boundary).

- :class:`SshTarget`: where and how to connect (from Pulumi secrets).
- :class:`HostKernelPrepSpec`: desired kernel arguments and blacklisted modules of a host.
- :class:`DpuMlxconfigSpec`: desired mlxconfig parameters of one DPU device.
- :class:`MlxconfigRow`: one parsed row of ``mlxconfig -e query`` (observed state).

Past :mod:`dynamic_providers.ssh.provider` nobody touches the raw input dicts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from domain import mlxconfig as mlxconfig_rules

__all__ = [
    "DEFAULT_BLACKLISTED_MODULES",
    "DEFAULT_KERNEL_ARGS",
    "DpuMlxconfigSpec",
    "HostKernelPrepSpec",
    "MlxconfigRow",
    "SshTarget",
]

#: Seed 002: host kernel arguments for VFIO passthrough and hot-plugged PCIe devices.
DEFAULT_KERNEL_ARGS: tuple[str, ...] = ("intel_iommu=on", "iommu=pt", "pci=realloc")
#: Seed 002: the in-tree NVIDIA driver must not grab GPUs meant for VFIO / the NVIDIA driver.
DEFAULT_BLACKLISTED_MODULES: tuple[str, ...] = ("nouveau",)

_HOST_KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                   "ssh-rsa")
_KERNEL_ARG = re.compile(r"^[A-Za-z0-9_.\-]+(=[A-Za-z0-9_.,:/\-+=]*)?$")
_MODULE = re.compile(r"^[A-Za-z0-9_\-]+$")
#: List fields of HostKernelPrepSpec whose every item must match: field -> (pattern, what it is).
_LIST_ITEMS: dict[str, tuple[re.Pattern[str], str]] = {
    "kernel_args": (_KERNEL_ARG, "a plain kernel argument (name or name=value)"),
    "blacklisted_modules": (_MODULE, "a module name"),
}


class SshTarget(BaseModel):
    """Connection details of one SSH server, with its pinned host key.

    Attributes:
        host: DNS name or IP address.
        port: TCP port (1..65535, default 22).
        user: login user; key-only authentication.
        private_key: OpenSSH or PEM private key text (Ed25519, ECDSA or RSA, unencrypted);
            never logged, never returned as an output.
        host_key: the server's public host key as a known_hosts entry without the host
            name: ``"<type> <base64>"`` (``ssh-keyscan``'s output minus the first field, or
            the content of ``/etc/ssh/ssh_host_ed25519_key.pub``). Connections presenting
            another key are refused before authentication.
        connect_timeout_seconds: TCP connect, banner and authentication timeout.
        command_timeout_seconds: longest one remote command may run (``mlxconfig query``
            takes 10-20 s on real devices).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(min_length=1)
    port: int = Field(default=22, ge=1, le=65535)
    user: str = Field(min_length=1, pattern=r"^[a-z_][a-z0-9_.\-]*$")
    private_key: SecretStr
    host_key: str
    connect_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    command_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)

    @field_validator("host_key")
    @classmethod
    def _host_key_shape(cls, value: str) -> str:
        fields = value.split()
        if len(fields) >= 3 and fields[1] in _HOST_KEY_TYPES:
            fields = fields[1:]  # a full known_hosts line "<host> <type> <key>": drop the host
        if len(fields) < 2 or fields[0] not in _HOST_KEY_TYPES:
            raise ValueError("host_key must be '<type> <base64 key>' with type one of "
                             + ", ".join(_HOST_KEY_TYPES))
        try:
            base64.b64decode(fields[1], validate=True)
        except binascii.Error as exc:
            raise ValueError("host_key: the key is not valid base64") from exc
        return f"{fields[0]} {fields[1]}"

    @property
    def host_key_type(self) -> str:
        """The pinned key's algorithm name (``ssh-ed25519``)."""
        return self.host_key.split()[0]

    @property
    def host_key_bytes(self) -> bytes:
        """The pinned key's wire-format blob."""
        return base64.b64decode(self.host_key.split()[1])

    @property
    def host_key_fingerprint(self) -> str:
        """OpenSSH-style ``SHA256:<base64>`` fingerprint of the pinned host key (public)."""
        digest = base64.b64encode(hashlib.sha256(self.host_key_bytes).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"

    @property
    def label(self) -> str:
        """``user@host:port`` for messages."""
        return f"{self.user}@{self.host}:{self.port}"


class _Common(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    use_sudo: bool = False
    """Prefix commands that need root with ``sudo -n`` (password-less sudo required)."""


class HostKernelPrepSpec(_Common):
    """Desired kernel preparation of one host (Debian/Ubuntu GRUB layout).

    Attributes:
        kernel_args: arguments that must be on the kernel command line; added to
            ``GRUB_CMDLINE_LINUX`` in ``/etc/default/grub`` when missing (others are kept).
        blacklisted_modules: modules written as ``blacklist <m>`` to
            ``/etc/modprobe.d/composable-gpu-blacklist.conf`` (``nouveau`` also gets
            ``options nouveau modeset=0``), followed by ``update-initramfs -u``.
        allow_reboot: when True and a reboot is pending, run ``reboot`` and wait for the
            host to come back. Default False: nothing reboots unless the stack opts in.
        reboot_timeout_seconds: how long to wait for SSH after a reboot.
        sysroot: prefix of every file path (``""`` = the real root). The lab points it at
            the stand-in tree in the SSH user's home.
    """

    kernel_args: tuple[str, ...] = DEFAULT_KERNEL_ARGS
    blacklisted_modules: tuple[str, ...] = DEFAULT_BLACKLISTED_MODULES
    allow_reboot: bool = False
    reboot_timeout_seconds: float = Field(default=600.0, gt=0, le=3600)
    sysroot: str = ""

    @field_validator(*_LIST_ITEMS)
    @classmethod
    def _list_items(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        field = info.field_name or ""
        pattern, what = _LIST_ITEMS[field]
        for item in value:
            if not pattern.match(item):
                raise ValueError(f"{field}: {item!r} is not {what}")
        return value

    @field_validator("sysroot")
    @classmethod
    def _sysroot(cls, value: str) -> str:
        if value and not value.startswith("/"):
            raise ValueError("sysroot must be an absolute path or empty")
        return value.rstrip("/")

    def path(self, absolute: str) -> str:
        """``absolute`` (``/etc/default/grub``) under :attr:`sysroot`."""
        return posixpath.join(self.sysroot, absolute.lstrip("/")) if self.sysroot else absolute


class DpuMlxconfigSpec(_Common):
    """Desired firmware configuration of one DPU device.

    Attributes:
        device: the mst device (``/dev/mst/mt41692_pciconf0``) or PCI address (``03:00.0``).
        parameters: ``{mlxconfig name: value}``, validated and normalised to ints by
            :mod:`domain.mlxconfig`.
        allow_firmware_reset: when True and a change is pending, run ``mlxfwreset``.
            Default False: the new values wait for the next reset or power cycle.
        reset_level: ``mlxfwreset --level`` (3 = driver restart and PCI reset).
    """

    device: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_./:\-]+$")
    parameters: dict[str, int]
    allow_firmware_reset: bool = False
    reset_level: int = Field(default=3, ge=0, le=5)

    @field_validator("parameters", mode="before")
    @classmethod
    def _params(cls, value: object) -> dict[str, int]:
        if not isinstance(value, dict):
            raise ValueError("parameters must be a map of mlxconfig name to value")
        return mlxconfig_rules.validate(value)


class MlxconfigRow(BaseModel):
    """One parameter as ``mlxconfig -d <dev> -e query`` shows it.

    Attributes:
        name: the parameter name.
        default: factory default (``None`` when the tool printed only Next Boot).
        current: value in effect now (``None`` likewise).
        next_boot: value that takes effect after the next firmware reset / power cycle.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    default: int | None
    current: int | None
    next_boot: int
