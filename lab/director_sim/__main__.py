"""``python -m lab.director_sim``: run the LIQID Director simulator (hardware stand-in).

Example::

    python -m lab.director_sim --host 127.0.0.1 --port 18080 \\
        --inventory lab/inventories/dev.yaml --state-file .lab/sim-state/director.json \\
        --hotplug-latency 2 --username admin --password ...

Credentials default to ``$DIRECTOR_SIM_USERNAME`` / ``$DIRECTOR_SIM_PASSWORD``. ``--async-seconds N``
(default ``$DIRECTOR_SIM_ASYNC_SECONDS``) answers every change with HTTP 202 and a job that ends N
seconds later, as a Director may (see ``lab.director_sim.jobs``). Prints
``director-sim listening on http://HOST:PORT`` once serving; stops cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from .app import create_app
from .inventory import load_inventory
from .server import SimulatorServer
from .state import Fabric

DEFAULT_INVENTORY = Path(__file__).resolve().parents[1] / "inventories" / "dev.yaml"


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    ap = argparse.ArgumentParser(
        prog="python -m lab.director_sim",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18080, help="TCP port; 0 picks a free one")
    ap.add_argument("--inventory", type=Path, default=DEFAULT_INVENTORY, help="inventory YAML")
    ap.add_argument(
        "--state-file",
        type=Path,
        default=None,
        help="JSON state file (loaded when present, rewritten on every change)",
    )
    ap.add_argument("--hotplug-latency", type=float, default=0.0, help="seconds per reprogram")
    ap.add_argument("--digest-ttl", type=float, default=None, help="seconds a digest stays valid")
    env_async = os.environ.get("DIRECTOR_SIM_ASYNC_SECONDS") or None
    ap.add_argument(
        "--async-seconds",
        type=float,
        default=float(env_async) if env_async else None,
        help="answer every change with HTTP 202 and a job of this many seconds",
    )
    ap.add_argument("--username", default=os.environ.get("DIRECTOR_SIM_USERNAME", "admin"))
    ap.add_argument("--password", default=os.environ.get("DIRECTOR_SIM_PASSWORD"))
    args = ap.parse_args(argv)
    if not args.password:
        print("director-sim: no password (--password or $DIRECTOR_SIM_PASSWORD)", file=sys.stderr)
        return 2
    if args.hotplug_latency < 0:
        print("director-sim: --hotplug-latency must be >= 0", file=sys.stderr)
        return 2
    if args.async_seconds is not None and not 0 <= args.async_seconds <= 600:
        print("director-sim: --async-seconds must be within 0..600", file=sys.stderr)
        return 2
    try:
        inventory = load_inventory(args.inventory)
    except Exception as exc:  # noqa: BLE001 - report any inventory problem and exit
        print(f"director-sim: bad inventory {args.inventory}: {exc}", file=sys.stderr)
        return 2
    fabric = Fabric(inventory, state_file=args.state_file, hotplug_latency=args.hotplug_latency)
    app = create_app(
        fabric,
        username=args.username,
        password=args.password,
        digest_ttl=args.digest_ttl,
        async_seconds=args.async_seconds,
    )
    server = SimulatorServer(app, host=args.host, port=args.port)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server.start()
    print(f"director-sim listening on {server.url}", flush=True)
    stop.wait()
    server.stop()
    fabric.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
