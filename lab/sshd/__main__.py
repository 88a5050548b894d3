"""``python -m lab.sshd up|down|status [--dir DIR] [--port N] [--user NAME]``: the lab sshd alone.

- ``up``: start it (as root) and print port, user, pinned host key and the client key path.
- ``down [--wipe]``: stop it; ``--wipe`` also deletes the instance directory.
- ``status``: running or stopped.

Default directory: ``$LAB_DIR/sshd`` (``.lab/sshd`` in the checkout).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lab import processes, sshd

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    ap = argparse.ArgumentParser(prog="python -m lab.sshd", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("up", "down", "status"))
    ap.add_argument("--dir", type=Path, default=Path(os.environ.get("LAB_DIR", ROOT / ".lab")) / "sshd")
    ap.add_argument("--port", type=int, default=None, help="TCP port (default: a free one)")
    ap.add_argument("--user", default="gpuprep")
    ap.add_argument("--wipe", action="store_true", help="with down: delete the instance directory")
    args = ap.parse_args(argv)
    if args.command == "up":
        try:
            lab = sshd.start(args.dir, user=args.user, port=args.port)
        except processes.LabProcessError as exc:
            print(f"lab sshd failed: {exc}", file=sys.stderr)
            return 1
        print(f"sshd on 127.0.0.1:{lab.port} user={lab.user}\nhost_key: {lab.host_key}\n"
              f"client key: {lab.client_key_path}\nsysroot: {lab.sysroot}")
        return 0
    if args.command == "down":
        print("stopped" if sshd.stop(args.dir, wipe=args.wipe) else "was not running")
        return 0
    pid = sshd.status(args.dir)
    print(f"sshd {'running, pid ' + str(pid) if pid else 'stopped'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
