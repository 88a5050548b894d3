"""The estate command's plan (ops.estate_plan): the stacks a change touches, dependency order with
bounded parallelism, a failure that skips only its dependents, and the one-screen summary."""

from __future__ import annotations

import threading
import time

import pytest

from ops.estate_plan import StackResult, render_review, render_summary, run_in_order, select
from tests.config.test_fleet import _racks


def _fake(fail: set[str], log: list[str], active: list[int], peak: list[int]):  # type: ignore[no-untyped-def]
    lock = threading.Lock()

    def run_one(role: str) -> StackResult:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            log.append(role)
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        status = "failed" if role in fail else "ok"
        return StackResult(role, role, status, 0.05, {"same": 1}, "error: boom" if role in fail else "")

    return run_one


def _skipped(role: str, bad: list[str]) -> StackResult:
    return StackResult(role, role, "skipped", detail="reads " + ", ".join(bad))


def test_a_failed_host_group_skips_its_dependents_only_and_parallelism_is_bounded() -> None:
    fleet = _racks()
    order = select(fleet)
    assert order == ["platform", "hosts:rack-a", "hosts:rack-b", "tenant:red", "tenant:blue", "tenant:green"]
    log: list[str] = []
    active, peak = [0], [0]
    run_one = _fake({"hosts:rack-a"}, log, active, peak)
    results = run_in_order(fleet, order, run_one, parallel=2, skipped=_skipped)
    assert {r.role: r.status for r in results} == {
        "platform": "ok", "hosts:rack-a": "failed", "hosts:rack-b": "ok", "tenant:red": "skipped",
        "tenant:blue": "skipped", "tenant:green": "ok",
    }
    assert {r.role: r.detail for r in results if r.status == "skipped"} == {
        "tenant:red": "reads hosts:rack-a", "tenant:blue": "reads hosts:rack-a"}
    assert log[0] == "platform" and log.index("tenant:green") > log.index("hosts:rack-b")
    assert peak[0] == 2  # rack-a and rack-b ran together, never more than two


def test_one_at_a_time_keeps_the_dependency_order() -> None:
    fleet = _racks()
    log: list[str] = []
    active, peak = [0], [0]
    order = select(fleet, roles=["hosts:rack-b"])
    assert order == ["hosts:rack-b", "tenant:blue", "tenant:green"]
    run_in_order(fleet, order, _fake(set(), log, active, peak), parallel=1, skipped=_skipped)
    assert log == order and peak[0] == 1
    with pytest.raises(KeyError):
        select(fleet, roles=["tenant:gamma"])


def test_the_summary_is_one_line_per_stack() -> None:
    text = render_summary([
        StackResult("platform", "prod-platform", "ok", 4.14, {"same": 12, "create": 0, "update": 1}),
        StackResult("hosts:b", "prod-hosts-b", "failed", 2.0, detail="error: refused"),
        StackResult("tenant:x", "prod-tenant-x", "skipped", detail="not run: it reads prod-hosts-b"),
    ], operation="preview")
    assert text.splitlines() == [
        "preview of 3 stacks: 1 ok, 1 failed, 1 skipped",
        "  ok       prod-platform     4.1 s  same 12, update 1",
        "  failed   prod-hosts-b      2.0 s  error: refused",
        "  skipped  prod-tenant-x     0.0 s  not run: it reads prod-hosts-b",
    ]


def test_the_review_is_the_summary_then_each_run_stacks_own_markdown_in_order() -> None:
    results = [StackResult("platform", "p-platform", "ok", 1.0, {"same": 3}),
               StackResult("hosts:a", "p-hosts-a", "failed", 2.0, detail="error: boom"),
               StackResult("tenant:x", "p-tenant-x", "skipped", detail="not run: it reads p-hosts-a")]
    sections = {"p-hosts-a": "## hosts a\n\nfailed here\n", "p-platform": "## platform\n\nsame 3\n"}
    review = render_review(results, operation="preview", sections=sections)
    assert review.splitlines()[:3] == ["# Estate preview: 1 ok, 1 failed, 1 skipped", "", "```text"]
    assert render_summary(results, operation="preview") in review
    assert review.index("## platform") < review.index("## hosts a") < review.index("## `p-tenant-x`")
    assert "## `p-tenant-x` (tenant:x): skipped\n\nnot run: it reads p-hosts-a\n" in review
    assert review.endswith("\n") and not review.endswith("\n\n")
