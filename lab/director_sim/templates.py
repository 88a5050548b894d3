"""Record rendering for the Director simulator (hardware stand-in), from the payload fixtures.

Every record the simulator returns starts as a copy of the matching record in
``tests/fixtures/director/*.json`` (transcribed from LIQID's SDK types, mock and integration
tests; each file cites its source) with the live values filled in. Filling a key the fixture
does not have is an error, so the simulator and the fixtures cannot drift apart.

Values follow the SDK's types (``liqidinc/liqidsdk-go`` ``liqidsdk/types_gen.go``): strings
where it has strings (``PreDevice.index`` and ``mach_id``, ``GPUDeviceInfo.dram_size`` and
``core_cnt``), and the string :data:`NA` where the Director has no value (``PreDevice.mach_id``,
``mname``, ``owner_id`` of a device in a group's free pool; an empty user description):
``liqidinc/liqidsdk-java`` ``PreDevice.java:136-156``, ``MockLiqidClient.java:265,1512``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from .state import FabricState, GpuRecord, GroupRecord, MachineRecord

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "director"

#: The Director's placeholder for an absent value.
NA = "n/a"


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


def device_status(
    state: FabricState, g: GpuRecord, machines: Mapping[int, MachineRecord] | None = None
) -> dict[str, Any]:
    """``status`` record of a GPU (LIQID DeviceStatus: the GPU status without ``unique``)."""
    rec = gpu_status(state, g, machines)
    tmpl = json.loads(_fixture_record("status.json", 1))
    return {k: rec[k] for k in tmpl}


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
    """``device/info/gpu`` record (LIQID GPUDeviceInfo); ``dram_size``: MiB as a decimal string
    (the unit is this simulator's assumption; the SDK only says it is a string)."""
    return _fill(
        "device_info_gpu.json",
        core_cnt=str(g.cores),
        dev_id=g.dev_id,
        device_state=g.state,
        dram_size=str(g.memory_mib),
        dram_type=g.dram_type,
        fabr_gid=g.fabr_gid,
        family=g.family,
        index=g.index,
        location={"rack": 0, "shelf": g.switch_index + 1, "node": g.port},
        model=g.model,
        name=g.name,
        pci_device=g.pci_device,
        serial_num=g.serial,
        udesc=g.udesc or NA,
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
        entry = {**tmpl, **h}
        entry["dev_type"] = str(entry["dev_type"]).lower()  # DeviceType "gpu" (enums_gen.go:122)
        entry["dtime"] = entry["dtime"] or 0  # int64, never null (types_gen.go:454)
        entry["udesc"] = entry["udesc"] or NA
        history.append(entry)
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
        index=str(g.index),
        mach_id=str(m.mach_id) if m else NA,
        mname=m.name if m else NA,
        name=g.name,
        owner_id=m.fabr_gid if m else NA,
        port_gid=g.port_gid,
        swit_gid=g.swit_gid,
    )


def group_gpu_relator(state: FabricState, g: GpuRecord, grp: GroupRecord) -> dict[str, Any]:
    """``{"deviceStatus", "group"}`` (LIQID GroupGPUDeviceRelator): the answer of ``predevice/gpu``."""
    return {"deviceStatus": gpu_status(state, g), "group": group(state, grp)}


def machine_gpu_relator(
    state: FabricState, g: GpuRecord, grp: GroupRecord, m: MachineRecord
) -> dict[str, Any]:
    """``{"groupDeviceRelator", "machine"}`` (LIQID MachineGPUDeviceRelator): the answer of ``relate/gpu``."""
    return {"groupDeviceRelator": group_gpu_relator(state, g, grp), "machine": machine(state, m)}


def coordinates() -> dict[str, Any]:
    """``coordinates`` record: the Director's default Liqid coordinates (all 0 in the lab)."""
    return _fill("coordinates.json")


def group_pool(state: FabricState, grp: GroupRecord) -> dict[str, Any]:
    """``pool/edit|done|cancel`` record (LIQID GroupPool)."""
    return _fill("pool_edit.json", coordinates=coordinates(), fabr_id=state.fabric_id, grp_id=grp.grp_id)


def digest(digest_id: int, key: str, label: str) -> dict[str, Any]:
    """``digest/{label}`` record."""
    return _fill("digest.json", digest_id=digest_id, digest_key=key, digest_label=label)


def udesc(text: str) -> dict[str, Any]:
    """``device/udesc`` record; an empty description reads ``n/a``."""
    return _fill("device_udesc_put.json", udesc=text or NA)
