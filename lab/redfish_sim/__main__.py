"""Run the Redfish BMC simulator (hardware stand-in): several BMCs, one port each.

Usage::

    python -m lab.redfish_sim --host 127.0.0.1 --state-dir DIR \\
        --bmc NAME=PORT[:firmware] [--bmc ...] [--username U --password P] [--tls]

- ``firmware`` ``BF-*`` (default ``BF-24.10-17`` for names containing ``dpu``) makes a
  BlueField-3 BMC; anything else a host BMC with ``Systems/1``. Before ``BF-24.10`` the
  BIOS uses the spaced ``Host Privilege Level`` key. The firmware also picks the host-privilege
  generation (``docs/bluefield-bmc-generations.md``): the BIOS attribute before ``BF-24.10``,
  ``ExternalHostPrivileges`` from ``BF-24.10``, ``HostPrivilegeConfig`` from ``BF-25.10``.
- ``PORT`` 0 picks a free port. Once every BMC listens, ``DIR/endpoints.json`` maps each
  name to ``{"url", "port", "kind", "firmware"}`` and one ``READY`` line goes to stdout.
- Credentials: ``--username``/``--password`` or ``REDFISH_SIM_USERNAME``/``REDFISH_SIM_PASSWORD``
  (the environment keeps the password off the process list).
- ``--tls``: HTTPS with a self-signed CA; clients verify with ``DIR/tls/ca.pem``.
- SIGTERM/SIGINT stop every server; state stays in ``DIR/<name>.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import ssl
import sys
import threading
from pathlib import Path

from werkzeug.serving import make_server

from lab.redfish_sim.app import create_app
from lab.redfish_sim.state import BmcSpec, BmcState
from lab.redfish_sim.tls import ensure_tls


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m lab.redfish_sim", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--bmc", action="append", required=True, type=BmcSpec.parse,
                   metavar="NAME=PORT[:firmware]")
    p.add_argument("--state-dir", required=True, type=Path)
    p.add_argument("--username", default=os.environ.get("REDFISH_SIM_USERNAME"))
    p.add_argument("--password", default=os.environ.get("REDFISH_SIM_PASSWORD"))
    p.add_argument("--tls", action="store_true", help="serve HTTPS with a self-signed CA (DIR/tls/ca.pem)")
    p.add_argument("--verbose", action="store_true", help="log every request")
    args = p.parse_args(argv)
    if not args.username or not args.password:
        p.error("credentials needed: --username/--password or REDFISH_SIM_USERNAME/REDFISH_SIM_PASSWORD")
    names = [b.name for b in args.bmc]
    if len(set(names)) != len(names):
        p.error(f"duplicate BMC names in {names}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s redfish-sim %(levelname)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.INFO if args.verbose else logging.WARNING)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    ssl_ctx = None
    scheme = "http"
    if args.tls:
        files = ensure_tls(args.state_dir / "tls")
        ssl_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ssl_ctx.load_cert_chain(files.cert, files.key)
        scheme = "https"

    servers = []
    endpoints = {}
    for spec in args.bmc:
        state = BmcState(spec, args.state_dir, username=args.username, password=args.password)
        server = make_server(args.host, spec.port, create_app(state), threaded=True, ssl_context=ssl_ctx)
        port = server.socket.getsockname()[1]
        endpoints[spec.name] = {"url": f"{scheme}://{args.host}:{port}", "port": port,
                                "kind": spec.kind, "firmware": spec.firmware}
        servers.append(server)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threads = [threading.Thread(target=s.serve_forever, name=f"bmc-{n}", daemon=True)
               for s, n in zip(servers, endpoints, strict=True)]
    for t in threads:
        t.start()
    tmp = args.state_dir / "endpoints.json.tmp"
    tmp.write_text(json.dumps(endpoints, indent=2, sort_keys=True))
    os.replace(tmp, args.state_dir / "endpoints.json")
    print("READY " + " ".join(f"{n}={e['url']}({e['kind']},{e['firmware']})" for n, e in endpoints.items()),
          flush=True)
    stop.wait()
    for server in servers:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
