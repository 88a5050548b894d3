"""Pulumi dynamic provider and the ``GpuComposition`` resource: GPUs composed into a host by the Director.

Example (program side)::

    cfg = pulumi.Config("director")
    GpuComposition("blade-slot-1-gpus", endpoint=cfg.require("endpoint"),
                   username=cfg.require_secret("username"), password=cfg.require_secret("password"),
                   machine="blade-slot-1", count=2, model="Tesla-T4")

Resource contract:

- Inputs: ``endpoint``; ``username`` / ``password`` (made secrets here, listed in
  ``additional_secret_outputs``, so state holds them encrypted); ``machine`` (Director machine
  name == host / Kubernetes node name); ``count`` and/or ``device_names`` (stored as
  ``requested_device_names``); ``model`` (GFD product name, ``Tesla-T4``; ``Tesla T4`` is
  normalised); ``group`` (the machine's group, checked); ``timeout_seconds``,
  ``reprogram_timeout_seconds``, ``use_digest``.
- Outputs: every input, plus ``device_names`` (attached, natural order), ``models``,
  ``fabric_ids`` (each device's ``fabr_gid``), ``switch_ids`` (``swit_gid``), ``machine_id``,
  ``group_id``, ``group_name`` and ``pool_moved_devices`` (GPUs this resource moved from the
  system free pool into the group; delete moves them back).
- Type token: ``pulumi-python:dynamic/director:GpuComposition``.

Behaviour (docs/domain.md "Pulumi dynamic providers and policies"):

- The provider object holds no state: credentials and clients are never pickled. Each method
  builds a :class:`DirectorClient` from the resource's own (secret) inputs and closes it.
- ``check`` validates inputs with one failure per problem and skips values unknown at preview.
- ``diff``: ``machine`` / ``group`` changes replace (delete first: the same GPUs may be wanted
  on the new host); count, names, model and connection settings update in place; drift found
  by ``refresh`` (fewer or other GPUs than wanted) also shows as an update.
- ``create`` is idempotent: each GPU is tagged with the resource's owner tag (``udesc``)
  *before* it is attached, so a retry after a crash adopts GPUs already attached for this
  resource instead of attaching more. Bad input fails before anything changes.
- ``update`` composes or decomposes only the difference.
- ``read`` reports GPUs removed or added out of band; a machine gone from the Director means
  the composition is gone.
- ``delete`` tolerates GPUs already detached and a machine already gone.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)
from pydantic import Field, field_validator, model_validator

from .. import oneline
from ..kit import DynamicResource, check_known, is_unknown, plain
from .account import SECRET_KEYS, DirectorAccount
from .client import DirectorClient
from .endpoint import director_failure
from .errors import DirectorConflictError, DirectorError, DirectorNotFoundError
from .models import Gpu, Machine, gfd_product_name
from .planning import natural_key, owned_gpus, owner_tags, plan_composition, tag_for, taken_from_free_pool

# Inside the engine's provider process, report our typed errors as one line (see oneline).
oneline.install()

__all__ = ["CLIENT_DEFAULTS", "CompositionSpec", "GpuComposition", "GpuCompositionProvider"]

log = logging.getLogger(__name__)

#: Client settings that are not resource inputs (tests lower them; never pickled).
CLIENT_DEFAULTS: dict[str, float] = {
    "backoff_factor": 0.5,
    "edit_wait": 30.0,
    "poll_interval": 0.5,
    "retries": 3,
}

#: Input keys, in the order check() reports them.
INPUT_KEYS = (
    "endpoint",
    "username",
    "password",
    "machine",
    "group",
    "count",
    "requested_device_names",
    "model",
    "owner",
    "timeout_seconds",
    "reprogram_timeout_seconds",
    "use_digest",
)
#: Changing these replaces the resource.
REPLACE_KEYS = ("machine", "group")
_HOST = r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$"


class CompositionSpec(DirectorAccount):
    """Validated inputs of one GPU composition: the Director account (:class:`DirectorAccount`)
    and what to compose.

    Attributes:
        machine: Director machine name (host / Kubernetes node name).
        group: the machine's group; ``None`` = whatever group the machine is in.
        count: GPUs wanted, 1..64; ``None`` = ``len(requested_device_names)``.
        requested_device_names: explicit GPUs (``gpu3``), unique; empty = any of ``model``.
        model: GFD product name filter (``Tesla-T4``), or ``None`` for any model.
        owner: owner tag written into each GPU's user description.
        timeout_seconds: per-request timeout, seconds (0 < t <= 300).
        reprogram_timeout_seconds: longest hot-plug wait, seconds (0 < t <= 3600; default 600).
        use_digest: digest (``X-API-Key``) auth instead of HTTP Basic.
    """

    machine: str = Field(pattern=_HOST)
    group: str | None = Field(default=None, min_length=1, max_length=63)
    count: int | None = Field(default=None, ge=1, le=64)
    requested_device_names: list[str] = Field(default_factory=list, max_length=64)
    model: str | None = Field(default=None, max_length=128)
    owner: str = Field(min_length=1, max_length=255)
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    reprogram_timeout_seconds: float = Field(default=600.0, gt=0, le=3600)
    use_digest: bool = False

    @field_validator("requested_device_names", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, list):
            bad = [v for v in value if not isinstance(v, str) or not v.strip()]
            if bad:
                raise ValueError(f"device names must be non-empty strings, got {bad!r}")
            dupes = sorted({v for v in value if value.count(v) > 1})
            if dupes:
                raise ValueError(f"device names repeat: {', '.join(dupes)}")
            return sorted(value, key=natural_key)
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                return None
            value = gfd_product_name(value)
            if not all(ch.isalnum() or ch in "._-" for ch in value):
                raise ValueError(f"model {value!r} is not a GPU product name like Tesla-T4")
        return value

    @model_validator(mode="after")
    def _count_or_names(self) -> CompositionSpec:
        if self.count is None and not self.requested_device_names:
            raise ValueError("give count, device_names, or both")
        if (
            self.count is not None
            and self.requested_device_names
            and self.count != len(self.requested_device_names)
        ):
            raise ValueError(
                f"count is {self.count} but {len(self.requested_device_names)} device_names are given"
            )
        return self

    def inputs(self) -> dict[str, Any]:
        """The normalised inputs, keyed as in state."""
        return {k: getattr(self, k) for k in INPUT_KEYS}


def _spec(props: Mapping[str, Any]) -> CompositionSpec:
    return CompositionSpec.model_validate(
        {k: plain(props.get(k)) for k in INPUT_KEYS if props.get(k) is not None}
    )


def _client(spec: CompositionSpec) -> DirectorClient:
    return DirectorClient(
        spec.endpoint,
        username=spec.username,
        password=spec.password,
        timeout=spec.timeout_seconds,
        use_digest=spec.use_digest,
        reprogram_timeout=spec.reprogram_timeout_seconds,
        retries=int(CLIENT_DEFAULTS["retries"]),
        backoff_factor=CLIENT_DEFAULTS["backoff_factor"],
        edit_wait=CLIENT_DEFAULTS["edit_wait"],
        poll_interval=CLIENT_DEFAULTS["poll_interval"],
    )


def _list(value: Any) -> list[str]:
    value = plain(value)
    return [str(v) for v in value] if isinstance(value, list) else []


class GpuCompositionProvider(ResourceProvider):
    """CRUD for ``GpuComposition`` against the Director.

    Stateless: safe to pickle and to share across the provider's threads.
    """

    # ------------------------------------------------------------------ check / diff (preview-safe)
    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """Validate inputs, then probe the Director read-only (``director_failure``); values
        unknown during preview are passed through unchecked."""
        checked = check_known(CompositionSpec, news, rename={"requested_device_names": "device_names"},
                              whole="inputs")
        unknown = checked.unknown
        spec = checked.spec
        if spec is None:
            failures = checked.failures
            if unknown & {"count", "requested_device_names"}:
                # The count/names rule (an error on the whole model) cannot be judged yet.
                failures = [f for f in failures if f.property != "inputs"]
            # Errors of the whole model are about count and device_names: reported on count.
            return CheckResult(dict(news), [CheckFailure("count", f.reason) if f.property == "inputs" else f
                                            for f in failures])
        inputs = dict(news)
        for k, v in spec.inputs().items():
            # Secrets keep the engine's own value (and its secretness); others get normalised.
            if k not in unknown and k not in SECRET_KEYS:
                inputs[k] = v
        if not unknown & {"endpoint", "username", "password"}:
            # Read-only probe, once per Director and account per run (dynamic_providers.preflight).
            reason = director_failure(spec.endpoint, username=spec.username, password=spec.password)
            if reason:
                return CheckResult(inputs, [CheckFailure("endpoint", reason)])
        return CheckResult(inputs, [])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Replace on machine/group change; update in place on anything else or on drift."""
        replaces = []
        for k in REPLACE_KEYS:
            new, old = news.get(k), plain(olds.get(k))
            if is_unknown(new):
                replaces.append(k)
            elif k == "group":
                if new is not None and new != old and new != olds.get("group_name"):
                    replaces.append(k)
            elif plain(new) != old:
                replaces.append(k)
        changed = [
            k
            for k in INPUT_KEYS
            if k not in REPLACE_KEYS
            and (is_unknown(news.get(k)) or plain(news.get(k)) != plain(olds.get(k)))
        ]
        drift = self._drift(olds, news)
        return DiffResult(
            changes=bool(replaces or changed or drift),
            replaces=replaces,
            stables=["machine_id"] if not replaces else [],
            delete_before_replace=True,
        )

    @staticmethod
    def _drift(olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        """True when the GPUs held (as last read) differ from what the inputs ask for."""
        if any(is_unknown(news.get(k)) for k in ("count", "requested_device_names", "model")):
            return True
        held = _list(olds.get("device_names"))
        names = sorted(_list(news.get("requested_device_names")), key=natural_key)
        count = news.get("count")
        desired = int(count) if count is not None else len(names)
        if len(held) != desired or (names and sorted(held, key=natural_key) != names):
            return True
        model = news.get("model")
        return bool(model) and any(m != gfd_product_name(str(model)) for m in _list(olds.get("models")))

    # ------------------------------------------------------------------ CRUD
    def create(self, props: dict[str, Any]) -> CreateResult:
        """Compose the GPUs; adopt GPUs already attached for this resource (owner tag)."""
        spec = _spec(props)
        with _client(spec) as c:
            outs = self._converge(c, spec, recorded=[], pool_moved=[])
        return CreateResult(f"{spec.machine}/{uuid.uuid4().hex[:12]}", outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Compose or decompose only the difference."""
        spec = _spec(news)
        with _client(spec) as c:
            outs = self._converge(
                c,
                spec,
                recorded=_list(olds.get("device_names")),
                pool_moved=_list(olds.get("pool_moved_devices")),
            )
        return UpdateResult(outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Report the GPUs the machine holds for this resource now (refresh)."""
        spec = _spec(props)
        with _client(spec) as c:
            m = self._machine_or_none(c, spec)
            if m is None:
                return ReadResult("", {})
            gpus = c.gpus()
            names = [*_list(props.get("device_names")), *spec.requested_device_names]
            held = owned_gpus(gpus, machine_id=m.mach_id, owner_tag=spec.owner, names=names)
            grp = c.group(m.grp_id)
            outs = {
                **props,
                **self._computed(
                    held, m.mach_id, grp.grp_id, grp.group_name, _list(props.get("pool_moved_devices")), gpus
                ),
            }
        return ReadResult(id_, outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Detach this resource's GPUs (skipping those already gone) and undo its pool moves."""
        spec = _spec(props)
        with _client(spec) as c:
            m = self._machine_or_none(c, spec)
            if m is None:
                return
            gpus = c.gpus()
            recorded = _list(props.get("device_names"))
            held = [
                g.name for g in owned_gpus(gpus, machine_id=m.mach_id, owner_tag=spec.owner, names=recorded)
            ]
            if held:
                c.decompose(m, held)
            existing = {g.name for g in gpus}
            # Recorded moves, and GPUs an interrupted run took from the free pool (adopted since).
            marked = {g.name for g in gpus if g.name in held and taken_from_free_pool(g.owner_tag)}
            moved = {*_list(props.get("pool_moved_devices")), *marked}
            c.clear_owner_tag([n for n in {*held, *recorded} if n in existing],
                              only_if=owner_tags(spec.owner))
            c.release_to_system_pool(sorted(n for n in moved if n in existing))

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _machine_or_none(c: DirectorClient, spec: CompositionSpec) -> Machine | None:
        """The machine, or ``None`` when the Director no longer has it (the composition is gone)."""
        try:
            return c.machine(spec.machine)
        except DirectorNotFoundError:
            log.warning("machine %s is gone from the Director; its composition is gone", spec.machine)
            return None

    def _converge(
        self, c: DirectorClient, spec: CompositionSpec, *, recorded: Sequence[str], pool_moved: Sequence[str]
    ) -> dict[str, Any]:
        m = c.machine(spec.machine)
        grp = c.group(m.grp_id)
        if spec.group is not None and spec.group != grp.group_name:
            raise DirectorConflictError(
                f"machine {m.mach_name} is in group {grp.group_name}, not {spec.group}", machine=m.mach_name
            )
        gpus = c.gpus()
        by_name = {g.name: g for g in gpus}
        held = owned_gpus(
            gpus, machine_id=m.mach_id, owner_tag=spec.owner, names=[*recorded, *spec.requested_device_names]
        )
        plan = plan_composition(
            gpus,
            machine_id=m.mach_id,
            group_id=grp.grp_id,
            count=spec.count,
            device_names=spec.requested_device_names,
            model=spec.model,
            current=[g.name for g in held],
        )
        # GPUs an interrupted run took from the free pool and attached carry the free-pool mark:
        # adopted here, they go back to the free pool when released, as that run's would have.
        moved = set(pool_moved) | {g.name for g in held if taken_from_free_pool(g.owner_tag)}
        tags = owner_tags(spec.owner)
        if plan.attach:
            new_moves = {n for n in plan.attach if by_name[n].in_system_pool}
            c.set_owner_tag(sorted(new_moves), tag_for(spec.owner, from_free_pool=True))
            c.set_owner_tag([n for n in plan.attach if n not in new_moves], spec.owner)
            try:
                c.compose(m, plan.attach)
            except DirectorError:
                try:
                    c.clear_owner_tag(plan.attach, only_if=tags)
                except DirectorError as exc:
                    log.warning("could not clear owner tags after a failed compose: %s", exc)
                raise
            moved |= new_moves
        c.set_owner_tag([n for n in plan.keep if by_name[n].owner_tag not in tags], spec.owner)
        if plan.detach:
            c.decompose(m, plan.detach)
            c.clear_owner_tag(plan.detach, only_if=tags)
            released = c.release_to_system_pool([n for n in plan.detach if n in moved])
            moved -= set(released)
        gpus = c.gpus()
        now = owned_gpus(gpus, machine_id=m.mach_id, owner_tag=spec.owner, names=plan.target)
        return {
            **spec.inputs(),
            **self._computed(now, m.mach_id, grp.grp_id, grp.group_name, sorted(moved), gpus),
        }

    @staticmethod
    def _computed(
        held: Sequence[Gpu],
        machine_id: int,
        group_id: int,
        group_name: str,
        pool_moved: Sequence[str],
        gpus: Sequence[Gpu],
    ) -> dict[str, Any]:
        existing = {g.name for g in gpus}
        return {
            "device_names": [g.name for g in held],
            "models": [g.model for g in held],
            "fabric_ids": [g.fabr_gid for g in held],
            "switch_ids": [g.swit_gid for g in held],
            "machine_id": machine_id,
            "group_id": group_id,
            "group_name": group_name,
            "pool_moved_devices": sorted((n for n in pool_moved if n in existing), key=natural_key),
        }


class GpuComposition(DynamicResource, module="director", name="GpuComposition"):
    """GPUs from the Director's pool composed into one bare-metal host.

    Args:
        resource_name: Pulumi resource name; also part of the owner tag written on the GPUs
            (``pulumi:<project>/<stack>/<resource_name>``).
        endpoint: Director base URL (``http://127.0.0.1:18080``).
        username / password: Director credentials; wrapped as secrets here.
        machine: Director machine name (== host / Kubernetes node name).
        count: how many GPUs (1..64). Give ``count``, ``device_names`` or both (then equal).
        device_names: explicit GPUs (``["gpu0", "gpu1"]``).
        model: GFD product name filter (``Tesla-T4``, ``NVIDIA-A100-PCIE-40GB``).
        group: the machine's group, checked (a mismatch fails the update).
        use_digest: digest auth (``X-API-Key``) instead of HTTP Basic.
        timeout_seconds: per-request timeout, seconds.
        reprogram_timeout_seconds: longest hot-plug wait, seconds (default 600).
        opts: resource options (``additional_secret_outputs`` gains username and password).

    Outputs: ``device_names``, ``models``, ``fabric_ids``, ``switch_ids``, ``machine_id``,
    ``group_id``, ``group_name``, ``pool_moved_devices`` (see the module docstring).
    """

    device_names: pulumi.Output[list[str]]
    models: pulumi.Output[list[str]]
    fabric_ids: pulumi.Output[list[str]]
    switch_ids: pulumi.Output[list[str]]
    machine_id: pulumi.Output[int]
    group_id: pulumi.Output[int]
    group_name: pulumi.Output[str]
    pool_moved_devices: pulumi.Output[list[str]]

    secret_inputs = SECRET_KEYS

    def __init__(
        self,
        resource_name: str,
        *,
        endpoint: pulumi.Input[str],
        username: pulumi.Input[str],
        password: pulumi.Input[str],
        machine: pulumi.Input[str],
        count: pulumi.Input[int] | None = None,
        device_names: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None,
        model: pulumi.Input[str] | None = None,
        group: pulumi.Input[str] | None = None,
        use_digest: bool = False,
        timeout_seconds: float = 10.0,
        reprogram_timeout_seconds: float = 600.0,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(GpuCompositionProvider(), resource_name, {
            "endpoint": endpoint,
            "username": username,
            "password": password,
            "machine": machine,
            "group": group,
            "count": count,
            "requested_device_names": device_names,
            "model": model,
            "owner": f"pulumi:{pulumi.get_project()}/{pulumi.get_stack()}/{resource_name}",
            "timeout_seconds": timeout_seconds,
            "reprogram_timeout_seconds": reprogram_timeout_seconds,
            "use_digest": use_digest,
        }, opts)
