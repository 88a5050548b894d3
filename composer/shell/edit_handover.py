"""The Director edits a leader may have left open: cancelled by a sweep while it leads, and
handed to the next leader through the Lease.

An edit of a machine (``fabric/edit``) or of a group's pool (``pool/edit``) whose opening lost its
answer may be open on the Director, and an open edit refuses every later one on that machine or
group (HTTP 409), to every client of the Director. The process that lost the answer cancels it
once no job of it can still run (:mod:`dynamic_providers.director.client`): its next opening of
that machine or group does, and, for one no opening comes to, :func:`sweep`, which the composer
runs on a thread for as long as it lives and which acts while it leads. A leader that dies first
would leave it open for good. So every Lease write carries those edits in the annotation
:data:`EDITS_ANNOTATION` and a new leader takes them over: its next opening of each waits the same
``job_timeout`` from the lost answer and cancels it, and its sweep cancels those no opening comes
to. The edits handed over are those whose opening lost its answer and those the leader was
opening or holding open at its last renewal; one opened after it (at most ``leaseRetrySeconds``
before the leader died) is not handed over. With them go, in :data:`EDIT_JOBS_ANNOTATION`, the
links of their jobs (HTTP 202) whose end the leader had not seen: the new leader cancels such an
edit only once a poll of its job shows it ended, since a job may outlast ``job_timeout``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from composer.shell.leader import Handover
from dynamic_providers.director.client import edit_jobs_left_open, edits_left_open, inherit_edits_left_open
from dynamic_providers.director.errors import DirectorError

log = logging.getLogger(__name__)

#: Lease annotation: JSON ``{"machine:<mach_id>" | "group:<grp_id>": epoch seconds}`` of the lost
#: answer, of the step left open, or of the opening of an edit being held.
EDITS_ANNOTATION = "composer.liqid.io/director-edits-left-open"
#: Lease annotation: JSON ``{"machine:<mach_id>" | "group:<grp_id>": job link}``, the jobs (HTTP
#: 202) of those edits whose end the leader has not seen; the next leader waits for each to end.
EDIT_JOBS_ANNOTATION = "composer.liqid.io/director-edit-jobs"


#: Pause between sweeps, seconds: an edit left open is cancelled at most this long after its
#: ``job_timeout`` has run out.
SWEEP_EVERY_SECONDS = 5.0


class EditCanceller(Protocol):
    """What a sweep needs of a Director client (``DirectorClient`` provides it)."""

    def cancel_edits_left_open(self) -> list[str]: ...

    def close(self) -> None: ...


def sweep(
    director_url: str,
    client: Callable[[], EditCanceller],
    *,
    leading: Callable[[], bool] = lambda: True,
    every: float | None = None,
    stop: threading.Event,
) -> None:
    """Until ``stop`` is set, every ``every`` seconds (default :data:`SWEEP_EVERY_SECONDS`) while
    ``leading()``: let one client from
    ``client()`` (made at the first sweep that has something to do) cancel the edits this process
    may have left open on ``director_url`` whose jobs can no longer run
    (``DirectorClient.cancel_edits_left_open``); a failed call is logged and tried again at the
    next sweep. A follower sends nothing: an edit it lost the answer of was handed to the leader."""
    c: EditCanceller | None = None
    pause = SWEEP_EVERY_SECONDS if every is None else every
    try:
        while not stop.wait(pause):
            if not leading() or not edits_left_open(director_url):
                continue
            try:
                c = c or client()
                cancelled = c.cancel_edits_left_open()
                if cancelled:
                    log.info("cancelled Director edits left open: %s", ", ".join(cancelled))
            except DirectorError as exc:
                log.warning("could not cancel the Director edits left open yet: %s", exc)
    finally:
        if c is not None:
            c.close()


def edit_handover(director_url: str) -> Handover:
    """The :class:`~composer.shell.leader.Handover` of the edits left open on ``director_url``;
    inherited edits are cancelled by the next opening of each or by :func:`sweep`."""

    def annotations() -> Mapping[str, str]:
        edits = edits_left_open(director_url)
        if not edits:
            return {}
        out = {EDITS_ANNOTATION: json.dumps(edits, sort_keys=True)}
        jobs = edit_jobs_left_open(director_url)
        if jobs:
            out[EDIT_JOBS_ANNOTATION] = json.dumps(jobs, sort_keys=True)
        return out

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
        raw_jobs = annotations.get(EDIT_JOBS_ANNOTATION) or "{}"
        try:
            jobs = {str(k): str(v) for k, v in json.loads(raw_jobs).items()}
        except (ValueError, TypeError, AttributeError) as exc:
            # without the links the edits are still taken over, cancelled after job_timeout only
            log.warning("ignoring the Lease annotation %s %r: %s", EDIT_JOBS_ANNOTATION, raw_jobs, exc)
            jobs = {}
        waits = f" (jobs still to end: {', '.join(sorted(jobs))})" if jobs else ""
        log.info("taking over Director edits the previous leader may have left open: %s%s",
                 ", ".join(sorted(parsed)), waits)
        inherit_edits_left_open(director_url, parsed, jobs)

    return Handover(annotations=annotations, inherit=inherit)
