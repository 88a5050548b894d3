"""Pulumi dynamic resources that prepare hosts and DPUs over SSH.

Substitution: the issue asks for pulumi-command, but its provider plugin cannot be built
here (the Go module ``github.com/pulumi/pulumi-command/provider`` is not served by this
machine's Go proxy). These Python dynamic providers do the same job (remote commands over
SSH, as ``command.remote.Command`` would) with paramiko, and add what pulumi-command leaves
to the user: query-before-change idempotency, validation in ``check``, host-key pinning and
outputs that say whether a reboot or firmware reset is pending.

Resources (type tokens ``pulumi-python:dynamic/ssh:<Name>``):

- :class:`HostKernelPrep`: kernel args (default ``intel_iommu=on iommu=pt pci=realloc``) in
  GRUB and a module blacklist (default ``nouveau``); reboots only with ``allow_reboot=True``.
- :class:`DpuMlxconfig`: mlxconfig parameters of one DPU device; ``mlxfwreset`` only with
  ``allow_firmware_reset=True``.

Lifecycle: ``check`` validates every known input (mlxconfig names and ranges via
:mod:`domain.mlxconfig`) before anything connects; ``diff`` is pure
(inputs against the last outputs; a changed ``triggers`` list forces a re-check);
``create``/``update`` query, change only what differs and return every output; ``read``
(``pulumi refresh``) connects and reads the live values: GRUB's ``GRUB_CMDLINE_LINUX``, the
running ``/proc/cmdline``, the blacklist file and ``/proc/modules`` for a host; ``mlxconfig -e
query`` Current and Next Boot for a DPU. It reports them as outputs and writes the values the
machine will boot with back as inputs (``kernel_args`` and ``blacklisted_modules`` keep only
what is still configured, ``parameters`` become the Next Boot values), so the next preview
shows the repair and ``pulumi up`` carries it out; ``delete`` leaves the machine as it is
(firmware and boot settings are not rolled back by forgetting a resource).

Secrets: ``connection`` (host, port, user, private key, pinned host key) is always wrapped
as a Pulumi secret and kept in the outputs only as one (``additional_secret_outputs``), so
``read`` can reach the machine while state stores it encrypted; no other output echoes it.
The only other connection-derived output is the host key's public SHA256 fingerprint. A
resource recorded before its outputs carried the connection is refreshed as recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypedDict, TypeVar

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    DiffResult,
    ReadResult,
)
from pydantic import ValidationError

from domain import mlxconfig as mlxconfig_rules
from dynamic_providers import kit, oneline, preflight
from dynamic_providers.ssh import operations
from dynamic_providers.ssh.client import SshRunner
from dynamic_providers.ssh.errors import SshAuthError, SshError, SshHostKeyError, SshUnavailableError
from dynamic_providers.ssh.models import (
    DEFAULT_BLACKLISTED_MODULES,
    DEFAULT_KERNEL_ARGS,
    DpuMlxconfigSpec,
    HostKernelPrepSpec,
    SshTarget,
)

__all__ = [
    "DpuMlxconfig",
    "DpuMlxconfigProvider",
    "HostKernelPrep",
    "HostKernelPrepProvider",
    "SshConnectionArgs",
]

# Inside the engine's provider process, report our typed errors as one line (see oneline).
oneline.install()


class SshConnectionArgs(TypedDict, total=False):
    """The ``connection`` input (see :class:`~dynamic_providers.ssh.models.SshTarget`).

    Keys: ``host`` (str), ``port`` (int, default 22), ``user`` (str), ``private_key``
    (str, OpenSSH/PEM), ``host_key`` (str, ``"<type> <base64>"``),
    ``connect_timeout_seconds`` (float, default 10), ``command_timeout_seconds`` (float,
    default 120). Pass values from ``Config.require_secret``.
    """

    host: pulumi.Input[str]
    port: pulumi.Input[int]
    user: pulumi.Input[str]
    private_key: pulumi.Input[str]
    host_key: pulumi.Input[str]
    connect_timeout_seconds: pulumi.Input[float]
    command_timeout_seconds: pulumi.Input[float]


def _spec_fields(props: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {k: props[k] for k in names if props.get(k) is not None}


def _check_connection(news: Mapping[str, Any]) -> list[CheckFailure]:
    conn = news.get("connection")
    if conn is None:
        return [CheckFailure("connection", "connection: required (host, user, private_key, host_key)")]
    if kit.is_unknown(conn):
        return []
    try:
        SshTarget.model_validate(conn)
    except ValidationError as exc:
        return kit.validation_failures(exc, prefix="connection")
    return []


#: One line for a preview login's failure: what was refused and what to do.
_explain_refusal = kit.explainer(
    (SshAuthError, lambda _exc: "the private key was refused for the login user: set the right key with "
                                "`pulumi config set --secret` and preview again"),
    (SshHostKeyError, lambda _exc: "the host key is not the pinned one: check host_key (ssh-keyscan) "
                                   "before trusting this host"),
    (SshUnavailableError, lambda exc: kit.unreachable(
        "no SSH connection", exc.summary, "host and port and that the host is reachable")),
    (SshError, lambda exc: f"login failed: {exc.summary}"),
)


def _check_login(news: Mapping[str, Any], failures: list[CheckFailure]) -> None:
    """Log in once per host, user and key per run (no command runs); skipped when the
    connection failed its local checks or is unknown at preview."""
    conn = news.get("connection")
    if failures or conn is None or kit.is_unknown(conn):
        return
    target = SshTarget.model_validate(conn)

    def probe() -> None:
        with SshRunner(target, connect_retries=0):
            pass

    reason = preflight.endpoint_failure(
        "SSH host", f"{target.user}@{target.host}:{target.port}", identity=target.host_key,
        secret=target.private_key.get_secret_value(), probe=probe, explain=_explain_refusal)
    if reason:
        failures.append(CheckFailure("connection", reason))


def _target(props: Mapping[str, Any]) -> SshTarget:
    return SshTarget.model_validate(props["connection"])


SpecT = TypeVar("SpecT", HostKernelPrepSpec, DpuMlxconfigSpec)
#: What a refresh read: (live outputs, managed inputs as the machine has them configured now).
Observed = tuple[dict[str, Any], dict[str, Any]]


class _PrepProvider(kit.ConvergeProvider, Generic[SpecT]):
    """What both SSH providers do the same way around their spec: check, diff, converge, refresh.

    A subclass names its spec model (its fields are the spec inputs), the output that says a
    reset (or reboot) is pending and the spec field that allows one, its id prefix, and gives
    ``_apply`` (query and change the machine) and ``_read_live`` (query only); it may add rules
    in ``_spec_failures``.
    """

    spec_model: type[SpecT]
    #: Output that is True while a reboot/firmware reset is still owed, and the spec field
    #: that allows the provider to perform it.
    pending_output: str
    allow_field: str
    id_prefix: str

    @property
    def spec_fields(self) -> tuple[str, ...]:
        """Inputs that make up the spec (echoed as outputs, normalised): the spec model's fields."""
        return tuple(self.spec_model.model_fields)

    def _spec(self, props: Mapping[str, Any]) -> SpecT:
        return self.spec_model.model_validate(_spec_fields(props, self.spec_fields))

    def _echo(self, spec: SpecT, props: Mapping[str, Any]) -> dict[str, Any]:
        """The spec as stored in the outputs (JSON shapes: lists, not tuples) and ``triggers``."""
        return {**spec.model_dump(mode="json", include=set(self.spec_fields)),
                "triggers": props.get("triggers") or []}

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """Validate the connection and the spec, then log in once (``preflight``); inputs
        unknown at preview are not judged."""
        failures = _check_connection(news)
        _check_login(news, failures)
        return CheckResult(news, failures + self._spec_failures(news))

    def _spec_failures(self, news: Mapping[str, Any]) -> list[CheckFailure]:
        """Failures of the known spec inputs (``kit.check_known`` with ``spec_model``)."""
        return kit.check_known(self.spec_model, news).failures

    def _apply(self, target: SshTarget, spec: SpecT) -> dict[str, Any]:
        """Query the machine, change what differs; the computed outputs."""
        raise NotImplementedError

    def _read_live(self, target: SshTarget, spec: SpecT) -> Observed:
        """Query only; nothing is changed."""
        raise NotImplementedError

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Changes when the spec, the pinned host key or ``triggers`` differ, or when a pending
        reset/reboot is now allowed. Pure: no connection."""
        if kit.is_unknown({k: news.get(k) for k in (*self.spec_fields, "connection", "triggers")}):
            return DiffResult(changes=True)
        try:
            spec = self._spec(news)
            fingerprint = _target(news).host_key_fingerprint
        except ValueError:  # pydantic's ValidationError included
            return DiffResult(changes=True)
        changed = any(olds.get(k) != v for k, v in self._echo(spec, news).items())
        changed |= olds.get("host_key_fingerprint") != fingerprint
        changed |= bool(olds.get(self.pending_output)) and bool(getattr(spec, self.allow_field))
        return DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def converge(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Query, change only what differs, maybe reset/reboot; return every output."""
        spec, target = self._spec(props), _target(props)
        result = self._apply(target, spec)
        return {**self._echo(spec, props), "connection": props["connection"],
                "host_key_fingerprint": target.host_key_fingerprint, **result}

    def new_id(self, _props: Mapping[str, Any], _outs: Mapping[str, Any]) -> str:
        """``<id_prefix>-<uuid4 hex>``."""
        return kit.new_id(self.id_prefix)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: recorded outputs updated with the live values; the inputs (connection, spec,
        ``triggers``) get the managed values as configured now, so drift shows in the next preview.
        A resource recorded without its connection is returned as recorded.

        Raises:
            dynamic_providers.ssh.errors.SshError: the machine cannot be reached or read.
        """
        if not props.get("connection"):
            return ReadResult(id_=id_, outs=props)
        live, configured = self._read_live(_target(props), self._spec(props))
        inputs = {k: props.get(k) for k in ("connection", *self.spec_fields, "triggers")}
        return ReadResult(id_=id_, outs={**props, **live, **configured}, inputs={**inputs, **configured})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Forget the resource; the machine keeps its configuration."""


class _SshPrepResource(kit.DynamicResource):
    """Program side shared by both SSH resources: the secret ``connection`` and the outputs both have.

    Outputs:
        host_key_fingerprint: ``SHA256:...`` of the pinned host key.
        changed: what this run changed (names; empty when nothing differed).
    """

    secret_inputs = ("connection",)

    host_key_fingerprint: pulumi.Output[str]
    changed: pulumi.Output[list[str]]


# ---------------------------------------------------------------------------------------------
# HostKernelPrep


class HostKernelPrepProvider(_PrepProvider[HostKernelPrepSpec]):
    """Dynamic provider of :class:`HostKernelPrep` (stateless; safe on several threads)."""

    spec_model = HostKernelPrepSpec
    pending_output = "reboot_pending"
    allow_field = "allow_reboot"
    id_prefix = "host"

    def _apply(self, target: SshTarget, spec: HostKernelPrepSpec) -> dict[str, Any]:
        """GRUB, blacklist, initramfs; reboot only with ``allow_reboot``."""
        return operations.prepare_host(target, spec)

    def _read_live(self, target: SshTarget, spec: HostKernelPrepSpec) -> Observed:
        """GRUB, ``/proc/cmdline``, the blacklist and ``/proc/modules`` (nothing is written).
        ``kernel_args``/``blacklisted_modules`` keep only the wanted values still configured,
        so a removed one shows as drift and ``up`` restores it."""
        live = operations.read_host(target, spec)
        configured = {"kernel_args": live.pop("present_kernel_args"),
                      "blacklisted_modules": live.pop("present_blacklisted_modules")}
        return live, configured


class HostKernelPrep(_SshPrepResource, module="ssh", name="HostKernelPrep"):
    """Kernel arguments and module blacklist of one already-installed host, over SSH.

    Outputs (besides the echoed inputs, ``host_key_fingerprint`` and ``changed``: ``grub``,
    ``modprobe``, ``initramfs``):
        configured_kernel_args: ``GRUB_CMDLINE_LINUX`` tokens after the run.
        missing_active_kernel_args: wanted args not yet in ``/proc/cmdline``.
        loaded_blacklisted_modules: blacklisted modules still loaded.
        reboot_pending: True until the host has booted with the new settings.
        rebooted: this run rebooted the host (only with ``allow_reboot``).
    """

    configured_kernel_args: pulumi.Output[list[str]]
    missing_active_kernel_args: pulumi.Output[list[str]]
    loaded_blacklisted_modules: pulumi.Output[list[str]]
    reboot_pending: pulumi.Output[bool]
    rebooted: pulumi.Output[bool]

    def __init__(
        self,
        name: str,
        *,
        connection: pulumi.Input[SshConnectionArgs],
        kernel_args: pulumi.Input[Sequence[pulumi.Input[str]]] = DEFAULT_KERNEL_ARGS,
        blacklisted_modules: pulumi.Input[Sequence[pulumi.Input[str]]] = DEFAULT_BLACKLISTED_MODULES,
        allow_reboot: pulumi.Input[bool] = False,
        reboot_timeout_seconds: pulumi.Input[float] = 600.0,
        sysroot: pulumi.Input[str] = "",
        use_sudo: pulumi.Input[bool] = False,
        triggers: pulumi.Input[Sequence[Any]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Args:
            name: Pulumi resource name (e.g. ``f"{host}-kernel"``).
            connection: :class:`SshConnectionArgs`; always stored as a secret.
            kernel_args: arguments that must be on the kernel command line.
            blacklisted_modules: modules to blacklist (empty list removes our file).
            allow_reboot: reboot when pending (stack config opt-in; default False).
            reboot_timeout_seconds: wait for SSH after the reboot.
            sysroot: path prefix for every file (lab stand-ins); ``""`` on real hosts.
            use_sudo: run privileged commands with ``sudo -n``.
            triggers: any values; a change re-runs the query-and-converge step.
        """
        super().__init__(HostKernelPrepProvider(), name, {
            "connection": connection,
            "kernel_args": kernel_args,
            "blacklisted_modules": blacklisted_modules,
            "allow_reboot": allow_reboot,
            "reboot_timeout_seconds": reboot_timeout_seconds,
            "sysroot": sysroot,
            "use_sudo": use_sudo,
            "triggers": triggers or [],
        }, opts)


# ---------------------------------------------------------------------------------------------
# DpuMlxconfig


class DpuMlxconfigProvider(_PrepProvider[DpuMlxconfigSpec]):
    """Dynamic provider of :class:`DpuMlxconfig` (stateless; safe on several threads)."""

    spec_model = DpuMlxconfigSpec
    pending_output = "reset_pending"
    allow_field = "allow_firmware_reset"
    id_prefix = "dpu"

    def _spec_failures(self, news: Mapping[str, Any]) -> list[CheckFailure]:
        """Device and options as the model says; each mlxconfig rule violation is its own
        failure on property ``parameters`` whose reason starts with the parameter name
        (``VIRTIO_NET_EMULATION_NUM_PF: 40 is out of range 0..31 ...``)."""
        failures: list[CheckFailure] = []
        params = news.get("parameters")
        if not isinstance(params, Mapping) and not kit.is_unknown(params):
            failures.append(CheckFailure("parameters", "parameters: required map of mlxconfig name to value"))
        elif isinstance(params, Mapping):
            known = {k: v for k, v in params.items() if not kit.is_unknown(v)}
            if known or not params:  # all-unknown values wait for the real run's check
                failures += [CheckFailure("parameters", v.reason) for v in mlxconfig_rules.violations(known)]
        return failures + [f for f in super()._spec_failures(news) if f.property != "parameters"]

    def _apply(self, target: SshTarget, spec: DpuMlxconfigSpec) -> dict[str, Any]:
        """Set only the parameters that differ; ``mlxfwreset`` only with ``allow_firmware_reset``."""
        return operations.configure_dpu(target, spec)

    def _read_live(self, target: SshTarget, spec: DpuMlxconfigSpec) -> Observed:
        """``mlxconfig -e query`` the managed parameters (nothing is set). ``parameters`` become
        the Next Boot values, so a value changed behind our back shows as drift and ``up`` sets
        it again."""
        live = operations.read_dpu(target, spec)
        return live, {"parameters": dict(live["next_boot"])}


class DpuMlxconfig(_SshPrepResource, module="ssh", name="DpuMlxconfig"):
    """mlxconfig parameters of one DPU device, set over SSH (on the DPU's Arm OS or its host).

    Outputs (besides the echoed, normalised inputs, ``host_key_fingerprint`` and ``changed``:
    the parameter names set in this run):
        next_boot: ``{name: int}`` Next Boot values after the run.
        current: ``{name: int}`` values in effect now.
        pending_parameters: names whose Current differs from Next Boot.
        reset_pending: True while a firmware reset (or power cycle) is still needed.
        reset_performed: this run ran ``mlxfwreset`` (only with ``allow_firmware_reset``).
    """

    next_boot: pulumi.Output[dict[str, int]]
    current: pulumi.Output[dict[str, int]]
    pending_parameters: pulumi.Output[list[str]]
    reset_pending: pulumi.Output[bool]
    reset_performed: pulumi.Output[bool]

    def __init__(
        self,
        name: str,
        *,
        connection: pulumi.Input[SshConnectionArgs],
        device: pulumi.Input[str],
        parameters: pulumi.Input[Mapping[str, pulumi.Input[int | bool | str]]],
        allow_firmware_reset: pulumi.Input[bool] = False,
        reset_level: pulumi.Input[int] = 3,
        use_sudo: pulumi.Input[bool] = False,
        triggers: pulumi.Input[Sequence[Any]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Args:
            name: Pulumi resource name (e.g. ``f"{dpu}-mlxconfig"``).
            connection: :class:`SshConnectionArgs`; always stored as a secret.
            device: mst device or PCI address (``/dev/mst/mt41692_pciconf0``).
            parameters: ``{mlxconfig name: value}``; see
                :mod:`domain.mlxconfig` for names and ranges.
            allow_firmware_reset: run ``mlxfwreset`` when pending (default False).
            reset_level: ``mlxfwreset --level`` (default 3).
            use_sudo: run mlxconfig/mlxfwreset with ``sudo -n``.
            triggers: any values; a change re-runs the query-and-converge step.
        """
        super().__init__(DpuMlxconfigProvider(), name, {
            "connection": connection,
            "device": device,
            "parameters": parameters,
            "allow_firmware_reset": allow_firmware_reset,
            "reset_level": reset_level,
            "use_sudo": use_sudo,
            "triggers": triggers or [],
        }, opts)
