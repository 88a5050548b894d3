"""The simulated fabric (hardware stand-in): groups, machines, GPUs, open edits; file-backed.

All mutations go through :class:`Fabric`, under one lock, and are written to the state file
(atomically: temp file + rename) so the simulator survives a restart. It refuses what LIQID's
own mock refuses, with its wording (``liqidinc/liqidsdk-java``
``liqidsdk/mock/com/liqid/sdk/mock/MockLiqidClient.java``: a second fabric edit, 1620-1625; a
relate or reprogram without an edit, 546-553; a second pool edit, 2740-2745; a pool move
without a pool edit, 515-523; a pool add of a device not in the system free pool, 846-851),
plus what a fabric must refuse: attaching a GPU another machine holds, pool moves of attached
devices.

Group pool moves are queued inside a pool edit and applied by ``pool/done`` (``MockLiqidClient``
``groupPoolDone``, 2688-2718); relations are queued inside a fabric edit and applied by
``fabric/reprogram``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from pydantic import BaseModel, Field

from .inventory import MODEL_CATALOGUE, Inventory

__all__ = [
    "HEALTHY_STATE",
    "EditRecord",
    "Fabric",
    "FabricState",
    "GpuRecord",
    "GroupRecord",
    "MachineRecord",
    "PoolEditRecord",
    "SimError",
]

#: The state of a working device, as LIQID's mock writes it (``MockLiqidClient.java:243``).
HEALTHY_STATE = "active | online"


def _hex(value: int) -> str:
    """Ids in LIQID's messages: ``0x%08x`` (``MockLiqidClient.java:1622``)."""
    return f"0x{value:08x}"


class SimError(Exception):
    """A refusal, rendered as the Director's error envelope.

    Args:
        status: error code in ``errors[0].code`` (HTTP-like: 404, 409, 500...).
        message: ``errors[0].message``.
        type_: ``errors[0].type``.
        http_status: HTTP status of the answer (default ``status``; 200 for the envelope-only
            failures the real Director sends).
        envelope_code: ``response.code`` (default ``status``).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "DirectorException",
        http_status: int | None = None,
        envelope_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.http_status = status if http_status is None else http_status
        self.envelope_code = status if envelope_code is None else envelope_code


class GpuRecord(BaseModel):
    """One GPU and where it is (``grp_id``/``mach_id`` ``None``: system free pool / unattached)."""

    name: str
    index: int
    dev_id: str
    fabr_gid: str
    swit_gid: str
    port_gid: str
    switch_index: int
    port: int
    vendor: str
    model: str
    memory_mib: int
    pci_device: str
    family: str
    dram_type: str
    cores: int
    serial: str
    state: str = HEALTHY_STATE
    grp_id: int | None = None
    mach_id: int | None = None
    udesc: str = ""


class GroupRecord(BaseModel):
    """A group."""

    grp_id: int
    name: str


class MachineRecord(BaseModel):
    """A machine (host) and its attach/detach history (``connection_history``)."""

    mach_id: int
    name: str
    grp_id: int
    index: int
    comp_name: str
    fabr_gid: str
    swit_gid: str
    port_gid: str
    mtime_ms: int
    history: list[dict[str, object]] = Field(default_factory=list)


class EditRecord(BaseModel):
    """An open fabric edit on one machine and its pending relations."""

    mach_id: int
    opened_by: str
    opened_at: float = Field(default_factory=time.time, description="wall clock, seconds since the epoch")
    changed_at: float | None = Field(
        default=None, description="wall clock of the last change the edit accepted (None: none yet)"
    )
    attach: list[str] = Field(default_factory=list)
    detach: list[str] = Field(default_factory=list)
    reprogramming: bool = False


class PoolEditRecord(BaseModel):
    """An open pool edit on one group and its queued moves (``pool/edit`` .. ``pool/done``)."""

    grp_id: int
    opened_by: str
    opened_at: float = Field(default_factory=time.time, description="wall clock, seconds since the epoch")
    changed_at: float | None = Field(
        default=None, description="wall clock of the last change the edit accepted (None: none yet)"
    )
    add: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)
    committing: bool = False


class FabricState(BaseModel):
    """Everything the state file holds."""

    fabric_id: int = 0
    groups: list[GroupRecord] = Field(default_factory=list)
    machines: list[MachineRecord] = Field(default_factory=list)
    gpus: list[GpuRecord] = Field(default_factory=list)
    edits: dict[int, EditRecord] = Field(default_factory=dict)
    pool_edits: dict[int, PoolEditRecord] = Field(default_factory=dict)

    @classmethod
    def from_inventory(cls, inv: Inventory) -> FabricState:
        """The start state an inventory describes."""
        switch_index = {s.name: i for i, s in enumerate(inv.switches)}
        groups = [GroupRecord(grp_id=i + 1, name=g.name) for i, g in enumerate(inv.groups)]
        gid = {g.name: g.grp_id for g in groups}
        now = int(time.time() * 1000)
        machines = []
        for i, m in enumerate(inv.machines):
            sw = switch_index[m.switch] if m.switch else 0
            machines.append(
                MachineRecord(
                    mach_id=i + 1,
                    name=m.name,
                    grp_id=gid[m.group],
                    index=i,
                    comp_name=f"pcpu{i}",
                    fabr_gid=f"0x{0x00010000 + i:08x}",
                    swit_gid=f"0x{0x00020000 + (sw << 8):08x}",
                    port_gid=f"0x{0x00020000 + (sw << 8) + 0x80 + i:08x}",
                    mtime_ms=now,
                )
            )
        mid = {m.name: m.mach_id for m in machines}
        ports: dict[int, int] = {}
        gpus = []
        for i, g in enumerate(inv.gpus):
            sw = switch_index[g.switch]
            ports[sw] = ports.get(sw, 0) + 1
            pci, family, mib, dram, cores = MODEL_CATALOGUE.get(
                g.model, ("0x0000", "unknown", 16384, "unknown", 0)
            )
            gpus.append(
                GpuRecord(
                    name=g.name,
                    index=i,
                    dev_id=f"0x{0x00000B00 + i:08x}",
                    fabr_gid=f"0x{0x00000B00 + i:08x}",
                    swit_gid=f"0x{0x00020000 + (sw << 8):08x}",
                    port_gid=f"0x{0x00020000 + (sw << 8) + ports[sw]:08x}",
                    switch_index=sw,
                    port=ports[sw],
                    vendor=g.vendor,
                    model=g.model,
                    memory_mib=g.memory_mib or mib,
                    pci_device=pci,
                    family=family,
                    dram_type=dram,
                    cores=cores,
                    serial=f"13210190{i:05d}",
                    state=g.state,
                    grp_id=gid[g.pool] if g.pool else None,
                    mach_id=mid[g.attached_to] if g.attached_to else None,
                )
            )
        return cls(fabric_id=inv.fabric_id, groups=groups, machines=machines, gpus=gpus)


class Fabric:
    """Thread-safe, file-backed simulated fabric.

    Args:
        inventory: the start state when no state file exists (and for :meth:`reset`).
        state_file: JSON file kept in step with every change; loaded at start when present.
        hotplug_latency: seconds a reprogram takes (sleep outside the lock).
    """

    def __init__(
        self, inventory: Inventory, *, state_file: str | Path | None = None, hotplug_latency: float = 0.0
    ) -> None:
        self.inventory = inventory
        self.state_file = Path(state_file) if state_file else None
        self.hotplug_latency = hotplug_latency
        self.lock = threading.RLock()
        if self.state_file and self.state_file.exists():
            self.state = FabricState.model_validate_json(self.state_file.read_text(encoding="utf-8"))
            for e in self.state.edits.values():  # a crash mid-reprogram leaves the edit open
                e.reprogramming = False
            for pe in self.state.pool_edits.values():
                pe.committing = False
        else:
            self.state = FabricState.from_inventory(inventory)
            self.save()

    # ----------------------------------------------------------------- persistence
    def save(self) -> None:
        """Write the state file (atomic replace). No-op without a state file."""
        if self.state_file is None:
            return
        with self.lock:
            data = self.state.model_dump_json(indent=1)
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(self.state_file.name + f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, self.state_file)

    def reset(self) -> None:
        """Back to the inventory's start state."""
        with self.lock:
            self.state = FabricState.from_inventory(self.inventory)
            self.save()

    def snapshot(self) -> dict[str, object]:
        """A JSON-ready copy of the whole state."""
        with self.lock:
            return json.loads(self.state.model_dump_json())

    # ----------------------------------------------------------------- lookups
    def group(self, *, grp_id: int | None = None, name: str | None = None) -> GroupRecord:
        """Raises SimError 404."""
        for g in self.state.groups:
            if g.grp_id == grp_id or (name is not None and g.name == name):
                return g
        raise SimError(
            404,
            f"Group {grp_id if grp_id is not None else name} does not exist",
            type_="EntityNotFoundException",
        )

    def machine(self, *, mach_id: int | None = None, name: str | None = None) -> MachineRecord:
        """Raises SimError 404."""
        for m in self.state.machines:
            if m.mach_id == mach_id or (name is not None and m.name == name):
                return m
        what = _hex(mach_id) if mach_id is not None else name
        raise SimError(404, f"Machine {what} does not exist", type_="LiqidException")

    def gpu(self, *, name: str | None = None, dev_id: str | None = None) -> GpuRecord:
        """Raises SimError 404."""
        for g in self.state.gpus:
            if (name is not None and g.name == name) or (
                dev_id is not None and g.dev_id.lower() == dev_id.lower()
            ):
                return g
        raise SimError(404, f"Device {name or dev_id} does not exist", type_="EntityNotFoundException")

    def pending_owner(self, device: str) -> int | None:
        """The machine whose open edit has ``device`` pending, if any."""
        for e in self.state.edits.values():
            if device in e.attach or device in e.detach:
                return e.mach_id
        return None

    # ----------------------------------------------------------------- groups and machines
    def create_group(self, name: str) -> GroupRecord:
        """``POST group``. Raises SimError 409 on a duplicate name."""
        with self.lock:
            if any(g.name == name for g in self.state.groups):
                raise SimError(409, f"Group {name} already exists", type_="LiqidException")
            g = GroupRecord(grp_id=max((x.grp_id for x in self.state.groups), default=0) + 1, name=name)
            self.state.groups.append(g)
            self.save()
            return g

    def create_machine(self, name: str, grp_id: int) -> MachineRecord:
        """``POST machine``. Raises SimError 404 (group) or 409 (duplicate)."""
        with self.lock:
            self.group(grp_id=grp_id)
            if any(m.name == name for m in self.state.machines):
                raise SimError(409, f"Machine {name} already exists", type_="LiqidException")
            i = max((m.mach_id for m in self.state.machines), default=0) + 1
            m = MachineRecord(
                mach_id=i,
                name=name,
                grp_id=grp_id,
                index=i - 1,
                comp_name=f"pcpu{i - 1}",
                fabr_gid=f"0x{0x00010000 + i - 1:08x}",
                swit_gid="0x00020000",
                port_gid=f"0x{0x00020080 + i - 1:08x}",
                mtime_ms=int(time.time() * 1000),
            )
            self.state.machines.append(m)
            self.save()
            return m

    # ----------------------------------------------------------------- pools
    def open_pool_edit(self, grp_id: int, *, opened_by: str) -> GroupRecord:
        """``POST pool/edit``. Raises SimError 409 when the group's pool is already being edited."""
        with self.lock:
            grp = self.group(grp_id=grp_id)
            if grp.grp_id in self.state.pool_edits:
                raise SimError(
                    409, f"Group {_hex(grp.grp_id)} is already being edited", type_="LiqidException"
                )
            self.state.pool_edits[grp.grp_id] = PoolEditRecord(grp_id=grp.grp_id, opened_by=opened_by)
            self.save()
            return grp

    def _pool_edit(self, grp: GroupRecord) -> PoolEditRecord:
        pe = self.state.pool_edits.get(grp.grp_id)
        if pe is None or pe.committing:
            raise SimError(
                409,
                f"Group {_hex(grp.grp_id)} is not in edit mode",
                type_="LiqidException",
                http_status=200,
                envelope_code=1,
            )
        return pe

    def add_to_group(self, device: str, grp_id: int) -> GpuRecord:
        """``POST predevice/gpu``: queue system free pool -> group pool (applied by ``pool/done``)."""
        with self.lock:
            g, grp = self.gpu(name=device), self.group(grp_id=grp_id)
            pe = self._pool_edit(grp)
            if device in pe.add:
                return g
            if g.grp_id is not None or g.mach_id is not None or self._queued_elsewhere(device, grp.grp_id):
                raise SimError(
                    409, f"Device {g.dev_id} is not in the system free pool", type_="LiqidException"
                )
            pe.add.append(device)
            pe.changed_at = time.time()
            self.save()
            return g

    def remove_from_group(self, device: str, grp_id: int) -> GpuRecord:
        """``DELETE predevice/gpu``: queue group pool -> system free pool (applied by ``pool/done``)."""
        with self.lock:
            g, grp = self.gpu(name=device), self.group(grp_id=grp_id)
            pe = self._pool_edit(grp)
            if device in pe.remove:
                return g
            if g.grp_id != grp.grp_id:
                raise SimError(409, f"Device {device} is not in group {grp.name}", type_="LiqidException")
            if g.mach_id is not None or self.pending_owner(device) is not None:
                raise SimError(409, f"Device {device} is attached to a machine", type_="LiqidException")
            pe.remove.append(device)
            pe.changed_at = time.time()
            self.save()
            return g

    def _queued_in_pool_edit(self, device: str) -> bool:
        return any(device in pe.add or device in pe.remove for pe in self.state.pool_edits.values())

    def _queued_elsewhere(self, device: str, grp_id: int) -> bool:
        return any(device in pe.add for gid, pe in self.state.pool_edits.items() if gid != grp_id)

    def begin_pool_done(self, grp_id: int) -> GroupRecord:
        """``POST pool/done``, first half: check the edit and mark it committing."""
        with self.lock:
            grp = self.group(grp_id=grp_id)
            pe = self._pool_edit(grp)
            pe.committing, pe.changed_at = True, time.time()
            self.save()
            return grp

    def finish_pool_done(self, grp_id: int, *, failed: bool = False) -> None:
        """``POST pool/done``, second half: apply the queued moves and close the edit (or, when
        ``failed``, leave the edit open with its moves, as a failed job would)."""
        with self.lock:
            pe = self.state.pool_edits.get(grp_id)
            if pe is None:
                return
            pe.committing, pe.changed_at = False, time.time()
            if not failed:
                for device in pe.remove:
                    self.gpu(name=device).grp_id = None
                for device in pe.add:
                    self.gpu(name=device).grp_id = grp_id
                del self.state.pool_edits[grp_id]
            self.save()

    def cancel_pool_edit(self, grp_id: int) -> GroupRecord:
        """``POST pool/cancel``: drop the queued moves and close the pool edit."""
        with self.lock:
            grp = self.group(grp_id=grp_id)
            pe = self.state.pool_edits.get(grp.grp_id)
            if pe is None:
                raise SimError(409, f"Group {_hex(grp.grp_id)} is not being edited", type_="LiqidException")
            if pe.committing:
                raise SimError(409, f"Group {_hex(grp.grp_id)} is being committed", type_="LiqidException")
            del self.state.pool_edits[grp.grp_id]
            self.save()
            return grp

    def set_udesc(self, dev_id: str, text: str) -> GpuRecord:
        """``PUT/DELETE device/udesc/gpu/{dev_id}``."""
        with self.lock:
            g = self.gpu(dev_id=dev_id)
            g.udesc = text
            self.save()
            return g

    # ----------------------------------------------------------------- fabric edit cycle
    def open_edit(self, mach_id: int, *, opened_by: str) -> MachineRecord:
        """``POST fabric/edit``. Raises SimError 409 when an edit is already open on the machine."""
        with self.lock:
            m = self.machine(mach_id=mach_id)
            if m.mach_id in self.state.edits:
                raise SimError(
                    409, f"Machine {_hex(m.mach_id)} is already being edited", type_="LiqidException"
                )
            self.state.edits[m.mach_id] = EditRecord(mach_id=m.mach_id, opened_by=opened_by)
            self.save()
            return m

    def cancel_edit(self, mach_id: int) -> MachineRecord:
        """``POST fabric/edit/cancel``: drop pending relations; no-op without an open edit."""
        with self.lock:
            m = self.machine(mach_id=mach_id)
            e = self.state.edits.get(m.mach_id)
            if e is not None and e.reprogramming:
                raise SimError(
                    409, f"Machine {_hex(m.mach_id)} is being reprogrammed", type_="LiqidException"
                )
            self.state.edits.pop(m.mach_id, None)
            self.save()
            return m

    def _edit(self, m: MachineRecord) -> EditRecord:
        e = self.state.edits.get(m.mach_id)
        if e is None or e.reprogramming:
            # The real Director answers HTTP 200 with a failing envelope here.
            raise SimError(
                409,
                f"Machine {_hex(m.mach_id)} is not in edit mode",
                type_="LiqidException",
                http_status=200,
                envelope_code=1,
            )
        return e

    def relate(self, mach_id: int, device: str, *, attach: bool) -> GpuRecord:
        """``POST/DELETE relate/gpu``: add a pending attach/detach to the machine's open edit."""
        with self.lock:
            m = self.machine(mach_id=mach_id)
            g = self.gpu(name=device)
            e = self._edit(m)
            pending = self.pending_owner(device)
            if attach:
                if g.mach_id == m.mach_id or device in e.attach:
                    return g
                if self._queued_in_pool_edit(device):
                    # This simulator's rule (LIQID's code does not show one): a device with a
                    # pool move pending may change group under the relation.
                    raise SimError(
                        409, f"Device {g.dev_id} has a pending group pool change", type_="LiqidException"
                    )
                if g.mach_id is not None:
                    holder = self.machine(mach_id=g.mach_id).name
                    raise SimError(
                        409, f"Device {device} is attached to machine {holder}", type_="LiqidException"
                    )
                if pending is not None and pending != m.mach_id:
                    raise SimError(
                        409, f"Device {device} is pending in another fabric edit", type_="LiqidException"
                    )
                if g.grp_id != m.grp_id:
                    raise SimError(
                        409,
                        f"Device {device} is not in the free pool of group "
                        f"{self.group(grp_id=m.grp_id).name}",
                        type_="LiqidException",
                    )
                e.attach.append(device)
                e.changed_at = time.time()
            else:
                if g.mach_id != m.mach_id:
                    raise SimError(
                        409,
                        f"Device {device} is not attached to machine {m.name}",
                        type_="LiqidException",
                    )
                if device not in e.detach:
                    e.detach.append(device)
                    e.changed_at = time.time()
            self.save()
            return g

    def reprogram(self, mach_id: int, *, fail_half: bool = False) -> MachineRecord:
        """``POST fabric/reprogram`` answered at once: :meth:`begin_reprogram`, the hot-plug
        latency, :meth:`finish_reprogram`.

        With ``fail_half`` only the first half of the pending relations is applied, the edit
        stays open with the rest, and SimError 500 is raised (a reprogram failing half way).
        """
        m = self.begin_reprogram(mach_id)
        if self.hotplug_latency > 0:
            time.sleep(self.hotplug_latency)
        self.finish_reprogram(m.mach_id, fail_half=fail_half)
        return m

    def begin_reprogram(self, mach_id: int) -> MachineRecord:
        """Check the machine's edit and mark it reprogramming (no relate or cancel meanwhile)."""
        with self.lock:
            m = self.machine(mach_id=mach_id)
            e = self._edit(m)
            e.reprogramming, e.changed_at = True, time.time()
            self.save()
            return m

    def finish_reprogram(self, mach_id: int, *, fail_half: bool = False, failed: bool = False) -> None:
        """Apply the pending relations and close the edit. ``failed``: apply nothing and leave
        the edit open (a failed reprogram job); ``fail_half``: see :meth:`reprogram`.

        Raises:
            SimError: 500 with ``fail_half``.
        """
        with self.lock:
            m = self.machine(mach_id=mach_id)
            e = self.state.edits.get(m.mach_id)
            if e is None:
                return
            ops = [(d, True) for d in e.attach] + [(d, False) for d in e.detach]
            applied = [] if failed else ops[: len(ops) // 2] if fail_half else ops
            for device, attach in applied:
                g = self.gpu(name=device)
                if attach:
                    g.mach_id = m.mach_id
                    self._record_attach(m, g)
                    e.attach.remove(device)
                else:
                    g.mach_id = None
                    self._record_detach(g)
                    e.detach.remove(device)
            e.reprogramming, e.changed_at = False, time.time()
            if fail_half or failed:
                self.save()
                if fail_half:
                    raise SimError(
                        500,
                        f"Reprogram of machine {m.name} failed after {len(applied)} of {len(ops)} device(s)",
                        type_="LiqidException",
                    )
                return
            del self.state.edits[m.mach_id]
            m.mtime_ms = int(time.time() * 1000)
            self.save()

    def cancel_reprogram(self, mach_id: int) -> MachineRecord:
        """``POST fabric/reprogram/cancel``: stop a reprogram in progress; its edit stays open
        with the pending relations. A no-op when none runs (the semantics are not published:
        LIQID's mock does not implement it, ``MockLiqidClient.java:1345-1356``)."""
        with self.lock:
            m = self.machine(mach_id=mach_id)
            e = self.state.edits.get(m.mach_id)
            if e is not None:
                e.reprogramming = False
                self.save()
            return m

    # ----------------------------------------------------------------- out of band (test control)
    def force_detach(self, device: str) -> GpuRecord:
        """Detach a GPU at once, outside any edit (someone pulled it out of band)."""
        with self.lock:
            g = self.gpu(name=device)
            g.mach_id = None
            self._record_detach(g)
            self.save()
            return g

    def force_attach(self, device: str, machine: str) -> GpuRecord:
        """Attach a GPU at once, outside any edit; it joins the machine's group."""
        with self.lock:
            g, m = self.gpu(name=device), self.machine(name=machine)
            g.grp_id, g.mach_id = m.grp_id, m.mach_id
            self._record_attach(m, g)
            self.save()
            return g

    def _record_attach(self, m: MachineRecord, g: GpuRecord) -> None:
        m.history.append(
            {
                "atime": int(time.time() * 1000),
                "dev_type": "gpu",
                "dtime": None,
                "fabr_gid": g.fabr_gid,
                "free": False,
                "name": g.name,
                "owner_gid": m.fabr_gid,
                "udesc": g.udesc,
            }
        )

    def _record_detach(self, g: GpuRecord) -> None:
        for m in self.state.machines:
            for h in m.history:
                if h["name"] == g.name and h["dtime"] is None:
                    h["dtime"], h["free"] = int(time.time() * 1000), True

    def set_state(self, device: str, state: str) -> GpuRecord:
        """Set a GPU's ``device_state`` (:data:`HEALTHY_STATE`, or e.g. ``ERROR`` for a broken device)."""
        with self.lock:
            g = self.gpu(name=device)
            g.state = state
            self.save()
            return g
