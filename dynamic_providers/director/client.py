"""LIQID Director client: typed reads, and the compose / decompose transactions as single calls.

Example::

    with DirectorClient("http://127.0.0.1:18080", username="admin", password=pw) as director:
        free = director.free_gpus(group="gpu-pool")
        director.compose("blade-slot-1", [g.name for g in free[:2]])
        director.decompose("blade-slot-1", ["gpu0"])

LIQID's order (kubint ``AssignToGroupAction.java:56-80``, ``ReconfigureMachineAction.java:75-113``,
``RemoveFromGroupAction.java:61-85``; ``liqidsdk-java`` ``IntegrationTests.java:345-357``):

- compose: GPUs still in the system free pool first move into the machine's group pool in their
  own pool transaction, ``POST pool/edit`` -> ``POST predevice/gpu`` each -> ``POST pool/done``
  (``POST pool/cancel`` on failure; the body needs ``GET coordinates`` and ``GET fabric/id``);
  then the fabric transaction ``POST fabric/edit`` -> ``POST relate/gpu`` each ->
  ``POST fabric/reprogram`` (``POST fabric/edit/cancel`` on failure);
- decompose: ``POST fabric/edit`` -> ``DELETE relate/gpu`` each -> ``POST fabric/reprogram``;
- back to the system free pool: ``POST pool/edit`` -> ``DELETE predevice/gpu`` each -> ``POST pool/done``.

Any call may answer HTTP 202: the transport polls the job to its end before the next step, and a
job still running when the wait ends (:class:`DirectorJobRunningError`) stops the transaction
without a cancel, since an edit must not be cancelled while a job runs.

Retry policy: urllib3 retries GETs on 5xx and any call on connection errors raised before the
request left. A step that may have reached the Director (POST/PUT/DELETE) is never re-sent
blindly: after a transient failure the whole transaction is cancelled, the fabric state is read
again, and only what is still missing is attempted, up to ``retries`` times. A reprogram whose
answer timed out is followed by reading state, not by a second reprogram.

Concurrency: a group's pool takes one edit at a time (``pool/edit`` is refused while another is
open), and every machine of a group shares it. Clients of one process (the composer runs one per
worker thread) take turns through a lock per Director and group (:func:`group_pool_lock`), so
they never collide on the Director; an edit another process left open is waited for with short
polls growing to ``poll_interval`` (:func:`_waits`), up to ``edit_wait``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Unpack

from domain.reclaim import reads_as_no_description

from ._transport import Transport, TransportOptions
from .api import device as device_api
from .api import fabric as fabric_api
from .api import group as group_api
from .api import machine as machine_api
from .api import pool as pool_api
from .api import predevice as predevice_api
from .api import relate as relate_api
from .api import status as status_api
from .errors import (
    DirectorConflictError,
    DirectorError,
    DirectorJobFailedError,
    DirectorJobRunningError,
    DirectorNotFoundError,
    DirectorServerError,
    DirectorTimeoutError,
    DirectorUnavailableError,
    name_list,
)
from .known import shared_statuses
from .models import (
    DeviceStatus,
    Gpu,
    GpuInfo,
    Group,
    GroupPool,
    Machine,
    MachineDetails,
    PreDevice,
    gfd_product_name,
)
from .planning import natural_key

_EDIT_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_EDIT_LOCKS_GUARD = threading.Lock()
#: First pause before asking again for an edit another client holds, seconds.
FIRST_EDIT_POLL_SECONDS = 0.02


def edit_lock(director: str, key: str) -> threading.Lock:
    """The process-wide lock of one edit on one Director (``director``: its base URL; ``key``:
    ``"machine:<mach_id>"`` or ``"group:<grp_id>"``): held from the opening (``fabric/edit``,
    ``pool/edit``) to its end (``fabric/reprogram``, ``pool/done``, or the cancel), and by
    :meth:`DirectorClient.cancel_edits_left_open` while it cancels one, so that it never cancels
    an edit a transaction of this process has just opened."""
    with _EDIT_LOCKS_GUARD:
        return _EDIT_LOCKS.setdefault((director, key), threading.Lock())


def group_pool_lock(director: str, grp_id: int) -> threading.Lock:
    """The process-wide lock of one group's pool on one Director (:func:`edit_lock` of
    ``"group:<grp_id>"``): held from ``pool/edit`` to ``pool/done`` (or ``pool/cancel``)."""
    return edit_lock(director, f"group:{grp_id}")


#: Edits this process may have left open, (Director URL, ``"machine:<id>"`` / ``"group:<id>"``)
#: -> ``time.monotonic()`` when their opening call lost its answer (timeout, connection reset),
#: or when a transaction left its edit open (a step's job still running, a cancel without an
#: answer: ``DirectorClient._left_after_failure``): the Director may hold the edit open and may
#: still run a job for it (an HTTP 202 answer that never arrived, or one whose end was not seen:
#: :data:`_LEFT_JOBS`), so nothing is sent about it until the longest job wait (``job_timeout``)
#: has passed since and a poll shows its recorded job ended; then the next opening cancels
#: it first, or, for one no opening comes to,
#: :meth:`DirectorClient.cancel_edits_left_open` (the composer's leader calls it every few seconds).
_LEFT_OPEN: dict[tuple[str, str], float] = {}
#: Of :data:`_LEFT_OPEN`, the link of a job (HTTP 202) of the edit whose end this process did not
#: see (still running after the wait, or its poll failed): the edit is cancelled only once a poll
#: of it shows the job ended, so a job running longer than ``job_timeout`` is still waited for.
_LEFT_JOBS: dict[tuple[str, str], str] = {}
#: Those of :data:`_LEFT_OPEN` handed over by another process: most were closed before it stopped,
#: so an opening is tried first and the wait-and-cancel applies only when the Director refuses it.
_INHERITED: set[tuple[str, str]] = set()
_LEFT_OPEN_GUARD = threading.Lock()


def _left_open(
    director: str, key: str, *, mark: bool | None = None, job: str | None = None
) -> float | None:
    """When ``key`` on ``director`` became an edit this process may have left open (None: it
    is not one); ``mark`` True / False records it now / forgets it first. ``job``, with ``mark``
    True: the link of a job of the edit whose end was not seen (:data:`_LEFT_JOBS`; one recorded
    before is kept when None)."""
    with _LEFT_OPEN_GUARD:
        if mark is True:
            _LEFT_OPEN[(director, key)] = time.monotonic()
            _INHERITED.discard((director, key))  # this process's own lost answer from now on
            if job is not None:
                _LEFT_JOBS[(director, key)] = job
        elif mark is False:
            _LEFT_OPEN.pop((director, key), None)
            _LEFT_JOBS.pop((director, key), None)
            _INHERITED.discard((director, key))
        return _LEFT_OPEN.get((director, key))


#: Edits this process is opening or holding open now, (Director URL, key) -> ``time.monotonic()``
#: of the opening: a process that dies (SIGKILL, a lost Lease) in the middle leaves them open.
_EDITING: dict[tuple[str, str], float] = {}
#: Of :data:`_EDITING`, the link of the job (HTTP 202) the edit's transaction is waiting for.
_EDITING_JOBS: dict[tuple[str, str], str] = {}
#: The edit (Director URL, key) the current thread's transaction holds, if any.
_CURRENT = threading.local()


@contextmanager
def _editing(director: str, key: str) -> Iterator[None]:
    """Record ``key`` as an edit this process is opening or holding open while the block runs."""
    with _LEFT_OPEN_GUARD:
        _EDITING[(director, key)] = time.monotonic()
    _CURRENT.edit = (director, key)
    try:
        yield
    finally:
        _CURRENT.edit = None
        with _LEFT_OPEN_GUARD:
            _EDITING.pop((director, key), None)
            _EDITING_JOBS.pop((director, key), None)


def _note_job(href: str, ended: bool) -> None:
    """The transport's ``on_job``: the job a call of the current thread's edit waits for
    (``ended`` False), or its end (True)."""
    edit = getattr(_CURRENT, "edit", None)
    if edit is None:
        return
    with _LEFT_OPEN_GUARD:
        if not ended:
            _EDITING_JOBS[edit] = href
        elif _EDITING_JOBS.get(edit) == href:
            del _EDITING_JOBS[edit]


def edit_jobs_left_open(director: str) -> dict[str, str]:
    """Of :func:`edits_left_open`, the jobs whose end this process has not seen: ``{key: job
    link}``. A process that takes over waits for each to end before cancelling its edit."""
    director = director.rstrip("/")
    with _LEFT_OPEN_GUARD:
        jobs = {key: job for (url, key), job in _EDITING_JOBS.items() if url == director}
        jobs.update({key: job for (url, key), job in _LEFT_JOBS.items() if url == director})
        return jobs


def edits_left_open(director: str) -> dict[str, float]:
    """The edits this process may have left open on ``director`` (its base URL) were it to stop now,
    for a process that takes over from this one: those whose opening lost its answer and those it
    is opening or holding open, ``{"machine:<mach_id>" | "group:<grp_id>": epoch seconds of the
    opening}`` (wall clock, since the monotonic clock is this process's own)."""
    director = director.rstrip("/")
    offset = time.time() - time.monotonic()
    with _LEFT_OPEN_GUARD:
        edits = {key: at for (url, key), at in _EDITING.items() if url == director}
        edits.update({key: at for (url, key), at in _LEFT_OPEN.items() if url == director})
        return {key: round(at + offset, 3) for key, at in edits.items()}


def inherit_edits_left_open(
    director: str, edits: Mapping[str, float], jobs: Mapping[str, str] | None = None
) -> None:
    """Record ``edits`` (:func:`edits_left_open` of a process that stopped, e.g. the previous leader)
    as edits this process may have left open on ``director``: its next opening of each waits until
    ``job_timeout`` has passed since the lost answer, and until a poll shows the edit's job in
    ``jobs`` (:func:`edit_jobs_left_open` of that process) ended, then cancels it. Times are wall
    clock, so a clock difference between the two processes' hosts shifts the wait by as much.
    Keys already recorded keep their own time and job."""
    director = director.rstrip("/")
    offset = time.time() - time.monotonic()
    with _LEFT_OPEN_GUARD:
        for key, at in edits.items():
            if (director, key) not in _LEFT_OPEN:
                _LEFT_OPEN[(director, key)] = float(at) - offset
                _INHERITED.add((director, key))
                if jobs and key in jobs:
                    _LEFT_JOBS[(director, key)] = jobs[key]


def _may_be_open(cancel_error: DirectorError | None) -> bool:
    """Whether an edit may still be open after a cancel that ended with ``cancel_error`` (None:
    it was cancelled): only when the cancel got no answer or a server error (``transient``); a
    refusal (4xx) is the Director saying it has no such edit open."""
    return cancel_error is not None and cancel_error.transient


def _waits(first: float, most: float) -> Iterable[float]:
    """Pauses between polls: ``first`` doubling up to ``most`` seconds, then ``most`` forever."""
    pause = min(first, most)
    while True:
        yield pause
        pause = min(most, pause * 2)

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
            f"no such GPU on the fabric: {name_list(unknown)}", device=",".join(unknown)
        )


GroupRef = str | int | Group


class DirectorClient:
    """A connection to one LIQID Director (or its lab stand-in).

    Args:
        base_url: ``http(s)://host:port`` of the Director; ``/liqid/api/v2`` is appended.
        username / password: Director credentials.
        reprogram_timeout: longest wait for a hot-plug (``fabric/reprogram``), seconds; default
            600, the Kubernetes device-attach KEP 5007 default.
        edit_wait: how long to wait for another client's open fabric edit on the same machine
            (or pool edit on the same group) to close before giving up with
            :class:`DirectorConflictError`, seconds.
        poll_interval: pause between state polls, seconds.
        reuse_statuses_seconds: a compose may take the ``status/gpu`` records of its GPUs from
            the whole list another client of this process read at most this many seconds ago
            (:mod:`.known`), instead of reading every GPU's record again; ``0`` (default): it
            reads them. Where each GPU is always comes from a fresh ``predevice`` read, and a
            failed transaction drops the shared list, so its retry reads the Director.
        transport: :class:`~._transport.TransportOptions`: ``timeout``, ``retries``,
            ``backoff_factor``, ``use_digest``, ``digest_label``, ``verify_tls``,
            ``job_poll_interval``, ``job_timeout``. ``retries`` and ``backoff_factor`` also
            bound how often, and how far apart, a whole transaction is tried again after a
            transient failure.

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
        reprogram_timeout: float = 600.0,
        edit_wait: float = 30.0,
        poll_interval: float = 0.5,
        reuse_statuses_seconds: float = 0.0,
        **transport: Unpack[TransportOptions],
    ) -> None:
        self._director = base_url.rstrip("/")
        self._statuses = shared_statuses(self._director)
        self.reuse_statuses_seconds = reuse_statuses_seconds
        self._t = Transport(base_url, username=username, password=password, **transport)
        self._t.on_job = _note_job
        self.retries = self._t.retries
        self._pool_place: tuple[object, int] | None = None  # (coordinates, fabric id), read once
        self.backoff_factor = self._t.backoff_factor
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

    def group(self, ref: GroupRef, *, among: Sequence[Group] | None = None) -> Group:
        """One group by name or id, from ``among`` (a ``GET group`` answer) when given.

        Raises:
            DirectorNotFoundError: no such group.
        """
        if isinstance(ref, Group):
            return ref
        groups = self.groups() if among is None else among
        for g in groups:
            if g.group_name == ref or g.grp_id == ref:
                return g
        known = name_list(g.group_name for g in groups)
        raise DirectorNotFoundError(
            f"no group {ref!r} on the Director (groups: {known})", method="GET", path="group"
        )

    def machines(self) -> list[Machine]:
        """All machines (``GET machine``)."""
        return machine_api.list_machines(self._t)

    def machine(self, ref: MachineRef) -> Machine:
        """One machine by name (the host / Kubernetes node name) or by ``mach_id``
        (``GET machine?mach_name=`` / ``?mach_id=``, ``LiqidClient.java:2555-2565``).

        Raises:
            DirectorNotFoundError: no such machine; the message lists the known ones.
        """
        if isinstance(ref, Machine):
            return ref
        by = {"mach_id": ref} if isinstance(ref, int) else {"mach_name": ref}
        for m in machine_api.list_machines(self._t, **by):  # type: ignore[arg-type]
            if m.mach_name == ref or m.mach_id == ref:
                return m
        known = name_list(sorted((m.mach_name for m in self.machines()), key=natural_key))
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

    def gpu_statuses(
        self, *, free_only: bool = False, names: Collection[str] | None = None
    ) -> list[DeviceStatus]:
        """GPU status records (``GET status/gpu``); ``free_only``: system free pool only;
        ``names``: only these GPUs' records (the others are not validated). A whole list is
        left for the process's other clients (see ``reuse_statuses_seconds``)."""
        records = status_api.list_gpus(self._t, free_only=free_only, names=names)
        if not free_only and names is None:
            self._statuses.put(records)
        return records

    def gpu_infos(self) -> list[GpuInfo]:
        """GPU vendor/model records (``GET device/info/gpu``)."""
        return device_api.list_gpu_info(self._t)

    def predevices(
        self,
        *,
        group_id: int | None = None,
        machine_id: int | None = None,
        groups: Sequence[Group] | None = None,
    ) -> list[PreDevice]:
        """Group-assigned GPUs: ``GET predevice?dev_type=gpu&grp_id=`` for one group, or for every
        group (of ``groups``, a ``GET group`` answer, else ``GET group`` first) when ``group_id``
        is ``None``; ``machine_id`` narrows to one machine's."""
        if group_id is not None:
            group_ids = [group_id]
        else:
            group_ids = [g.grp_id for g in (self.groups() if groups is None else groups)]
        out: list[PreDevice] = []
        for gid in group_ids:
            out += predevice_api.list_predevices(self._t, grp_id=gid, mach_id=machine_id)
        return out

    def gpus(self) -> list[Gpu]:
        """Every GPU with model, vendor, switch, state and where it is, in name order
        (``GET status/gpu``, ``GET device/info/gpu``, ``GET group``, one ``GET predevice`` per group)."""
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
                    owner_tag=info.udesc if info else None,
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
        """Write ``tag`` into each GPU's user description (``PUT device/udesc/gpu/{id}``).

        Raises:
            ValueError: an empty tag or ``n/a`` (the Director's "no description").
        """
        if reads_as_no_description(tag):
            raise ValueError(f"owner tag {tag!r} reads as no description on the Director")
        names = list(device_names)
        if not names:
            return
        for name, g in self._by_name(names).items():
            if g.owner_tag != tag:
                device_api.set_gpu_description(self._t, dev_id=g.dev_id, text=tag, device=name)

    def clear_owner_tag(self, device_names: Iterable[str], *,
                        only_if: str | Collection[str] | None = None) -> None:
        """Remove the user description of each GPU (only those tagged ``only_if``, one tag or
        any of several, when given)."""
        names = list(device_names)
        if not names:
            return
        accepted = {only_if} if isinstance(only_if, str) else set(only_if or ())
        for name, g in self._by_name(names, missing_ok=True).items():
            if g.owner_tag and (only_if is None or g.owner_tag in accepted):
                device_api.clear_gpu_description(self._t, dev_id=g.dev_id, device=name)

    def release_to_system_pool(self, device_names: Iterable[str]) -> list[str]:
        """Move unattached GPUs from their group pool back to the system free pool.

        One pool transaction per group (``pool/edit`` -> ``DELETE predevice/gpu`` each ->
        ``pool/done``; ``RemoveFromGroupAction.java:61-69``). GPUs attached to a machine, already
        in the system pool, or unknown are skipped. Returns the names moved.
        """
        names = list(device_names)
        if not names:
            return []
        placed = self._read_placed(names, missing_ok=True)
        groups = {g.grp_id: g for g in self.groups()}
        by_group: dict[int, list[str]] = {}
        for name, g in placed.items():
            if g.machine_id is None and g.group_id is not None and g.group_id in groups:
                by_group.setdefault(g.group_id, []).append(name)
        moved = []
        for gid, group_names in by_group.items():
            self._pool_transaction(groups[gid], placed, remove=group_names)
            moved += group_names
        return sorted(moved, key=natural_key)

    def cancel_edit(self, machine: MachineRef) -> None:
        """Cancel the open fabric edit on ``machine`` (``POST fabric/edit/cancel``).

        For an operator clearing an edit left open by a crashed client.
        """
        fabric_api.cancel_edit(self._t, machine=self.machine(machine))

    def cancel_pool_edit(self, group: GroupRef) -> None:
        """Cancel the open pool edit of ``group`` (``POST pool/cancel``).

        For an operator clearing a pool edit left open by a crashed client.
        """
        pool_api.cancel(self._t, pool=self._group_pool(self.group(group)))

    def cancel_edits_left_open(self) -> list[str]:
        """Cancel each edit this process may have left open on this Director (an opening that
        lost its answer, a step whose job's end was not seen, or one handed over by
        :func:`inherit_edits_left_open`) once ``job_timeout`` has passed since and a poll of its
        recorded job, if any, shows the job ended, and forget it; a later opening would do the
        same for its own machine or group, this does it for those no opening comes to.

        A key whose :func:`edit_lock` a transaction of this process holds is left for that
        transaction's opening (which cancels it first) or for a later call, and one recorded anew
        since it fell due is left too: neither may cancel an edit this process opened since.

        Returns:
            The keys (``machine:<id>`` / ``group:<id>``) dealt with: cancelled, or refused because
            the Director had no such edit open (logged).

        Raises:
            DirectorError: reading the machine or group failed (the key is kept for the next call).
        """
        now = time.monotonic()
        with _LEFT_OPEN_GUARD:
            due = sorted((key, at) for (url, key), at in _LEFT_OPEN.items()
                         if url == self._director and at + self._t.job_timeout <= now)
        done = []
        for key, at in due:
            lock = edit_lock(self._director, key)
            if not lock.acquire(blocking=False):
                continue
            try:
                if _left_open(self._director, key) != at or self._job_still_runs(key):
                    continue
                kind, _, ident = key.partition(":")
                if kind == "machine":
                    err = self._cancel_quietly(self.machine(int(ident)))
                else:
                    grp = self.group(int(ident))
                    err = self._cancel_pool_quietly(self._group_pool(grp), grp)
                if _may_be_open(err):
                    continue  # no answer: kept for the next call
                _left_open(self._director, key, mark=False)
            finally:
                lock.release()
            done.append(key)
        return done

    # ================================================================ transactions
    def compose(
        self,
        machine: MachineRef,
        device_names: Sequence[str],
        *,
        owner_tag: str | None = None,
        before_change: Callable[[], object] | None = None,
    ) -> None:
        """Attach GPUs to a machine in one transaction; idempotent.

        GPUs already on the machine are left alone. GPUs in the system free pool are moved into
        the machine's group pool first, in a pool transaction of their own; then one fabric
        transaction attaches them all (see the module docstring). All or nothing: after a final
        failure, GPUs this call attached are detached again and pool moves undone (best effort;
        a note on the exception says what could not be undone), except while a job still runs.

        The pool move is what keeps two clients from taking the same free GPU: a second move of a
        GPU already out of the system free pool is refused, as LIQID's mock Director refuses it
        (``liqidsdk-java`` ``MockLiqidClient.java:846-851``, "is not in the system free pool"; the
        mock calls itself "not an exact mock"), while no published LIQID code shows a real
        Director's answer.

        Args:
            machine: machine name, ``mach_id`` or :class:`Machine` record.
            device_names: GPUs to attach (``gpu0``...).
            owner_tag: when given, written into each GPU's user description once the GPU is in
                the machine's group pool and before the fabric edit (``PUT
                device/udesc/gpu/{id}``, skipped for a GPU that carries it already), so the tag
                is the durable record of who attached it; a GPU carrying another tag is refused
                with nothing changed. ``GET
                device/info/gpu/{name}`` reads the tag of each GPU to attach, before the pool move
                (one small read per GPU, not the whole fabric's).
            before_change: called once, after the reads and before the first request that
                changes anything on the Director (the owner tag, the pool move, the fabric
                edit), and not at all when nothing is left to attach. A caller that must record
                its intent durably before the fabric changes starts that write, passes a wait
                for it here, and so overlaps the write with the reads. Whatever it raises stops
                the compose with nothing changed and propagates unchanged.

        Returns nothing: read the result back with :meth:`attached_gpus` when needed (the
        transaction reads only ``status/gpu`` and ``predevice``, not the GPU models, so the
        edit is opened as soon as possible).

        Raises:
            DirectorNotFoundError: unknown machine or GPU.
            DirectorConflictError: a GPU held by another machine or in another group's pool,
                or carrying another owner tag; an edit left open on the machine for longer
                than ``edit_wait``.
            DirectorServerError / DirectorTimeoutError / DirectorUnavailableError: still failing
                after ``retries`` attempts.
            DirectorJobFailedError: a job (HTTP 202) of the last attempt failed.
            DirectorJobRunningError: a job still runs after ``job_timeout``; nothing was
                cancelled or undone.
        """
        names = list(dict.fromkeys(device_names))
        m = self.machine(machine)
        groups = self.groups()
        grp = self.group(m.grp_id, among=groups)
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

        first_change = before_change  # called once, before the first attempt's first change

        def run(todo: list[str], gpus: dict[str, Placed]) -> None:
            nonlocal first_change
            untagged = self._untagged(m, todo, owner_tag) if owner_tag is not None else []
            if first_change is not None:  # after the reads: a caller's write overlaps them
                first_change()
                first_change = None
            from_system = [n for n in todo if gpus[n].group_id is None]
            if from_system:
                # The pool move is the claim between clients sharing the system free pool: a GPU
                # joins one group's pool only, a second move of it is refused. The owner tag is
                # written after it: reading "no tag" and then writing one is not atomic, so two
                # clients tagging the same free GPU at once would both succeed, and the loser's
                # tag would stay on the winner's GPU.
                self._pool_transaction(grp, gpus, add=from_system)
                moved.extend(from_system)
            if owner_tag is not None:
                self._tag(untagged, gpus, owner_tag)
            self._transaction(m, grp, attach=todo, gpus=gpus)

        self._retry_transaction(
            "compose", m, names, missing, run, give_up, groups=groups, reuse=self.reuse_statuses_seconds
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
    def _untagged(self, m: Machine, names: Sequence[str], tag: str) -> list[str]:
        """The GPUs of ``names`` carrying no owner tag yet (one ``GET device/info/gpu/{name}``
        each); refuse, with nothing changed, one carrying another tag."""
        if reads_as_no_description(tag):
            raise ValueError(f"owner tag {tag!r} reads as no description on the Director")
        out = []
        for n in names:
            have = device_api.gpu_info(self._t, n).udesc
            if reads_as_no_description(have):
                out.append(n)
            elif have != tag:
                raise DirectorConflictError(
                    f"GPU {n} carries the owner tag {have!r}, not {tag!r}", machine=m.mach_name, device=n
                )
        return out

    def _tag(self, names: Sequence[str], gpus: Mapping[str, Placed], tag: str) -> None:
        """Write ``tag`` on the GPUs ``names`` (in the machine's group pool by then)."""
        for n in names:
            device_api.set_gpu_description(self._t, dev_id=gpus[n].status.dev_id, text=tag, device=n)

    def _by_name(self, names: Iterable[str], *, missing_ok: bool = False) -> dict[str, Gpu]:
        wanted = list(dict.fromkeys(names))
        by_name = {g.name: g for g in self.gpus()}
        _check_known(wanted, by_name, missing_ok)
        return {n: by_name[n] for n in wanted if n in by_name}

    def _read_placed(
        self,
        names: Iterable[str],
        *,
        missing_ok: bool = False,
        groups: Sequence[Group] | None = None,
        reuse: float = 0.0,
    ) -> dict[str, Placed]:
        """Where the named GPUs are: ``GET status/gpu`` and the groups' ``GET predevice`` (the
        models are not needed to change the fabric). ``groups``: the ``GET group`` answer to
        use; ``reuse``: take the status records from a whole list read at most this many
        seconds ago by a client of this process, when it has them all (``predevice`` is read
        anyway).

        Raises:
            DirectorNotFoundError: a name is not on the fabric (unless ``missing_ok``).
        """
        wanted = list(dict.fromkeys(names))
        statuses = self._statuses.get(wanted, max_age=reuse)
        if statuses is None:
            statuses = {s.name: s for s in self.gpu_statuses(names=wanted)}
        _check_known(wanted, statuses, missing_ok)
        pre = {p.name: p for p in self.predevices(groups=groups)}
        out = {}
        for n in wanted:
            if n not in statuses:
                continue
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
        *,
        groups: Sequence[Group] | None = None,
        reuse: float = 0.0,
    ) -> None:
        """Read state, run the transaction for what is still pending, repeat after transient failures.

        Never re-sends a step blindly: each attempt starts from a fresh read of the fabric (the
        first may take the status records from the shared list, ``reuse`` seconds old at most,
        and the group list from ``groups``; a failure drops the shared list). Returns once
        nothing is pending or a transaction succeeded (its reprogram is verified on the
        Director); calls ``give_up`` before re-raising a final failure.
        """
        attempt = 0
        while True:
            gpus = self._read_placed(names, groups=groups, reuse=reuse if attempt == 0 else 0.0)
            groups = None
            todo = pending(gpus)
            if not todo:
                return
            try:
                run(todo, gpus)
                return
            except DirectorError as exc:
                self._statuses.forget()
                attempt += 1
                # a job whose end was not seen may still apply the call: never re-sent over it
                if not (exc.transient and exc.job is None and attempt <= self.retries):
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
    ) -> None:
        """fabric/edit -> relate/unrelate each -> fabric/reprogram; fabric/edit/cancel on a
        failure, unless a job still runs (ReconfigureMachineAction.java:75-113). After a lost
        answer to ``fabric/edit`` itself (timeout, connection reset, a job still running) the
        Director may have opened the edit, and an edit left open refuses every later one on the
        machine: it is recorded
        (:func:`_left_open`) and cancelled by a later opening ``job_timeout`` later, once a poll
        shows its job (if one answered 202) ended. So is an edit this transaction opened and could
        not close (:meth:`_left_after_failure`)."""
        key = f"machine:{m.mach_id}"
        with edit_lock(self._director, key), _editing(self._director, key):
            self._open_edit(m)
            try:
                for n in attach:
                    relate_api.attach_gpu(self._t, status=gpus[n].status, group=grp, machine=m)
                for n in detach:
                    relate_api.detach_gpu(self._t, status=gpus[n].status, group=grp, machine=m)
                self._reprogram(m, attach=attach, detach=detach)
            except BaseException as exc:
                self._left_after_failure(key, lambda: self._cancel_quietly(m), exc,
                                         what=f"fabric edit of machine {m.mach_name}")
                raise

    def _left_after_failure(
        self, key: str, cancel: Callable[[], DirectorError | None], exc: BaseException, *, what: str
    ) -> None:
        """After step ``exc`` of an open edit ``key`` failed: cancel it now, unless a job of the
        step may still run (``exc.job``: DirectorJobRunningError, or a poll of the job failed;
        LIQID's SDK sends nothing while one runs). An edit left open that way, or whose cancel got
        no answer (:func:`_may_be_open`), is recorded as left open (:func:`_left_open`, with the
        job's link): the next opening of ``key`` or ``cancel_edits_left_open`` cancels it
        ``job_timeout`` from now and once a poll shows the job ended; unrecorded, it would refuse
        every later edit of the machine or group, to every client, for good."""
        job = exc.job if isinstance(exc, DirectorError) else None
        if job is not None:  # still running after the wait, or its poll failed
            log.warning("a job of the %s may still run (%s): the edit is left open, cancelled once "
                        "the job ended and %g s passed", what, job, self._t.job_timeout)
        elif _may_be_open(cancel()):
            log.warning("the %s may be left open: cancelled after %g s", what, self._t.job_timeout)
        else:
            return
        _left_open(self._director, key, mark=True, job=job)

    def _group_pool(self, grp: Group) -> GroupPool:
        """The ``GroupPool`` body of ``grp``: coordinates and fabric id are read once per client
        (LiqidClientBase.java:342-347 ``loadPresets``)."""
        if self._pool_place is None:
            self._pool_place = (pool_api.default_coordinates(self._t), pool_api.fabric_id(self._t))
        coords, fabric = self._pool_place
        return GroupPool(coordinates=coords, fabr_id=fabric, grp_id=grp.grp_id)  # type: ignore[arg-type]

    def _pool_transaction(
        self, grp: Group, gpus: Mapping[str, Placed], *, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> None:
        """pool/edit -> predevice/gpu POST (``add``) or DELETE (``remove``) each -> pool/done;
        pool/cancel on a failure, unless a job still runs (AssignToGroupAction.java:56-80); a lost
        answer to ``pool/edit`` itself, and an edit it could not close, are handled as in
        :meth:`_transaction`."""
        pool = self._group_pool(grp)
        key = f"group:{grp.grp_id}"
        with group_pool_lock(self._director, grp.grp_id), _editing(self._director, key):
            self._open_pool_edit(pool, grp)
            try:
                for n in add:
                    predevice_api.add_gpu_to_group(self._t, status=gpus[n].status, group=grp)
                for n in remove:
                    predevice_api.remove_gpu_from_group(self._t, status=gpus[n].status, group=grp)
                pool_api.done(self._t, pool=pool)
            except BaseException as exc:
                self._left_after_failure(key, lambda: self._cancel_pool_quietly(pool, grp), exc,
                                         what=f"pool edit of group {grp.group_name}")
                raise

    def _cancel_pool_quietly(self, pool: GroupPool, grp: Group) -> DirectorError | None:
        """``pool/cancel``; None when done, else the error (logged): the Director refused it, or
        did not answer (``transient``: the edit may still be open)."""
        try:
            pool_api.cancel(self._t, pool=pool)
        except DirectorError as exc:
            log.warning("could not cancel the pool edit of group %s: %s", grp.group_name, exc)
            return exc
        return None

    def _open_pool_edit(self, pool: GroupPool, grp: Group) -> None:
        self._open_when_free(
            lambda: pool_api.open_edit(self._t, pool=pool),
            busy=f"the pool of group {grp.group_name} is still being edited",
            clear="cancel_pool_edit",
            left_open=(f"group:{grp.grp_id}", lambda: self._cancel_pool_quietly(pool, grp)),
        )

    def _open_edit(self, m: Machine) -> None:
        self._open_when_free(
            lambda: fabric_api.open_edit(self._t, machine=m),
            busy=f"a fabric edit is still open on machine {m.mach_name}",
            clear="cancel_edit",
            machine=m.mach_name,
            left_open=(f"machine:{m.mach_id}", lambda: self._cancel_quietly(m)),
        )

    def _open_when_free(
        self,
        open_edit: Callable[[], object],
        *,
        busy: str,
        clear: str,
        machine: str | None = None,
        left_open: tuple[str, Callable[[], DirectorError | None]] | None = None,
    ) -> None:
        """Call ``open_edit()`` until the Director no longer answers that another edit is open,
        for at most ``edit_wait`` seconds (pauses from :data:`FIRST_EDIT_POLL_SECONDS` growing to
        ``poll_interval``).

        ``busy`` says what is still open (``"... after <edit_wait> s"`` follows it), ``clear``
        names the DirectorClient method that clears a left-over edit, ``machine`` goes on the error.
        ``left_open``: (key, cancel) of this edit, cleared first when this process may have left
        it open (:meth:`_clear_left_open`), and recorded as maybe left open when an opening loses
        its answer (timeout, connection reset) or its job outlasts the wait.

        Raises:
            DirectorConflictError: still refused after ``edit_wait`` seconds (the last refusal's
                method, path, status and Director message kept, and chained).
        """

        def attempt() -> None:
            try:
                open_edit()
            except DirectorJobFailedError:
                # the opening's job ended in FAILURE, the edit maybe open: no job of it runs any
                # more, so it is cancelled now (left open, it would refuse every later edit), or
                # recorded as left open when the cancel fails
                if left_open is not None and _may_be_open(left_open[1]()):
                    _left_open(self._director, left_open[0], mark=True)
                raise
            except DirectorError as exc:
                # The Director may hold the edit open with no transaction of this process left
                # to close it: the answer was lost (see _left_open), or the opening's job still
                # runs or could not be polled (exc.job; cancelled once a poll shows it ended).
                lost = exc.job is not None or isinstance(exc, DirectorUnavailableError)
                if left_open is not None and lost:
                    _left_open(self._director, left_open[0], mark=True, job=exc.job)
                raise

        if left_open is not None:
            if (self._director, left_open[0]) in _INHERITED:
                try:
                    attempt()
                except DirectorConflictError:
                    pass
                else:
                    _left_open(self._director, left_open[0], mark=False)
                    return
            self._clear_left_open(*left_open, busy=busy, machine=machine)
        deadline = time.monotonic() + self.edit_wait
        waits = _waits(FIRST_EDIT_POLL_SECONDS, self.poll_interval)
        while True:
            try:
                attempt()
                return
            except DirectorConflictError as exc:
                if exc.job is not None:
                    raise  # a refused poll of the opening's job, not a busy edit
                if time.monotonic() >= deadline:
                    raise DirectorConflictError(
                        f"{busy} after {self.edit_wait:g} s; "
                        "another client is changing it, or a crashed one left the edit open "
                        f"(DirectorClient.{clear} clears it)",
                        method=exc.method,
                        path=exc.path,
                        status=exc.status,
                        director_message=exc.director_message,
                        machine=machine,
                    ) from exc
                time.sleep(next(waits))

    def _clear_left_open(
        self, key: str, cancel: Callable[[], DirectorError | None], *, busy: str, machine: str | None
    ) -> None:
        """Before opening edit ``key``: if this process may have left it open (:func:`_left_open`),
        wait until no job of it can still run (``job_timeout`` after the lost answer; LIQID's SDK
        sends nothing while a job runs), then cancel it (an error, when the Director had not
        opened it, is logged) and forget it; a cancel without an answer keeps it recorded, for
        the sweep (``cancel_edits_left_open``) to try again.

        Raises:
            DirectorConflictError: that moment is more than ``edit_wait`` seconds away (nothing sent).
        """
        lost_at = _left_open(self._director, key)
        if lost_at is None:
            return
        wait = lost_at + self._t.job_timeout - time.monotonic()
        if wait > self.edit_wait:
            raise DirectorConflictError(
                f"{busy}, maybe by this client: it may have left the edit open "
                f"{time.monotonic() - lost_at:.0f} s ago (an answer or a cancel that did not come, or a "
                f"job still running), and a job of it may run for {self._t.job_timeout:g} s; "
                "it is cancelled after that",
                machine=machine,
            )
        if wait > 0:
            time.sleep(wait)
        if self._job_still_runs(key):
            raise DirectorConflictError(
                f"{busy}, maybe by this client: a job of it may still run "
                f"({_LEFT_JOBS.get((self._director, key))}); the edit is cancelled once it ended",
                machine=machine,
            )
        err = cancel()
        if err is None:
            log.info("cancelled the edit of %s left open (a lost answer, a job that outlasted the wait, "
                     "or a cancel without an answer)", key)
        if err is None or not err.transient:  # else kept: the sweep tries again
            _left_open(self._director, key, mark=False)

    def _job_still_runs(self, key: str) -> bool:
        """Whether the job recorded with left-open edit ``key`` (:data:`_LEFT_JOBS`) may still
        run: one poll of its link; True while ``Pending`` or when the poll fails (its end unknown),
        False when none is recorded or it ended (then it is forgotten)."""
        with _LEFT_OPEN_GUARD:
            job = _LEFT_JOBS.get((self._director, key))
        if job is None:
            return False
        try:
            ended = self._t.job_ended(job)
        except DirectorJobFailedError:
            ended = True
        except DirectorError as exc:
            log.warning("cannot tell whether the job %s of edit %s ended: %s", job, key, exc)
            return True
        if not ended:
            return True
        with _LEFT_OPEN_GUARD:
            if _LEFT_JOBS.get((self._director, key)) == job:
                del _LEFT_JOBS[(self._director, key)]
        return False

    def _reprogram(self, m: Machine, *, attach: Sequence[str], detach: Sequence[str]) -> None:
        start = time.monotonic()
        devices = ",".join([*attach, *detach])
        try:
            fabric_api.reprogram(self._t, machine=m, timeout=self.reprogram_timeout, device=devices)
        except DirectorJobRunningError:
            raise  # the hot-plug job still runs: the caller must not cancel or retry
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
        ``GET predevice?grp_id=&mach_id=``, the devices attached to that machine)."""
        held = {
            p.name for p in self.predevices(group_id=m.grp_id, machine_id=m.mach_id) if p.mach_id == m.mach_id
        }
        return set(attach) <= held and not held & set(detach)

    def _cancel_quietly(self, m: Machine) -> DirectorError | None:
        """``fabric/edit/cancel``; None when done, else the error (logged): the Director refused
        it, or did not answer (``transient``: the edit may still be open)."""
        try:
            fabric_api.cancel_edit(self._t, machine=m)
        except DirectorError as exc:
            log.warning("could not cancel the fabric edit on %s: %s", m.mach_name, exc)
            return exc
        return None

    def _undo_compose(
        self, m: Machine, names: Sequence[str], already: set[str], moved: list[str], exc: DirectorError
    ) -> None:
        """Best-effort rollback after a final compose failure; notes what is left on ``exc``.
        Nothing is undone while a job still runs (the Director is still applying the call)."""
        if exc.job is not None:
            exc.add_note(f"a job may still run on machine {m.mach_name} ({exc.job}); nothing was undone")
            return
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
