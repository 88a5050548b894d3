"""A pytest plugin: skips are honest in CI and summarised in every run.

Every skip in this suite stands for something the README's setup (``make setup``) installs or
starts: the toolchain, helm, the lab, sshd. In CI (``CI=true``, as ``.ci/run``, GitHub Actions
and most CI systems set it) a missing piece is a broken setup and must not pass as green, so
a test that would skip fails instead, naming what was missing. Locally a skip stays a skip.
Each run ends with one line, after pytest's totals: ``skips: none`` or ``skips: N (count x reason; ...)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

#: Values of ``CI`` that mean "running in CI".
CI_VALUES = {"1", "true", "yes"}
_PREFIX = "Skipped: "


def in_ci() -> bool:
    """True when the environment variable ``CI`` is ``1``, ``true`` or ``yes`` (any case)."""
    return os.environ.get("CI", "").strip().lower() in CI_VALUES


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    text = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return text.removeprefix(_PREFIX)


def _fail_in_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = _reason(report)
        report.outcome = "failed"
        report.longrepr = (f"CI=true: this test would have been skipped ({reason}); "
                           "in CI everything `make setup` installs must be present")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A skip in setup, call or teardown fails under ``CI=true``."""
    outcome = yield
    _fail_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """A module skipped at collection (``allow_module_level``) fails under ``CI=true``."""
    outcome = yield
    _fail_in_ci(outcome.get_result())


def skip_summary(skipped: list[pytest.TestReport]) -> str:
    """``skips: none`` or ``skips: N (count x reason; ...)``, most frequent reason first."""
    counts: dict[str, int] = {}
    for report in skipped:
        counts[_reason(report)] = counts.get(_reason(report), 0) + 1
    if not counts:
        return "skips: none"
    detail = "; ".join(f"{n} x {reason}" for reason, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"skips: {len(skipped)} ({detail})"


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Write the one-line skip summary as the run's very last line (after pytest's own totals)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(skip_summary(reporter.stats.get("skipped", [])))
