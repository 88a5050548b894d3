"""The composer's per-pod step lines (composer/shell/pod_steps.py): read back from a log line
with the composer's own prefix, malformed lines skipped."""

from __future__ import annotations

import logging

import pytest

from composer.__main__ import LOG_FORMAT
from composer.shell.pod_steps import LOGGER, log_step, parse


def test_a_step_line_reads_back_from_the_composers_log_format(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    log_step("planned", "ml/a", 1800000000.25, uid="u1", node="host-1", devices=2, seen=1800000000.0)
    (rec,) = caplog.records
    line = logging.Formatter(LOG_FORMAT).format(rec)
    assert line.startswith(tuple("0123456789")) and f"INFO {LOGGER} " in line  # the prefix is there
    assert parse(line) == {
        "step": "planned",
        "pod": "ml/a",
        "t": 1800000000.25,
        "uid": "u1",
        "node": "host-1",
        "devices": 2,
        "seen": 1800000000.0,
    }


def test_an_unknown_step_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="'seen': must be one of admitted, planned"):
        log_step("seen", "ml/a", 1.0)


@pytest.mark.parametrize(
    "line",
    [
        "INFO composer.run.controller: round: 1 placement(s)",  # no marker
        'pod-step {"step": "planned", "pod": "ml/a", "t": 1.0',  # cut off
        'pod-step {"step": "bound", "pod": "ml/a", "t": 1.0}',  # unknown step
        'pod-step {"step": "planned", "pod": "ml/a", "t": "soon"}',  # no time
        'pod-step {"step": "planned", "t": 1.0}',  # no pod
        "pod-step [1, 2]",
    ],
)
def test_lines_that_are_not_whole_step_lines_are_skipped(line):
    assert parse(line) is None
