"""The report's step table of part 2: where a gated pod's wait for its compose call goes.

Reads the ``wait_steps`` and ``load`` of each gated composer run in ``reaction.json`` (written
by :mod:`bench.reaction` and :mod:`bench.wait_steps`) and ``composer_share_target``; every
sentence is computed from them, and a step no pod was observed in says so instead of a number.
"""

from __future__ import annotations

from typing import Any

from bench.wait_steps import SPANS, STEPS

#: The steps outside the composer's share (the API server's admission, the composer's watch).
OUTSIDE = ("admission", "informer")
LABELS = dict((*STEPS, *SPANS))


def _s(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _stat(run: dict[str, Any], key: str) -> dict[str, Any]:
    stat: dict[str, Any] = ((run.get("wait_steps") or {}).get("stats") or {}).get(key) or {}
    return stat


def _table(run: dict[str, Any]) -> list[str]:
    pods = (run.get("wait_steps") or {}).get("pods", 0)
    out = ["| step | pods observed | p50 s | p99 s |", "|---|---|---|---|"]
    for key, label in (*STEPS, *SPANS):
        s = _stat(run, key)
        if not s.get("n"):
            out.append(f"| {label} | 0 of {pods} | not observed | not observed |")
        else:
            out.append(f"| {label} | {s['n']} of {pods} | {_s(s['p50'])} | {_s(s['p99'])} |")
    return out


def _load(run: dict[str, Any]) -> str:
    load = run.get("load") or {}
    if not load.get("samples"):
        return "load average during the run: not recorded"
    cores = load.get("cores")
    verdict = (
        ""
        if not cores
        else (
            f", above its {cores} cores: runnable tasks waited for a CPU"
            if load["mean"] > cores
            else f", within its {cores} cores"
        )
    )
    return (
        f"load average (1 min) during the run: mean {load['mean']:.2f}, max {load['max']:.2f} "
        f"({load['samples']} samples){verdict}"
    )


def _holds(run: dict[str, Any]) -> str:
    """Which step holds the wait, at p50 and at p99, from the observed steps only."""
    seen = {k: _stat(run, k) for k, _ in STEPS if _stat(run, k).get("n")}
    if not seen:
        return "no step was observed (no composer step lines or no gated pod in this run)"
    top50 = max(seen, key=lambda k: seen[k]["p50"])
    top99 = max(seen, key=lambda k: seen[k]["p99"])
    total = _stat(run, "total")
    of = f" of the whole wait's p50 {_s(total['p50'])} s" if total.get("n") else ""
    text = f"the wait is held mostly by **{LABELS[top50]}** (p50 {_s(seen[top50]['p50'])} s{of})"
    if top99 == top50:
        return text + f", also at p99 ({_s(seen[top99]['p99'])} s)"
    return text + f"; at p99 by **{LABELS[top99]}** ({_s(seen[top99]['p99'])} s)"


def _outside(run: dict[str, Any]) -> str:
    """The steps outside the composer against its own share, at p50."""
    parts = [(k, _stat(run, k)) for k in OUTSIDE]
    mine = _stat(run, "composer")
    if not mine.get("n") or any(not s.get("n") for _, s in parts):
        missing = [LABELS[k] for k, s in (*parts, ("composer", mine)) if not s.get("n")]
        return f"outside vs inside the composer: not comparable ({', '.join(missing)} not observed)"
    outside = sum(s["p50"] for _, s in parts)
    bigger = "outside the composer" if outside > mine["p50"] else "in the composer"
    return (
        f"admission + informer p50 sum {_s(outside)} s against the composer's share p50 "
        f"{_s(mine['p50'])} s: more of the median wait is {bigger}"
    )


def _missing(run: dict[str, Any]) -> list[str]:
    pods = (run.get("wait_steps") or {}).get("pods", 0)
    out = []
    for key, label in STEPS:
        n = _stat(run, key).get("n", 0)
        if n < pods:
            out.append(f"{label}: {pods - n} of {pods} gated pods not observed")
    return out


def _share(run: dict[str, Any], target: dict[str, Any] | None) -> str:
    s = _stat(run, "composer")
    if not s.get("n"):
        return "the composer's share (seen → compose sent): not observed"
    text = f"the composer's share (seen → compose sent) p99 {_s(s['p99'])} s"
    if target and run["nodes"] == target["at_nodes"]:
        verdict = "met" if s["p99"] < target["p99_seconds"] else "NOT met"
        text += f" (target < {target['p99_seconds']:g} s at {target['at_nodes']:,} nodes: **{verdict}**)"
    return text


def _batch(timing: dict[str, float] | None) -> str:
    if not timing:
        return ""
    return (
        f" The step seen → planned includes the gated-pod batch window of the run (planned once none "
        f"arrived for {timing['batch_idle_seconds'] * 1000:.0f} ms, at the latest after "
        f"{timing['batch_max_seconds']:g} s), the pause before a round "
        f"({timing['round_after_change_seconds'] * 1000:.0f} ms, or until the batch window of a gated pod "
        f"that just arrived closes), a round already running when the pod arrived, and the round that "
        f"plans it."
    )


def _rounds(run: dict[str, Any]) -> str:
    """The composer's rounds in the run, from its ``composer_round_seconds`` histogram."""
    m = run.get("metrics") or {}
    count, total = m.get("composer_round_seconds_count"), m.get("composer_round_seconds_sum")
    if not count or total is None:
        return "the composer's rounds: not recorded"
    return (
        f"the composer ran {count:.0f} rounds, mean {total / count:.3f} s each "
        f"({total:.1f} s of rounds in all)"
    )


def wait_steps_section(d: dict[str, Any]) -> list[str]:
    """Markdown lines: per gated composer run, its step table, the load beside it and the
    sentences on where the wait goes and whether the composer's share met its target."""
    runs = [r for r in d.get("runs", []) if r.get("wait_steps") is not None]
    head = ["### Where a gated pod's wait goes (creation → compose sent)", ""]
    if not runs:
        return [*head, "Not measured in this run: no gated composer run recorded its steps."]
    lines = [
        *head,
        "Per gated pod: created = the bench's create call (the API's `creationTimestamp` has whole "
        "seconds only and is set after admission); admitted = the composer's webhook answered with the "
        "gate; seen = the composer's "
        "pod watch first delivered it; planned = the composer's round that placed it (the last three from "
        "the composer's `pod-step` log lines, `composer/shell/pod_steps.py`); compose sent = the Director "
        "received `POST fabric/edit` for the planned node (the bench's Director tap). One clock, this "
        "machine's. Quantiles are nearest-rank over the pods in which both ends of a step were observed."
        + _batch(d.get("composer_timing")),
        "",
    ]
    target = d.get("composer_share_target")
    for r in sorted(runs, key=lambda r: (r["nodes"], r.get("workload") != "pinned")):
        title = f"{r['nodes']:,} nodes, {r.get('workload', 'unpinned')} workload"
        lines += [f"**{title}** ({_load(r)}):", "", *_table(r), ""]
        lines.append(f"- {title}: {_holds(r)}; {_outside(r)}; {_share(r, target)}; {_rounds(r)}.")
        lines += [f"- {title}: {m}." for m in _missing(r)]
        lines.append("")
    if target and not any(r["nodes"] == target["at_nodes"] for r in runs):
        lines.append(
            f"- The composer's share at {target['at_nodes']:,} nodes (target p99 < "
            f"{target['p99_seconds']:g} s): not measured in this run."
        )
    elif not target:
        lines.append("- No target for the composer's share is recorded in this run's data.")
    return lines
