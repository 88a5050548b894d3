"""The Director edits a leader may have left open, handed to the next leader through the Lease.

An edit of a machine (``fabric/edit``) or of a group's pool (``pool/edit``) whose opening lost its
answer may be open on the Director, and an open edit refuses every later one on that machine or
group (HTTP 409). The process that lost the answer cancels it once no job of it can still run
(:mod:`dynamic_providers.director.client`); a leader that dies first would leave it open for good.
So every Lease write carries those edits in the annotation :data:`EDITS_ANNOTATION` and a new
leader takes them over: its next opening of each waits the same ``job_timeout`` from the lost
answer and cancels it, and a sweep (:func:`sweep`) cancels those no opening comes to. The edits
handed over are those whose opening lost its answer and those the leader was opening or holding
open at its last renewal; one opened after it (at most ``leaseRetrySeconds`` before the leader
died) is not handed over.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from composer.shell.leader import Handover
from dynamic_providers.director.client import edits_left_open, inherit_edits_left_open
from dynamic_providers.director.errors import DirectorError

log = logging.getLogger(__name__)

#: Lease annotation: JSON ``{"machine:<mach_id>" | "group:<grp_id>": epoch seconds of the lost answer}``.
EDITS_ANNOTATION = "composer.liqid.io/director-edits-left-open"


#: Pause between sweeps (s), and how long a sweep goes on before giving up (s).
SWEEP_EVERY_SECONDS = 5.0
SWEEP_FOR_SECONDS = 900.0


class EditCanceller(Protocol):
    """What a sweep needs of a Director client (``DirectorClient`` provides it)."""

    def cancel_edits_left_open(self) -> list[str]: ...

    def close(self) -> None: ...


def sweep(
    director_url: str,
    client: Callable[[], EditCanceller],
    *,
    every: float = SWEEP_EVERY_SECONDS,
    give_up_after: float = SWEEP_FOR_SECONDS,
    stop: threading.Event | None = None,
) -> None:
    """Until no edit is recorded as left open on ``director_url`` (or ``give_up_after`` seconds or
    ``stop``), every ``every`` seconds let one client from ``client()`` cancel the due ones
    (``DirectorClient.cancel_edits_left_open``); a failed call is logged and tried again."""
    stop = stop or threading.Event()
    deadline = time.monotonic() + give_up_after
    c = client()
    try:
        while edits_left_open(director_url) and time.monotonic() < deadline and not stop.is_set():
            try:
                cancelled = c.cancel_edits_left_open()
                if cancelled:
                    log.info("cancelled Director edits left open: %s", ", ".join(cancelled))
            except DirectorError as exc:
                log.warning("could not cancel the Director edits left open yet: %s", exc)
            stop.wait(every)
    finally:
        c.close()


def edit_handover(director_url: str, client: Callable[[], EditCanceller] | None = None) -> Handover:
    """The :class:`~composer.shell.leader.Handover` of the edits left open on ``director_url``;
    with ``client``, inheriting edits also starts :func:`sweep` on a daemon thread."""

    def annotations() -> Mapping[str, str]:
        edits = edits_left_open(director_url)
        return {EDITS_ANNOTATION: json.dumps(edits, sort_keys=True)} if edits else {}

    def inherit(annotations: Mapping[str, str]) -> None:
        raw = annotations.get(EDITS_ANNOTATION)
        if not raw:
            return
        try:
            edits = json.loads(raw)
            parsed = {str(k): float(v) for k, v in edits.items()}
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("ignoring the Lease annotation %s %r: %s", EDITS_ANNOTATION, raw, exc)
            return
        log.info("taking over Director edits the previous leader may have left open: %s",
                 ", ".join(sorted(parsed)))
        inherit_edits_left_open(director_url, parsed)
        if client is not None and parsed:
            threading.Thread(target=sweep, args=(director_url, client), name="composer-edit-sweep",
                             daemon=True).start()

    return Handover(annotations=annotations, inherit=inherit)
