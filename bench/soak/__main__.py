"""``python -m bench.soak [--seconds N] [--seed S]``: the soak on the lab (``make soak``).

Starts (or adopts) the lab's control plane as the test suite's ``lab`` fixture does
(``lab.controlplane.start``), applies the composer chart's RBAC and runs one scenario of the
composer's lab harness (``tests.composer.harness``: Director simulator with the ``rich.yaml``
inventory, four kwok Nodes, the GPU-Operator stand-in, the composer as a process with the
pod-gating webhook) behind a cuttable relay, then :func:`bench.soak.run.soak`. Writes
``<out>/soak-<seed>.json`` and ``<out>/SOAK.md``. Exit code 1 when an invariant was violated;
then the run's process logs (composer replicas, Director simulator, GPU-Operator stand-in) are
kept in ``.lab/soak-<seed>/`` (:func:`keep_logs`), as the evidence a violation needs.

``--seconds`` defaults to ``$SOAK_SECONDS`` or 1800; ``--seed`` to ``$SOAK_SEED`` or the time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.machine import commit
from bench.soak import report
from bench.soak.plan import SoakConfig, timeline
from bench.soak.proxy import Relay
from bench.soak.run import COMPOSER_SETTINGS, SoakLab, soak, soak_config
from lab import controlplane
from lab.settings import LabConfig
from tests.composer import harness

ROOT = Path(__file__).resolve().parents[2]


def keep_logs(src: Path, dest: Path) -> list[Path]:
    """Copy every ``*.log`` file under ``src`` to ``dest`` (same relative paths), nothing else:
    the work folder also holds the composer's service-account token and kubeconfig, which must
    not be left in plaintext. Returns the copies' paths, sorted; ``dest`` is made if missing."""
    out: list[Path] = []
    for f in sorted(src.rglob("*.log")):
        if f.is_file():
            to = dest / f.relative_to(src)
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, to)
            out.append(to)
    return out


def flags() -> list[str]:
    """The composer flags of :data:`bench.soak.run.COMPOSER_SETTINGS`."""
    return [x for k, v in COMPOSER_SETTINGS.items() for x in (f"--{k.replace('_', '-')}", f"{v:g}")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS") or 1800))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED") or int(time.time())))
    ap.add_argument(
        "--mean-fault-gap", type=float, default=SoakConfig.mean_fault_gap, help="mean seconds between faults"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    lab_cfg = LabConfig()
    controlplane.start(lab_cfg)
    api = harness.admin_api(lab_cfg.kubeconfig)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp_s:
        tmp = Path(tmp_s)
        base = soak_config(seconds=args.seconds, mean_fault_gap=args.mean_fault_gap)
        ident = harness.apply_chart_rbac(api, lab_cfg, tmp, token_seconds=base.token_seconds())
        try:
            with harness.scenario(
                api, ident, tmp, lab_cfg.kubeconfig, inventory="rich.yaml", hotplug_latency=0.2
            ) as sc:
                relay = Relay(int(sc.director_url.rsplit(":", 1)[1]))
                lab = SoakLab(sc, lab_cfg, relay, [*flags(), *sc.enable_gating()], harness.free_port())
                cfg = replace(base, hosts=tuple(sorted(sc.hosts.values())))
                tl = timeline(args.seed, cfg)
                print(
                    f"soak: seed {args.seed}, {args.seconds:.0f} s, "
                    f"{len(tl.pods)} pods, {len(tl.faults)} faults",
                    flush=True,
                )
                data = soak(lab, tl, cfg, out_dir=args.out, say=lambda m: print(m, flush=True))
                relay.close()
            if data["violations"]:
                kept = ROOT / ".lab" / f"soak-{args.seed}"
                print(f"soak: {len(keep_logs(tmp, kept))} log file(s) kept in {kept}", flush=True)
        finally:
            harness.delete_chart_rbac(api, ident)
    md = report.render(data, commit=commit(("composer", "bench/soak", "lab")))
    (args.out / "SOAK.md").write_text(md)
    print(md)
    return 1 if data["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
