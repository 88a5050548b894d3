"""``python -m stack_config``: offline tools for the stack config.

- ``schema [--check]``: write ``stack_config/stack-config.schema.json`` (``--check``: exit 1 if
  the committed file is stale).
- ``validate [--allow-missing-secrets] FILE...``: validate the estate in ``Pulumi.<stack>.yaml``
  files (encrypted values are only checked for presence; with the flag, absent secrets are
  accepted; secrets in plain text and ``composable-gpu:*`` keys the program does not read are
  refused); prints one line per problem, exit 1 on any. Missing secrets are reported with the
  ``pulumi config set --secret`` command of each, then one line naming ``--allow-missing-secrets``.
  A file that cannot be read or parsed is one line (the file and the reason; for YAML, the line
  and column), and the other files are still checked. A stack whose estate is an inventory
  folder (``composable-gpu:inventory``) is checked with its folder's files and credential sets;
  a problem in a file names the file and the key inside it.
- ``migrate --stack STACK [--folder DIR]``: one-time move of an inline ``composable-gpu:estate``
  into an inventory folder (default ``environments/<stack>``) with credential sets
  (:mod:`stack_config.migrate`); run in the folder of ``Pulumi.yaml`` with the stack's secrets
  provider available. Prints the files written and the credential sets.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from stack_config.errors import EstateConfigError, StackFileError
from stack_config.schema import SCHEMA_PATH, render_schema, write_schema
from stack_config.stack_file import load_stack_file


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    ap = argparse.ArgumentParser(
        prog="python -m stack_config",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    schema = sub.add_parser("schema", help="write (or --check) the JSON schema file")
    schema.add_argument("--check", action="store_true")
    validate = sub.add_parser("validate", help="validate Pulumi.<stack>.yaml files")
    validate.add_argument(
        "--allow-missing-secrets",
        action="store_true",
        help="accept absent secrets (set per deployment with pulumi config set --secret)",
    )
    validate.add_argument("files", nargs="+", type=Path)
    migrate = sub.add_parser("migrate", help="move a stack's inline estate into an inventory folder")
    migrate.add_argument("--stack", required=True, help="the stack whose Pulumi.<stack>.yaml to migrate")
    migrate.add_argument(
        "--folder", default=None, help="inventory folder to write (default environments/<stack>)"
    )
    args = ap.parse_args(argv)

    if args.cmd == "migrate":
        return _migrate(args.stack, args.folder)

    if args.cmd == "schema":
        if args.check:
            current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
            if current != render_schema():
                print(f"{SCHEMA_PATH} is stale: run python -m stack_config schema", file=sys.stderr)
                return 1
            return 0
        print(write_schema())
        return 0
    failed = False
    for path in args.files:
        try:
            estate = load_stack_file(path, require_secrets=not args.allow_missing_secrets)
        except StackFileError as exc:
            failed = True
            print(exc, file=sys.stderr)
            continue
        except EstateConfigError as exc:
            failed = True
            print(f"{path}: {exc}", file=sys.stderr)
            secrets = sum(p.missing_secret for p in exc.problems)
            if secrets:  # once per file, after the list: the flag is about the run, not one key
                rerun = f"python -m stack_config validate --allow-missing-secrets {shlex.quote(str(path))}"
                plural = "s" if secrets != 1 else ""
                print(
                    f"{path}: {secrets} secret{plural} missing: set them as shown above, "
                    f"or validate the rest with: {rerun}",
                    file=sys.stderr,
                )
            continue
        print(f"{path}: ok ({estate.environment}, {len(estate.hosts)} hosts, {len(estate.tenants)} tenants)")
    return 1 if failed else 0


def _migrate(stack: str, folder: str | None) -> int:
    from stack_config.migrate import migrate

    try:
        plan = migrate(Path.cwd(), stack, folder)
    except EstateConfigError as exc:
        print("\n".join(f"Pulumi.{stack}.yaml: {p}" for p in exc.problems), file=sys.stderr)
        return 1
    target = folder or f"environments/{stack}"
    for name in plan.files:
        print(f"wrote {target}/{name}")
    for name, fields in plan.credentials.items():
        stored = [key for set_name, key, _ in plan.secrets if set_name == name]
        print(f"credential set {name!r}: {', '.join([*fields, *stored]) or 'empty'} "
              f"(secrets encrypted in Pulumi.{stack}.yaml)")
    print(f"Pulumi.{stack}.yaml now names {target}; run pulumi preview --stack {stack}: it shows no change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
