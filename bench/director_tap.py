"""``python -m bench.director_tap``: the lab's Director simulator with a request-timestamp tap.

The same simulator as ``python -m lab.director_sim`` (hardware stand-in: ``lab.director_sim``'s
``create_app``, ``Fabric`` and inventory loader, unchanged), plus Flask hooks that append one
JSON line per fabric-changing request to ``--tap-file``: when the request arrived and when its
answer left (``time.time()``, seconds since the epoch, same clock as the benchmark), method,
API path and the ``mach_id`` of the body. The reaction benchmark reads ``POST fabric/edit``
arrivals as "compose request issued" and ``POST fabric/reprogram`` answers as "GPUs attached".

Example::

    DIRECTOR_SIM_PASSWORD=... python -m bench.director_tap --port 0 --inventory inv.yaml \\
        --hotplug-latency 2 --tap-file tap.jsonl --url-file url.txt
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from flask import Response, g, request

from lab.director_sim.app import API_PREFIX, create_app
from lab.director_sim.inventory import load_inventory
from lab.director_sim.server import SimulatorServer
from lab.director_sim.state import Fabric

#: API paths (below ``/liqid/api/v2/``) whose POST/DELETE requests are tapped.
TAPPED = ("fabric/edit", "fabric/reprogram", "fabric/edit/cancel", "relate/gpu")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for bad arguments or inventory)."""
    ap = argparse.ArgumentParser(
        prog="python -m bench.director_tap",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--inventory", type=Path, required=True)
    ap.add_argument("--hotplug-latency", type=float, default=0.0, help="seconds per reprogram")
    ap.add_argument("--tap-file", type=Path, required=True, help="JSON lines written here")
    ap.add_argument("--url-file", type=Path, default=None, help="the base URL is written here once serving")
    ap.add_argument("--username", default=os.environ.get("DIRECTOR_SIM_USERNAME", "admin"))
    args = ap.parse_args(argv)
    password = os.environ.get("DIRECTOR_SIM_PASSWORD")
    if not password:
        print("director-tap: set $DIRECTOR_SIM_PASSWORD", file=sys.stderr)
        return 2
    try:
        inventory = load_inventory(args.inventory)
    except Exception as exc:  # noqa: BLE001 - report any inventory problem and exit
        print(f"director-tap: bad inventory {args.inventory}: {exc}", file=sys.stderr)
        return 2
    fabric = Fabric(inventory, hotplug_latency=args.hotplug_latency)
    app = create_app(fabric, username=args.username, password=password)
    lock = threading.Lock()
    tap = args.tap_file.open("a", buffering=1, encoding="utf-8")

    def _path() -> str | None:
        if request.method in ("POST", "DELETE") and request.path.startswith(API_PREFIX + "/"):
            p = request.path[len(API_PREFIX) + 1 :]
            return p if p in TAPPED else None
        return None

    @app.before_request
    def _arrived() -> None:
        if _path() is not None:
            g.bench_t0 = time.time()

    @app.after_request
    def _answered(resp: Response) -> Response:
        path = _path()
        if path is None or not hasattr(g, "bench_t0"):
            return resp
        body: Any = request.get_json(silent=True) or {}
        mach = body.get("mach_id") if isinstance(body, dict) else None
        if mach is None and isinstance(body, dict) and isinstance(body.get("machine"), dict):
            mach = body["machine"].get("mach_id")
        rec = {
            "t0": g.bench_t0,
            "t1": time.time(),
            "method": request.method,
            "path": path,
            "mach_id": mach,
            "status": resp.status_code,
        }
        with lock:
            tap.write(json.dumps(rec) + "\n")
        return resp

    server = SimulatorServer(app, host=args.host, port=args.port, quiet=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    if args.url_file is not None:
        args.url_file.write_text(server.url)
    print(f"director-tap listening on {server.url}", flush=True)
    stop.wait()
    server.stop()
    tap.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
