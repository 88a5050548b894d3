"""One-time migration of an inline ``composable-gpu:estate`` into an inventory folder.

``python -m stack_config migrate --stack dev`` (in the folder of ``Pulumi.yaml``, with the stack's
secrets provider available: ``PULUMI_CONFIG_PASSPHRASE`` or the KMS credentials):

1. reads the estate of ``Pulumi.<stack>.yaml``, its secrets decrypted by the CLI
   (``pulumi config --show-secrets --json``, kept in memory);
2. plans the folder (:func:`plan_migration`, pure): every secret-taking mapping (the Director, each
   BMC, each SSH ``prep``) names a credential set instead (``credential: bmc``); mappings with the
   same user and the same secrets share one set, so a fleet whose BMCs share a password gets one;
3. writes the folder's files (default ``environments/<stack>/``, which must not exist yet);
4. replaces ``composable-gpu:estate`` in the stack file by ``composable-gpu:inventory`` and
   ``composable-gpu:credentials`` (usernames), then stores each set's secrets with
   ``pulumi config set --secret --path`` (the value on standard input, never on a command line).

On a failure in step 4 the stack file is put back as it was. The estate is unchanged, so
``pulumi preview`` afterwards shows no change.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from stack_config.errors import ConfigProblem, EstateConfigError
from stack_config.hints import (
    CREDENTIALS_KEY,
    FULL_CONFIG_KEY,
    FULL_CREDENTIALS_KEY,
    FULL_INVENTORY_KEY,
)
from stack_config.inventory import CREDENTIAL_REF, _secret_holders
from stack_config.loader import _fields_by_key, _is_secret, read_stack_config
from stack_config.models import EstateConfig

#: The top-level keys each file of a migrated folder holds (hosts and tenants get files of their own).
FILE_KEYS: dict[str, tuple[str, ...]] = {
    "estate.yaml": ("environment", "mothership", "composer", "composers", "catalog", "gpu_products"),
    "fabric.yaml": ("fabric", "gpu_compositions"),
    "clusters.yaml": ("hypervisor_clusters", "dpu_cluster"),
}
#: The set names given to credentials found at each kind of place, by the end of the mapping's path.
_KIND_NAMES = (("fabric.director", "director"), ("dpu.bmc", "dpu-bmc"), ("dpu.prep", "dpu-ssh"),
               ("bmc", "bmc"), ("prep", "ssh"), ("credentials", "repository"))


@dataclass
class MigrationPlan:
    """What :func:`plan_migration` makes of an inline estate.

    Attributes:
        files: file path inside the folder -> its content (a mapping of estate keys).
        credentials: set name -> ``{"username": ...}`` (the set's plain fields, for the stack file).
        secrets: ``(set name, field, value)`` of every secret to store encrypted, in order.
    """

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: list[tuple[str, str, str]] = field(default_factory=list)


def _kind(path: str) -> str:
    return next((name for end, name in _KIND_NAMES if path == end or path.endswith(f".{end}")), "credential")


def plan_migration(estate: Mapping[str, Any]) -> MigrationPlan:
    """Split an inline estate (secrets decrypted) into inventory files and credential sets (pure).

    Mappings with the same user and the same secret values share one set, named after the first
    place it is found (``director``, ``bmc``, ``dpu-bmc``, ``ssh``, ``dpu-ssh``; ``bmc-2`` for a
    second distinct BMC set). A secret absent from the estate (set per deployment) stays absent
    from its set. Joined again (:mod:`stack_config.inventory`), the files with the sets give back
    the same estate: list order is kept (hosts are split into ``hosts/<cluster>.yaml`` by the
    hypervisor cluster they belong to and tenants into ``tenants/<name>.yaml`` only where the
    sorted file names keep the order; else one ``hosts.yaml``/``tenants.yaml``).
    """
    raw = copy.deepcopy(dict(estate))
    plan = MigrationPlan()
    groups: dict[tuple[Any, ...], str] = {}
    for holder, model, path in list(_secret_holders(EstateConfig, raw)):
        _to_reference(holder, model, path, plan, groups)
    used: set[str] = set()
    for name, keys in FILE_KEYS.items():
        content = {k: raw[k] for k in keys if k in raw}
        used.update(content)
        if content:
            plan.files[name] = content
    extra = {k: v for k, v in raw.items() if k not in used and k not in ("hosts", "tenants")}
    if extra:  # keys the models do not know: kept, so that validation names them
        plan.files.setdefault("estate.yaml", {}).update(extra)
    plan.files.update(_split(raw.get("hosts"), "hosts", _host_group(raw)))
    plan.files.update(_split(raw.get("tenants"), "tenants", lambda t: str(t.get("name", ""))))
    return plan


def _to_reference(
    holder: dict[str, Any], model: type[BaseModel], path: str, plan: MigrationPlan,
    groups: dict[tuple[Any, ...], str],
) -> None:
    """Replace the user and secrets of ``holder`` by ``credential: <set>`` (found or added)."""
    fields = _fields_by_key(model)
    user_key = "user" if "user" in fields else "username"
    secret_keys = [k for k, f in fields.items() if _is_secret(f.annotation)]
    user = holder.get(user_key)
    secrets = tuple((k, holder.get(k)) for k in secret_keys)
    key = (user, secrets)
    name = groups.get(key)
    if name is None:
        base = _kind(path)
        taken = set(groups.values())
        name = next(n for n in (base, *(f"{base}-{i}" for i in range(2, 10_000))) if n not in taken)
        groups[key] = name
        plan.credentials[name] = {"username": str(user)} if user is not None else {}
        plan.secrets += [(name, k, str(v)) for k, v in secrets if v is not None]
    rebuilt: dict[str, Any] = {}
    for k, v in holder.items():
        if k in (user_key, *secret_keys):
            rebuilt.setdefault(CREDENTIAL_REF, name)
        else:
            rebuilt[k] = v
    rebuilt.setdefault(CREDENTIAL_REF, name)
    holder.clear()
    holder.update(rebuilt)


def _host_group(raw: Mapping[str, Any]) -> Any:
    clusters = raw.get("hypervisor_clusters") or []

    def group(host: Mapping[str, Any]) -> str:
        name = host.get("name")
        return next((str(c.get("name")) for c in clusters if isinstance(c, Mapping)
                     and name in (c.get("hosts") or [])), "standalone")

    return group


def _split(items: Any, key: str, group_of: Any) -> dict[str, dict[str, Any]]:
    """``{"<key>/<group>.yaml": {key: [...]}, ...}`` when the runs of items by group, files sorted by
    name, keep the items' order and no group comes back after another; else ``{"<key>.yaml": ...}``."""
    if not isinstance(items, list) or not items:
        return {f"{key}.yaml": {key: items}} if items is not None else {}
    runs: list[tuple[str, list[Any]]] = []
    for item in items:
        g = group_of(item) if isinstance(item, Mapping) else ""
        if runs and runs[-1][0] == g:
            runs[-1][1].append(item)
        else:
            runs.append((g, [item]))
    names = [g for g, _ in runs]
    safe = all(g and g.replace("-", "").replace(".", "").isalnum() for g in names)
    if safe and len(set(names)) == len(names) and names == sorted(names):
        return {f"{key}/{g}.yaml": {key: group} for g, group in runs}
    return {f"{key}.yaml": {key: items}}


def dump_yaml(content: Mapping[str, Any]) -> str:
    """An inventory file's text: block style, leaf lists and mappings inline, keys in order."""
    return str(yaml.safe_dump(dict(content), sort_keys=False, default_flow_style=None, width=110))


def migrated_stack_config(
    config: Mapping[str, Any], folder: str, credentials: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    """The stack file's ``config`` after the migration (pure): ``composable-gpu:estate`` replaced,
    in its place, by the folder's path and the sets' plain fields (their secrets are set apart)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key == FULL_CONFIG_KEY:
            out[FULL_INVENTORY_KEY] = folder
            out[FULL_CREDENTIALS_KEY] = {name: dict(fields) for name, fields in credentials.items()}
        else:
            out[key] = value
    return out


def _has_secure(value: Any) -> bool:
    if isinstance(value, Mapping):
        return set(value) == {"secure"} or any(_has_secure(v) for v in value.values())
    return isinstance(value, list) and any(_has_secure(v) for v in value)


def _pulumi(args: Sequence[str], cwd: Path, *, stdin: str | None = None) -> str:
    proc = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    if proc.returncode != 0:
        shown = " ".join(a for a in args)  # never a value: values go through standard input
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        raise EstateConfigError([ConfigProblem("", f"pulumi {shown} failed: {tail[0]}")])
    return str(proc.stdout)


def decrypted_estate(cwd: Path, stack: str) -> Any:
    """The stack's ``composable-gpu:estate`` with its secrets decrypted, read through the CLI."""
    out = json.loads(_pulumi(["config", "--show-secrets", "--json", "--stack", stack], cwd))
    entry = out.get(FULL_CONFIG_KEY) or {}
    return entry.get("objectValue", json.loads(entry.get("value", "null")))


def migrate(cwd: Path, stack: str, folder: str | None = None) -> MigrationPlan:
    """Migrate ``<cwd>/Pulumi.<stack>.yaml`` to an inventory folder (the steps in the module doc).

    Args:
        cwd: the folder of ``Pulumi.yaml`` and the stack file.
        stack: the stack's name.
        folder: the inventory folder to write, relative to ``cwd`` (default ``environments/<stack>``).

    Returns:
        The plan that was carried out.

    Raises:
        EstateConfigError: the stack file has no inline estate, the folder exists, or a ``pulumi``
            command failed (naming the command, never a value); the stack file is then unchanged.
    """
    folder = folder or f"environments/{stack}"
    stack_file = cwd / f"Pulumi.{stack}.yaml"
    config = read_stack_config(stack_file)
    if FULL_CONFIG_KEY not in config:
        done = " (it is migrated already)" if FULL_INVENTORY_KEY in config else ""
        problem = ConfigProblem("", f"{stack_file.name} has no {FULL_CONFIG_KEY} to migrate{done}")
        raise EstateConfigError([problem])
    target = cwd / folder
    if target.exists():
        problem = ConfigProblem("", f"{folder} exists already: move it away or pass --folder")
        raise EstateConfigError([problem])
    estate = config[FULL_CONFIG_KEY]
    if _has_secure(estate):
        estate = decrypted_estate(cwd, stack)
    plan = plan_migration(estate)
    before = stack_file.read_text(encoding="utf-8")
    doc = yaml.safe_load(before)
    doc["config"] = migrated_stack_config(config, folder, plan.credentials)
    for name, content in plan.files.items():
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_yaml(content), encoding="utf-8")
    try:
        stack_file.write_text(_leading_comments(before) + yaml.safe_dump(doc, sort_keys=False, width=110),
                              encoding="utf-8")
        for name, key, value in plan.secrets:
            # the CLI drops one trailing newline of a value read from standard input
            _pulumi(["config", "set", "--secret", "--path", "--stack", stack,
                     f"{CREDENTIALS_KEY}.{name}.{key}"], cwd, stdin=f"{value}\n")
    except BaseException:
        stack_file.write_text(before, encoding="utf-8")
        raise
    return plan


def _leading_comments(text: str) -> str:
    """The comment lines a stack file starts with (kept by the migration)."""
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines)

