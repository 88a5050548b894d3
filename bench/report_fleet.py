"""The report's part 5: a change to one tenant of a split estate against the monolith (pure).

Reads ``fleet.json`` (written by :mod:`bench.fleet`); :func:`figures` computes every number the
section states and :func:`fleet_section` writes its sentences from them, so a figure missing from
the data (a failed run) is said to be missing instead of being guessed.
"""

from __future__ import annotations

import statistics
from typing import Any

#: The size the goal is stated at (hosts).
GOAL_HOSTS = 1_000
#: Kinds of stacks of the split, by the part of the stack's name after the fleet's.
KINDS = (("platform", "platform"), ("hosts", "host group"), ("tenant", "tenant"))


def _kind(stack: str, fleet: str) -> str:
    """``platform``, ``hosts`` or ``tenant`` for a stack of ``fleet`` (``fleet-hosts-rack-001``)."""
    rest = stack.removeprefix(fleet + "-")
    return next((k for k, _ in KINDS if rest == k or rest.startswith(k + "-")), "other")


def _creates(run: dict[str, Any]) -> int:
    return sum(s["changes"].get("create", 0) for s in run.get("stacks", []))


def figures(d: dict[str, Any]) -> dict[str, Any]:
    """The section's numbers from ``fleet.json``'s content ``d``.

    Returns ``{"hosts", "tenants", "stacks", "one_tenant_wall", "one_tenant_stack_seconds",
    "command_overhead", "one_tenant_ok", "monolith_wall", "monolith_resources", "monolith_ok",
    "full_wall", "full_ok", "full_stacks_seconds" (sum of the stacks' own seconds),
    "full_parallelism" (that sum over the wall), "split_creates", "speedup" (monolith wall over
    one-tenant wall), "goal_met" (True/False, None below :data:`GOAL_HOSTS` hosts or without a
    successful one-tenant run), "peak_mib" ({run: peak tree RSS}), "kinds" ({kind: {"count",
    "median", "max", "slowest", "creates"}} of the full run's successful stacks), "failed"
    ([(run, stack, detail)])}``; a figure of a run that is absent is None.
    """
    est, runs = d["estate"], d["runs"]
    one, mono, full = runs.get("one_tenant") or {}, runs.get("monolith") or {}, runs.get("full") or {}
    one_ok = bool(one.get("ok"))
    own = [s["seconds"] for s in one.get("stacks", []) if s["stack"] == est["changed_stack"]]
    one_wall = one.get("wall_seconds")
    stack_seconds = own[0] if own else None
    full_sum = sum(s["seconds"] for s in full.get("stacks", []) if s["status"] != "skipped")
    full_wall = full.get("wall_seconds")
    kinds: dict[str, dict[str, Any]] = {}
    for kind, _ in KINDS:
        rows = [s for s in full.get("stacks", [])
                if s["status"] == "ok" and _kind(s["stack"], est["name"]) == kind]
        if rows:
            slowest = max(rows, key=lambda s: s["seconds"])
            kinds[kind] = {"count": len(rows), "median": statistics.median(s["seconds"] for s in rows),
                           "max": slowest["seconds"], "slowest": slowest["stack"],
                           "creates": sum(s["changes"].get("create", 0) for s in rows)}
    goal = None
    if one_ok and one_wall is not None and est["hosts"] >= GOAL_HOSTS:
        goal = one_wall < d.get("goal_seconds", 60.0)
    mono_wall = mono.get("wall_seconds") if mono.get("ok") else None
    return {
        "hosts": est["hosts"],
        "tenants": est["tenants"],
        "stacks": est["stacks"],
        "one_tenant_wall": one_wall,
        "one_tenant_stack_seconds": stack_seconds,
        "command_overhead": None if one_wall is None or stack_seconds is None else one_wall - stack_seconds,
        "one_tenant_ok": one_ok,
        "monolith_wall": mono.get("wall_seconds"),
        "monolith_resources": mono.get("resources"),
        "monolith_ok": bool(mono.get("ok")),
        "full_wall": full_wall,
        "full_ok": bool(full.get("ok")),
        "full_stacks_seconds": full_sum if full.get("stacks") else None,
        "full_parallelism": full_sum / full_wall if full.get("stacks") and full_wall else None,
        "split_creates": _creates(full) if full.get("stacks") else None,
        "speedup": mono_wall / one_wall if mono_wall and one_ok and one_wall else None,
        "goal_met": goal,
        "peak_mib": {k: r.get("peak_tree_rss_mib") for k, r in runs.items()},
        "kinds": kinds,
        "failed": [(k, s["stack"], s["detail"]) for k, r in runs.items() for s in r.get("stacks", [])
                   if s["status"] != "ok"],
    }


def _s(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _result(run: dict[str, Any]) -> str:
    if not run:
        return "not run"
    return "ok" if run.get("ok") else f"exit {run.get('exit_code')}"


def _goal_sentence(f: dict[str, Any], d: dict[str, Any]) -> str:
    goal = d.get("goal_seconds", 60.0)
    if not f["one_tenant_ok"]:
        return f"- The one-tenant change did not preview successfully: the {goal:.0f} s goal is not judged."
    where = (f"The one-tenant change took {_s(f['one_tenant_wall'])} s end to end at {f['hosts']:,} hosts "
             f"and {f['tenants']} tenants")
    if f["goal_met"] is None:
        return (f"- {where}; the goal (under {goal:.0f} s) is stated at {GOAL_HOSTS:,} hosts, so this size "
                "does not judge it.")
    verdict = "meets" if f["goal_met"] else "misses"
    return f"- {where}: it {verdict} the goal of under {goal:.0f} s at {GOAL_HOSTS:,} hosts."


def _against_monolith(f: dict[str, Any]) -> str:
    """``, N more than the monolith's M (about K per stack)`` (or fewer), empty without both counts."""
    mono, split = f["monolith_resources"], f["split_creates"]
    if not mono or split is None:
        return ""
    diff = split - mono
    more = "more" if diff >= 0 else "fewer"
    per = abs(diff) / f["stacks"]
    return f", {abs(diff):,} {more} than the monolith's {mono:,} (about {per:.1f} per stack)"


def _count(n: int | None, noun: str) -> str:
    """``3 stacks``, ``1 stack``, or ``its stacks`` when the count was not recorded."""
    if n is None:
        return f"its {noun}s"
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _stack_handling(run: dict[str, Any], total: int) -> str:
    """What the estate command did with the fleet's ``total`` stacks before ``run``'s previews: from
    its ``stacks_created`` (recorded since the command lists the backend's stacks once and opens
    only those it runs); a run without it predates that (every stack was selected or created)."""
    created = run.get("stacks_created")
    if created is None:
        return f"and selecting or creating each of the fleet's {total} stacks on the backend before any runs"
    made = f"creating the {_count(created, 'stack')} it lacked, " if created else "creating none, "
    return (f"one listing of the backend's stacks ({total} in the fleet), {made}and opening the "
            f"{_count(len(run.get('stacks', [])), 'stack')} it ran")


def fleet_section(d: dict[str, Any], *, commit_line: str) -> str:
    """Part 5 of ``REPORT.md`` from ``fleet.json``'s content ``d``; ``commit_line`` names the commit
    measured (``bench.report._commit``)."""
    f, est, runs = figures(d), d["estate"], d["runs"]
    mono, one, full, setup = (runs.get(k) or {} for k in ("monolith", "one_tenant", "full", "setup"))
    parallel = d.get("parallel")
    rows = [
        ["one-tenant change", "`ops.estate preview --changed-since <base>`", len(one.get("stacks", [])),
         _s(one.get("wall_seconds")), one.get("peak_tree_rss_mib"), (one.get("load") or {}).get("mean"),
         _result(one)],
        ["monolith", f"`pulumi preview --stack {est['name']}`", 1, _s(mono.get("wall_seconds")),
         mono.get("peak_tree_rss_mib"), (mono.get("load") or {}).get("mean"), _result(mono)],
        [f"full estate, {parallel} at a time", f"`ops.estate preview --parallel {parallel}`",
         len(full.get("stacks", [])), _s(full.get("wall_seconds")), full.get("peak_tree_rss_mib"),
         (full.get("load") or {}).get("mean"), _result(full)],
        [f"first run (creates {_count(setup.get('stacks_created'), 'stack')})",
         "`ops.estate preview --stack <changed tenant>`",
         len(setup.get("stacks", [])), _s(setup.get("wall_seconds")), setup.get("peak_tree_rss_mib"),
         (setup.get("load") or {}).get("mean"), _result(setup)],
    ]
    table = ["| preview | command | stacks run | wall s | peak tree RSS MiB | mean load (1 min) | result |",
             "|---|---|---|---|---|---|---|"]
    table += ["| " + " | ".join("–" if c is None else str(c) for c in r) + " |" for r in rows]
    lines = [
        "## 5. A change to one tenant of a split estate",
        "",
        commit_line,
        "",
        f"A generated estate of {est['hosts']:,} hosts in {est['racks']} racks and {est['tenants']} tenants, "
        f"{est['files']} inventory files (a file per rack, per tenant), which the estate command splits into "
        f"{est['stacks']} stacks (platform, a host group per rack, a stack per tenant); validated and split "
        f"offline in {est['validate_seconds']} s. The change is `{est['changed_file']}` (its `gpu_quota` "
        "raised by one), committed on a branch. Every preview runs with the policy pack (lab config) in a "
        "temporary git repository holding the program and the estate, with its own file backend, against the "
        "benchmark's own control plane; the hypervisor clusters are adopted (a kubeconfig file) and the "
        "BMC and Director probes are off (`COMPOSABLE_GPU_PREFLIGHT=off`), so no simulator runs. Nothing is "
        "deployed: every stack's preview plans creates.",
        "",
        *table,
        "",
        _goal_sentence(f, d),
    ]
    if f["command_overhead"] is not None:
        lines.append(
            f"- Of those {_s(f['one_tenant_wall'])} s, the preview of `{est['changed_stack']}` took "
            f"{_s(f['one_tenant_stack_seconds'])} s (the command's summary); the other "
            f"{_s(f['command_overhead'])} s are the command around it: Python start-up, reading and "
            f"splitting the estate, git's diff, {_stack_handling(one, est['stacks'])}.")
    if f["speedup"] is not None:
        lines.append(
            f"- The monolithic preview of the same estate took {_s(f['monolith_wall'])} s for "
            f"{f['monolith_resources']:,} resources: {f['speedup']:.1f} times the one-tenant change's wall.")
    elif not f["monolith_ok"]:
        lines.append(f"- The monolithic preview did not succeed ({_result(mono)}), so no ratio is given.")
    if f["full_parallelism"] is not None:
        lines.append(
            f"- Every stack, at most {parallel} at a time: {_s(f['full_wall'])} s wall; the stacks' own "
            f"previews add up to {_s(f['full_stacks_seconds'])} s, so {f['full_parallelism']:.2f} ran at "
            f"once on average. Together they plan {f['split_creates']:,} creates{_against_monolith(f)}"
            + (f"; the run created the {_count(full['stacks_created'], 'stack')} the first run had not."
               if full.get("stacks_created") else "."))
    for kind, label in KINDS:
        k = f["kinds"].get(kind)
        if k:
            lines.append(
                f"- {k['count']} {label} stack{'s' if k['count'] != 1 else ''}: median {_s(k['median'])} s, "
                f"slowest {_s(k['max'])} s (`{k['slowest']}`), {k['creates']:,} creates.")
    peaks = {k: v for k, v in f["peak_mib"].items() if v is not None}
    if peaks:
        names = {"one_tenant": "one-tenant change", "monolith": "monolith", "full": "full estate",
                 "setup": "first run"}
        lines.append("- Peak memory (summed RSS of the command's process tree): "
                     + ", ".join(f"{names.get(k, k)} {v:,.0f} MiB" for k, v in peaks.items()) + ".")
    by_process = full.get("peak_rss_by_process_mib") or {}
    if by_process:
        lines.append("- Highest RSS per process kind in the full-estate run: "
                     + ", ".join(f"{k} {v}" for k, v in by_process.items()) + " MiB.")
    load = full.get("load") or {}
    if load.get("samples"):
        lines.append(f"- The machine's 1-minute load average during the full-estate run: mean "
                     f"{load['mean']}, max {load['max']} on {load['cores']} cores (a shared machine).")
    for run, stack, detail in f["failed"]:
        lines.append(f"- {run}: `{stack}` {detail}")
    lines += ["", f"Reproduce: `{d['command']}`"]
    return "\n".join(lines)
