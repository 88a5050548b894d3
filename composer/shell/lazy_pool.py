"""A thread pool whose threads start on first use: the composer's background workers.

The composer runs its node jobs, intent writes, Events, pod nominations and background
Director reads each on its own :class:`concurrent.futures.ThreadPoolExecutor`; most of them are
idle in most deployments (no Events queued without ``async_events``, no nomination without
gating), so none starts a thread before something is submitted to it. :class:`LazyPool` is that
pattern once: created on the first :meth:`LazyPool.submit`, shut down (waiting) by
:meth:`LazyPool.close`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class LazyPool:
    """A :class:`ThreadPoolExecutor` of ``workers`` threads named ``name-N``, started by the first
    :meth:`submit`.

    Any thread may submit and close. :meth:`close` waits for everything submitted before it; a
    later :meth:`submit` starts a fresh pool.

    Args:
        workers: most threads running submitted calls at once (1 keeps their order).
        name: prefix of the threads' names (``thread_name_prefix``).
    """

    __slots__ = ("_lock", "_name", "_pool", "_workers")

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` on the pool (started now if it is not running).

        Returns:
            The call's future (its exception, if any, is raised by ``Future.result``).
        """
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=self._name)
            return self._pool.submit(fn, *args, **kwargs)

    def close(self) -> None:
        """Wait until every call submitted so far has ended, and stop the threads."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
