"""Write ``REPORT.md`` and PNG plots from the parts' JSON results.

Reads ``<out>/{machine,planner,reaction,savings,preview,fleet}.json`` (whichever exist, so one part
can be re-run alone) and writes ``<out>/REPORT.md`` plus ``planner.png``, ``reaction.png``,
``savings.png`` and ``preview.png``, and part 5 alone with the machine in ``FLEET.md``. Plots need
matplotlib; without it the report says so and still gives every figure as a table.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.report_dra import dra_section
from bench.report_fleet import fleet_section
from bench.report_steps import wait_steps_section
from bench.run_modes import LABELS, taken
from bench.run_modes import label as _label
from bench.run_modes import mode as _mode

PARTS = ("planner", "reaction", "savings", "preview", "fleet")


def load(out: Path) -> dict[str, Any]:
    """``{name: parsed JSON}`` of the result files present in ``out``."""
    data = {}
    for name in ("machine", *PARTS):
        f = out / f"{name}.json"
        if f.exists():
            data[name] = json.loads(f.read_text())
    return data


def _fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if math.isinf(x):
            return "∞"
        return f"{x:.{nd}f}"
    return str(x)


def _table(head: list[str], rows: list[list[Any]], nd: int = 2) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_fmt(c, nd) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


# -- plots ------------------------------------------------------------------------------------
def plot_planner(d: dict[str, Any], path: Path) -> bool:
    """Round time and peak memory against pending pods (log-log). False without matplotlib."""
    plt = _plt()
    if plt is None:
        return False
    rows = d["sizes"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [r["pods"] for r in rows]
    a.loglog(xs, [r["ms_median"] for r in rows], "o-", label="median")
    a.fill_between(xs, [r["ms_min"] for r in rows], [r["ms_max"] for r in rows], alpha=0.2, label="min–max")
    lin = [rows[0]["ms_median"] * x / xs[0] for x in xs]
    a.loglog(xs, lin, "k:", label="linear from smallest")
    a.axhline(d.get("target_ms", 100), color="r", ls="--", label="100 ms target")
    a.set_xlabel("pending pods (hosts = pods/10, GPUs = 8 x hosts)")
    a.set_ylabel("plan() per round, ms")
    a.legend(fontsize=8)
    a.grid(True, which="both", alpha=0.3)
    b.loglog(xs, [r["peak_round_mib"] for r in rows], "o-", label="peak during round")
    b.loglog(xs, [r["input_mib"] for r in rows], "s--", label="inputs held")
    b.set_xlabel("pending pods")
    b.set_ylabel("MiB (tracemalloc)")
    b.legend(fontsize=8)
    b.grid(True, which="both", alpha=0.3)
    fig.suptitle("Part 1: planner round time and memory")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_reaction(d: dict[str, Any], path: Path) -> bool:
    """p50/p99 of unschedulable->Running and ->issue per fleet size, composer vs baseline, one row
    per workload. False without matplotlib or data."""
    plt = _plt()
    if plt is None:
        return False
    runs = [r for r in d["runs"] if r.get("stats")]
    if not runs:
        return False
    workloads = sorted({r.get("workload", "unpinned") for r in runs}, key=lambda w: w != "pinned")
    fig, axes = plt.subplots(len(workloads), 2, figsize=(11, 3.6 * len(workloads)), squeeze=False)
    series = (
        ("composer", "plain", "p50", "#1f77b4"),
        ("composer", "plain", "p99", "#9ecae1"),
        ("composer", "gating", "p50", "#2ca02c"),
        ("composer", "gating", "p99", "#a1d99b"),
        ("composer", "dra", "p50", "#9467bd"),
        ("composer", "dra", "p99", "#c5b0d5"),
        ("baseline", "plain", "p50", "#d62728"),
        ("baseline", "plain", "p99", "#fc9272"),
    )
    width = 0.8 / len(series)
    for row, wl in enumerate(workloads):
        mine = [r for r in runs if r.get("workload", "unpinned") == wl]
        sizes = sorted({r["nodes"] for r in mine})
        for col, (key, title) in enumerate(
            (
                ("to_running", "creation → Running"),
                ("to_issue", "creation → compose request issued"),
            )
        ):
            ax = axes[row][col]
            for i, (ctrl, m, q, colour) in enumerate(series):
                ys = []
                for n in sizes:
                    r = next((x for x in mine if x["nodes"] == n and _mode(x) == (ctrl, m)), None)
                    ys.append(((r or {}).get("stats", {}).get(key) or {}).get(q) or 0)
                ax.bar(
                    [j + (i - (len(series) - 1) / 2) * width for j in range(len(sizes))],
                    ys,
                    width,
                    color=colour,
                    label=f"{ctrl}{LABELS[m]} {q}",
                )
            ax.set_xticks(list(range(len(sizes))))
            ax.set_xticklabels([f"{n} nodes" for n in sizes])
            ax.set_ylabel("seconds")
            ax.set_title(f"{title} ({wl})", fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=7)
    cfg = runs[0].get("config", {})
    fig.suptitle(
        f"Part 2: reaction time (hot-plug {cfg.get('hotplug_latency')} s, "
        f"relabel {cfg.get('advertise_delay')} s, baseline scan {cfg.get('scan_interval')} s)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_savings(d: dict[str, Any], path: Path) -> bool:
    """p99 pending time against total GPUs, pool vs fixed, for the bursty trace."""
    plt = _plt()
    if plt is None:
        return False
    c = d["curve"]
    fig, ax = plt.subplots(figsize=(7, 4))
    big = 1e6
    for mode, style in (("pool", "o-"), ("fixed", "s-")):
        pts = c[mode]
        ax.semilogy(
            [p["gpus"] for p in pts],
            [max(0.5, p["p99"] if p["p99"] is not None else big) for p in pts],
            style,
            label=mode,
        )
    for case in d["cases"]:
        if case["trace"] == c["trace"] and case["idle_timeout_seconds"] == c["idle_timeout_seconds"]:
            ax.axhline(case["target_seconds"], color="grey", ls=":", lw=1)
    ax.set_xlabel("GPUs in total")
    ax.set_ylabel("p99 pending time, s (log; 0 shown as 0.5)")
    ax.set_title(f"Part 3: {c['trace']} (idle timeout {c['idle_timeout_seconds']:.0f} s)")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_preview(d: dict[str, Any], path: Path) -> bool:
    """Preview wall time split into program-alive and engine-after time, and peak memory."""
    plt = _plt()
    if plt is None:
        return False
    rows = [r for r in d["stacks"] if r["preview"].get("ok")]
    if not rows:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    labels = [f"{r['stack']}\n{r['hosts']} hosts" for r in rows]
    prog = [r["preview"]["program"].get("alive_seconds", 0) for r in rows]
    eng = [r["preview"].get("engine_seconds", 0) for r in rows]
    mocks = [r["mocks"].get("seconds", 0) for r in rows]
    xs = list(range(len(rows)))
    a.bar(xs, prog, label="program process alive")
    a.bar(xs, eng, bottom=prog, label="engine/CLI outside it")
    a.plot(xs, mocks, "k^", label="program under mocks")
    a.plot(
        xs,
        [r["preview"]["program"].get("cpu_seconds", 0) for r in rows],
        "rD",
        label="program CPU (real run)",
    )
    a.set_xticks(xs)
    a.set_xticklabels(labels, fontsize=8)
    a.set_ylabel("seconds")
    a.legend(fontsize=8)
    a.grid(True, axis="y", alpha=0.3)
    b.bar(xs, [r["preview"]["peak_tree_rss_mib"] for r in rows])
    b.set_xticks(xs)
    b.set_xticklabels(labels, fontsize=8)
    b.set_ylabel("peak RSS of the process tree, MiB")
    b.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Part 4: pulumi preview cost")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- sections ---------------------------------------------------------------------------------
def _machine(m: dict[str, Any]) -> str:
    pk = ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items() if v)
    bins = "; ".join(f"{k}: {v}" for k, v in m.get("binaries", {}).items() if v)
    return "\n".join(
        [
            "## Machine and versions",
            "",
            f"- CPU: {m.get('cpu_model')}, {m.get('cores')} logical cores; memory {m.get('memory_mib')} MiB",
            f"- load average at start (1/5/15 min): {m.get('loadavg')} — the machine is shared, so "
            "figures carry that noise",
            f"- Python {m.get('python')} on {m.get('platform')}",
            f"- packages: {pk}",
            f"- binaries: {bins or 'not on PATH'}",
            f"- measured at {m.get('timestamp')}",
        ]
    )


def _planner(d: dict[str, Any], plotted: bool) -> str:
    rows = [
        [
            r["label"],
            r["ms_median"],
            r["ms_min"],
            r["ms_max"],
            r["peak_round_mib"],
            r["input_mib"],
            r["placements"],
            r["refusals"],
        ]
        for r in d["sizes"] + d["pod_sweep"]
    ]
    verdict = {True: "met", False: "NOT met", None: "not measured (no 1,000-host size in this run)"}[
        d["target_met"]
    ]
    prof = _table(
        ["function", "calls", "tottime s", "cumtime s"],
        [[p["function"], p["calls"], p["tottime_s"], p["cumtime_s"]] for p in d["profile"]["top"][:10]],
        nd=4,
    )
    return "\n".join(
        [
            "## 1. Planner: time per planning round",
            "",
            f"One round = one `composer.decide.planner.plan(requests, hosts, free_gpus)` call on a generated "
            f"world (seed {d['seed']}; {'/'.join(d['world']['models'])} models, "
            f"{d['world']['slots_per_host']} GPU slots per host, {d['world']['gpus_per_switch']} GPUs per "
            "PCIe switch; a fifth of the hosts already carry GPUs, a tenth are tainted; pods of 1/2/4/8 "
            f"GPUs, 5 % pinned). Time: `perf_counter` over {d['sizes'][0]['repeats']} rounds; memory: "
            "`tracemalloc` peak of one round (separate run).",
            "",
            _table(
                [
                    "hosts/GPUs/pods",
                    "median ms",
                    "min ms",
                    "max ms",
                    "peak MiB",
                    "inputs MiB",
                    "placed",
                    "refused",
                ],
                rows,
            ),
            "",
            f"- Target < 100 ms per round at 1,000 hosts (median round): **{verdict}**; fastest round: "
            f"{ {True: 'under', False: 'over', None: 'n/a'}[d.get('target_met_best_round')] } 100 ms "
            f"(load average before/after this part: {d.get('loadavg_before_after', '?')}).",
            f"- Growth exponent k (time ∝ size^k) between consecutive sizes: {d['growth_exponents']} "
            "(1 = linear).",
            "- At scale most pods are refused (demand > free GPUs); refusals walk candidate lists and "
            "cost more than placements, so this is the expensive case.",
            "",
            f"cProfile of the {d['profile']['size']} round (profiler overhead inflates totals; read "
            "the shares):",
            "",
            prof,
            "",
            "![planner](planner.png)" if plotted else "(plot skipped: matplotlib not installed)",
            "",
            f"Reproduce: `{d['command']}`",
        ]
    )


def _commit(d: dict[str, Any]) -> str:
    c = d.get("commit") or {}
    if not c.get("sha"):
        return "Commit measured: not recorded."
    return f"Commit measured: `{c['sha'][:12]}`" + (
        f" (with uncommitted changes under {', '.join(c.get('paths') or ['composer', 'bench', 'charts'])})."
        if c.get("dirty")
        else "."
    )


def _reaction(d: dict[str, Any], plotted: bool) -> str:
    lines = ["## 2. Reaction time on the lab", "", _commit(d), ""]
    runs = d["runs"]
    cfg = next((r["config"] for r in runs if r.get("config")), {})
    if cfg:
        lines += [
            f"Hot-plug latency L = {cfg['hotplug_latency']} s per Director reprogram; GPU-agent relabel "
            f"delay D = {cfg['advertise_delay']} s (polling every {cfg['agent_interval']} s); pods of one "
            f"GPU arrive with exponential gaps of mean {cfg['mean_interarrival']} s; hosts take "
            f"{cfg['max_gpus_per_node']} GPUs; baseline scans every {cfg['scan_interval']} s. "
            "Every mode is measured from the pod's creation: overhead = (creation → Running) − L − D. "
            "Quantiles are nearest-rank over the pods of a run. Workloads: `pinned` (pod i selects node "
            "i mod N by `kubernetes.io/hostname`: a composed GPU can only serve its "
            "host's pods) and `unpinned` (any host). `composer + gating`: the composer's admission "
            "webhook gates each new pod (scheduling gate `composer.liqid.io/compose`), the composer "
            "reserves GPUs for it and, once they are advertised, pins it to their node and removes the "
            "gate; `composer DRA`: the composer as the DRA driver (below); `taken` counts GPUs composed "
            "for one pod that another pod got (`composer_gpus_taken_by_another_pod_total`; in DRA mode "
            "derived from the claims, below); in DRA mode advertise = attached → the node's "
            "`nvidia.com/gpu.count` label changed.",
            "",
        ]
    rows = []
    for r in runs:
        if r.get("error"):
            rows.append(
                [
                    _label(r),
                    r.get("workload", "–"),
                    r["nodes"],
                    r.get("pods"),
                    f"error: {r['error'][:80]}",
                ]
                + [None] * 10
            )
            continue
        s = r["stats"]

        def g(k: str, q: str, s: dict[str, Any] = s) -> Any:
            return (s.get(k) or {}).get(q)

        m = r.get("metrics") or {}
        rnd = (
            m.get("composer_round_seconds_sum", 0) / m["composer_round_seconds_count"]
            if m.get("composer_round_seconds_count")
            else None
        )
        rows.append(
            [
                _label(r),
                r.get("workload", "unpinned"),
                r["nodes"],
                f"{r['pods']} ({r.get('not_running', 0)} not running)",
                g("to_issue", "p50"),
                g("to_issue", "p99"),
                g("to_running", "p50"),
                g("to_running", "p99"),
                g("overhead", "p50"),
                g("overhead", "p99"),
                g("overhead", "max"),
                g("director", "mean"),
                g("advertise", "mean"),
                rnd,
                taken(r),
            ]
        )
    lines.append(
        _table(
            [
                "controller",
                "workload",
                "nodes",
                "pods",
                "→issue p50",
                "→issue p99",
                "→Running p50",
                "→Running p99",
                "overhead p50",
                "overhead p99",
                "overhead max",
                "director mean",
                "advertise mean",
                "round mean s",
                "taken",
            ],
            rows,
        )
    )
    lines.append("")
    if d.get("comparison"):
        lines.append(
            f"Baseline ({cfg.get('scan_interval')} s periodic scan) over composer, same workload "
            "(ratio > 1: the baseline is slower):"
        )
        lines.append("")
        lines.append(
            _table(
                [
                    "composer",
                    "workload",
                    "nodes",
                    "→issue mean",
                    "→issue p50",
                    "→issue p99",
                    "→Running mean",
                    "→Running p50",
                    "→Running p99",
                ],
                [
                    [
                        {"gating": "+ gating", "dra": "DRA"}.get(
                            c.get("mode") or ("gating" if c.get("gating") else "plain"), "plain"
                        ),
                        c.get("workload", "unpinned"),
                        c["nodes"],
                        *[c["baseline_over_composer"]["to_issue"][q] for q in ("mean", "p50", "p99")],
                        *[c["baseline_over_composer"]["to_running"][q] for q in ("mean", "p50", "p99")],
                    ]
                    for c in d["comparison"]
                ],
            )
        )
        lines.append("")
    stuck_runs = [r for r in runs if r.get("stuck")]
    if stuck_runs:
        lines.append(
            f"Pods not Running {stuck_runs[0]['config']['settle_timeout']:.0f} s after the last arrival "
            "(left out of the quantiles above), with the pod's last intent (node, phase):"
        )
        lines.append("")
        for r in stuck_runs:
            where = ", ".join(
                f"{x['pod']} ({(x.get('last_intent') or {}).get('node', '?')}, "
                f"{(x.get('last_intent') or {}).get('phase', 'none')})"
                for x in r["stuck"][:6]
            )
            more = f" and {len(r['stuck']) - 6} more" if len(r["stuck"]) > 6 else ""
            lines.append(
                f"- {_label(r)} / {r.get('workload', 'unpinned')} / {r['nodes']} nodes: "
                f"{len(r['stuck'])}: {where}{more}"
            )
        lines += [
            "",
            "A pod's last intent says where the composer last composed for it; `none` means no intent "
            "was open when the run ended (the pod was waiting to be planned, or its intent had been "
            "dropped because another pod took the GPUs).",
            "",
        ]
    at = sorted(
        (
            r
            for r in runs
            if _mode(r) == ("composer", "plain")
            and r.get("nodes") == d["target"]["at_nodes"]
            and r.get("stats")
        ),
        key=lambda r: r.get("workload") != "pinned",  # the pinned workload measures the overhead cleanly
    )
    if at:
        p99 = at[0]["stats"]["overhead"].get("p99")
        ok = p99 is not None and p99 < d["target"]["overhead_p99_seconds"]
        lines.append(
            f"- Target p99 overhead < 1 s at 1,000 nodes ({at[0].get('workload', 'unpinned')} workload): "
            f"**{'met' if ok else 'NOT met'}** (p99 = {_fmt(p99)} s)."
        )
    else:
        lines.append("- Target p99 overhead < 1 s at 1,000 nodes: not measured in this run.")
    lines += _gating_findings(d)
    unpinned = [
        r
        for r in runs
        if _mode(r) == ("composer", "plain") and r.get("workload") == "unpinned" and r.get("stats")
    ]
    if unpinned:
        lines.append(
            "- Unpinned workload: the composer's own step stays short (→issue p50 "
            + ", ".join(f"{_fmt(r['stats']['to_issue'].get('p50'))} s at {r['nodes']}" for r in unpinned)
            + " nodes; "
            + ", ".join(f"{r.get('composes')} composes for {r['pods']} pods" for r in unpinned)
            + "), but without gating the tail is who gets which GPU: the scheduler binds a freshly "
            "advertised GPU to whichever pending pod it tries first, so some pods lose their GPU to "
            "another pod and wait for a later one (advertised → bound p99 "
            + ", ".join(f"{_fmt((r['stats'].get('schedule') or {}).get('p99'))} s" for r in unpinned)
            + "; their →issue is then matched to the later compose on the node they ran on). The "
            "periodic-scan baseline on the same workload: overhead p99 "
            + ", ".join(
                f"{_fmt(((b.get('stats') or {}).get('overhead') or {}).get('p99'))} s at {b['nodes']}"
                for b in runs
                if b.get("controller") == "baseline" and b.get("workload") == "unpinned"
            )
            + " nodes."
        )
    slo = d["ca_slo"]
    lines += [
        f"- Reference: cluster-autoscaler's published SLO for unschedulable → scale-up at {slo['nodes']} "
        f"nodes is ≤ {slo['max_seconds']} s, about {slo['average_seconds']} s on average ({slo['source']}); "
        "that covers its decision only, not node provisioning.",
        "- The breakdown columns (means): director = fabric/edit received → reprogram answered (≈ L); "
        "advertise = attached → node allocatable changed (≈ D + agent polling). The rest of the overhead is "
        "the composer's detection and planning (→issue), the scheduler's requeue of the pod and kwok.",
        "- How the composer gets there: pods, nodes and pool namespaces come from watch-fed caches "
        "(`composer.shell.cache`, the Kubernetes client's `SharedInformer`), so a round costs no API reads; "
        + _timing_clause(d.get("composer_timing"))
        + "a compose reads where its GPUs are (`predevice`) while its intent is being written, takes their "
        "status records from the composer's last whole read instead of reading 1,000 again, and checks "
        "the machine with one `predevice?mach_id=` after the reprogram; a clean compose is "
        "applied to the composer's cached read instead of reading 1,000 GPUs again, and that read is "
        "refreshed in the background (`composer.shell.fabric_cache`) so no round waits for it; a batch "
        "of pinned pods is planned on its own hosts only. With gating, a pod is "
        "released (pinned + ungated) in the round that sees its GPUs advertised, so the scheduler takes it "
        "from its active queue at once instead of retrying an unschedulable pod.",
        "",
        *wait_steps_section(d),
        "",
        *dra_section(d),
        "",
        "![reaction](reaction.png)" if plotted else "(plot skipped: matplotlib not installed or no data)",
        "",
        f"Reproduce: `{d['command']}`"
        + (
            f" (the {'/'.join(d['carried_over']['workloads'])} rows come from an earlier run of the same "
            f"part, `{d['carried_over']['from']}`; this run re-ran the other workload(s) with "
            "`--workloads`)"
            if d.get("carried_over")
            else ""
        ),
    ]
    return "\n".join(lines)


def _gating_findings(d: dict[str, Any]) -> list[str]:
    """The gating targets, per fleet size measured, each sentence computed from the runs."""
    runs = [r for r in d["runs"] if r.get("stats")]
    sizes = sorted({r["nodes"] for r in runs if _mode(r) == ("composer", "gating")})
    if not sizes:
        return ["- Gating: not measured in this run."]

    def find(n: int, wl: str, mode: tuple[str, str]) -> dict[str, Any] | None:
        return next(
            (r for r in runs if r["nodes"] == n and r.get("workload") == wl and _mode(r) == mode), None
        )

    def p99(r: dict[str, Any] | None) -> float | None:
        return ((r or {}).get("stats", {}).get("overhead") or {}).get("p99")

    def ok(flag: bool | None) -> str:
        return "not measured" if flag is None else ("met" if flag else "NOT met")

    out = []
    target = d["target"]
    for n in sizes:
        un, pin = find(n, "unpinned", ("composer", "gating")), find(n, "pinned", ("composer", "gating"))
        bu, bp = find(n, "unpinned", ("baseline", "plain")), find(n, "pinned", ("baseline", "plain"))
        u99, p_99 = p99(un), p99(pin)
        gap = None if u99 is None or p_99 is None else round(u99 - p_99, 3)
        took = [taken(r or {}) for r in (un, pin)]
        none_taken = None if None in took else sum(t or 0.0 for t in took) == 0
        not_running = sum((r or {}).get("not_running", 0) for r in (un, pin))
        ratios = [
            (wl, None if p99(b) is None or not p99(g) else round(p99(b) / p99(g), 1))
            for wl, g, b in (("pinned", pin, bp), ("unpinned", un, bu))
        ]
        judged = " (the issue's targets are judged here)" if n == target["at_nodes"] else ""
        limit = target["overhead_p99_seconds"]
        tenfold = None if any(x is None for _, x in ratios) else all(x >= 10 for _, x in ratios)
        out.append(
            f"- Gating at {n} nodes{judged}: unpinned p99 overhead {_fmt(u99)} s (target < "
            f"{limit:g} s: **{ok(None if u99 is None else u99 < limit)}**); "
            f"pinned p99 {_fmt(p_99)} s in the same run, difference {_fmt(gap)} s (target ≤ 0.3 s: "
            f"**{ok(None if gap is None else gap <= 0.3)}**); GPUs taken by another pod: "
            + " / ".join("–" if t is None else f"{t:g}" for t in took)
            + f" (unpinned / pinned; target 0: **{ok(none_taken)}**); pods "
            f"not Running: {not_running}; baseline p99 / gated p99: "
            + ", ".join(f"{wl} {_fmt(x)}×" for wl, x in ratios)
            + f" (target ≥ 10× on both: **{ok(tenfold)}**)."
        )
    if target["at_nodes"] not in sizes:
        out.append(f"- Gating at {target['at_nodes']:,} nodes: not measured in this run.")
    return out


def _savings(d: dict[str, Any], plotted: bool) -> str:
    rows = []
    for c in d["cases"]:
        p, f = c.get("pool") or {}, c.get("fixed") or {}
        rows.append(
            [
                c["trace"],
                c["hosts"],
                c["idle_timeout_seconds"],
                c["target_seconds"],
                p.get("gpus"),
                f.get("gpus"),
                f.get("per_host"),
                c.get("pool_over_fixed"),
                p.get("utilisation"),
                f.get("utilisation"),
                p.get("p99_pending_seconds"),
                f.get("p99_pending_seconds"),
            ]
        )
    traces = "; ".join(
        f"{k}: {v['pods']} pods over {v['arrival_span_hours']} h, {v['gpu_hours']} GPU-h, "
        f"{v['pinned']} pinned"
        for k, v in d["traces"].items()
    )
    return "\n".join(
        [
            "## 3. GPU savings: composable pool vs GPUs fixed per host",
            "",
            "Discrete-event replay of a pod trace through `composer.decide.planner.plan` (pool: compose "
            f"takes {d['cases'][0]['compose_seconds']:.0f} s, hosts take up to "
            f"{d['cases'][0]['slots_per_host']} GPUs, "
            "idle hosts give GPUs back after the idle timeout) against hosts with a fixed GPU count. "
            "Smallest GPU count for which 99 % of pods wait at most the target. Traces: " + traces + ". "
            "The trace files used are written beside this report (format: `bench/trace.py`).",
            "",
            _table(
                [
                    "trace",
                    "hosts",
                    "idle timeout s",
                    "target s",
                    "pool GPUs",
                    "fixed GPUs",
                    "fixed per host",
                    "pool/fixed",
                    "pool util",
                    "fixed util",
                    "pool p99 wait s",
                    "fixed p99 wait s",
                ],
                rows,
            ),
            "",
            "- Two hosts handing over two pooled GPUs (taking turns with one 2-GPU pod): see the `article` "
            "rows.",
            "- Utilisation = GPU-seconds of running pods / (GPUs × span); a bursty trace leaves any pool "
            "sized for its bursts idle most of the day, fixed GPUs more so.",
            "- Fixed hosts need at least the largest pod's GPU count each (the curve's fixed points start "
            "there); pinned pods wait for their own host's GPUs.",
            "",
            "![savings](savings.png)" if plotted else "(plot skipped: matplotlib not installed)",
            "",
            f"Reproduce: `{d['command']}`; your own trace: `python -m bench --only savings --trace FILE.csv`",
        ]
    )


def _mock_profile(row: dict[str, Any]) -> list[str]:
    top = (row.get("mocks") or {}).get("profile_by_tottime")
    if not top:
        return []
    return [
        "",
        f"Where the program's own time goes at {row['stack']} (cProfile under mocks, top functions by own "
        "time; profiler overhead inflates totals):",
        "",
        _table(
            ["function", "calls", "tottime s", "cumtime s"],
            [[p["function"], p["calls"], p["tottime_s"], p["cumtime_s"]] for p in top[:12]],
            nd=3,
        ),
    ]


def _env_bytes(p: dict[str, Any], kind: str) -> Any:
    """The config bytes measured in the environment of the process kind ``kind`` (``program``: the
    language host's runner of ``__main__.py``; ``analyzer``: the policy pack), or None."""
    seen = p.get("config_env_bytes_by_process") or {}
    if kind == "program":
        found = [v for k, v in seen.items() if "language-python-exec" in k]
        if not found and p.get("program", {}).get("config_env_bytes") is not None:
            found = [p["program"]["config_env_bytes"]]
    else:
        found = [v for k, v in seen.items() if k.endswith("policies")]
    return max(found) if found else None


def _config_table(d: dict[str, Any]) -> list[str]:
    """The configuration handed to the program and the analyzer, per previewed or validated stack."""
    rows = []
    for r in d["stacks"]:
        config = r.get("config") or {}
        rows.append([r["stack"], r["hosts"], config.get("config_bytes"), _env_bytes(r["preview"], "program"),
                     _env_bytes(r["preview"], "analyzer"), config.get("inline_config_bytes"), "preview"])
    rows += [
        [v["stack"], v["hosts"], v.get("config_bytes"), None, None, v.get("inline_config_bytes"),
         f"validated in {v.get('validation_seconds')} s" + ("" if v.get("ok") else " (FAILED)")]
        for v in d.get("validated", [])
    ]
    if not any(r[2] is not None for r in rows):
        return []
    return [
        "",
        "Configuration handed to the program (in one environment variable, `PULUMI_CONFIG`; Linux caps one "
        "at 128 KiB) and to the analyzer (the policy pack; this CLI passes it in the analyzer's "
        "`ConfigureStack` call, so its environment holds none): the stack file's config as the engine "
        "passes it (secrets counted as their ciphertext, an upper bound), the bytes measured in the "
        "program's and the policy pack's environment during the preview, and what the same estate would "
        "weigh inline in `composable-gpu:estate`:",
        "",
        _table(["stack", "hosts", "config bytes", "program env bytes", "analyzer env bytes",
                "inline estate bytes", "run"], rows, nd=0),
    ]


def _preview(d: dict[str, Any], plotted: bool) -> str:
    rows = []
    for r in d["stacks"]:
        p, m = r["preview"], r["mocks"]
        prog = p.get("program", {})
        rows.append(
            [
                r["stack"],
                r["hosts"],
                p.get("resources"),
                p["wall_seconds"],
                p["peak_tree_rss_mib"],
                prog.get("construct_seconds"),
                prog.get("cpu_seconds"),
                prog.get("alive_seconds"),
                p.get("engine_seconds"),
                prog.get("maxrss_mib"),
                m.get("seconds"),
                m.get("tracemalloc_peak_mib"),
                "ok" if p.get("ok") else f"exit {p.get('exit_code')}",
            ]
        )
    fails = [
        f"- {r['stack']}: `{(r['preview'].get('tail') or '').strip()[-400:]}`"
        for r in d["stacks"]
        if not r["preview"].get("ok")
    ]
    biggest = max(d["stacks"], key=lambda r: r["hosts"])
    procs = ", ".join(f"{k} {v}" for k, v in biggest["preview"].get("peak_rss_by_process_mib", {}).items())
    return "\n".join(
        [
            "## 4. Preview cost",
            "",
            _commit(d),
            "",
            "`pulumi preview` (with the policy pack) of the dev stack and of generated fleets, each in a "
            "temporary copy of the program with its own file backend, against the benchmark's own control "
            "plane; every estate is an inventory folder (hosts in files of 32). Program time is measured "
            "inside the real run (wrapper around `__main__.py`) and again under Pulumi mocks (no engine).",
            "",
            _table(
                [
                    "stack",
                    "hosts",
                    "resources",
                    "wall s",
                    "peak tree RSS MiB",
                    "program construct s",
                    "program CPU s",
                    "program alive s",
                    "engine after s",
                    "program RSS MiB",
                    "mocks s",
                    "mocks tracemalloc MiB",
                    "result",
                ],
                rows,
            ),
            "",
            f"- Peak RSS per process kind at {biggest['stack']}: {procs}.",
            "- wall = median of "
            f"{biggest['preview'].get('runs', 1)} run(s); all runs: "
            + "; ".join(
                f"{r['stack']} {r['preview'].get('wall_seconds_all', [r['preview']['wall_seconds']])}"
                for r in d["stacks"]
            )
            + " s.",
            "- construct = the program's module code (config validation, component construction); CPU = the "
            "program process's user+system time over its whole life (it also serialises every registration "
            "for the engine); engine after = wall − program alive (CLI start, plugins, provider checks/diffs "
            "that finish after the program).",
            *fails,
            *_config_table(d),
            *_mock_profile(biggest),
            "",
            "![preview](preview.png)" if plotted else "(plot skipped: matplotlib not installed or no data)",
            "",
            f"Reproduce: `{d['command']}`",
        ]
    )


def write_report(out: Path) -> Path:
    """(Re)write ``out/REPORT.md`` and the plots from the JSON files in ``out``; returns the path."""
    data = load(out)
    parts = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`python -m bench`); every figure below is read from "
        "`bench/results/*.json`. `python -m bench --quick` is the smoke-test size.",
        "",
    ]
    if "machine" in data:
        parts += [_machine(data["machine"]), ""]
    sections = {
        "planner": (_planner, plot_planner),
        "reaction": (_reaction, plot_reaction),
        "savings": (_savings, plot_savings),
        "preview": (_preview, plot_preview),
        "fleet": (lambda d, _plotted: fleet_section(d, commit_line=_commit(d)), lambda _d, _path: False),
    }
    for name in PARTS:
        d = data.get(name)
        if d is None:
            continue
        text, plot = sections[name]
        if d.get("error"):
            parts += [f"## {name}", "", f"Failed: `{d['error']}`", ""]
            continue
        plotted = plot(d, out / f"{name}.png")
        parts += [text(d, plotted), ""]
    path = out / "REPORT.md"
    path.write_text("\n".join(parts))
    fleet = data.get("fleet")
    if fleet is not None and not fleet.get("error"):
        machine = [_machine(data["machine"]), ""] if "machine" in data else []
        (out / "FLEET.md").write_text("\n".join(["# Fleet benchmark", "", *machine,
                                                  fleet_section(fleet, commit_line=_commit(fleet)), ""]))
    return path


def _timing_clause(timing: dict[str, float] | None) -> str:
    """The composer's waits as the measured run recorded them (empty for older JSON)."""
    if not timing:
        return ""
    after = timing["round_after_change_seconds"] * 1000
    idle, most = timing["batch_idle_seconds"] * 1000, timing["batch_max_seconds"]
    return (
        f"a round runs {after:.0f} ms after a change that alters what the composer decides on, gated pods "
        f"are planned once none arrived for {idle:.0f} ms (at the latest after {most:g} s); "
    )
