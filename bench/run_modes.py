"""Which mode a run of ``reaction.json`` measured, read the same way by every report section
(:mod:`bench.report`, :mod:`bench.report_dra`), older result files included."""

from __future__ import annotations

from typing import Any

#: A composer mode's name in the report, by mode (:data:`bench.reaction.MODES`).
LABELS = {"plain": "", "gating": " + gating", "dra": " DRA"}


def mode(r: dict[str, Any]) -> tuple[str, str]:
    """(controller, mode) of a run: the controller ``composer`` or ``baseline`` and the mode
    ``plain``, ``gating`` or ``dra`` (runs without the ``gating`` or ``dra`` flag predate it: off)."""
    cfg = r.get("config") or {}
    if r.get("dra", cfg.get("dra", False)):
        return r.get("controller", "?"), "dra"
    gated = r.get("gating", cfg.get("gating", False))
    return r.get("controller", "?"), "gating" if gated else "plain"


def label(r: dict[str, Any]) -> str:
    """A run's controller and mode as the report names them (``composer + gating``)."""
    ctrl, m = mode(r)
    return ctrl + LABELS.get(m, f" {m}")


def taken(r: dict[str, Any]) -> float | None:
    """GPUs composed for one pod that another pod got, as the run recorded them (in DRA mode
    derived by the benchmark, else the composer's ``composer_gpus_taken_by_another_pod_total``);
    None when not recorded."""
    value = r.get("gpus_taken_by_another_pod")
    if value is None:
        value = (r.get("metrics") or {}).get("composer_gpus_taken_by_another_pod_total")
    return None if value is None else float(value)


def seconds(x: float | None) -> str:
    """``x`` with two decimals, ``–`` for None."""
    return "–" if x is None else f"{x:.2f}"
