"""GPU status records one process has read from a Director, shared by its clients.

A ``status/gpu`` record (LIQID ``DeviceStatus``) names where a device sits on the fabric: its
ids, fabric, switch and port. A compose sends the records of the GPUs it attaches back to the
Director (``predevice/gpu`` and ``relate/gpu`` bodies), and reading them means reading every
GPU's record: ``GET status/gpu`` has no per-device form, and LIQID's own SDKs read one GPU's
status by reading the whole list and picking it (``getGPUDeviceStatus`` over
``getGPUDevicesStatus`` in liqidinc/liqidsdk-java ``LiqidClient.java``; ``GetGPUDeviceStatus``
in liqidinc/liqidsdk-go). A client that reads the whole list leaves it here;
a compose of another client of the same process may use it while it is younger than the age
that client allows, instead of reading the whole list again. Where each GPU is (its group and
machine) is never taken from here: a compose reads ``predevice`` for that every time.

Example::

    known = shared_statuses("http://director:8080")
    known.put(client.gpu_statuses())
    records = known.get(["gpu0", "gpu1"], max_age=30.0)  # None when unknown or too old

A list read in another process crosses over as the Director's JSON records (:meth:`SharedStatuses.wire`
there, :meth:`SharedStatuses.put_wire` here): validating them back into models costs about ten
times as much as the dicts do (measured at 5,000 GPUs: 180 ms against 39 ms to unpickle), so a
record is validated when a compose asks for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from .models import DeviceStatus

__all__ = ["SharedStatuses", "shared_statuses"]


class SharedStatuses:
    """The last whole ``status/gpu`` list read from one Director, and when it was read.

    Args:
        clock: seconds, monotonic (tests pass a fake).

    Thread-safe.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._records: Mapping[str, DeviceStatus | Mapping[str, Any]] = {}
        self._read_at = float("-inf")

    def put(self, records: Iterable[DeviceStatus]) -> None:
        """Keep ``records``, a whole ``GET status/gpu`` answer read just now."""
        by_name = {r.name: r for r in records}
        with self._lock:
            self._records, self._read_at = by_name, self._clock()

    def put_wire(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Keep ``records``, a whole ``GET status/gpu`` answer read just now, as the Director's
        JSON records (each is validated when :meth:`get` returns it).

        Raises:
            ValueError: a record without a string ``name``.
        """
        by_name: dict[str, Mapping[str, Any]] = {}
        for r in records:
            name = r.get("name")
            if not isinstance(name, str):
                raise ValueError(f"status record without a name: {dict(r)!r:.200}")
            by_name[name] = r
        with self._lock:
            self._records, self._read_at = by_name, self._clock()

    def wire(self) -> list[dict[str, Any]]:
        """The kept records as the Director's JSON (for :meth:`put_wire` in another process)."""
        with self._lock:
            records = list(self._records.values())
        return [r.wire() if isinstance(r, DeviceStatus) else dict(r) for r in records]

    def get(self, names: Iterable[str], *, max_age: float) -> dict[str, DeviceStatus] | None:
        """The records of ``names`` when every one is known from a list read at most
        ``max_age`` seconds ago; ``None`` otherwise (read the Director), also when a record kept
        by :meth:`put_wire` is not a valid ``DeviceStatus``."""
        with self._lock:
            records, age = self._records, self._clock() - self._read_at
        if max_age <= 0 or age > max_age:
            return None
        out = {}
        for n in names:
            r = records.get(n)
            if r is None:
                return None
            if isinstance(r, DeviceStatus):
                out[n] = r
                continue
            try:
                out[n] = DeviceStatus.model_validate(r)
            except ValidationError:
                return None
        return out

    def forget(self) -> None:
        """Drop the records (a transaction failed: the next one reads the Director)."""
        with self._lock:
            self._records, self._read_at = {}, float("-inf")


_SHARED: dict[str, SharedStatuses] = {}
_SHARED_GUARD = threading.Lock()


def shared_statuses(director: str) -> SharedStatuses:
    """The process-wide :class:`SharedStatuses` of one Director (``director``: its base URL; a
    trailing ``/`` names the same Director)."""
    with _SHARED_GUARD:
        return _SHARED.setdefault(director.rstrip("/"), SharedStatuses())
