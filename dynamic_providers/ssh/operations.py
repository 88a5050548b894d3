"""Idempotent host and DPU preparation over SSH: query, change only what differs, report.

- :func:`prepare_host`: kernel arguments in ``/etc/default/grub`` (+ ``update-grub``) and the
  module blacklist in ``/etc/modprobe.d`` (+ ``update-initramfs -u``); a reboot only when
  ``spec.allow_reboot`` is True and one is pending.
- :func:`configure_dpu`: ``mlxconfig -e query`` the managed parameters, ``mlxconfig set``
  only those whose Next Boot value differs, and ``mlxfwreset`` only when
  ``spec.allow_firmware_reset`` is True and a Current value differs from Next Boot.
- :func:`read_host`, :func:`read_dpu`: the same queries and nothing else (``pulumi refresh``).

Both return a plain result dict (the provider's outputs, minus the echoed inputs) and never
include command output or connection details. Decisions come from the pure modules
:mod:`~dynamic_providers.ssh.kernel`, :mod:`~dynamic_providers.ssh.mlxconfig`; only the
:class:`~dynamic_providers.ssh.client.SshRunner` does I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dynamic_providers.ssh import kernel, mlxconfig
from dynamic_providers.ssh.client import SshRunner
from dynamic_providers.ssh.errors import (
    SshCommandError,
    SshTimeoutError,
    SshUnavailableError,
    ToolOutputError,
)
from dynamic_providers.ssh.models import DpuMlxconfigSpec, HostKernelPrepSpec, MlxconfigRow, SshTarget

__all__ = ["BOOT_ID", "RunnerFactory", "configure_dpu", "prepare_host", "read_dpu", "read_host"]

#: Changes on every boot (proc(5): ``/proc/sys/kernel/random/boot_id``); tells a finished
#: reboot from a host that has not gone down yet.
BOOT_ID = "/proc/sys/kernel/random/boot_id"

RunnerFactory = Callable[..., SshRunner]


def _observe_host(ssh: SshRunner, spec: HostKernelPrepSpec) -> dict[str, Any]:
    grub_text = ssh.read_file(spec.path(kernel.GRUB_DEFAULTS))
    if grub_text is None:
        raise ToolOutputError(f"{spec.path(kernel.GRUB_DEFAULTS)} does not exist: not a GRUB "
                              "(Debian/Ubuntu) host", target=ssh.target.label)
    cmdline = ssh.read_file(spec.path(kernel.PROC_CMDLINE)) or ""
    modules = ssh.read_file(spec.path(kernel.PROC_MODULES)) or ""
    blacklist = ssh.read_file(spec.path(kernel.BLACKLIST_FILE))
    return {"grub": grub_text, "cmdline": cmdline.split(), "loaded": kernel.loaded_modules(modules),
            "blacklist": blacklist}


def _host_status(spec: HostKernelPrepSpec, observed: dict[str, Any]) -> dict[str, Any]:
    missing_active = kernel.missing_args(spec.kernel_args, observed["cmdline"])
    still_loaded = sorted(m for m in spec.blacklisted_modules if m in observed["loaded"])
    return {
        "configured_kernel_args": kernel.grub_args(observed["grub"]),
        "missing_active_kernel_args": missing_active,
        "loaded_blacklisted_modules": still_loaded,
        "reboot_pending": bool(missing_active or still_loaded),
    }


def _reboot_and_wait(ssh: SshRunner, spec: HostKernelPrepSpec, *, poll_seconds: float = 2.0) -> None:
    """Run ``reboot`` and return once the host answers with a new boot id.

    A real host may still answer (old boot id) right after ``reboot`` returns, drop the
    connection mid-command while going down, or refuse connections while booting: all of
    these are waited out until ``spec.reboot_timeout_seconds``.
    """
    before = (ssh.read_file(spec.path(BOOT_ID)) or "").strip()
    try:
        ssh.run(["reboot"], privileged=True)
    except SshUnavailableError:
        pass  # the connection dropped as the host went down: expected
    deadline = time.monotonic() + spec.reboot_timeout_seconds
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            remaining = max(deadline - time.monotonic(), 1.0)
            ssh.wait_until_back(timeout_seconds=remaining, poll_seconds=poll_seconds)
            now = (ssh.read_file(spec.path(BOOT_ID)) or "").strip()
        except (SshUnavailableError, SshCommandError) as exc:  # going down or still booting
            last_error = exc
        else:
            if not before or now != before:
                return
        time.sleep(poll_seconds)
    raise SshTimeoutError(f"host did not come back rebooted within {spec.reboot_timeout_seconds:g} s "
                          f"(last: {last_error or 'boot id unchanged'})", target=ssh.target.label)


def prepare_host(target: SshTarget, spec: HostKernelPrepSpec, *, runner: RunnerFactory = SshRunner,
                 reboot_poll_seconds: float = 2.0) -> dict[str, Any]:
    """Bring one host's kernel arguments and module blacklist to ``spec``.

    ``runner`` builds the :class:`SshRunner` (tests pass a fake); ``reboot_poll_seconds`` is
    the pause between checks while a rebooting host comes back.

    Returns:
        ``changed`` (list of ``grub``, ``modprobe``, ``initramfs`` done in this run),
        ``configured_kernel_args`` (``GRUB_CMDLINE_LINUX`` tokens after the run),
        ``missing_active_kernel_args`` (wanted but not in ``/proc/cmdline``),
        ``loaded_blacklisted_modules`` (blacklisted but still in ``/proc/modules``),
        ``reboot_pending`` (bool) and ``rebooted`` (bool, this run rebooted the host).
    Raises:
        dynamic_providers.ssh.errors.SshError: connection, authentication, host key,
            a failing command, or a host without ``/etc/default/grub``.
    """
    with runner(target, sudo=spec.use_sudo) as ssh:
        observed = _observe_host(ssh, spec)
        changed: list[str] = []
        new_grub = kernel.with_grub_args(observed["grub"], spec.kernel_args)
        if new_grub != observed["grub"]:
            ssh.write_file(spec.path(kernel.GRUB_DEFAULTS), new_grub, privileged=True)
            ssh.run(["update-grub"], privileged=True)
            changed.append("grub")
        wanted_conf = kernel.blacklist_conf(spec.blacklisted_modules) if spec.blacklisted_modules else None
        if wanted_conf != observed["blacklist"]:
            if wanted_conf is None:
                ssh.run(["rm", "-f", "--", spec.path(kernel.BLACKLIST_FILE)], privileged=True)
            else:
                ssh.write_file(spec.path(kernel.BLACKLIST_FILE), wanted_conf, privileged=True)
            ssh.run(["update-initramfs", "-u"], privileged=True)
            changed += ["modprobe", "initramfs"]
        if changed:
            observed = _observe_host(ssh, spec)
        status = _host_status(spec, observed)
        rebooted = False
        if status["reboot_pending"] and spec.allow_reboot:
            _reboot_and_wait(ssh, spec, poll_seconds=reboot_poll_seconds)
            rebooted = True
            status = _host_status(spec, _observe_host(ssh, spec))
    return {"changed": changed, **status, "rebooted": rebooted}


def read_host(target: SshTarget, spec: HostKernelPrepSpec, *, runner: RunnerFactory = SshRunner,
              ) -> dict[str, Any]:
    """What the host runs with and will boot with, read-only (no file written, nothing run
    but reads of ``/etc/default/grub``, ``/proc/cmdline``, ``/proc/modules`` and the blacklist).

    Returns:
        :func:`prepare_host`'s status keys (``configured_kernel_args``,
        ``missing_active_kernel_args``, ``loaded_blacklisted_modules``, ``reboot_pending``),
        plus ``present_kernel_args`` (the wanted args GRUB has, in ``spec`` order) and
        ``present_blacklisted_modules`` (the wanted modules our modprobe.d file blacklists).
    Raises:
        dynamic_providers.ssh.errors.SshError: as :func:`prepare_host`.
    """
    with runner(target, sudo=spec.use_sudo) as ssh:
        observed = _observe_host(ssh, spec)
    status = _host_status(spec, observed)
    configured = set(status["configured_kernel_args"])
    in_file = set(kernel.blacklisted_modules(observed["blacklist"]))
    return {**status, "present_kernel_args": [a for a in spec.kernel_args if a in configured],
            "present_blacklisted_modules": [m for m in spec.blacklisted_modules if m in in_file]}


def read_dpu(target: SshTarget, spec: DpuMlxconfigSpec, *, runner: RunnerFactory = SshRunner,
             ) -> dict[str, Any]:
    """The managed parameters' values, read-only (``mlxconfig -e query`` only).

    Returns:
        ``next_boot``, ``current``, ``pending_parameters`` and ``reset_pending`` as
        :func:`configure_dpu` reports them.
    Raises:
        dynamic_providers.ssh.errors.SshError: as :func:`configure_dpu`.
    """
    with runner(target, sudo=spec.use_sudo) as ssh:
        rows = _query(ssh, spec)
    return _dpu_status(spec, rows, _differing(spec, rows))


def _differing(spec: DpuMlxconfigSpec, rows: dict[str, MlxconfigRow]) -> list[str]:
    """Managed names whose reported Current differs from Next Boot."""
    return [n for n in spec.parameters
            if rows[n].current is not None and rows[n].current != rows[n].next_boot]


def _dpu_status(spec: DpuMlxconfigSpec, rows: dict[str, MlxconfigRow], pending: list[str]) -> dict[str, Any]:
    return {
        "next_boot": {n: rows[n].next_boot for n in spec.parameters},
        "current": {n: rows[n].current for n in spec.parameters if rows[n].current is not None},
        "pending_parameters": pending,
        "reset_pending": bool(pending),
    }


def _query(ssh: SshRunner, spec: DpuMlxconfigSpec) -> dict[str, MlxconfigRow]:
    result = ssh.run(mlxconfig.query_argv(spec.device, spec.parameters), privileged=True)
    rows = mlxconfig.parse_query(result.stdout)
    unsupported = [n for n in spec.parameters if n not in rows]
    if unsupported:
        raise ToolOutputError(f"device {spec.device} does not report {', '.join(unsupported)} "
                              "(firmware without this feature?)", target=ssh.target.label,
                              command="mlxconfig query")
    return rows


def configure_dpu(target: SshTarget, spec: DpuMlxconfigSpec, *,
                  runner: RunnerFactory = SshRunner) -> dict[str, Any]:
    """Bring one DPU device's mlxconfig parameters to ``spec``.

    Returns:
        ``changed`` (names set in this run, sorted; ``mlxconfig set`` gets them in that order),
        ``next_boot`` and ``current``
        (``{name: int}`` after the run; ``current`` omits names the tool did not report),
        ``pending_parameters`` (names whose Current differs from Next Boot),
        ``reset_pending`` (bool) and ``reset_performed`` (bool, this run ran mlxfwreset).
    Raises:
        dynamic_providers.ssh.errors.SshError: connection, authentication, host key,
            a failing ``mlxconfig``/``mlxfwreset``, or output without a managed parameter.
    """
    with runner(target, sudo=spec.use_sudo) as ssh:
        rows = _query(ssh, spec)
        to_set = {n: v for n, v in sorted(spec.parameters.items()) if rows[n].next_boot != v}
        if to_set:
            ssh.run(mlxconfig.set_argv(spec.device, to_set), privileged=True)
            rows = _query(ssh, spec)
            refused = [n for n, v in to_set.items() if rows[n].next_boot != v]
            if refused:
                raise SshCommandError(f"mlxconfig set returned success but Next Boot of {', '.join(refused)} "
                                      "did not change", target=ssh.target.label, command="mlxconfig set")
        pending = [n for n in spec.parameters
                   if (rows[n].current is None and n in to_set) or
                   (rows[n].current is not None and rows[n].current != rows[n].next_boot)]
        reset_performed = False
        if pending and spec.allow_firmware_reset:
            ssh.run(mlxconfig.mlxfwreset_argv(spec.device, spec.reset_level), privileged=True)
            reset_performed = True
            rows = _query(ssh, spec)
            pending = _differing(spec, rows)
    return {"changed": list(to_set), **_dpu_status(spec, rows, pending), "reset_performed": reset_performed}
