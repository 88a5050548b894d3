"""LIQID Director client: typed reads, and the compose / decompose transactions as single calls.

Example::

    with DirectorClient("http://127.0.0.1:18080", username="admin", password=pw) as director:
        free = director.free_gpus(group="gpu-pool")
        director.compose("blade-slot-1", [g.name for g in free[:2]])
        director.decompose("blade-slot-1", ["gpu0"])

The compose transaction (BRIEF.md "Domain facts"): ``POST fabric/edit`` -> ``POST relate/gpu``
for each GPU -> ``POST fabric/reprogram``; on any failure ``POST fabric/edit/cancel``. GPUs in
the system free pool are first moved into the machine's group pool (``POST predevice/gpu``).
Decompose is the same with ``DELETE relate/gpu``.

Retry policy: urllib3 retries GETs on 5xx and any call on connection errors raised before the
request left. A step that may have reached the Director (POST/PUT/DELETE) is never re-sent
blindly: after a transient failure the whole transaction is cancelled, the fabric state is read
again, and only what is still missing is attempted, up to ``retries`` times. A reprogram whose
answer timed out is followed by reading state, not by a second reprogram.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ._transport import Transport
from .api import device as device_api
from .api import fabric as fabric_api
from .api import group as group_api
from .api import machine as machine_api
from .api import predevice as predevice_api
from .api import relate as relate_api
from .api import status as status_api
from .errors import (
    DirectorConflictError,
    DirectorError,
    DirectorNotFoundError,
    DirectorServerError,
    DirectorTimeoutError,
)
from .models import DeviceStatus, Gpu, GpuInfo, Group, Machine, MachineDetails, PreDevice, gfd_product_name
from .planning import natural_key

__all__ = ["DirectorClient"]

log = logging.getLogger(__name__)

MachineRef = str | int | Machine


@dataclass(frozen=True)
class Placed:
    """Where one GPU is, as a transaction reads it (``status/gpu`` joined with ``predevice``).

    Attributes:
        name: device name; status: its ``status/gpu`` record (relate bodies carry it);
        group_id / group: the group pool holding it (None: system free pool);
        machine_id / machine: the machine it is attached to (None: not attached).
    """

    name: str
    status: DeviceStatus
    group_id: int | None = None
    group: str | None = None
    machine_id: int | None = None
    machine: str | None = None


def _check_known(wanted: Sequence[str], known: Mapping[str, object], missing_ok: bool) -> None:
    unknown = [n for n in wanted if n not in known]
    if unknown and not missing_ok:
        raise DirectorNotFoundError(
            f"no such GPU on the fabric: {', '.join(unknown)}", device=",".join(unknown)
        )
GroupRef = str | int | Group


class DirectorClient:
    """A connection to one LIQID Director (or its lab stand-in).

    Args:
        base_url: ``http(s)://host:port`` of the Director; ``/liqid/api/v2`` is appended.
        username / password: Director credentials.
        timeout: per-request timeout, seconds (default 10).
        retries: retries of GETs (urllib3) and of whole transactions after transient failures.
        use_digest: authenticate with a message digest (``X-API-Key``) instead of HTTP Basic.
        verify_tls: verify the certificate on https.
        backoff_factor: exponential backoff base between retries, seconds.
        reprogram_timeout: longest wait for a hot-plug (``fabric/reprogram``), seconds; default
            600, the Kubernetes device-attach KEP 5007 default.
        edit_wait: how long to wait for another client's open fabric edit on the same machine
            to close before giving up with :class:`DirectorConflictError`, seconds.
        poll_interval: pause between state polls, seconds.

    Not thread-safe: use one client per thread. A context manager; :meth:`close` deletes the
    digest and closes connections.

    Raises (every method): subclasses of :class:`~dynamic_providers.director.errors.DirectorError`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        username: str,
        password: str,
        timeout: float = 10.0,
        retries: int = 3,
        use_digest: bool = False,
        verify_tls: bool = True,
        backoff_factor: float = 0.5,
        reprogram_timeout: float = 600.0,
        edit_wait: float = 30.0,
        poll_interval: float = 0.5,
    ) -> None:
        self._t = Transport(
            base_url,
            username=username,
            password=password,
            timeout=timeout,
            retries=retries,
            backoff_factor=backoff_factor,
            use_digest=use_digest,
            verify_tls=verify_tls,
        )
        self.retries = retries
        self._machine_ids: dict[str, int] = {}  # name -> mach_id, from the last full machine list
        self.backoff_factor = backoff_factor
        self.reprogram_timeout = reprogram_timeout
        self.edit_wait = edit_wait
        self.poll_interval = poll_interval

    def __enter__(self) -> DirectorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Delete the digest (if any) and close connections."""
        self._t.close()

    @property
    def api_root(self) -> str:
        """The API base URL (``http://host:port/liqid/api/v2/``)."""
        return self._t.root

    # ================================================================ reads
    def groups(self) -> list[Group]:
        """All groups (``GET group``)."""
        return group_api.list_groups(self._t)

    def group(self, ref: GroupRef) -> Group:
        """One group by name or id.

        Raises:
            DirectorNotFoundError: no such group.
        """
        if isinstance(ref, Group):
            return ref
        groups = self.groups()
        for g in groups:
            if g.group_name == ref or g.grp_id == ref:
                return g
        known = ", ".join(g.group_name for g in groups) or "none"
        raise DirectorNotFoundError(
            f"no group {ref!r} on the Director (groups: {known})", method="GET", path="group"
        )

    def machines(self) -> list[Machine]:
        """All machines (``GET machine``)."""
        return machine_api.list_machines(self._t)

    def machine(self, ref: MachineRef) -> Machine:
        """One machine by name (the host / Kubernetes node name) or by ``mach_id``.

        Raises:
            DirectorNotFoundError: no such machine; the message lists the known ones.
        """
        if isinstance(ref, Machine):
            return ref
        known_id = ref if isinstance(ref, int) else self._machine_ids.get(ref)
        if known_id is not None:  # one small read, checked: ids and names can be reassigned
            for m in machine_api.list_machines(self._t, mach_id=known_id):
                if m.mach_id == known_id and (m.mach_name == ref or m.mach_id == ref):
                    return m
        machines = self.machines()
        self._machine_ids = {m.mach_name: m.mach_id for m in machines}
        for m in machines:
            if m.mach_name == ref or m.mach_id == ref:
                return m
        known = ", ".join(sorted((m.mach_name for m in machines), key=natural_key)) or "none"
        raise DirectorNotFoundError(
            f"no machine {ref!r} on the Director (machines: {known})",
            method="GET",
            path="machine",
            machine=ref,
        )

    def machine_details(self, ref: MachineRef) -> MachineDetails:
        """``GET machine/details/{id}`` for a machine."""
        return machine_api.machine_details(self._t, mach_id=self.machine(ref).mach_id)

    def device_statuses(self) -> list[DeviceStatus]:
        """Every device's live status (``GET status``)."""
        return status_api.list_devices(self._t)

    def gpu_statuses(self, *, free_only: bool = False) -> list[DeviceStatus]:
        """GPU status records (``GET status/gpu``); ``free_only``: system free pool only."""
        return status_api.list_gpus(self._t, free_only=free_only)

    def gpu_infos(self) -> list[GpuInfo]:
        """GPU vendor/model records (``GET device/info/gpu``)."""
        return device_api.list_gpu_info(self._t)

    def predevices(self, *, group_id: int | None = None, machine_id: int | None = None) -> list[PreDevice]:
        """Group-assigned GPUs (``GET predevice?dev_type=gpu``)."""
        return predevice_api.list_predevices(self._t, grp_id=group_id, mach_id=machine_id)

    def gpus(self) -> list[Gpu]:
        """Every GPU with model, vendor, switch, state and where it is (3 GETs), in name order."""
        statuses = self.gpu_statuses()
        infos = {i.name: i for i in self.gpu_infos()}
        placed = {p.name: p for p in self.predevices()}
        out = []
        for s in statuses:
            info = infos.get(s.name)
            p = placed.get(s.name)
            raw_model = info.model if info else ""
            out.append(
                Gpu(
                    name=s.name,
                    dev_id=s.dev_id,
                    model=gfd_product_name(raw_model),
                    director_model=raw_model,
                    vendor=info.vendor if info else "",
                    memory_mib=info.dram_size if info else None,
                    fabr_id=s.fabr_id,
                    fabr_gid=s.fabr_gid,
                    swit_gid=s.swit_gid,
                    port_gid=s.port_gid,
                    device_state=s.device_state,
                    group_id=p.grp_id if p else None,
                    group=p.gname if p else None,
                    machine_id=p.mach_id if p else None,
                    machine=p.mname if p else None,
                    owner_tag=(info.udesc or None) if info else None,
                )
            )
        return sorted(out, key=lambda g: natural_key(g.name))

    def free_gpus(self, group: GroupRef | None = None) -> list[Gpu]:
        """Healthy GPUs attached to no machine.

        Args:
            group: when given, only GPUs in the system free pool or in this group's pool
                (the ones :meth:`compose` can give to that group's machines); when ``None``,
                unattached GPUs in any pool.
        """
        gpus = [g for g in self.gpus() if not g.attached and g.healthy]
        if group is None:
            return gpus
        grp = self.group(group)
        return [g for g in gpus if g.group_id in (None, grp.grp_id)]

    def attached_gpus(self, machine: MachineRef) -> list[Gpu]:
        """GPUs attached to ``machine`` now."""
        m = self.machine(machine)
        return [g for g in self.gpus() if g.machine_id == m.mach_id]

    # ================================================================ owner tags and pools
    def set_owner_tag(self, device_names: Iterable[str], tag: str) -> None:
        """Write ``tag`` into each GPU's user description (``PUT device/udesc/gpu/{id}``)."""
        names = list(device_names)
        if not names:
            return
        for name, g in self._by_name(names).items():
            if g.owner_tag != tag:
                device_api.set_gpu_description(self._t, dev_id=g.dev_id, text=tag, device=name)

    def clear_owner_tag(self, device_names: Iterable[str], *, only_if: str | None = None) -> None:
        """Remove the user description of each GPU (only those tagged ``only_if`` when given)."""
        names = list(device_names)
        if not names:
            return
        for name, g in self._by_name(names, missing_ok=True).items():
            if g.owner_tag and (only_if is None or g.owner_tag == only_if):
                device_api.clear_gpu_description(self._t, dev_id=g.dev_id, device=name)

    def release_to_system_pool(self, device_names: Iterable[str]) -> list[str]:
        """Move unattached GPUs from their group pool back to the system free pool.

        GPUs attached to a machine, already in the system pool, or unknown are skipped.
        Returns the names moved.
        """
        names = list(device_names)
        if not names:
            return []
        statuses = {s.name: s for s in self.gpu_statuses()}
        groups = {g.grp_id: g for g in self.groups()}
        moved = []
        for name, g in self._by_name(names, missing_ok=True).items():
            if g.attached or g.group_id is None or g.group_id not in groups:
                continue
            predevice_api.remove_gpu_from_group(self._t, status=statuses[name], group=groups[g.group_id])
            moved.append(name)
        return moved

    def cancel_edit(self, machine: MachineRef) -> None:
        """Cancel the open fabric edit on ``machine`` (``POST fabric/edit/cancel``).

        For an operator clearing an edit left open by a crashed client.
        """
        fabric_api.cancel_edit(self._t, machine=self.machine(machine))

    # ================================================================ transactions
    def compose(self, machine: MachineRef, device_names: Sequence[str]) -> None:
        """Attach GPUs to a machine in one transaction; idempotent.

        GPUs already on the machine are left alone. GPUs in the system free pool are moved into
        the machine's group pool first. All or nothing: after a final failure, GPUs this call
        attached are detached again and pool moves undone (best effort; a note on the
        exception says what could not be undone).

        Args:
            machine: machine name, ``mach_id`` or :class:`Machine` record.
            device_names: GPUs to attach (``gpu0``...).

        Returns nothing: read the result back with :meth:`attached_gpus` when needed (the
        transaction reads only ``status/gpu`` and ``predevice``, not the GPU models, so the
        edit is opened as soon as possible).

        Raises:
            DirectorNotFoundError: unknown machine or GPU.
            DirectorConflictError: a GPU held by another machine or in another group's pool;
                an edit left open on the machine for longer than ``edit_wait``.
            DirectorServerError / DirectorTimeoutError / DirectorUnavailableError: still failing
                after ``retries`` attempts.
        """
        names = list(dict.fromkeys(device_names))
        m = self.machine(machine)
        grp = self.group(m.grp_id)
        already: set[str] | None = None  # on the machine before this call
        moved: list[str] = []  # moved from the system pool by this call

        def missing(gpus: dict[str, Placed]) -> list[str]:
            nonlocal already
            if already is None:
                already = {n for n, g in gpus.items() if g.machine_id == m.mach_id}
            todo = [n for n in names if gpus[n].machine_id != m.mach_id]
            for n in todo:
                g = gpus[n]
                if g.machine_id is not None:
                    raise DirectorConflictError(
                        f"GPU {n} is attached to machine {g.machine or g.machine_id}",
                        machine=m.mach_name,
                        device=n,
                    )
                if g.group_id not in (None, m.grp_id):
                    raise DirectorConflictError(
                        f"GPU {n} sits in the pool of group {g.group or g.group_id}, not {grp.group_name}",
                        machine=m.mach_name,
                        device=n,
                    )
            return todo

        def give_up(exc: DirectorError) -> None:
            self._undo_compose(m, names, already or set(), moved, exc)

        self._retry_transaction(
            "compose",
            m,
            names,
            missing,
            lambda todo, gpus: self._transaction(m, grp, attach=todo, gpus=gpus, moved=moved),
            give_up,
        )

    def decompose(self, machine: MachineRef, device_names: Sequence[str]) -> None:
        """Detach GPUs from a machine in one transaction; they stay in the group's free pool.

        GPUs not attached to this machine (already detached, or moved elsewhere) are skipped,
        so a repeat is harmless.

        Raises:
            DirectorNotFoundError: unknown machine or GPU.
            DirectorConflictError: an edit left open on the machine for longer than ``edit_wait``.
            DirectorServerError / DirectorTimeoutError / DirectorUnavailableError: still failing
                after ``retries`` attempts.
        """
        names = list(dict.fromkeys(device_names))
        m = self.machine(machine)
        grp = self.group(m.grp_id)
        self._retry_transaction(
            "decompose",
            m,
            names,
            lambda gpus: [n for n in names if gpus[n].machine_id == m.mach_id],
            lambda todo, gpus: self._transaction(m, grp, detach=todo, gpus=gpus),
        )

    # ================================================================ internals
    def _by_name(self, names: Iterable[str], *, missing_ok: bool = False) -> dict[str, Gpu]:
        wanted = list(dict.fromkeys(names))
        by_name = {g.name: g for g in self.gpus()}
        _check_known(wanted, by_name, missing_ok)
        return {n: by_name[n] for n in wanted if n in by_name}

    def _read_placed(self, names: Iterable[str]) -> dict[str, Placed]:
        """Where the named GPUs are: ``GET status/gpu`` and ``GET predevice`` (2 GETs; the
        models are not needed to change the fabric).

        Raises:
            DirectorNotFoundError: a name is not on the fabric.
        """
        wanted = list(dict.fromkeys(names))
        statuses = {s.name: s for s in self.gpu_statuses()}
        _check_known(wanted, statuses, False)
        pre = {p.name: p for p in self.predevices()}
        out = {}
        for n in wanted:
            p = pre.get(n)
            out[n] = Placed(
                n,
                statuses[n],
                group_id=p.grp_id if p else None,
                group=p.gname if p else None,
                machine_id=p.mach_id if p else None,
                machine=p.mname if p else None,
            )
        return out

    def _retry_transaction(
        self,
        what: str,
        m: Machine,
        names: Sequence[str],
        pending: Callable[[dict[str, Placed]], list[str]],
        run: Callable[[list[str], dict[str, Placed]], None],
        give_up: Callable[[DirectorError], None] | None = None,
    ) -> None:
        """Read state, run the transaction for what is still pending, repeat after transient failures.

        Never re-sends a step blindly: each attempt starts from a fresh read of the fabric.
        Returns once nothing is pending or a transaction succeeded (its reprogram is verified
        on the Director); calls ``give_up`` before re-raising a final failure.
        """
        attempt = 0
        while True:
            gpus = self._read_placed(names)
            todo = pending(gpus)
            if not todo:
                return
            try:
                run(todo, gpus)
                return
            except DirectorError as exc:
                attempt += 1
                if not (exc.transient and attempt <= self.retries):
                    if give_up is not None:
                        give_up(exc)
                    raise
                log.warning(
                    "%s on %s failed (%s); re-reading state, attempt %d of %d",
                    what,
                    m.mach_name,
                    exc,
                    attempt + 1,
                    self.retries + 1,
                )
                time.sleep(min(self.backoff_factor * (2 ** (attempt - 1)), 30.0))

    def _transaction(
        self,
        m: Machine,
        grp: Group,
        *,
        gpus: dict[str, Placed],
        attach: Sequence[str] = (),
        detach: Sequence[str] = (),
        moved: list[str] | None = None,
    ) -> None:
        """edit -> (pool moves) -> relate/unrelate each -> reprogram; cancel on any failure."""
        self._open_edit(m)
        try:
            for n in attach:
                if gpus[n].group_id is None:
                    self._move_into_group(gpus[n].status, grp)
                    if moved is not None:
                        moved.append(n)
            for n in attach:
                relate_api.attach_gpu(self._t, status=gpus[n].status, group=grp, machine=m)
            for n in detach:
                relate_api.detach_gpu(self._t, status=gpus[n].status, group=grp, machine=m)
            self._reprogram(m, attach=attach, detach=detach)
        except BaseException:
            self._cancel_quietly(m)
            raise

    def _open_edit(self, m: Machine) -> None:
        deadline = time.monotonic() + self.edit_wait
        while True:
            try:
                fabric_api.open_edit(self._t, machine=m)
                return
            except DirectorConflictError as exc:
                if time.monotonic() >= deadline:
                    raise DirectorConflictError(
                        f"a fabric edit is still open on machine {m.mach_name} after {self.edit_wait:g} s; "
                        "another client is changing it, or a crashed one left the edit open "
                        "(DirectorClient.cancel_edit clears it)",
                        method=exc.method,
                        path=exc.path,
                        status=exc.status,
                        director_message=exc.director_message,
                        machine=m.mach_name,
                    ) from exc
                time.sleep(self.poll_interval)

    def _move_into_group(self, status: DeviceStatus, grp: Group) -> None:
        try:
            predevice_api.add_gpu_to_group(self._t, status=status, group=grp)
        except DirectorError as exc:
            if not exc.transient:
                raise
            # The move may have happened before the answer was lost: check before going on.
            now = self._by_name([status.name])[status.name]
            if now.group_id != grp.grp_id:
                raise

    def _reprogram(self, m: Machine, *, attach: Sequence[str], detach: Sequence[str]) -> None:
        start = time.monotonic()
        devices = ",".join([*attach, *detach])
        try:
            fabric_api.reprogram(self._t, machine=m, timeout=self.reprogram_timeout, device=devices)
        except DirectorTimeoutError:
            # The hot-plug may still be running, or be done: read state; never re-send it.
            deadline = start + self.reprogram_timeout
            while True:
                if self._settled(m, attach, detach):
                    return
                if time.monotonic() >= deadline:
                    raise
                time.sleep(self.poll_interval)
        if not self._settled(m, attach, detach):
            raise DirectorServerError(
                "fabric/reprogram answered success but the fabric does not show the change",
                method="POST",
                path="fabric/reprogram",
                machine=m.mach_name,
                device=devices,
            )

    def _settled(self, m: Machine, attach: Sequence[str], detach: Sequence[str]) -> bool:
        """The machine holds every GPU of ``attach`` and none of ``detach`` (one small read:
        ``GET predevice?mach_id=``, the devices attached to that machine)."""
        held = {p.name for p in self.predevices(machine_id=m.mach_id) if p.mach_id == m.mach_id}
        return set(attach) <= held and not held & set(detach)

    def _cancel_quietly(self, m: Machine) -> None:
        try:
            fabric_api.cancel_edit(self._t, machine=m)
        except DirectorError as exc:
            log.warning("could not cancel the fabric edit on %s: %s", m.mach_name, exc)

    def _undo_compose(
        self, m: Machine, names: Sequence[str], already: set[str], moved: list[str], exc: DirectorError
    ) -> None:
        """Best-effort rollback after a final compose failure; notes what is left on ``exc``."""
        try:
            now = self._by_name(names, missing_ok=True)
            attached_here = [n for n, g in now.items() if g.machine_id == m.mach_id and n not in already]
            if attached_here:
                self.decompose(m, attached_here)
            if moved:
                self.release_to_system_pool(moved)
        except DirectorError as undo_exc:
            exc.add_note(
                f"rollback incomplete on machine {m.mach_name}: {undo_exc}; "
                f"GPUs possibly left attached or in group {m.grp_id}'s pool: {', '.join(names)}"
            )
