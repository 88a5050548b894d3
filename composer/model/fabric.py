"""The composer's view of the LIQID fabric, and the client surface it needs.

:class:`FabricClient` is the part of ``dynamic_providers.director.client.DirectorClient`` the
composer calls (``gpus``, ``machines``, ``compose``, ``decompose``, ``release_to_system_pool``,
``close``); tests pass fakes with the same methods. Errors are the Director client's
(``dynamic_providers.director.errors.DirectorError`` and subclasses; ``transient`` tells whether
a retry may help).

:func:`read_fabric` turns one read of the Director into a :class:`FabricView` of plain values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from composer.model.models import FreeGpu

if TYPE_CHECKING:
    from dynamic_providers.director._transport import TransportOptions


class GpuLike(Protocol):
    """What the composer reads of a ``dynamic_providers.director.models.Gpu``."""

    name: str
    model: str
    director_model: str
    memory_mib: int | None
    fabr_id: int
    swit_gid: str
    machine: str | None
    group_id: int | None
    owner_tag: str | None

    @property
    def healthy(self) -> bool: ...


class MachineLike(Protocol):
    """What the composer reads of a ``dynamic_providers.director.models.Machine``."""

    mach_name: str
    grp_id: int


class FabricClient(Protocol):
    """The Director operations the composer uses (one client per thread: not thread-safe)."""

    def gpus(self) -> Sequence[GpuLike]: ...

    def machines(self) -> Sequence[MachineLike]: ...

    def compose(
        self,
        machine: str,
        device_names: Sequence[str],
        *,
        owner_tag: str | None = None,
        before_change: Callable[[], object] | None = None,
    ) -> None:
        """Attach the GPUs; ``before_change`` runs once after the reads, before the first
        change (see ``DirectorClient.compose``)."""

    def decompose(self, machine: str, device_names: Sequence[str]) -> None: ...

    def release_to_system_pool(self, device_names: Sequence[str]) -> list[str]: ...

    def close(self) -> None: ...


#: Builds a fresh client (called once per worker thread).
FabricFactory = Callable[[], FabricClient]


@dataclass(frozen=True, slots=True)
class FabricGpu:
    """One GPU as read from the Director.

    Attributes:
        name: device name (``gpu7``).
        model: GFD product name (``Tesla-T4``).
        switch: PCIe switch id (``swit_gid``).
        machine: machine (== node) it is attached to, or None.
        group: id of the Director group whose pool holds it, or None (system free pool).
        healthy: the device state is a working one.
        owner_tag: the device's user description (the Pulumi program tags GPUs it composes).
        director_model: the Director's own model string (``Tesla T4``, ``device/info/gpu``
            ``model``); "" when the Director has no info record for the GPU.
        memory_mib: GPU memory in MiB (``device/info/gpu`` ``dram_size``, a decimal string on
            the wire), or None when the Director does not say.
        fabric: the id of the fabric the GPU sits on (``status/gpu`` ``fabr_id``), or None when
            not read.
    """

    name: str
    model: str
    switch: str = ""
    machine: str | None = None
    group: str | None = None
    healthy: bool = True
    owner_tag: str | None = None
    director_model: str = ""
    memory_mib: int | None = None
    fabric: int | None = None


#: Views derived by :meth:`FabricView.without` kept per view (one per set of running jobs).
_DERIVED_KEPT = 8


@dataclass(frozen=True, slots=True)
class FabricView:
    """One consistent read of the fabric.

    Attributes:
        gpus: every GPU.
        machines: names of all Director machines (composable hosts are nodes with these names).
        machine_groups: machine name -> id of its Director group (as a string).
    """

    gpus: tuple[FabricGpu, ...] = ()
    machines: frozenset[str] = frozenset()
    machine_groups: Mapping[str, str] = field(default_factory=dict)
    _attached: dict[str, dict[str, str]] = field(default_factory=dict, compare=False, repr=False)
    _free: dict[tuple[object, ...], tuple[FreeGpu, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _derived: dict[tuple[frozenset[str], frozenset[str]], FabricView] = field(
        default_factory=dict, compare=False, repr=False
    )
    _by_tag: dict[str, tuple[FabricGpu, ...]] = field(default_factory=dict, compare=False, repr=False)
    _owned: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict, compare=False, repr=False)
    _base: FabricView | None = field(default=None, compare=False, repr=False)
    _removed: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        tagged: dict[str, list[FabricGpu]] = {}
        for g in self.gpus:
            if g.machine is not None:
                self._attached.setdefault(g.machine, {})[g.name] = g.model
            if g.owner_tag:
                tagged.setdefault(g.owner_tag, []).append(g)
        self._by_tag.update((tag, tuple(gs)) for tag, gs in tagged.items())

    @property
    def whole(self) -> FabricView:
        """The read this view was derived from by :meth:`without` (itself if none): every GPU,
        also those of machines whose job is running."""
        return self if self._base is None else self._base

    def attached(self, machine: str) -> Mapping[str, str]:
        """Device name -> model of every GPU attached to ``machine``."""
        return self._attached.get(machine, {})

    def tagged(self, owner_tag: str) -> tuple[FabricGpu, ...]:
        """The GPUs carrying ``owner_tag`` as their user description, in view order."""
        return self._by_tag.get(owner_tag, ())

    def owned_on(self, owner_tag: str, machine: str) -> frozenset[str]:
        """Names of the GPUs attached to ``machine`` that carry ``owner_tag`` (the composer's own,
        whatever its node record says)."""
        by_machine = self._owned.get(owner_tag)
        if by_machine is None:
            acc: dict[str, set[str]] = {}
            for g in self.tagged(owner_tag):
                if g.machine is not None:
                    acc.setdefault(g.machine, set()).add(g.name)
            by_machine = self._owned[owner_tag] = {m: frozenset(ds) for m, ds in acc.items()}
        return by_machine.get(machine, frozenset())

    def tagged_other_than(self, owner_tag: str) -> frozenset[str]:
        """Names of the GPUs carrying an owner tag that is not ``owner_tag``."""
        return frozenset(g.name for tag, gs in self._by_tag.items() if tag != owner_tag for g in gs)

    def with_attached(
        self, machine: str, devices: Iterable[str], owner_tag: str | None = None
    ) -> FabricView:
        """This view after the Director confirmed ``devices`` attached to ``machine`` (they are
        in the machine's group pool now) and, with ``owner_tag``, tagged with it (the compose
        writes the tag before the attach): what a compose changed, without reading it again."""
        names = set(devices)
        group = self.machine_groups.get(machine)
        gpus = tuple(
            replace(
                g,
                machine=machine,
                group=g.group if group is None else group,
                owner_tag=g.owner_tag if owner_tag is None else owner_tag,
            )
            if g.name in names
            else g
            for g in self.gpus
        )
        view = FabricView(gpus, self.machines, self.machine_groups)
        for key, free in self._free.items():  # attached GPUs leave the free pool; the rest stands
            view._free[key] = tuple(f for f in free if f.name not in names)
        return view

    def without(self, devices: frozenset[str], machines: frozenset[str]) -> FabricView:
        """This view without ``devices`` and without the GPUs attached to ``machines`` (what a
        round may not plan on while those machines have a job running).

        Kept per (devices, machines): the rounds during one job ask for the same view, and its
        free pool is computed once, from this view's.
        """
        key = (devices, machines)
        view = self._derived.get(key)
        if view is None:
            gpus = tuple(g for g in self.gpus if g.name not in devices and g.machine not in machines)
            view = FabricView(gpus, self.machines, self.machine_groups, _base=self, _removed=devices)
            if len(self._derived) >= _DERIVED_KEPT:
                self._derived.clear()
            self._derived[key] = view
        return view

    def free(self, *, excluded: frozenset[str], device_pools: Mapping[str, str]) -> list[FreeGpu]:
        """The planner's free pool.

        Healthy, unattached GPUs, minus ``excluded`` and minus GPUs carrying an owner tag (the
        Pulumi program tags the GPUs it composes statically, before it attaches them). A GPU's
        pool is ``device_pools[name]`` if configured, else None (shared). A GPU in a group's
        pool keeps that group, so the planner only puts it on machines of the group (the
        Director refuses anything else).
        """
        return list(self._free_pool((excluded, tuple(sorted(device_pools.items())))))

    def _free_pool(self, key: tuple[frozenset[str], tuple[tuple[str, str], ...]]) -> tuple[FreeGpu, ...]:
        cached = self._free.get(key)
        if cached is not None:  # a view is read once and planned on many rounds: compute once
            return cached
        if self._base is not None:  # free GPUs are on no machine: only the removed devices leave
            cached = tuple(f for f in self._base._free_pool(key) if f.name not in self._removed)
        else:
            excluded, pools = key[0], dict(key[1])
            cached = tuple(
                FreeGpu(g.name, g.model, g.switch, pools.get(g.name), g.group)
                for g in self.gpus
                if g.machine is None and g.healthy and g.name not in excluded and not g.owner_tag
            )
        self._free[key] = cached
        return cached


def read_fabric(client: FabricClient) -> FabricView:
    """Read every GPU and machine once.

    A GPU's Director model string, memory and fabric id come with the same records as its
    place and owner tag (``DirectorClient.gpus``: ``status/gpu`` and ``device/info/gpu``): they
    cost no request of their own.

    Raises:
        dynamic_providers.director.errors.DirectorError: the Director could not be read.
    """
    gpus = tuple(
        FabricGpu(
            name=g.name,
            model=g.model,
            switch=str(g.swit_gid or ""),
            machine=g.machine,
            group=None if g.group_id is None else str(g.group_id),
            healthy=bool(g.healthy),
            owner_tag=g.owner_tag or None,
            director_model=g.director_model,
            memory_mib=g.memory_mib,
            fabric=g.fabr_id,
        )
        for g in client.gpus()
    )
    machines = client.machines()
    groups = {m.mach_name: str(m.grp_id) for m in machines}
    return FabricView(gpus, frozenset(groups), groups)


#: How old the whole ``status/gpu`` list read by one of the composer's Director clients (the
#: background refresh reads it every ``directorResyncSeconds``) may be for a compose to take its
#: GPUs' records from it instead of reading every GPU's record again, seconds. The records
#: identify hardware (ids, fabric, switch, port); where each GPU is comes from a fresh
#: ``predevice`` read in every compose, and a failed compose drops the list.
STATUS_REUSE_SECONDS = 60.0


@dataclass(frozen=True)
class DirectorFactory:
    """Builds real ``DirectorClient`` objects (imported lazily so tests need not); their composes
    reuse status records up to :data:`STATUS_REUSE_SECONDS` old.

    A plain value, so it can be pickled to a child process that reads the fabric there
    (:mod:`composer.shell.fabric_process`); the password is left out of its ``repr``.

    Attributes:
        base_url: the Director's URL (``http://director:8080``).
        username / password: HTTP Basic credentials.
        timeout: each request's read timeout, seconds.
        retries: transient failures retried per request and per transaction.
        job_timeout: the client's longest job wait, seconds (None: LIQID's default).
    """

    base_url: str
    username: str
    password: str = field(repr=False)
    timeout: float
    retries: int
    job_timeout: float | None = None

    def __call__(self) -> FabricClient:
        """A new client (one per thread: clients are not thread-safe)."""
        from dynamic_providers.director.client import DirectorClient

        transport: TransportOptions = {"timeout": self.timeout, "retries": self.retries}
        if self.job_timeout is not None:
            transport["job_timeout"] = self.job_timeout
        return DirectorClient(self.base_url, username=self.username, password=self.password,
                              reuse_statuses_seconds=STATUS_REUSE_SECONDS, **transport)
