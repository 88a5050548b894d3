"""The orphan timers kept where the next leader reads them: a ConfigMap in the composer's namespace.

The orphan grace (``orphan_grace_seconds``, :func:`composer.decide.reclaim.orphan_jobs`) counts from
the first time any composer replica saw a GPU carrying its owner tag on a machine with no Node
(or free and still tagged). That time cannot live on the Node (there is none), nor on the
Director (a GPU's only free-text field, its description, is the owner tag itself, which every
ownership check compares), nor on the Lease (the elector replaces the Lease with a body of its
own on every renewal, a second writer would make those renewals fail on the resourceVersion). So
the leader keeps it in the ConfigMap ``<leaseName>-orphans`` of its own namespace, data key
:data:`ORPHAN_SINCE_KEY`: JSON, device name -> seconds since the epoch.

:class:`OrphanTimers` loads it into ``Memory.orphan_since`` on the controller's first round
(a replica only runs rounds while it leads, and one that loses the Lease exits) and saves it
after every round that changed it. A failed load is tried again next round and merged (the
earlier time of each device wins), unless it was refused (403: the timers count from this
leader's start); a failed save is tried again next round. Either way a timer only ever runs
longer than the grace, never shorter.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from composer.shell.kube import KubeError

log = logging.getLogger(__name__)

#: The ConfigMap's data key holding the orphan timers.
ORPHAN_SINCE_KEY = "orphan-since"


def configmap_name(lease_name: str) -> str:
    """Name of the composer's ConfigMap of timers, next to its Lease ``lease_name``."""
    return f"{lease_name}-orphans"


def encode(since: Mapping[str, float]) -> str:
    """The data value for ``since`` (device -> seconds since the epoch), sorted, to the millisecond."""
    return json.dumps({d: round(t, 3) for d, t in sorted(since.items())}, separators=(",", ":"))


def decode(value: str | None) -> dict[str, float]:
    """The timers in a data value; anything malformed reads as no timer (never raises)."""
    try:
        raw = json.loads(value or "{}")
        return {str(d): float(t) for d, t in raw.items() if math.isfinite(float(t))}
    except (ValueError, TypeError, AttributeError):
        return {}


class ConfigMapApi(Protocol):
    """The ConfigMap calls used here (:class:`composer.shell.kube.KubeApi` provides them)."""

    def read_configmap_data(self, namespace: str, name: str) -> dict[str, str] | None: ...

    def write_configmap_data(self, namespace: str, name: str, data: Mapping[str, str | None]) -> None: ...


@dataclass
class OrphanTimers:
    """Loads and saves ``Memory.orphan_since`` (see the module docstring).

    Attributes:
        kube: ConfigMap reads and writes.
        namespace / name: the ConfigMap.
    """

    kube: ConfigMapApi
    namespace: str
    name: str
    loaded: bool = False
    _saved: dict[str, float] = field(default_factory=dict)

    def load_into(self, orphan_since: dict[str, float]) -> None:
        """Merge the saved timers into ``orphan_since`` (once; the earlier time wins)."""
        if self.loaded:
            return
        try:
            data = self.kube.read_configmap_data(self.namespace, self.name)
        except KubeError as exc:
            if exc.status == 403:  # not allowed (RBAC without the timers' Role): not worth a retry
                log.warning("orphan timers not readable, counted from this leader's start: %s", exc)
                self.loaded = True
                return
            log.warning("orphan timers not read (tried again next round): %s", exc)
            return
        self.loaded = True
        self._saved = decode((data or {}).get(ORPHAN_SINCE_KEY))
        for d, t in self._saved.items():
            orphan_since[d] = min(t, orphan_since.get(d, t))
        if self._saved:
            log.info("orphan timers of %d GPU(s) read from %s/%s", len(self._saved), self.namespace,
                     self.name)

    def save(self, orphan_since: Mapping[str, float]) -> None:
        """Write ``orphan_since`` when it differs from what was last saved (after the load)."""
        if not self.loaded or dict(orphan_since) == self._saved:
            return
        try:
            data: dict[str, str | None] = {ORPHAN_SINCE_KEY: encode(orphan_since)}
            self.kube.write_configmap_data(self.namespace, self.name, data)
        except KubeError as exc:
            log.warning("orphan timers not saved (tried again next round): %s", exc)
            return
        self._saved = dict(orphan_since)
