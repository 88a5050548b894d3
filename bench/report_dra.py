"""The report's DRA-mode section of part 2: DRA mode beside gated device-plugin mode, and how
much of DRA mode's overhead is the scheduler's 5 s PreBind poll.

Reads the runs of ``reaction.json`` (:mod:`bench.reaction`; the per-pod derivations are
defined in :mod:`bench.dra_times`), its ``target`` (``dra_beyond_poll_p99_seconds``) and
``prebind_poll_seconds``; every sentence is computed from them, and a figure not recorded says
so instead of a number.
"""

from __future__ import annotations

from typing import Any

from bench.run_modes import mode, seconds, taken


def _q(r: dict[str, Any] | None, key: str, q: str) -> float | None:
    value: float | None = (((r or {}).get("stats") or {}).get(key) or {}).get(q)
    return value


def _verdict(flag: bool | None) -> str:
    return "not measured" if flag is None else ("met" if flag else "NOT met")


def _count(x: float | None) -> str:
    return "–" if x is None else f"{x:g}"


def _share(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def _gated(runs: list[dict[str, Any]], r: dict[str, Any]) -> dict[str, Any] | None:
    """The gated composer run of the same size and workload as ``r``, if measured."""
    return next(
        (
            g
            for g in runs
            if mode(g) == ("composer", "gating")
            and g.get("nodes") == r.get("nodes")
            and g.get("workload") == r.get("workload")
            and g.get("stats")
        ),
        None,
    )


def _row(runs: list[dict[str, Any]], r: dict[str, Any]) -> str:
    g = _gated(runs, r)
    cells = [
        r.get("workload", "–"),
        str(r["nodes"]),
        f"{r.get('pods')} ({r.get('not_running', 0)} not running)",
        seconds(_q(r, "overhead", "p50")),
        seconds(_q(r, "overhead", "p99")),
        seconds(_q(g, "overhead", "p50")),
        seconds(_q(g, "overhead", "p99")),
        seconds(_q(r, "to_issue", "p50")),
        seconds(_q(r, "to_issue", "p99")),
        seconds(_q(r, "visible_lag", "p50")),
        seconds(_q(r, "visible_lag", "p99")),
        seconds(_q(r, "poll_wait", "mean")),
        _share(r.get("poll_share")),
        seconds(_q(r, "after_poll", "p99")),
        seconds(_q(r, "overhead_beyond_poll", "p50")),
        seconds(_q(r, "overhead_beyond_poll", "p99")),
        f"{_count(taken(r))} / {_count(taken(g) if g else None)}",
    ]
    return "| " + " | ".join(cells) + " |"


HEAD = (
    "| workload | nodes | pods | DRA overhead p50 | DRA overhead p99 | gated overhead p50 | "
    "gated overhead p99 | →issue p50 | →issue p99 | advertised → visible p50 | "
    "advertised → visible p99 | poll wait mean | poll share | poll → bound p99 | beyond poll p50 | "
    "beyond poll p99 | taken DRA / gated |"
)


def _finding(runs: list[dict[str, Any]], r: dict[str, Any], target: float, interval: float) -> str:
    where = f"DRA at {r['nodes']} nodes ({r.get('workload', '–')})"
    if r.get("error"):
        return f"- {where}: failed: `{r['error'][:300]}`."
    g = _gated(runs, r)
    beyond = _q(r, "overhead_beyond_poll", "p99")
    met = _verdict(None if beyond is None else beyond <= target)
    took = taken(r)
    missed = r.get("missed_polls")
    return (
        f"- {where}: overhead p50 {seconds(_q(r, 'overhead', 'p50'))} s, p99 "
        f"{seconds(_q(r, 'overhead', 'p99'))} s; gated device-plugin mode in the same size and "
        f"workload: p50 {seconds(_q(g, 'overhead', 'p50'))} s, p99 {seconds(_q(g, 'overhead', 'p99'))} s. "
        f"The composer sent the compose p50 {seconds(_q(r, 'to_issue', 'p50'))} s, p99 "
        f"{seconds(_q(r, 'to_issue', 'p99'))} s after the pod's creation and set the binding conditions "
        f"p50 {seconds(_q(r, 'visible_lag', 'p50'))} s, p99 {seconds(_q(r, 'visible_lag', 'p99'))} s "
        "after the node showed the GPU (advertised → visible). "
        f"The {interval:g} s PreBind poll grid accounts for {_share(r.get('poll_share'))} of DRA "
        f"mode's overhead (mean wait for the next poll {seconds(_q(r, 'poll_wait', 'mean'))} s of a "
        f"mean overhead {seconds(_q(r, 'overhead', 'mean'))} s); overhead beyond the poll p99 "
        f"{seconds(beyond)} s (target ≤ {target:g} s: **{met}**); "
        f"pods bound a poll or more after the first poll that could have seen their GPU visible: "
        f"{_count(missed)}, pods whose claim was seen ready and then not ready again before their bind: "
        f"{_count(r.get('visible_withdrawn'))}; GPUs taken by another pod: {_count(took)} (target 0: "
        f"**{_verdict(None if took is None else took == 0)}**); pods whose GPU was never seen visible: "
        f"{_count(r.get('never_visible'))}; pods not Running: {r.get('not_running', 0)}."
    )


def dra_section(d: dict[str, Any]) -> list[str]:
    """The section's lines: a table of the DRA runs beside the gated ones, then one finding per
    DRA run; one line saying so when no DRA run was made."""
    runs = d.get("runs") or []
    mine = [r for r in runs if mode(r) == ("composer", "dra")]
    if not mine:
        return ["- DRA mode: not measured in this run."]
    interval = float(d.get("prebind_poll_seconds") or 5.0)
    target = float((d.get("target") or {}).get("dra_beyond_poll_p99_seconds") or 0.5)
    measured = [r for r in mine if r.get("stats")]
    out = [
        "### DRA mode and the scheduler's PreBind poll",
        "",
        "`composer DRA`: the composer as the DRA driver `gpu.composer.liqid.io` (`--mode dra`, no "
        "webhook, the GPU agent writing GFD's labels only); the scheduler allocates a device to the "
        "pod's extended-resource claim, records `BindingConditionsPending` and polls the claim every "
        f"{interval:g} s until the composer sets `Attached` and `VisibleOnNode` True. Per pod: visible = "
        "the benchmark's claim watch first sees both conditions True, bound = its pod watch sees "
        "`spec.nodeName`; the next poll = the PreBind start (the Event's `eventTime`) plus the "
        f"smallest multiple of {interval:g} s not before visible; poll wait = next poll − visible; "
        "overhead beyond the poll = overhead − poll wait; advertised → visible = from the node's "
        "`nvidia.com/gpu.count` label showing the GPU to visible; poll share = Σ poll wait / Σ overhead "
        "(`bench/dra_times.py`). `taken` in DRA mode: GPUs composed for one claim that another claim "
        "holds at the end of the run.",
        "",
    ]
    if measured:
        out += [HEAD, "|" + "---|" * HEAD.count(" | ") + "---|"]
        out += [_row(runs, r) for r in measured]
        out.append("")
    out += [_finding(runs, r, target, interval) for r in mine]
    return out
