"""``python -m lab.node_proxy --listen IP --port P ...``: relay TCP from the lab node's address to
the same ports on 127.0.0.1.

The lab has no kube-proxy, and its API server and hardware simulators listen on 127.0.0.1 only.
The real node's Pods (``lab.node``) sit behind a bridge whose host side is the node address;
this relay makes ``<node address>:<port>`` reach ``127.0.0.1:<port>`` for the ports named,
byte for byte (TLS to the API server passes through untouched; its certificate names the node
address). Lab plumbing only: one asyncio task per connection, no limits, no logging of data.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until end of stream or a connection error; close ``writer``."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def _handler(port: int):  # noqa: ANN202 - asyncio's client_connected_cb shape
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return handle


async def serve(listen: str, ports: list[int]) -> None:
    """Relay ``listen:port`` to ``127.0.0.1:port`` for every port until cancelled.

    Raises:
        OSError: an address cannot be bound (e.g. ``listen`` is not an address of this host).
    """
    servers = [await asyncio.start_server(_handler(p), listen, p, reuse_address=True) for p in ports]
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    ap = argparse.ArgumentParser(prog="python -m lab.node_proxy", description=__doc__)
    ap.add_argument("--listen", required=True, help="address to listen on (the node address)")
    ap.add_argument("--port", type=int, action="append", required=True, help="port to relay (repeatable)")
    args = ap.parse_args(argv)
    try:
        asyncio.run(serve(args.listen, args.port))
    except OSError as exc:
        print(f"node-proxy: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
