"""Inventory files for the Director simulator (hardware stand-in): what the fabric holds at start.

YAML shape (see ``lab/inventories/dev.yaml``)::

    fabric_id: 0
    switches: [{name: sw0}]                      # PCIe switches of the fabric
    groups: [{name: gpu-pool}]                   # groups (each with a free device pool)
    machines:                                    # one per bare-metal host
      - {name: blade-slot-1, group: gpu-pool}    # name == Kubernetes node name
    gpus:
      - {name: gpu0, model: Tesla T4, switch: sw0}          # in the system free pool
      - {name: gpu1, model: Tesla T4, switch: sw0, pool: gpu-pool, attached_to: blade-slot-1}

``model`` is the Director's model string with blanks (``Tesla T4``); clients derive the GFD
label (``Tesla-T4``). ``memory_mib`` defaults from :data:`MODEL_CATALOGUE`.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MODEL_CATALOGUE", "GpuSpec", "Inventory", "load_inventory"]

#: Director model string -> (PCI device id, family, memory MiB, memory type, cores). Public
#: product facts (NVIDIA data sheets); used to fill ``device/info/gpu`` records.
MODEL_CATALOGUE: dict[str, tuple[str, str, int, str, int]] = {
    "Tesla T4": ("0x1eb8", "Turing", 15360, "GDDR6", 2560),
    "NVIDIA A100-PCIE-40GB": ("0x20f1", "Ampere", 40960, "HBM2", 6912),
    "NVIDIA A100 80GB PCIe": ("0x20b5", "Ampere", 81920, "HBM2e", 6912),
    "NVIDIA L40S": ("0x26b9", "Ada Lovelace", 46068, "GDDR6", 18176),
    "NVIDIA H100 PCIe": ("0x2331", "Hopper", 81559, "HBM2e", 14592),
}

_NAME = r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SwitchSpec(_Spec):
    """A PCIe switch of the fabric."""

    name: str = Field(pattern=_NAME)


class GroupSpec(_Spec):
    """A group (free device pool plus machines)."""

    name: str = Field(min_length=1, max_length=63)


class MachineSpec(_Spec):
    """A machine (bare-metal host); ``name`` equals the Kubernetes node name."""

    name: str = Field(pattern=_NAME)
    group: str
    switch: str | None = Field(default=None, description="switch the host's port hangs off; default: first")


class GpuSpec(_Spec):
    """A GPU in a PCIe expansion chassis.

    Attributes:
        name: device name (``gpu0``), unique.
        model: Director model string (``Tesla T4``).
        vendor: vendor string.
        memory_mib: GPU memory in MiB; default from the model catalogue (else 16384).
        switch: PCIe switch name.
        pool: group whose free pool holds it at start; ``None`` = system free pool.
        attached_to: machine it is attached to at start (needs ``pool`` = the machine's group).
        state: ``device_state`` (``active | online``, LIQID's working state, MockLiqidClient.java:243;
            anything else is a broken device).
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    model: str = Field(min_length=1)
    vendor: str = "NVIDIA Corporation"
    memory_mib: int | None = Field(default=None, gt=0)
    switch: str
    pool: str | None = None
    attached_to: str | None = None
    state: str = "active | online"


class Inventory(_Spec):
    """A whole fabric at start; cross-references are validated."""

    fabric_id: int = Field(default=0, ge=0)
    switches: list[SwitchSpec] = Field(min_length=1)
    groups: list[GroupSpec] = Field(default_factory=list)
    machines: list[MachineSpec] = Field(default_factory=list)
    gpus: list[GpuSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> Inventory:
        problems: list[str] = []
        for kind, names in (
            ("switch", [s.name for s in self.switches]),
            ("group", [g.name for g in self.groups]),
            ("machine", [m.name for m in self.machines]),
            ("gpu", [g.name for g in self.gpus]),
        ):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                problems.append(f"duplicate {kind} names: {', '.join(dupes)}")
        switches = {s.name for s in self.switches}
        groups = {g.name for g in self.groups}
        machines = {m.name: m for m in self.machines}
        for m in self.machines:
            if m.group not in groups:
                problems.append(f"machine {m.name}: unknown group {m.group}")
            if m.switch is not None and m.switch not in switches:
                problems.append(f"machine {m.name}: unknown switch {m.switch}")
        for g in self.gpus:
            if g.switch not in switches:
                problems.append(f"gpu {g.name}: unknown switch {g.switch}")
            if g.pool is not None and g.pool not in groups:
                problems.append(f"gpu {g.name}: unknown pool {g.pool}")
            if g.attached_to is not None:
                host = machines.get(g.attached_to)
                if host is None:
                    problems.append(f"gpu {g.name}: unknown machine {g.attached_to}")
                elif g.pool != host.group:
                    problems.append(
                        f"gpu {g.name}: attached to {g.attached_to} but pool is {g.pool}, "
                        f"not the machine's group {host.group}"
                    )
        if problems:
            raise ValueError("; ".join(problems))
        return self


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory YAML file.

    Raises:
        OSError: unreadable file. ``yaml.YAMLError``: not YAML.
        pydantic.ValidationError: wrong shape or dangling references (one line per problem).
    """
    with open(path, encoding="utf-8") as fh:
        return Inventory.model_validate(yaml.safe_load(fh) or {})
