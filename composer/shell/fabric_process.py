"""The composer's background Director read, run in a child process.

A whole-fabric read (:func:`composer.model.fabric.read_fabric`) decodes and validates every
GPU's ``status/gpu`` and ``device/info/gpu`` record: at 5,000 GPUs about 6 MB of JSON and half a
second of CPU. On a thread of the composer's own process that work holds the GIL, and every
request of a compose made meanwhile waits for it at each turn: measured against the lab's
Director simulator at 5,000 GPUs, composes took p50 0.61 s and p90 0.85 s with a read running on
a thread, 0.05 s and 0.06 s with none, 0.13 s and 0.27 s with the same read in another process
(the simulator's own share). :class:`ProcessFabricReader` makes the read there: one ``spawn``ed
worker process (:class:`concurrent.futures.ProcessPoolExecutor`) keeps one Director client and
hands back the :class:`~composer.model.fabric.FabricView` and the ``status/gpu`` records it read,
which go into this process's shared status list
(:func:`dynamic_providers.director.known.shared_statuses`) as they would from a read here.

The worker starts on the first read (about a second: it imports the client) and stops with
:meth:`ProcessFabricReader.close`, which closes its client; a worker that died is started again
by the next read.
"""

from __future__ import annotations

import atexit
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from composer.model.fabric import DirectorFactory, FabricClient, FabricView, read_fabric
from composer.shell.fabric_cache import close_client
from dynamic_providers.director.known import shared_statuses

#: (view, status records as the Director's JSON, error) as the worker hands them back.
_Answer = tuple[FabricView | None, list[dict[str, Any]] | None, str | None]


class FabricReadError(RuntimeError):
    """The worker process could not read the Director (the message is the worker's error), or
    the worker died."""


class ProcessFabricReader:
    """Reads the fabric in a worker process (see the module docstring).

    Args:
        factory: the Director client's settings; pickled to the worker (the password travels
            over the worker's pipe, never in its arguments or environment).

    Thread safety: :meth:`read` is called from one thread at a time (the cache's background
    thread); :meth:`close` from any.
    """

    def __init__(self, factory: DirectorFactory) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def read(self) -> FabricView:
        """One whole-fabric read, made by the worker.

        Returns:
            The worker's :class:`FabricView`; its ``status/gpu`` records are now this process's
            shared status list of the Director.

        Raises:
            FabricReadError: the worker's read failed (its client is closed; the next read makes
                a new one), or the worker died (the next read starts another).
        """
        pool = self._worker()
        try:
            view, statuses, error = pool.submit(_read_in_worker).result()
        except BrokenProcessPool as exc:
            self._drop(pool)
            raise FabricReadError(f"the fabric-read worker process died: {exc}") from exc
        if error is not None or view is None:
            raise FabricReadError(error or "the fabric-read worker answered nothing")
        if statuses is not None:
            shared_statuses(self._factory.base_url).put_wire(statuses)
        return view

    def close(self) -> None:
        """Stop the worker (waiting for a read in flight); it closes its Director client."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _worker(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(self._factory,),
                )
            return self._pool

    def _drop(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)


# ------------------------------------------------------------------------ in the worker process
_factory: DirectorFactory | None = None
_client: FabricClient | None = None


def _start_worker(factory: DirectorFactory) -> None:
    global _factory
    _factory = factory
    atexit.register(_close_client)


def _read_in_worker() -> _Answer:
    global _client
    assert _factory is not None, "the worker was started without a factory"
    try:
        if _client is None:
            _client = _factory()
        view = read_fabric(_client)
    except Exception as exc:  # handed back as text: the Director's errors need not unpickle
        _close_client()
        return None, None, f"{type(exc).__name__}: {exc}"
    return view, shared_statuses(_factory.base_url).wire(), None


def _close_client() -> None:
    global _client
    client, _client = _client, None
    close_client(client)


def background_reader(factory: object) -> ProcessFabricReader | None:
    """The reader a :class:`~composer.shell.fabric_cache.FabricCache` of ``factory``'s clients
    uses for its background reads: a :class:`ProcessFabricReader` for a real Director's
    :class:`DirectorFactory`, None (a thread of this process) for any other factory, such as a
    test's in-memory fabric, which a worker process could not share."""
    return ProcessFabricReader(factory) if isinstance(factory, DirectorFactory) else None
