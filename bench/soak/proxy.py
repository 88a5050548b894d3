"""A TCP relay on 127.0.0.1 between the composer and the Director simulator that can be cut.

The composer is given the relay's URL as its Director; the soak's fault injector then:

- :meth:`Relay.reset`: aborts every open connection once (the peer sees a connection reset);
- :meth:`Relay.cut` ``("reset")``: also refuses new connections (accepted and aborted at once)
  until :meth:`Relay.heal`;
- :meth:`Relay.cut` ``("blackhole")``: accepts new connections and never forwards a byte, so
  the client waits for its own timeout (a partition that drops packets).

The relay runs an asyncio loop in a daemon thread and copies bytes with
:func:`lab.node_proxy.pipe`. Lab plumbing: no limits, no logging of data.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Coroutine
from typing import Any, Literal

from lab.node_proxy import pipe

Mode = Literal["open", "reset", "blackhole"]


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), as a reset connection would."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    writer.transport.abort()


class Relay:
    """Relay ``127.0.0.1:<port>`` to ``127.0.0.1:<upstream>``; :attr:`port` is picked free."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.mode: Mode = "open"
        self.port = 0
        self._windows: list[tuple[float, float]] = []
        self._cut_since: float | None = None
        self._cuts: list[Mode] = []  # the partitions in force, oldest first
        self._lock = threading.Lock()
        self._conns: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-relay", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if not self.port:
            raise OSError("the relay did not start")

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "reset":
            _abort(writer)
            return
        self._conns.add(writer)
        try:
            if self.mode == "blackhole":
                while self.mode == "blackhole" and await reader.read(65536):
                    pass
                return
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
            except OSError:
                _abort(writer)
                return
            self._conns.add(up_writer)
            try:
                await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
            finally:
                self._conns.discard(up_writer)
        finally:
            self._conns.discard(writer)

    def _call(self, coro: Coroutine[Any, Any, Any]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _reset_all(self) -> int:
        n = len(self._conns)
        for w in list(self._conns):
            _abort(w)
        self._conns.clear()
        return n

    def reset(self) -> None:
        """Abort every open connection (both sides) once."""
        self._call(self._reset_all())

    def cut(self, mode: Literal["reset", "blackhole"]) -> None:
        """Partition: open connections are aborted; new ones are refused (``reset``) or held
        without an answer (``blackhole``) until the matching :meth:`heal`. Partitions nest: the
        latest one in force sets the mode, and the relay opens when the last one heals."""
        with self._lock:
            if self._cut_since is None:
                self._cut_since = time.time()
            self._cuts.append(mode)
            self.mode = mode
        self.reset()

    def heal(self, mode: Literal["reset", "blackhole"] | None = None) -> None:
        """End one partition (of ``mode``; None: the latest); the relay relays again once none
        is left in force. Connections held by a blackhole are aborted."""
        with self._lock:
            if mode in self._cuts:
                del self._cuts[len(self._cuts) - 1 - self._cuts[::-1].index(mode)]
            elif self._cuts:
                self._cuts.pop()
            if self._cuts:
                self.mode = self._cuts[-1]
            else:
                if self._cut_since is not None:
                    self._windows.append((self._cut_since, time.time()))
                    self._cut_since = None
                self.mode = "open"
        self.reset()

    def cut_off(self) -> list[tuple[float, float]]:
        """When the relay was cut: ``(from, to)`` pairs in seconds since the epoch, in order and
        not overlapping; a cut still in force ends now."""
        with self._lock:
            out = list(self._windows)
            if self._cut_since is not None:
                out.append((self._cut_since, time.time()))
        return out

    def close(self) -> None:
        """Stop the loop (the thread is a daemon)."""
        self._loop.call_soon_threadsafe(self._loop.stop)
