"""Readable text report of a deployed estate, from the stack output ``estate``.

Pure: takes the decoded stack output (``pulumi stack output estate --json``, or
``automation.Stack.outputs()["estate"].value``) and optionally the GPUs a live Director reports
per host, and returns text. Shape of ``estate`` (written by ``components.estate.Estate``)::

    {"stack": "dev", "environment": "lab",
     "hosts": [{"name", "role", "bmc_address", "cluster", "gpu_mode", "dpu",
                "reboot_pending"}],                  # reboot_pending: only hosts prepared over SSH
     "dpus": [{"name", "host", "mode", "host_privilege_level", "host_rshim", "reset_pending", "flavor",
               "firmware_reset_pending"}],           # firmware_reset_pending: only DPUs prepared over SSH
     "hypervisor_clusters": [{"name", "hosts", "gpu_workload_mode", "kubevirt", "services"}],
     "dpu_cluster": {"name", "hosts", "dpus", "services"} | None,
     "tenants": [{"name", "namespace", "gpu_quota", "allowed_models",
                  "networks": [{"name", "cidr", "vxlan_id", "vlan_id"}],
                  "clusters": [{"name", "hypervisor_cluster", "workers", "networks", "gpu_mode",
                                "gpu_model", "gpu_count", "cni"}],
                  "gpu_sharing": {"name", "strategy", "hosts", "replicas", "mig_profile"} | None}],
     "gpus": [{"host", "pool", "tenant", "device_names", "models"}],      # static compositions
     "composer": {"namespace", "pool", "target_cluster", "idle_timeout_seconds",
                  "excluded_devices"} | None,      # the only composer
     "composers": [{...as composer}]}                  # every composer (several: "Composers")

Missing keys render as ``-``; the function never raises on partial data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _s(value: Any) -> str:
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_s(v) for v in value)
    return str(value)


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return [f"{indent}(none)"]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]


def _list(estate: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = estate.get(key)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def gpus_per_host(
    estate: Mapping[str, Any], attached: Mapping[str, Sequence[str]] | None = None
) -> dict[str, list[str]]:
    """GPU lines per host: static compositions (``gpu0 (Tesla-T4) static``) plus live ``attached``
    device names not composed statically (``gpu1 dynamic``). Every host appears, possibly empty."""
    per_host: dict[str, list[str]] = {str(h.get("name")): [] for h in _list(estate, "hosts")}
    static: set[str] = set()
    for g in _list(estate, "gpus"):
        host = str(g.get("host"))
        names = list(g.get("device_names") or [])
        models = list(g.get("models") or [])
        for i, name in enumerate(names):
            model = models[i] if i < len(models) else None
            tenant = f", tenant {g['tenant']}" if g.get("tenant") else ""
            per_host.setdefault(host, []).append(f"{name} ({_s(model)}) static{tenant}")
            static.add(name)
    for host, dynamic in (attached or {}).items():
        for name in dynamic:
            if name not in static:
                per_host.setdefault(host, []).append(f"{name} dynamic")
    return per_host


def render_summary(estate: Mapping[str, Any], *, attached: Mapping[str, Sequence[str]] | None = None) -> str:
    """The report: hosts (with ``reboot pending`` when prepared over SSH), DPUs with their posture (and
    ``firmware reset pending`` when prepared over SSH), clusters, tenants with networks and clusters,
    GPUs per host, composer.

    Args:
        estate: the stack output ``estate`` (shape in the module docstring).
        attached: optional live view, host -> device names the Director reports attached (the
            composer's dynamic GPUs show up only here).

    Returns:
        Multi-line text ending with a newline.
    """
    out: list[str] = [f"Estate {_s(estate.get('stack'))} ({_s(estate.get('environment'))})", ""]

    hosts = _list(estate, "hosts")
    out.append(f"Hosts ({len(hosts)})")
    out += _table(
        [
            [
                _s(h.get("name")),
                _s(h.get("role")),
                f"cluster {_s(h.get('cluster'))}",
                f"GPU mode {_s(h.get('gpu_mode'))}",
                f"DPU {_s(h.get('dpu'))}",
                _s(h.get("bmc_address")),
                f"reboot pending {_s(h['reboot_pending'])}" if "reboot_pending" in h else "",
            ]
            for h in hosts
        ]
    )

    dpus = _list(estate, "dpus")
    out += ["", f"DPUs ({len(dpus)})"]
    out += _table(
        [
            [
                _s(d.get("name")),
                f"on {_s(d.get('host'))}",
                _s(d.get("mode")),
                f"host privilege {_s(d.get('host_privilege_level'))}",
                f"rshim {_s(d.get('host_rshim'))}",
                f"reset pending {_s(d.get('reset_pending'))}",
                f"firmware reset pending {_s(d['firmware_reset_pending'])}"
                if "firmware_reset_pending" in d
                else "",
            ]
            for d in dpus
        ]
    )

    clusters = _list(estate, "hypervisor_clusters")
    out += ["", f"Hypervisor clusters ({len(clusters)})"]
    out += _table(
        [
            [
                _s(c.get("name")),
                _s(c.get("gpu_workload_mode")),
                "KubeVirt" if c.get("kubevirt") else "no KubeVirt",
                f"hosts {_s(c.get('hosts'))}",
                f"services {_s(c.get('services'))}",
            ]
            for c in clusters
        ]
    )

    dc = estate.get("dpu_cluster")
    out += ["", "DPU cluster"]
    if isinstance(dc, Mapping):
        out += _table(
            [[_s(dc.get("name")), f"DPUs {_s(dc.get('dpus'))}", f"services {_s(dc.get('services'))}"]]
        )
    else:
        out.append("  (none)")

    tenants = _list(estate, "tenants")
    out += ["", f"Tenants ({len(tenants)})"]
    if not tenants:
        out.append("  (none)")
    for t in tenants:
        out.append(
            f"  {_s(t.get('name'))}  namespace {_s(t.get('namespace'))}  GPU quota {_s(t.get('gpu_quota'))}"
            f"  models {_s(t.get('allowed_models'))}"
        )
        rows = [
            [
                "network",
                _s(n.get("name")),
                _s(n.get("cidr")),
                f"VXLAN {_s(n.get('vxlan_id'))}",
                f"VLAN {_s(n.get('vlan_id'))}",
                "",
            ]
            for n in t.get("networks") or []
            if isinstance(n, Mapping)
        ]
        for c in t.get("clusters") or []:
            if not isinstance(c, Mapping):
                continue
            gpu = (
                "no GPUs"
                if c.get("gpu_mode") in (None, "none")
                else f"{_s(c.get('gpu_count'))} x {_s(c.get('gpu_model'))} {_s(c.get('gpu_mode'))}"
            )
            rows.append(
                [
                    "cluster",
                    _s(c.get("name")),
                    f"on {_s(c.get('hypervisor_cluster'))}",
                    f"{_s(c.get('workers'))} worker{'' if c.get('workers') == 1 else 's'}",
                    f"CNI {_s(c.get('cni'))}",
                    gpu,
                ]
            )
        sharing = t.get("gpu_sharing")
        if isinstance(sharing, Mapping):
            detail = (
                f"profile {_s(sharing.get('mig_profile'))}"
                if sharing.get("strategy") == "mig"
                else f"{_s(sharing.get('replicas'))} replicas"
            )
            rows.append(
                ["sharing", _s(sharing.get("strategy")), detail, f"hosts {_s(sharing.get('hosts'))}", "", ""]
            )
        out += _table(rows, indent="    ") if rows else ["    (no networks or clusters)"]

    out += ["", "GPUs per host"]
    per_host = gpus_per_host(estate, attached)
    out += _table([[host, _s(lines) if lines else "none"] for host, lines in per_host.items()])

    comp = estate.get("composer")
    several = estate.get("composers")
    composers = [comp] if isinstance(comp, Mapping) else []
    if not composers and isinstance(several, Sequence):
        composers = [c for c in several if isinstance(c, Mapping)]
    out += ["", "Composer" if len(composers) < 2 else "Composers"]
    for c in composers:
        out.append(
            f"  pool {_s(c.get('pool'))} -> cluster {_s(c.get('target_cluster'))}"
            f" (namespace {_s(c.get('namespace'))}), idle timeout "
            f"{_s(c.get('idle_timeout_seconds'))} s,"
            f" excluded {_s(c.get('excluded_devices'))}"
        )
    if not composers:
        out.append("  (none)")
    return "\n".join(out) + "\n"
