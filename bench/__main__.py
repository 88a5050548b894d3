"""``python -m bench``: run the benchmarks, write ``bench/results/*.json``, ``REPORT.md`` and plots.

Examples::

    python -m bench                        # everything (about 60 min on 2 cores)
    python -m bench --quick                # smoke-test sizes, into bench/results/quick/
    python -m bench --only planner,savings # some parts; the report is rebuilt from all JSONs
    python -m bench --only savings --trace my-trace.csv
    python -m bench --only fleet --fleet-size 200,20 # a smaller split estate than 1,000 hosts/100 tenants
    python -m bench --report-only          # rebuild REPORT.md and plots from the JSONs

Exit code 1 when a part failed (its JSON then holds ``error``), else 0.

Run outside ``lab/env.sh`` (no ``COMPOSABLE_GPU_ROOT`` in the environment), it runs itself again
inside it (``bash -c 'source lab/env.sh && exec python -m bench ...'``), so the toolchain, the
virtualenv and the Pulumi home with its plugins are the ones ``make setup`` made; without the
toolchain it stops with one line naming the command to run.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import machine, report

if TYPE_CHECKING:
    from bench.labctl import IsolatedLab

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results"
#: Parts that drive the toolchain's binaries (pulumi, kube-apiserver, ...).
TOOLCHAIN_PARTS = ("preview", "fleet", "reaction")
#: Run order: the lab-bound reaction part, the longest, last.
RUN_ORDER = ("planner", "savings", "preview", "fleet", "reaction")


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

        with _control_plane(name) as lab:
            return preview.run(
                quick=args.quick,
                kubeconfig=lab.kubeconfig,
                ca_pem=lab.cfg.pki_dir / "ca.crt",
                fleets=args.fleets,
                repeats=args.repeats,
                validate_sizes=args.validate_fleets,
            )
    if name == "fleet":
        from bench import fleet

        size: list[int | None] = [*(args.fleet_size or ()), None, None, None]
        hosts, tenants, rack_size = size[:3]
        with _control_plane(name) as lab:
            return fleet.run(
                quick=args.quick,
                kubeconfig=lab.kubeconfig,
                ca_pem=lab.cfg.pki_dir / "ca.crt",
                hosts=hosts,
                tenants=tenants,
                rack_size=rack_size,
                parallel=args.parallel,
            )
    if name == "reaction":
        from bench import reaction

        result = reaction.run(
            quick=args.quick,
            sizes=args.nodes,
            pods=args.pods,
            workloads=args.workloads,
            modes=args.modes or reaction.MODES,
        )
        return _keep_other_workloads(result, out / "reaction.json", args.workloads)
    raise ValueError(f"unknown part {name!r}")


@contextmanager
def _control_plane(part: str) -> Iterator[IsolatedLab]:
    """The benchmark's own control plane (:func:`bench.labctl.isolated_control_plane`) in a
    temporary folder, two kwok Nodes, for a part whose previews need a reachable API server."""
    from bench.labctl import isolated_control_plane

    with (
        tempfile.TemporaryDirectory(prefix=f"bench-{part}-lab-") as tmp,
        isolated_control_plane(Path(tmp), ("blade-slot-1", "blade-slot-2")) as lab,
    ):
        yield lab


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


def toolchain_missing(root: Path = ROOT) -> str | None:
    """One line saying what to run when the toolchain (``.toolchain/bin/pulumi``) is not built."""
    if (root / ".toolchain" / "bin" / "pulumi").exists():
        return None
    return "python -m bench: the toolchain is not built (.toolchain/bin/pulumi is missing): run make setup"


def in_lab_env(environ: dict[str, str]) -> bool:
    """True inside ``lab/env.sh`` (it sets ``COMPOSABLE_GPU_ROOT`` with PATH and ``PULUMI_HOME``)."""
    return environ.get("COMPOSABLE_GPU_ROOT") is not None


def _reexec_in_env(argv: list[str]) -> None:
    """Replace this process by ``python -m bench argv`` inside ``lab/env.sh`` (never returns)."""
    script = 'source lab/env.sh && exec python -m bench "$@"'
    os.chdir(ROOT)
    os.execvp("bash", ["bash", "-c", script, "bench", *argv])


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
        "--modes",
        type=lambda t: tuple(x for x in t.split(",") if x),
        default=None,
        help="reaction: plain,gating,dra,baseline (default all, run in that order)",
    )
    ap.add_argument(
        "--fleets", type=_ints, default=None, help="preview: generated fleet sizes, e.g. 16,64,256"
    )
    ap.add_argument("--repeats", type=int, default=None, help="preview: runs per stack (default 3, quick 1)")
    ap.add_argument(
        "--validate-fleets",
        type=_ints,
        default=None,
        help="preview: fleet sizes generated and validated only, no preview (default 10000)",
    )
    ap.add_argument(
        "--fleet-size",
        type=_ints,
        default=None,
        help="fleet: HOSTS,TENANTS[,HOSTS_PER_RACK] of the generated split estate (default 1000,100,32)",
    )
    ap.add_argument("--parallel", type=int, default=2, help="fleet: stacks previewed at a time (default 2)")
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
        if set(parts) & set(TOOLCHAIN_PARTS):
            missing = toolchain_missing()
            if missing:
                print(missing, file=sys.stderr)
                return 2
            if not in_lab_env(dict(os.environ)):
                if argv is None:  # run as a command: the same command inside lab/env.sh
                    _reexec_in_env(sys.argv[1:])
                print("python -m bench: not inside lab/env.sh: run source lab/env.sh && python -m bench",
                      file=sys.stderr)
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
