"""``python -m bench``: run the benchmarks, write ``bench/results/*.json``, ``REPORT.md`` and plots.

Examples::

    python -m bench                        # everything (about 45 min on 2 cores)
    python -m bench --quick                # smoke-test sizes, into bench/results/quick/
    python -m bench --only planner,savings # some parts; the report is rebuilt from all JSONs
    python -m bench --only savings --trace my-trace.csv
    python -m bench --report-only          # rebuild REPORT.md and plots from the JSONs

Exit code 1 when a part failed (its JSON then holds ``error``), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench import machine, report

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
#: Run order: the lab-bound reaction part, the longest, last.
RUN_ORDER = ("planner", "savings", "preview", "reaction")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _part(name: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    if name == "planner":
        from bench import planner_bench

        return planner_bench.run(quick=args.quick)
    if name == "savings":
        from bench import savings

        return savings.run(quick=args.quick, out_dir=out, trace_path=args.trace)
    if name == "preview":
        from bench import preview
        from bench.labctl import isolated_control_plane

        with (
            tempfile.TemporaryDirectory(prefix="bench-preview-lab-") as tmp,
            isolated_control_plane(Path(tmp), ("blade-slot-1", "blade-slot-2")) as lab,
        ):
            return preview.run(
                quick=args.quick,
                kubeconfig=lab.kubeconfig,
                ca_pem=lab.cfg.pki_dir / "ca.crt",
                fleets=args.fleets,
            )
    if name == "reaction":
        from bench import reaction

        result = reaction.run(quick=args.quick, sizes=args.nodes, pods=args.pods, workloads=args.workloads)
        return _keep_other_workloads(result, out / "reaction.json", args.workloads)
    raise ValueError(f"unknown part {name!r}")


def _keep_other_workloads(
    result: dict[str, Any], previous: Path, ran: tuple[str, ...] | None
) -> dict[str, Any]:
    """With ``--workloads``, carry over the previous file's runs of the workloads not re-run
    (runs without a ``workload`` key predate it and were ``unpinned``)."""
    if not ran or not previous.exists():
        return result
    try:
        old = json.loads(previous.read_text())
    except ValueError:
        return result
    keep = [r for r in old.get("runs", []) if r.get("workload", "unpinned") not in ran and "controller" in r]
    for r in keep:
        r.setdefault("workload", "unpinned")
    comp = [c for c in old.get("comparison", []) if c.get("workload", "unpinned") not in ran]
    for c in comp:
        c.setdefault("workload", "unpinned")
    result["runs"] = keep + result["runs"]
    result["comparison"] = comp + result["comparison"]
    if keep:
        cmd = old.get("command") or "python -m bench --only reaction"
        if "--workloads" not in cmd:
            cmd += " --workloads " + ",".join(sorted({r["workload"] for r in keep}))
        result["carried_over"] = {"workloads": sorted({r["workload"] for r in keep}), "from": cmd}
    return result


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code. SIGTERM unwinds like Ctrl-C (``SystemExit``), so every
    part stops the processes it started."""
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smoke-test sizes (seconds per part)")
    ap.add_argument(
        "--only",
        default=",".join(report.PARTS),
        help=f"comma-separated parts (default: all of {','.join(report.PARTS)})",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results directory (default bench/results, or bench/results/quick with --quick)",
    )
    ap.add_argument("--trace", type=Path, default=None, help="savings: replay this .csv/.jsonl trace")
    ap.add_argument("--nodes", type=_ints, default=None, help="reaction: fleet sizes, e.g. 10,100,1000")
    ap.add_argument("--pods", type=int, default=None, help="reaction: pods per run")
    ap.add_argument(
        "--workloads",
        type=lambda t: tuple(x for x in t.split(",") if x),
        default=None,
        help="reaction: pinned,unpinned (default both; only pinned with --quick)",
    )
    ap.add_argument(
        "--fleets", type=_ints, default=None, help="preview: generated fleet sizes, e.g. 16,64,256"
    )
    ap.add_argument("--report-only", action="store_true", help="only rebuild REPORT.md and plots")
    args = ap.parse_args(argv)
    out = args.out or (DEFAULT_OUT / "quick" if args.quick else DEFAULT_OUT)
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    if not args.report_only:
        parts = [p.strip() for p in args.only.split(",") if p.strip()]
        unknown = [p for p in parts if p not in report.PARTS]
        if unknown:
            print(f"unknown part(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        (out / "machine.json").write_text(json.dumps(machine.describe(), indent=1))
        for name in RUN_ORDER:
            if name not in parts:
                continue
            t0 = time.monotonic()
            load_before = [round(x, 2) for x in os.getloadavg()]
            print(f"[bench] {name} ...", flush=True)
            try:
                result = _part(name, args, out)
            except Exception as exc:  # a failed part is reported in its JSON and the exit code
                traceback.print_exc()
                result = {"part": name, "error": f"{type(exc).__name__}: {exc}"}
                failed.append(name)
            result["elapsed_seconds"] = round(time.monotonic() - t0, 1)
            result["loadavg_before_after"] = [load_before, [round(x, 2) for x in os.getloadavg()]]
            (out / f"{name}.json").write_text(json.dumps(result, indent=1))
            print(f"[bench] {name} done in {result['elapsed_seconds']} s", flush=True)
    path = report.write_report(out)
    print(f"[bench] report: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
