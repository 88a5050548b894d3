"""``python -m bench.baseline``: the composer driven like a periodic-scan autoscaler.

Cluster-autoscaler looks at unschedulable pods once per ``--scan-interval`` (default 10 s) and
has no watch that wakes it early. This baseline runs the composer's own control loop
(:func:`composer.run.loop.run_loop`), decision and action code (the same ``Controller`` and
``Executor``, built from the same ``COMPOSER_*`` settings and flags as ``python -m composer``)
with the change-driven wake-up turned off: a round only on a fixed 10 s grid, without leader
election. Everything else being equal, the difference in reaction time against
``python -m composer`` is what event-driven triggering buys.

Usage: ``python -m bench.baseline --scan-interval-seconds 10 -- <python -m composer flags>``.
Stops on SIGTERM/SIGINT (exit 0).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from composer.run.loop import run_loop
from composer.run.wiring import build_controller
from composer.shell import config


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for bad configuration)."""
    ap = argparse.ArgumentParser(
        prog="python -m bench.baseline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--scan-interval-seconds", type=float, default=10.0)
    ap.add_argument("composer_args", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    rest = [a for a in args.composer_args if a != "--"]
    try:
        settings = config.load(rest)
    except Exception as exc:  # pydantic ValidationError or SystemExit from the CLI parser
        print(f"baseline: bad configuration: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s",
    )
    wired = build_controller(settings)
    ctrl = wired.controller
    if wired.cache is not None:  # cluster-autoscaler, too, reads from informers
        wired.cache.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print("baseline running", flush=True)
    try:
        run_loop(
            ctrl,
            stop,
            resync_seconds=settings.resync_seconds,
            scan_interval_seconds=args.scan_interval_seconds,
        )
    finally:
        if wired.cache is not None:
            wired.cache.stop()
        ctrl.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
