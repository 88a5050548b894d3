"""Record rendering for the Director simulator (hardware stand-in), from the payload fixtures.

Every record the simulator returns starts as a copy of the matching record in
``tests/fixtures/director/*.json`` (the published shapes the client is tested against) with the
live values filled in. Filling a key the fixture does not have is an error, so the simulator
and the client fixtures cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from .state import FabricState, GpuRecord, GroupRecord, MachineRecord

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "director"


@cache
def _fixture_record(file: str, at: int = 0) -> str:
    """The fixture record as JSON text (decoding it is a fast deep copy)."""
    body = json.loads((FIXTURES / file).read_text(encoding="utf-8"))["body"]
    return json.dumps(body["response"]["data"][at])


def _fill(file: str, at: int = 0, /, **values: Any) -> dict[str, Any]:
    rec: dict[str, Any] = json.loads(_fixture_record(file, at))
    extra = set(values) - set(rec)
    if extra:
        raise KeyError(f"{file} has no field(s) {sorted(extra)}: update the fixture first")
    rec.update(values)
    return rec


def machines_by_id(state: FabricState) -> dict[int, MachineRecord]:
    """``mach_id`` -> machine, for rendering many records (one scan instead of one per GPU)."""
    return {m.mach_id: m for m in state.machines}


def _machine_of(
    state: FabricState, g: GpuRecord, machines: Mapping[int, MachineRecord] | None
) -> MachineRecord | None:
    if g.mach_id is None:
        return None
    if machines is not None:
        return machines.get(g.mach_id)
    return next((m for m in state.machines if m.mach_id == g.mach_id), None)


def gpu_status(
    state: FabricState, g: GpuRecord, machines: Mapping[int, MachineRecord] | None = None
) -> dict[str, Any]:
    """``status/gpu`` record (LIQID GPUDeviceStatus); ``machines``: :func:`machines_by_id`."""
    m = _machine_of(state, g, machines)
    owner = {"rack": 0, "shelf": 0, "node": m.index if m else 0}
    return _fill(
        "status_gpu.json",
        dev_id=g.dev_id,
        device_state=g.state,
        did=g.pci_device,
        fabr_gid=g.fabr_gid,
        fabr_id=state.fabric_id,
        index=g.index,
        name=g.name,
        location={"rack": 0, "shelf": g.switch_index + 1, "node": g.port},
        owner=owner,
        port_gid=g.port_gid,
        swit_gid=g.swit_gid,
        unique=f"GPU-{g.serial}",
    )


def cpu_status(state: FabricState, m: MachineRecord) -> dict[str, Any]:
    """``status`` record of a machine's compute device (LIQID ComputeDeviceStatus)."""
    return _fill(
        "status.json",
        0,
        dev_id=m.fabr_gid,
        fabr_gid=m.fabr_gid,
        fabr_id=state.fabric_id,
        index=m.index,
        name=m.comp_name,
        location={"rack": 0, "shelf": 0, "node": m.index},
        port_gid=m.port_gid,
        swit_gid=m.swit_gid,
        unique=f"CPU-{m.name}",
    )


def gpu_info(state: FabricState, g: GpuRecord) -> dict[str, Any]:
    """``device/info/gpu`` record (LIQID GPUDeviceInfo); ``dram_size`` in MiB."""
    return _fill(
        "device_info_gpu.json",
        core_cnt=g.cores,
        dev_id=g.dev_id,
        device_state=g.state,
        dram_size=g.memory_mib,
        dram_type=g.dram_type,
        fabr_gid=g.fabr_gid,
        family=g.family,
        index=g.index,
        location={"rack": 0, "shelf": g.switch_index + 1, "node": g.port},
        model=g.model,
        name=g.name,
        pci_device=g.pci_device,
        serial_num=g.serial,
        udesc=g.udesc,
        unique=f"GPU-{g.serial}",
        vendor=g.vendor,
    )


def group(state: FabricState, grp: GroupRecord) -> dict[str, Any]:
    """``group`` record."""
    return _fill("group.json", fabr_id=state.fabric_id, grp_id=grp.grp_id, group_name=grp.name)


def machine(state: FabricState, m: MachineRecord) -> dict[str, Any]:
    """``machine`` record with ``connection_history``."""
    tmpl = json.loads(_fixture_record("machine.json"))["connection_history"][0]
    history = []
    for h in m.history:
        extra = set(h) - set(tmpl)
        if extra:
            raise KeyError(f"machine.json connection_history has no field(s) {sorted(extra)}")
        history.append({**tmpl, **h})
    return _fill(
        "machine.json",
        comp_name=m.comp_name,
        connection_history=history,
        fabr_gid=m.fabr_gid,
        fabr_id=state.fabric_id,
        grp_id=m.grp_id,
        index=m.index,
        mach_id=m.mach_id,
        mach_name=m.name,
        mtime=m.mtime_ms,
        port_gid=m.port_gid,
        swit_gid=m.swit_gid,
    )


def machine_details(state: FabricState, m: MachineRecord) -> dict[str, Any]:
    """``machine/details/{id}`` record."""
    gpus = [g for g in state.gpus if g.mach_id == m.mach_id]
    return _fill(
        "machine_details.json",
        **{"gpu-count": len(gpus), "gpu-cores": sum(g.cores for g in gpus)},
        mach_id=m.mach_id,
        mach_name=m.name,
        created=m.mtime_ms,
        modified=m.mtime_ms,
    )


def predevice(
    state: FabricState, g: GpuRecord, machines: Mapping[int, MachineRecord] | None = None
) -> dict[str, Any]:
    """``predevice`` record of a group-assigned GPU; ``machines``: :func:`machines_by_id`."""
    grp = next(x for x in state.groups if x.grp_id == g.grp_id)
    m = _machine_of(state, g, machines)
    return _fill(
        "predevice.json",
        fabr_gid=g.fabr_gid,
        fabr_id=state.fabric_id,
        gname=grp.name,
        grp_id=grp.grp_id,
        index=g.index,
        mach_id=m.mach_id if m else None,
        mname=m.name if m else None,
        name=g.name,
        owner_id=m.fabr_gid if m else None,
        port_gid=g.port_gid,
        swit_gid=g.swit_gid,
    )


def group_gpu_relator(state: FabricState, g: GpuRecord, grp: GroupRecord) -> dict[str, Any]:
    """``{"deviceStatus", "group"}`` (LIQID GroupGPUDeviceRelator): the answer of pool and relate calls."""
    return {"deviceStatus": gpu_status(state, g), "group": group(state, grp)}


def digest(digest_id: int, key: str, label: str) -> dict[str, Any]:
    """``digest/{label}`` record."""
    return _fill("digest.json", digest_id=digest_id, digest_key=key, digest_label=label)


def udesc(text: str) -> dict[str, Any]:
    """``device/udesc`` record."""
    return _fill("device_udesc_put.json", udesc=text)
