"""Preview-for-review: run ``pulumi preview`` for a stack with the policy pack and write the
Markdown summary for a pull-request comment.

Two CLI runs (both read-only; ``preview`` takes no stack lock):

1. ``pulumi preview --stack S --json --policy-pack P... [--policy-pack-config C...]`` with
   ``PULUMI_ENABLE_STREAMING_JSON_PREVIEW=1``: engine events, one JSON object per line (steps,
   policy violations, diagnostics, summary) — parsed by :mod:`ops.preview_events`.
2. ``pulumi preview --stack S --diff --color never`` with the same packs (skip with
   ``--no-diff-text``): the human-readable diff, embedded collapsed in the summary.

Usage::

    python -m ops.preview_report --stack dev --out preview-dev.md [--events-out dev.events.jsonl]
                                 [--diff-out dev.diff.txt]
    python -m ops.preview_report --from-events dev.events.jsonl --out preview-dev.md   # re-render

Without ``--policy-pack``, the pack is ``<cwd>/policies``. Without ``--policy-pack-config``, each
pack gets its config for the stack's environment, ``<pack>/config/<estate.environment>.json``
(e.g. ``policies/config/lab.json`` for ``dev``), when every pack has one.
The stack's backend and secrets come from the environment as for any ``pulumi`` command
(``PULUMI_BACKEND_URL``, ``PULUMI_CONFIG_PASSPHRASE`` or the stack's secrets provider).
Exit status: 0 when the preview succeeded with no mandatory policy violation; 1 when it
failed, did not finish, or a mandatory policy was violated (the summary is still written,
so CI can post it before failing the job; ``--exit-zero`` always exits 0); 2 on bad usage or
when ``pulumi`` cannot be run at all.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from ops.preview_events import Diagnostic, Preview, parse_events
from ops.preview_markdown import render_markdown

#: Default time limit of one ``pulumi preview`` run, in seconds.
DEFAULT_TIMEOUT_SECONDS = 1800.0


class PreviewRunError(Exception):
    """``pulumi`` could not be started, or a preview run exceeded its time limit."""


@dataclass(frozen=True)
class PreviewRun:
    """Raw results of :func:`run_preview`.

    ``events``: the JSON lines of the streaming ``--json`` run; ``returncode``/``stderr`` of
    that run; ``diff_text``: stdout of the ``--diff`` run, or ``None`` if not requested.
    """

    events: list[str]
    returncode: int
    stderr: str
    diff_text: str | None


def preview_args(stack: str, policy_packs: Sequence[Path | str], *, json_events: bool,
                 policy_configs: Sequence[Path | str] = ()) -> list[str]:
    """The ``pulumi preview`` argument list (without the ``pulumi`` executable).

    ``policy_configs``: ``--policy-pack-config`` files, one per pack in the same order (the
    CLI pairs them by position), or none.
    """
    args = ["preview", "--stack", stack, "--non-interactive"]
    args += ["--json"] if json_events else ["--diff", "--color", "never"]
    for pack in policy_packs:
        args += ["--policy-pack", str(pack)]
    for config in policy_configs:
        args += ["--policy-pack-config", str(config)]
    return args


def stack_environment(cwd: Path, stack: str) -> str | None:
    """The estate's ``environment`` (``lab``, ``staging``, ``production``) of the stack
    ``<cwd>/Pulumi.<stack>.yaml``, or ``None``: from its ``<project>:estate`` config, or from the
    files of its inventory folder (``<project>:inventory``, relative to ``cwd``)."""
    stack_file = cwd / f"Pulumi.{stack}.yaml"
    if not stack_file.is_file():
        return None
    config = (yaml.safe_load(stack_file.read_text()) or {}).get("config") or {}
    for key, value in config.items():
        if key.endswith(":estate") and isinstance(value, dict) and isinstance(value.get("environment"), str):
            return value["environment"]
        if key.endswith(":inventory") and isinstance(value, str):
            return _inventory_environment(cwd / value)
    return None


def _inventory_environment(folder: Path) -> str | None:
    """The ``environment`` of the inventory folder's joined files (None when they cannot be read:
    the program then names the file and what is wrong with it)."""
    from stack_config.errors import EstateConfigError
    from stack_config.inventory import join_inventory, read_inventory

    try:
        raw, _origins, _problems = join_inventory(read_inventory(folder), str(folder))
    except EstateConfigError:
        return None
    environment = raw.get("environment")
    return environment if isinstance(environment, str) else None


def default_policy_config(pack: Path, cwd: Path, stack: str) -> Path | None:
    """``<pack>/config/<environment>.json`` for the stack's environment, if that file exists
    (the policy pack ships one per environment: policies/README.md, "Config schema")."""
    environment = stack_environment(cwd, stack)
    candidate = pack / "config" / f"{environment}.json"
    return candidate if environment and candidate.is_file() else None


def run_preview(
    *,
    stack: str,
    cwd: Path,
    policy_packs: Sequence[Path | str] = (),
    policy_configs: Sequence[Path | str] = (),
    env: Mapping[str, str] | None = None,
    diff: bool = True,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> PreviewRun:
    """Run the preview(s) for ``stack`` in project directory ``cwd``.

    ``env`` defaults to this process's environment. Raises :class:`PreviewRunError` if the
    ``pulumi`` executable is missing or a run takes longer than ``timeout_seconds``.
    """
    base_env = dict(os.environ if env is None else env)
    json_args = preview_args(stack, policy_packs, json_events=True, policy_configs=policy_configs)
    diff_args = preview_args(stack, policy_packs, json_events=False, policy_configs=policy_configs)
    try:
        events = subprocess.run(
            ["pulumi", *json_args], cwd=cwd,
            env={**base_env, "PULUMI_ENABLE_STREAMING_JSON_PREVIEW": "1"},
            capture_output=True, text=True, timeout=timeout_seconds,
        )
        diff_text = None
        if diff:
            diff_text = subprocess.run(
                ["pulumi", *diff_args], cwd=cwd, env=base_env,
                capture_output=True, text=True, timeout=timeout_seconds,
            ).stdout
    except FileNotFoundError as exc:
        raise PreviewRunError("the pulumi CLI is not on PATH (source lab/env.sh)") from exc
    except subprocess.TimeoutExpired as exc:
        raise PreviewRunError(f"pulumi preview of {stack!r} took longer than {timeout_seconds} s") from exc
    lines = [line for line in events.stdout.splitlines() if line.startswith("{")]
    return PreviewRun(events=lines, returncode=events.returncode, stderr=events.stderr, diff_text=diff_text)


def preview_from_run(run: PreviewRun) -> Preview:
    """Parse a run's events; if the engine never reported a summary (the CLI failed before or
    during the preview), the tail of its stderr becomes an error diagnostic."""
    preview = parse_events(run.events)
    if preview.result is None and run.stderr.strip():
        tail = run.stderr.strip()[-2000:]
        preview = preview.model_copy(
            update={"diagnostics": [*preview.diagnostics, Diagnostic(severity="error", message=tail)]}
        )
    return preview


def blocks_merge(preview: Preview) -> bool:
    """True when the preview failed, did not finish, or violated a mandatory policy."""
    mandatory = any(v.enforcement_level == "mandatory" for v in preview.violations)
    return preview.result != "succeeded" or mandatory


def _default_packs(cwd: Path) -> list[Path]:
    pack = cwd / "policies"
    return [pack] if (pack / "PulumiPolicy.yaml").is_file() else []


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ops.preview_report",
                                     description="Run pulumi preview with the policy pack and write a "
                                                 "Markdown summary for a pull-request comment.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="stack to preview (e.g. dev, staging, production)")
    source.add_argument("--from-events", type=Path, metavar="FILE",
                        help="render a saved --events-out file instead of running pulumi")
    parser.add_argument("--cwd", type=Path, default=Path("."), help="project directory (default: .)")
    parser.add_argument("--policy-pack", type=Path, action="append", default=None, metavar="DIR",
                        help="policy pack directory, repeatable (default: <cwd>/policies if it has a "
                             "PulumiPolicy.yaml)")
    parser.add_argument("--policy-pack-config", type=Path, action="append", default=None, metavar="FILE",
                        help="config for the policy pack at the same position, repeatable (default: "
                             "<pack>/config/<environment>.json of the stack's estate, if every pack has one)")
    parser.add_argument("--no-policy-pack", action="store_true", help="run without any policy pack")
    parser.add_argument("--out", default="-", help="Markdown output file (default: stdout)")
    parser.add_argument("--events-out", type=Path, help="also save the raw engine events (JSON lines)")
    parser.add_argument("--diff-out", type=Path, help="also save the full --diff text (the summary embeds "
                                                      "at most 30000 characters of it)")
    parser.add_argument("--no-diff-text", action="store_true", help="skip the second, --diff run")
    parser.add_argument("--title", help="heading of the summary (default: project / stack)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="seconds per run")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even if the preview blocks merging")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status described in the module docstring."""
    args = _parser().parse_args(argv)
    if args.from_events:
        run = PreviewRun(events=args.from_events.read_text().splitlines(), returncode=0, stderr="",
                         diff_text=None)
    else:
        packs = [] if args.no_policy_pack else (args.policy_pack or _default_packs(args.cwd))
        configs = args.policy_pack_config or []
        if not configs and packs:
            found = [default_policy_config(p, args.cwd, args.stack) for p in packs]
            configs = [c for c in found if c is not None] if all(found) else []
        try:
            run = run_preview(stack=args.stack, cwd=args.cwd, policy_packs=packs, policy_configs=configs,
                              diff=not args.no_diff_text, timeout_seconds=args.timeout)
        except PreviewRunError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.events_out:
            args.events_out.write_text("".join(f"{line}\n" for line in run.events))
        if args.diff_out and run.diff_text is not None:
            args.diff_out.write_text(run.diff_text)
    preview = preview_from_run(run)
    markdown = render_markdown(preview, title=args.title, diff_text=run.diff_text)
    if args.out == "-":
        sys.stdout.write(markdown)
    else:
        Path(args.out).write_text(markdown)
    return 0 if args.exit_zero or not blocks_merge(preview) else 1


if __name__ == "__main__":
    sys.exit(main())
