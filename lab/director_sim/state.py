"""The simulated fabric (hardware stand-in): groups, machines, GPUs, open edits; file-backed.

All mutations go through :class:`Fabric`, under one lock, and are written to the state file
(atomically: temp file + rename) so the simulator survives a restart. It refuses what the
real Director refuses (BRIEF.md; issue 3): attaching a GPU another machine holds, relate
without an open edit, a second edit on a machine, pool moves of attached devices.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from pydantic import BaseModel, Field

from .inventory import MODEL_CATALOGUE, Inventory

__all__ = ["EditRecord", "Fabric", "FabricState", "GpuRecord", "GroupRecord", "MachineRecord", "SimError"]


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
    state: str = "ON"
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
    attach: list[str] = Field(default_factory=list)
    detach: list[str] = Field(default_factory=list)
    reprogramming: bool = False


class FabricState(BaseModel):
    """Everything the state file holds."""

    fabric_id: int = 0
    groups: list[GroupRecord] = Field(default_factory=list)
    machines: list[MachineRecord] = Field(default_factory=list)
    gpus: list[GpuRecord] = Field(default_factory=list)
    edits: dict[int, EditRecord] = Field(default_factory=dict)

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
        raise SimError(
            404,
            f"Machine with id {mach_id if mach_id is not None else name} does not exist",
            type_="EntityNotFoundException",
        )

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
                raise SimError(409, f"Group {name} already exists", type_="DuplicateEntityException")
            g = GroupRecord(grp_id=max((x.grp_id for x in self.state.groups), default=0) + 1, name=name)
            self.state.groups.append(g)
            self.save()
            return g

    def create_machine(self, name: str, grp_id: int) -> MachineRecord:
        """``POST machine``. Raises SimError 404 (group) or 409 (duplicate)."""
        with self.lock:
            self.group(grp_id=grp_id)
            if any(m.name == name for m in self.state.machines):
                raise SimError(409, f"Machine {name} already exists", type_="DuplicateEntityException")
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
    def add_to_group(self, device: str, grp_id: int) -> GpuRecord:
        """``POST predevice/gpu``: system free pool -> group pool (idempotent for the same group)."""
        with self.lock:
            g, grp = self.gpu(name=device), self.group(grp_id=grp_id)
            if g.grp_id == grp.grp_id:
                return g
            if g.mach_id is not None:
                raise SimError(409, f"Device {device} is attached to a machine", type_="DeviceBusyException")
            if g.grp_id is not None:
                other = self.group(grp_id=g.grp_id).name
                raise SimError(409, f"Device {device} belongs to group {other}", type_="DeviceBusyException")
            g.grp_id = grp.grp_id
            self.save()
            return g

    def remove_from_group(self, device: str, grp_id: int) -> GpuRecord:
        """``DELETE predevice/gpu``: group pool -> system free pool."""
        with self.lock:
            g, grp = self.gpu(name=device), self.group(grp_id=grp_id)
            if g.grp_id != grp.grp_id:
                raise SimError(
                    409, f"Device {device} is not in group {grp.name}", type_="DeviceBusyException"
                )
            if g.mach_id is not None or self.pending_owner(device) is not None:
                raise SimError(409, f"Device {device} is attached to a machine", type_="DeviceBusyException")
            g.grp_id = None
            self.save()
            return g

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
                    409,
                    f"Fabric edit already open for machine {m.name} (mach_id {m.mach_id})",
                    type_="FabricEditException",
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
                raise SimError(409, f"Machine {m.name} is being reprogrammed", type_="FabricEditException")
            self.state.edits.pop(m.mach_id, None)
            self.save()
            return m

    def _edit(self, m: MachineRecord) -> EditRecord:
        e = self.state.edits.get(m.mach_id)
        if e is None or e.reprogramming:
            # The real Director answers HTTP 200 with a failing envelope here.
            raise SimError(
                409,
                f"Machine {m.name} is not in fabric edit mode",
                type_="FabricEditException",
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
                if g.mach_id is not None:
                    holder = self.machine(mach_id=g.mach_id).name
                    raise SimError(
                        409, f"Device {device} is attached to machine {holder}", type_="DeviceBusyException"
                    )
                if pending is not None and pending != m.mach_id:
                    raise SimError(
                        409, f"Device {device} is pending in another fabric edit", type_="DeviceBusyException"
                    )
                if g.grp_id != m.grp_id:
                    raise SimError(
                        409,
                        f"Device {device} is not in the free pool of group "
                        f"{self.group(grp_id=m.grp_id).name}",
                        type_="DeviceBusyException",
                    )
                e.attach.append(device)
            else:
                if g.mach_id != m.mach_id:
                    raise SimError(
                        409,
                        f"Device {device} is not attached to machine {m.name}",
                        type_="DeviceBusyException",
                    )
                if device not in e.detach:
                    e.detach.append(device)
            self.save()
            return g

    def reprogram(self, mach_id: int, *, fail_half: bool = False) -> MachineRecord:
        """``POST fabric/reprogram``: apply pending relations after the hot-plug latency, close the edit.

        With ``fail_half`` only the first half of the pending relations is applied, the edit
        stays open with the rest, and SimError 500 is raised (a reprogram failing half way).
        """
        with self.lock:
            m = self.machine(mach_id=mach_id)
            e = self._edit(m)
            e.reprogramming = True
            ops = [(d, True) for d in e.attach] + [(d, False) for d in e.detach]
            self.save()
        if self.hotplug_latency > 0:
            time.sleep(self.hotplug_latency)
        with self.lock:
            applied = ops[: len(ops) // 2] if fail_half else ops
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
            e.reprogramming = False
            if fail_half:
                self.save()
                raise SimError(
                    500,
                    f"Reprogram of machine {m.name} failed after {len(applied)} of {len(ops)} device(s)",
                    type_="FabricException",
                )
            del self.state.edits[m.mach_id]
            m.mtime_ms = int(time.time() * 1000)
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
                "dev_type": "GPU",
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
        """Set a GPU's ``device_state`` (``ON``, or e.g. ``ERROR`` for a broken device)."""
        with self.lock:
            g = self.gpu(name=device)
            g.state = state
            self.save()
            return g
