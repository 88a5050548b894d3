"""The composer's last read of the Director, kept fresh in the background.

Reading the whole fabric (every GPU's status, description and pool, every machine) is the
composer's heaviest call: at 1,000 GPUs it is a few hundred milliseconds on a loaded host, and a
round that waits for it holds up every gated pod and every release behind it. So a round plans
on the last read, and :class:`FabricCache` keeps that read true:

- **no read yet, or forgotten** (the first round; after a failed or cancelled job, a reclaim,
  or a failed read): :meth:`FabricCache.view` reads the Director on the caller's thread, and a
  failure reaches the caller (the round is skipped), as before any read was cached;
- **a clean compose**: :meth:`FabricCache.applied` moves the GPUs the Director client verified
  onto the machine in the cached read (no read; the client checked the attach on the Director);
- **older than** ``max_age_seconds``: :meth:`FabricCache.view` returns the read it has and starts
  one background read (one at a time, on its own thread and Director client). When it lands,
  the composes applied meanwhile are applied to it again, it replaces the old read, and
  ``on_refresh`` is called if it differs (a change made behind the composer's back wakes the
  loop). A read started before a :meth:`FabricCache.forget` is dropped. A failed background
  read forgets the cached one, so the next round reads on its own thread and reports the failure;
- ``max_age_seconds`` 0: every :meth:`FabricCache.view` reads on the caller's thread.

With a ``reader`` (the composer passes a
:class:`~composer.shell.fabric_process.ProcessFabricReader`), the background read is made by
it, so its parsing runs in another process and does not hold this one's GIL while rounds compose.

A read is as old as its start, so changes made behind the composer's back are seen at most
``max_age_seconds`` plus one read's duration after they happen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Protocol

from composer.model.fabric import FabricClient, FabricFactory, FabricView, read_fabric
from composer.shell.lazy_pool import LazyPool
from dynamic_providers.director.errors import DirectorError

log = logging.getLogger(__name__)


class BackgroundReader(Protocol):
    """Makes the background read somewhere else than on a client of this process."""

    def read(self) -> FabricView:
        """One whole-fabric read; raises any exception when it failed."""
        ...

    def close(self) -> None:
        """Release what the reads hold."""
        ...


class FabricCache:
    """The Director read rounds plan on (see the module docstring).

    Args:
        factory: builds a Director client (one for the caller's thread, one for background reads).
        max_age_seconds: a read older than this is refreshed in the background (0 = read on
            every :meth:`view`).
        on_refresh: called (on the background thread) when a background read differs from the
            read it replaces.
        clock: seconds, for the read's age (the controller passes its own clock).
        reader: makes the background reads (None: a client from ``factory`` on the background
            thread); reads on the caller's thread always use ``factory``.

    Thread safety: :meth:`view`, :meth:`applied`, :meth:`forget` and :meth:`close` are called
    from one thread (the control loop); the background read only installs its result.
    """

    def __init__(
        self,
        factory: FabricFactory,
        *,
        max_age_seconds: float,
        on_refresh: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        reader: BackgroundReader | None = None,
    ) -> None:
        self._factory = factory
        self._reader = reader
        self.max_age_seconds = max_age_seconds
        self._on_refresh = on_refresh
        self._clock = clock
        self._lock = threading.Lock()
        self._view: FabricView | None = None
        self._read_at = 0.0
        self._generation = 0  # bumped by forget(): a read started before it is dropped
        self._client: FabricClient | None = None  # the caller's thread
        self._bg_client: FabricClient | None = None  # the background thread
        self._bg = LazyPool(1, "fabric-read")
        self._refresh: Future[None] | None = None
        # composes during a refresh: (machine, devices, owner tag)
        self._applied_since: list[tuple[str, tuple[str, ...], str | None]] = []

    def view(self) -> FabricView:
        """The read to plan on (see the module docstring).

        Raises:
            DirectorError: there was no usable read and the Director could not be read now.
        """
        now = self._clock()
        with self._lock:
            view, age = self._view, now - self._read_at
        if view is not None and self.max_age_seconds > 0:
            if age >= self.max_age_seconds:
                self._start_refresh()
            return view
        if self._client is None:
            self._client = self._factory()
        try:
            view = read_fabric(self._client)
        except DirectorError:
            self.reset()
            raise
        with self._lock:
            self._view, self._read_at = view, now
        return view

    def applied(self, machine: str, devices: Sequence[str], owner_tag: str | None = None) -> None:
        """A compose the Director client verified: ``devices`` are attached to ``machine`` now,
        tagged ``owner_tag`` (None: their tags as read)."""
        if not devices:
            return
        with self._lock:
            if self._view is not None:
                self._view = self._view.with_attached(machine, devices, owner_tag)
            if self.refreshing:
                self._applied_since.append((machine, tuple(devices), owner_tag))

    def forget(self) -> None:
        """The next :meth:`view` reads the Director on the caller's thread; a background read in
        flight is dropped when it lands."""
        with self._lock:
            self._view = None
            self._generation += 1
            self._applied_since = []

    def reset(self) -> None:
        """:meth:`forget`, and close the caller's Director client (after a failed read)."""
        self.forget()
        client, self._client = self._client, None
        close_client(client)

    @property
    def refreshing(self) -> bool:
        """A background read is in flight."""
        return self._refresh is not None and not self._refresh.done()

    def wait_refreshed(self, timeout: float) -> bool:
        """Wait for the background read in flight, if any (tests, shutdown); True when none is left."""
        fut = self._refresh
        if fut is None:
            return True
        try:
            fut.result(timeout)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        """Stop background reads (waiting for the one in flight) and close the clients."""
        self._bg.close()
        self.reset()
        client, self._bg_client = self._bg_client, None
        close_client(client)
        if self._reader is not None:
            self._reader.close()

    # ------------------------------------------------------------------------- background
    def _start_refresh(self) -> None:
        if self.refreshing:
            return
        with self._lock:
            generation = self._generation
            self._applied_since = []
        self._refresh = self._bg.submit(self._read_in_background, generation)

    def _read_in_background(self, generation: int) -> None:
        started = self._clock()
        try:
            if self._reader is not None:
                view = self._reader.read()
            else:
                if self._bg_client is None:
                    self._bg_client = self._factory()
                view = read_fabric(self._bg_client)
        except Exception as exc:  # the next round reads on its own thread and reports it
            log.warning("background Director read failed; the next round reads the Director: %s", exc)
            client, self._bg_client = self._bg_client, None
            close_client(client)
            with self._lock:
                if self._generation == generation:
                    self._view = None
                    self._generation += 1
            return
        with self._lock:
            if self._generation != generation:
                return  # forgotten meanwhile: the next round reads the Director anyway
            for machine, devices, tag in self._applied_since:
                view = view.with_attached(machine, devices, tag)
            old, self._view, self._read_at = self._view, view, started
            self._applied_since = []
        if old != view and self._on_refresh is not None:
            self._on_refresh()


def close_client(client: FabricClient | None) -> None:
    """Close ``client`` (None: nothing), logging rather than raising a failure to close."""
    if client is None:
        return
    try:
        client.close()
    except Exception:
        log.debug("closing the Director client failed", exc_info=True)
