"""One command for a split estate: preview, up, refresh or destroy the stacks a change touches.

::

    python -m ops.estate preview --fleet prod --changed-since origin/main   # a pull request
    python -m ops.estate up --fleet prod --changed-since HEAD~1             # after its merge
    python -m ops.estate preview --fleet prod --stack tenant:acme           # named stacks (or their names)
    python -m ops.estate preview --fleet prod                               # every stack

The fleet ``prod`` is the stack file ``Pulumi.prod.yaml`` in the project folder (``--project``,
default the current folder): its inventory folder and credential sets are the estate's one
definition, split by :func:`stack_config.fleet.split_estate`. Each role's stack is
``prod-<role>`` (:func:`stack_config.fleet.stack_name`); a stack file missing for it is written
from ``Pulumi.prod.yaml`` (the same inventory, credential sets and encryption salt, plus
``composable-gpu:role``) and the stack is created on the current backend (``PULUMI_BACKEND_URL``,
secrets with ``PULUMI_CONFIG_PASSPHRASE`` or the stack's provider). Before any runs, the stacks a
run touches and every stack they read, transitively, are created when the backend's one listing
(``pulumi stack ls``) lacks them, so a StackReference always names an existing stack; a stack is
opened (``pulumi stack select``) only when it runs, one skipped is never opened.

``--changed-since REF`` takes the files ``git diff --name-only REF`` lists and the untracked ones;
the stacks owning a changed inventory file run, then every stack that reads one of them
(:func:`ops.estate_plan.select`), in dependency order, at most ``--parallel`` (default 2) at a
time, through :mod:`pulumi.automation`. A stack that fails is reported and the stacks reading it
are skipped; independent stacks go on. The output is one line per stack
(:func:`ops.estate_plan.render_summary`); each stack's whole output is written to
``<log-dir>/<stack>.log`` when ``--log-dir`` is given. A preview with ``--report-dir DIR`` also writes
each stack's pull-request summary (:mod:`ops.preview_markdown`, with its policy results) to
``DIR/<stack>.md`` and the comment for the pull request, the one-screen summary followed by every
stack's summary, to ``DIR/estate-review.md`` (``make review FLEET=prod``).

Exit status: 0 when every stack run was ok (or none was touched), 1 when one failed or was skipped,
2 when the fleet's config is invalid or an argument names no stack of it.

``python -m ops.estate migrate --fleet prod [--from STACK]`` moves the resources of the monolithic
stack ``STACK`` (default ``prod`` itself, whose file is the fleet's config) into the fleet's stacks
with ``pulumi state move``, recreating nothing, and gives each host group's stack the output
``cluster_deployments`` its tenants read (:mod:`ops.estate_migrate`); a ``preview`` of the fleet
afterwards shows the moved resources unchanged. Exit status 1 when a move failed (the moves
done before it stay done; running the command again moves the rest).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto

from components.estate import composition_names
from ops.estate_migrate import (
    MigrationError,
    Move,
    held_resources,
    plan_moves,
    seed_deployment_outputs,
    state_move,
)
from ops.estate_plan import StackResult, render_review, render_summary, run_in_order, select
from ops.preview_events import Preview
from ops.preview_markdown import render_markdown
from ops.preview_report import PreviewRun, preview_from_run
from stack_config.errors import ConfigProblem, EstateConfigError
from stack_config.fleet import Fleet, split_estate, stack_name
from stack_config.hints import FULL_INVENTORY_KEY, FULL_ROLE_KEY
from stack_config.inventory import read_inventory
from stack_config.stack_file import load_stack_file

OPERATIONS = ("preview", "up", "refresh", "destroy")
#: The aggregate pull-request comment ``--report-dir`` writes.
REVIEW_FILE = "estate-review.md"
#: The environment variable that makes ``pulumi preview --json`` stream engine events.
STREAMING_JSON_PREVIEW = "PULUMI_ENABLE_STREAMING_JSON_PREVIEW"
#: The labels ``pulumi.automation.CommandError`` puts before the CLI's stdout and stderr.
_LABEL = re.compile(r"^(stdout|stderr): ")
#: Keys of the fleet's stack file that a role's stack file takes over.
_COPIED = ("secretsprovider", "encryptedkey", "encryptionsalt")


def fleet_folder(project: Path, fleet: str) -> str:
    """The inventory folder ``Pulumi.<fleet>.yaml`` names, as written there.

    Raises:
        EstateConfigError: the file holds no ``composable-gpu:inventory`` (an inline estate is not split).
    """
    config = (yaml.safe_load((project / f"Pulumi.{fleet}.yaml").read_text()) or {}).get("config") or {}
    folder = config.get(FULL_INVENTORY_KEY)
    if not isinstance(folder, str):
        raise EstateConfigError([ConfigProblem(FULL_INVENTORY_KEY, (
            f"Pulumi.{fleet}.yaml names no inventory folder; only an estate in files is split into stacks"))])
    return os.path.normpath(folder)


def load_fleet(project: Path, fleet: str) -> Fleet:
    """The split of the estate ``Pulumi.<fleet>.yaml`` defines (checked offline: secrets not decrypted).

    Raises:
        EstateConfigError: the stack file or its estate is invalid, or the estate cannot be split.
    """
    folder = fleet_folder(project, fleet)
    estate = load_stack_file(project / f"Pulumi.{fleet}.yaml", require_secrets=False)
    files = read_inventory(project / folder, shown_as=folder)
    return split_estate(files, estate, folder=folder)


def changed_files(ref: str, project: Path) -> list[str]:
    """Files changed since git revision ``ref`` (``git diff --name-only ref``, working tree included)
    and untracked files, as paths relative to ``project`` (files outside it left out).

    Raises:
        subprocess.CalledProcessError: git failed (not a repository, unknown revision).
    """

    def git(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, text=True).stdout
        return [line for line in out.splitlines() if line]

    top = Path(git("rev-parse", "--show-toplevel")[0])
    untracked = git("ls-files", "--others", "--exclude-standard", "--full-name")
    paths = git("diff", "--name-only", ref, "--") + untracked
    out = []
    for p in dict.fromkeys(paths):
        absolute = (top / p).resolve()
        if absolute.is_relative_to(project.resolve()):
            out.append(absolute.relative_to(project.resolve()).as_posix())
    return out


def ensure_stack_file(project: Path, fleet: str, role: str) -> Path:
    """``Pulumi.<fleet>-<role>.yaml``, written from ``Pulumi.<fleet>.yaml`` when missing (its config
    with ``composable-gpu:role`` set, and its secrets provider settings), else left as it is."""
    path = project / f"Pulumi.{stack_name(fleet, role)}.yaml"
    if not path.exists():
        base = yaml.safe_load((project / f"Pulumi.{fleet}.yaml").read_text()) or {}
        data: dict[str, Any] = {"config": {**(base.get("config") or {}), FULL_ROLE_KEY: role}}
        data.update({k: base[k] for k in _COPIED if k in base})
        path.write_text(f"# Written by python -m ops.estate from Pulumi.{fleet}.yaml: the {role} stack.\n"
                        + yaml.safe_dump(data, sort_keys=False))
    return path


def ensure_stacks(project: Path, fleet_name: str, roles: Iterable[str],
                  command: auto.PulumiCommand | None = None) -> list[str]:
    """Create on the current backend the stacks of ``roles`` that it does not hold, each with its
    stack file (:func:`ensure_stack_file`), after one listing of the project's stacks (``pulumi
    stack ls --json``); returns the names of the stacks created, in ``roles`` order.

    A listed name may be qualified (``<organization>/<project>/<stack>`` on some backends): its
    last part is the stack's name. ``command`` is the CLI the workspace runs (one ``pulumi
    version`` per :class:`pulumi.automation.PulumiCommand`), a new one when None.

    Raises:
        pulumi.automation.CommandError: the listing or a creation failed.
    """
    workspace = auto.LocalWorkspace(work_dir=str(project), pulumi_command=command)
    existing = {s.name.rsplit("/", 1)[-1] for s in workspace.list_stacks()}
    created = []
    for role in roles:
        name = stack_name(fleet_name, role)
        ensure_stack_file(project, fleet_name, role)
        if name not in existing:
            workspace.create_stack(name)
            created.append(name)
    return created


def open_stack(
    project: Path, fleet_name: str, role: str, command: auto.PulumiCommand | None = None
) -> auto.Stack:
    """The existing stack of ``role`` (``pulumi stack select``), in a workspace of its own (a run
    sets its environment); ``command`` as for :func:`ensure_stacks`.

    Raises:
        pulumi.automation.CommandError: the backend holds no such stack.
    """
    workspace = auto.LocalWorkspace(work_dir=str(project), pulumi_command=command)
    return auto.Stack.select(stack_name(fleet_name, role), workspace)


def migrate(project: Path, fleet_name: str, source: str) -> list[Move]:
    """Move the monolithic stack ``source``'s resources into the fleet's stacks
    (:mod:`ops.estate_migrate`), creating the fleet's stacks first; returns the moves done.

    Raises:
        EstateConfigError: the fleet's config is invalid.
        MigrationError: the source is not a monolith of this estate, a destination that would get
            resources already holds some (checked for all before any move), or a move failed.
    """
    fleet = load_fleet(project, fleet_name)
    estate = load_stack_file(project / f"Pulumi.{fleet_name}.yaml", require_secrets=False)
    if source in {stack_name(fleet_name, r) for r in fleet.slices}:
        raise MigrationError(f"{source} is a stack of the split of fleet {fleet_name}, not its monolith")
    command = auto.PulumiCommand()
    ensure_stacks(project, fleet_name, fleet.order(fleet.slices), command)
    resources = auto.select_stack(source, work_dir=str(project)).export_stack().deployment or {}
    moves = plan_moves(resources.get("resources") or [], fleet=fleet, estate=estate,
                       composition_names=composition_names(estate), fleet_name=fleet_name)
    for move in moves:
        exported = open_stack(project, fleet_name, move.role, command).export_stack()
        held = held_resources((exported.deployment or {}).get("resources") or [])
        if held:
            raise MigrationError(f"{move.stack} already holds {len(held)} resource(s), such as {held[0]}: "
                                 "a migration moves resources only into stacks that hold none")
    for move in moves:
        state_move(project, source, move)
        clusters = fleet.slices[move.role].hypervisor_clusters
        if clusters:
            seed_deployment_outputs(project, move.stack, move.role, clusters)
    return moves


@dataclass(frozen=True)
class PolicyArgs:
    """The policy pack (a folder) and its config file that every preview and up runs with, if any."""

    pack: str | None = None
    config: str | None = None


def _error_lines(text: str, most: int = 3) -> str:
    """The first line of ``text`` that starts with ``error:`` (the engine's diagnostics, not its
    progress lines) with the problem lines (``- ...``) under it, at most ``most`` lines joined with
    `` | `` and 300 characters; else its last line. ``text`` is a :class:`pulumi.automation.CommandError`'s,
    whose output starts with the labels ``stdout:`` and ``stderr:`` (``CommandResult.__str__`` of
    the pulumi Python SDK): a label is not part of the line (the CLI's own errors, such as a held
    stack lock, are the first line of its stderr)."""
    lines = [_LABEL.sub("", ln.strip()) for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    first = next((i for i, ln in enumerate(lines) if ln.startswith("error:")), None)
    if first is None:
        return lines[-1][:300] if lines else ""
    picked = [lines[first]]
    for ln in lines[first + 1:]:
        if not ln.startswith("- ") or len(picked) == most:
            break
        picked.append(ln)
    return " | ".join(picked)[:300]


def _preview_failure(preview: Preview) -> str:
    """Why a preview failed, from its engine events, in one line of at most 300 characters: its
    first mandatory policy violation (``policy <name>: <detail>``), else its first error
    diagnostic's first line; empty when neither."""
    for v in preview.violations:
        if v.enforcement_level == "mandatory":
            return f"policy {v.policy_name}: {v.detail}"[:300]
    for d in preview.diagnostics:
        if d.severity == "error" and d.message.strip():
            return d.message.strip().splitlines()[0][:300]
    return ""


def _run(stack: auto.Stack, operation: str, on_output: Any, policy: PolicyArgs, *,
         json_events: bool = False) -> dict[str, int]:
    """One operation on ``stack``; the engine's resource counts by operation. With ``json_events``
    a preview's output is its engine events, one JSON object per line (``pulumi preview --json``
    with ``PULUMI_ENABLE_STREAMING_JSON_PREVIEW=1``, as :mod:`ops.preview_report` runs it)."""
    packs = [policy.pack] if policy.pack else None
    configs = [policy.config] if policy.config else None
    if operation == "preview":
        if json_events:
            stack.workspace.env_vars = {**stack.workspace.env_vars, STREAMING_JSON_PREVIEW: "1"}
        result = stack.preview(color="never", on_output=on_output, policy_packs=packs,
                               policy_pack_configs=configs, json=json_events or None)
        return {str(k): v for k, v in result.change_summary.items()}
    if operation == "up":
        summary = stack.up(color="never", on_output=on_output, policy_packs=packs,
                           policy_pack_configs=configs).summary
    elif operation == "refresh":
        summary = stack.refresh(color="never", on_output=on_output).summary
    else:
        summary = stack.destroy(color="never", on_output=on_output).summary
    return {str(k): v for k, v in (summary.resource_changes or {}).items()}


def run_estate(
    operation: str,
    *,
    project: Path,
    fleet_name: str,
    roles: Sequence[str],
    changed: Sequence[str] | None,
    parallel: int,
    policy: PolicyArgs | None = None,
    log_dir: Path | None = None,
    report_dir: Path | None = None,
) -> list[StackResult]:
    """Run ``operation`` on the stacks :func:`ops.estate_plan.select` picks; see the module doc.
    With ``report_dir`` a preview also writes each stack's pull-request summary to
    ``<report_dir>/<stack>.md`` (:func:`ops.preview_markdown.render_markdown` of its engine events).

    Raises:
        EstateConfigError: the fleet's config is invalid.
        KeyError: a role in ``roles`` is not the fleet's.
    """
    fleet = load_fleet(project, fleet_name)
    order = select(fleet, changed_files=changed, roles=roles)
    command = auto.PulumiCommand()
    ensure_stacks(project, fleet_name, fleet.order(fleet.read_by(order)), command)

    def run_one(role: str) -> StackResult:
        name = stack_name(fleet_name, role)
        lines: list[str] = []
        start = time.perf_counter()
        report = report_dir if operation == "preview" else None
        error = ""
        try:
            stack = open_stack(project, fleet_name, role, command)
            changes = _run(stack, operation, lines.append, policy or PolicyArgs(),
                           json_events=report is not None)
            result = StackResult(role, name, "ok", time.perf_counter() - start, changes)
        except auto.CommandError as exc:
            error = str(exc)
            seconds = time.perf_counter() - start
            result = StackResult(role, name, "failed", seconds, detail=_error_lines(error))
        if report is not None:
            events = [ln.strip() for ln in lines if ln.lstrip().startswith("{")]
            run = PreviewRun(events=events, returncode=1 if error else 0, stderr=error, diff_text=None)
            preview = preview_from_run(run)
            report.mkdir(parents=True, exist_ok=True)
            title = f"Pulumi preview: `{name}` ({role})"
            (report / f"{name}.md").write_text(render_markdown(preview, title=title))
            if error:  # the CLI's output was engine events: say why from them
                result = replace(result, detail=_preview_failure(preview) or result.detail)
        if error:
            lines.append(error)
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            text = "".join(ln if ln.endswith("\n") else ln + "\n" for ln in lines)
            (log_dir / f"{name}.log").write_text(text)
        return result

    def skipped(role: str, bad: list[str]) -> StackResult:
        return StackResult(role, stack_name(fleet_name, role), "skipped",
                           detail="not run: it reads " + ", ".join(stack_name(fleet_name, b) for b in bad))

    return run_in_order(fleet, order, run_one, parallel=parallel, skipped=skipped)


def write_review(report_dir: Path, results: Sequence[StackResult]) -> Path:
    """``<report_dir>/estate-review.md``: :func:`ops.estate_plan.render_review` of a preview's
    ``results`` with the stacks' summaries ``run_estate`` wrote there; returns its path."""
    report_dir.mkdir(parents=True, exist_ok=True)
    sections = {r.stack: (report_dir / f"{r.stack}.md").read_text()
                for r in results if r.status != "skipped" and (report_dir / f"{r.stack}.md").is_file()}
    path = report_dir / REVIEW_FILE
    path.write_text(render_review(results, operation="preview", sections=sections))
    return path


def _role_of(value: str, fleet: str, fleet_roles: Sequence[str]) -> str:
    """A ``--stack`` value as a role: a role, or a stack's name (``prod-tenant-acme``)."""
    by_name = {stack_name(fleet, r): r for r in fleet_roles}
    return by_name.get(value, value)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module doc); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m ops.estate", description=__doc__.splitlines()[0])
    parser.add_argument("operation", choices=(*OPERATIONS, "migrate"))
    parser.add_argument("--from", dest="source", metavar="STACK",
                        help="migrate: the monolithic stack to split (default: the fleet's own stack)")
    parser.add_argument("--fleet", required=True, help="the fleet's stack file is Pulumi.<fleet>.yaml")
    parser.add_argument("--project", type=Path, default=Path.cwd(), help="folder of Pulumi.yaml")
    parser.add_argument("--changed-since", metavar="REF", help="the stacks owning files changed since REF")
    parser.add_argument("--stack", action="append", default=[], help="a role or stack name (repeatable)")
    parser.add_argument("--parallel", type=int, default=2, help="stacks run at the same time (default 2)")
    parser.add_argument("--policy-pack", help="policy pack folder, passed to every preview and up")
    parser.add_argument("--policy-pack-config", help="its config file")
    parser.add_argument("--log-dir", type=Path, help="write each stack's whole output to <dir>/<stack>.log")
    parser.add_argument("--report-dir", type=Path, help="preview: write each stack's Markdown summary to "
                        "<dir>/<stack>.md and all of them, after the summary, to <dir>/estate-review.md")
    args = parser.parse_args(argv)
    project = args.project.resolve()
    if args.operation == "migrate":
        return _main_migrate(project, args.fleet, args.source or args.fleet)
    try:
        roles = list(load_fleet(project, args.fleet).slices)
        named = [_role_of(v, args.fleet, roles) for v in args.stack]
        changed = changed_files(args.changed_since, project) if args.changed_since else None
        policy = PolicyArgs(args.policy_pack, args.policy_pack_config)
        results = run_estate(args.operation, project=project, fleet_name=args.fleet, roles=named,
                             changed=changed, parallel=args.parallel, policy=policy, log_dir=args.log_dir,
                             report_dir=args.report_dir)
    except EstateConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except KeyError as exc:
        print(f"error: {exc.args[0]} is not a stack of fleet {args.fleet}; its roles: {', '.join(roles)}",
              file=sys.stderr)
        return 2
    print(render_summary(results, operation=args.operation))
    if args.report_dir is not None and args.operation == "preview":
        write_review(args.report_dir, results)
    return 0 if all(r.status == "ok" for r in results) else 1


def _main_migrate(project: Path, fleet: str, source: str) -> int:
    """``migrate``: one line per move, then what is left to do; the exit status."""
    try:
        moves = migrate(project, fleet, source)
    except EstateConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except MigrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for move in moves:
        print(f"moved {len(move.urns):>4} resource(s) with their children from {source} to {move.stack}")
    print(f"{source} keeps its Estate component, providers and reads: preview the fleet "
          f"(python -m ops.estate preview --fleet {fleet}), then remove it with "
          f"pulumi stack rm --force --preserve-config --stack {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
