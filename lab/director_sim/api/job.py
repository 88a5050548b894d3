"""``GET job/{id}`` (stand-in): the poll link of an HTTP 202 answer (see ``lab.director_sim.jobs``).

Answers an ``AsynchronousStatus`` with ``command_execution_state`` ``Pending`` while the job runs
and ``FAILURE`` after it failed, and HTTP 404 once it succeeded (what LIQID's SDK reads as done,
``LiqidClientBase.java:219-221``).
"""

from __future__ import annotations

from flask import Blueprint, Response

from ..context import ctx, ok
from ..jobs import FAILURE, PENDING
from ..state import SimError

bp = Blueprint("job", __name__)


@bp.get("/job/<int:job_id>")
def poll(job_id: int) -> Response:
    """The job's state."""
    c = ctx()
    c.jobs.settle()
    job = c.jobs.get(job_id)
    if job is None or job.state not in (PENDING, FAILURE):
        raise SimError(404, f"Job {job_id} not found", type_="LiqidException")
    return ok(
        [{"command_execution_state": job.state, "device_id": job.device_id, "execution_date": job.started}]
    )
