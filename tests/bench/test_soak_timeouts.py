"""The soak's fault draws and the composer it runs agree on the Director timeouts: slow answers
and stuck jobs are drawn against the timeouts the composer is started with, and the open-edit
bound covers a job that outlasts the composer's wait."""

from __future__ import annotations

from bench.soak.__main__ import flags
from bench.soak.plan import timeline
from bench.soak.run import COMPOSER_SETTINGS, EDIT_BOUND, soak_config


def _flag(name: str) -> float:
    args = flags()
    return float(args[args.index(name) + 1])


def test_the_composer_runs_with_the_timeouts_the_plan_draws_against() -> None:
    cfg = soak_config(seconds=600)
    assert _flag("--director-timeout-seconds") == cfg.director_timeout
    assert _flag("--director-job-timeout-seconds") == cfg.job_timeout


def test_stuck_jobs_fall_on_both_sides_of_the_job_timeout_and_end_before_the_edit_is_cancelled() -> None:
    cfg = soak_config(seconds=7200, faults={"director_job_stuck": 1})
    stuck = [f.params["seconds"] for f in timeline(5, cfg).faults]
    jt = COMPOSER_SETTINGS["director_job_timeout_seconds"]
    assert len(stuck) > 20
    assert any(s > jt for s in stuck) and any(s < jt for s in stuck)
    # an edit left open by a job still running is cancelled one job timeout after the wait ended
    assert max(stuck) < 2 * jt <= EDIT_BOUND
