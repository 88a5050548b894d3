"""Which stacks of a split estate a run touches, in which order, and the run's summary (pure).

:func:`select` turns changed inventory files or named roles into the roles to run: those owning a
changed file (:attr:`stack_config.fleet.Fleet.file_roles`) or named, plus every stack that reads
one of them, transitively, in dependency order. :func:`run_in_order` runs them with at most
``parallel`` at a time, each once every stack it reads (among those selected) has succeeded; a
failure is recorded and its dependents are skipped, while independent stacks go on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Literal

from stack_config.fleet import Fleet

Status = Literal["ok", "failed", "skipped"]


@dataclass(frozen=True)
class StackResult:
    """What one stack's run gave.

    Attributes:
        role: the stack's role (``tenant:alpha``).
        stack: the Pulumi stack's name (``dev-tenant-alpha``).
        status: ``ok``, ``failed`` (its run raised or exited non-zero) or ``skipped`` (a stack it
            reads failed or was skipped).
        seconds: wall time of its run (0 when skipped).
        changes: operation -> count of resources (``create``, ``update``, ``same``, ...), from the
            engine's summary.
        detail: for a failure the error's last lines, for a skip the stacks it waited for.
    """

    role: str
    stack: str
    status: Status
    seconds: float = 0.0
    changes: dict[str, int] = field(default_factory=dict)
    detail: str = ""


def select(
    fleet: Fleet, *, changed_files: Iterable[str] | None = None, roles: Iterable[str] = ()
) -> list[str]:
    """The roles a run touches: those owning a file of ``changed_files`` and those in ``roles``, then
    every role that reads one of them, transitively; in dependency order. With neither (``None`` and
    no roles) every stack of the fleet.

    Raises:
        KeyError: a role in ``roles`` that is not one of the fleet's (message: the role).
    """
    named = list(roles)
    for r in named:
        if r not in fleet.slices:
            raise KeyError(r)
    if changed_files is None and not named:
        return fleet.order(fleet.slices)
    touched = set(named) | fleet.roles_of_files(changed_files or ())
    return fleet.order(fleet.dependents(touched))


def run_in_order(
    fleet: Fleet,
    order: Sequence[str],
    run_one: Callable[[str], StackResult],
    *,
    parallel: int,
    skipped: Callable[[str, list[str]], StackResult],
) -> list[StackResult]:
    """Run ``run_one(role)`` for every role of ``order`` (a :func:`select` result), at most
    ``parallel`` at a time, a role once every role of ``order`` it reads has finished ``ok``; a role
    one of whose reads did not is ``skipped(role, [those reads])``. An exception raised by
    ``run_one`` is a programming error and propagates. Returns the results in ``order``.
    """
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1, got {parallel}")
    results: dict[str, StackResult] = {}
    wanted = set(order)
    pending = list(order)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        running: dict[Future[StackResult], str] = {}
        while pending or running:
            for role in list(pending):
                reads = [r for r in fleet.slices[role].reads if r in wanted]
                if any(r not in results for r in reads):
                    continue
                bad = [r for r in reads if results[r].status != "ok"]
                if bad:
                    pending.remove(role)
                    results[role] = skipped(role, bad)
                elif len(running) < parallel:
                    pending.remove(role)
                    running[pool.submit(run_one, role)] = role
            if running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    results[running.pop(fut)] = fut.result()
    return [results[r] for r in order]


def render_summary(results: Sequence[StackResult], *, operation: str) -> str:
    """One screen: a line per stack (status, seconds, changes or why), then the totals, e.g.::

        preview of 3 stacks: 2 ok, 1 failed, 0 skipped
          ok       dev-platform             4.1 s  same 12
          failed   dev-hosts-rack-b         2.0 s  error: ...
    """
    counts = {s: sum(1 for r in results if r.status == s) for s in ("ok", "failed", "skipped")}
    lines = [f"{operation} of {len(results)} stack{'s' if len(results) != 1 else ''}: "
             f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped"]
    width = max((len(r.stack) for r in results), default=0)
    for r in results:
        changes = ", ".join(f"{op} {n}" for op, n in sorted(r.changes.items()) if n)
        what = changes if r.status == "ok" else r.detail
        lines.append(f"  {r.status:<8} {r.stack:<{width}}  {r.seconds:6.1f} s  {what}".rstrip())
    return "\n".join(lines)


def render_review(results: Sequence[StackResult], *, operation: str, sections: Mapping[str, str]) -> str:
    """The pull-request comment of an estate run: a heading with the totals, the one-screen summary
    (:func:`render_summary`) in a text block, then each run stack's own Markdown (``sections``:
    stack name -> its summary, such as :func:`ops.preview_markdown.render_markdown` writes), in
    ``results`` order; a stack without one (skipped, or not written) gets a line saying why.
    Returns Markdown ending in one newline."""
    summary = render_summary(results, operation=operation)
    totals = summary.splitlines()[0].split(": ", 1)[1]
    lines = [f"# Estate {operation}: {totals}", "", "```text", summary, "```", ""]
    for r in results:
        section = sections.get(r.stack)
        if section:
            lines += [section.rstrip("\n"), ""]
        else:
            lines += [f"## `{r.stack}` ({r.role}): {r.status}", "", r.detail or "no summary written", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
