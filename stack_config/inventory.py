"""The estate as an inventory folder in the repository, with credentials referenced by name.

A stack names its folder (``composable-gpu:inventory: environments/dev``) and holds the secrets
as credential sets (``composable-gpu:credentials``); the folder holds everything else, in as many
YAML files as reads well in a pull request::

    environments/dev/
      estate.yaml          # environment, mothership, composer (and catalog, gpu_products)
      fabric.yaml          # fabric (director: {credential: director}, pools), gpu_compositions
      clusters.yaml        # hypervisor_clusters, dpu_cluster
      hosts/lab-workers.yaml   # {hosts: [...]}: a rack or host group per file
      tenants/alpha.yaml   # {tenants: [...]}: a tenant per file

Every ``*.yaml`` below the folder is read, in sorted order of its path inside the folder (``/``
separated). Each is a mapping of top-level estate keys (those of :class:`EstateConfig`): the list
keys (``hosts``, ``tenants``, ``hypervisor_clusters``, ``gpu_compositions``, ``gpu_products``)
are joined over the files in that order; any other key is written in one file only. The joined
estate is validated by the same models and rules as the inline ``composable-gpu:estate``, and
every problem names the file, the key inside it and the rule, e.g.
``environments/dev/hosts/rack-a.yaml: hosts[3].bmc.endpoint: Input should be a valid URL...``.

A mapping that takes a secret (the Director, a host or DPU BMC, an SSH ``prep``) names a
credential set instead, ``credential: <name>``; the set (``username``, ``password``,
``private_key``) lives in the stack config, its secrets encrypted by the stack's secrets provider.
A secret written in an inventory file is refused, naming file and key.

Pure except :func:`read_inventory` (reads the folder's files).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from stack_config.errors import ConfigProblem, EstateConfigError
from stack_config.hints import (
    CONFIG_KEY,
    CREDENTIALS_KEY,
    FULL_CONFIG_KEY,
    FULL_CREDENTIALS_KEY,
    FULL_INVENTORY_KEY,
    INVENTORY_KEY,
    close_spelling,
    set_credential_command,
)
from stack_config.loader import (
    SECRET_PLACEHOLDER,
    _fields_by_key,
    _is_plain_text,
    _is_secret,
    _model_of,
    _problem_from_pydantic,
    _secret_fields,
    _yaml_error_summary,
    load_estate,
)
from stack_config.loader import (
    fill_missing_secrets as fill_missing_secrets_in,
)
from stack_config.models import EstateConfig
from stack_config.types import DnsLabel, EncryptedSecret, NonEmptyStr, Secret

#: PyYAML's safe loader, libyaml's when PyYAML was built with it (an order of magnitude faster on
#: thousands of hosts; the same documents and errors).
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: The key, inside a mapping that takes a secret, naming the credential set that provides it.
CREDENTIAL_REF = "credential"
#: Top-level estate keys that several inventory files may hold (their lists are joined).
LIST_KEYS: tuple[str, ...] = tuple(
    key for key, f in _fields_by_key(EstateConfig).items() if (m := _model_of(f.annotation)) and m[1]
)
#: Where a credential set's field lands in the mapping that references it: the first of these names
#: that the mapping's model declares (an SSH connection calls its user ``user``).
_TARGET_FIELDS: dict[str, tuple[str, ...]] = {
    "username": ("username", "user"),
    "password": ("password",),
    "private_key": ("private_key",),
}


class CredentialSet(BaseModel):
    """One credential set of ``composable-gpu:credentials``, shared by every mapping that names it
    (e.g. the BMCs of one rack). Its secrets are set with ``pulumi config set --secret``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: NonEmptyStr | None = None
    """Login name (a BMC's or the Director's ``username``, an SSH connection's ``user``)."""
    password: Secret | None = None
    """Password (Director, BMC)."""
    private_key: EncryptedSecret | None = None
    """SSH private key, set from a file (``... < key``)."""


_SET_NAME: TypeAdapter[str] = TypeAdapter(DnsLabel)


@dataclass(frozen=True)
class InventoryFile:
    """One YAML file of an inventory folder.

    Attributes:
        name: its path as messages show it: the folder as configured joined with the file's path
            inside it (``environments/dev/hosts/rack-a.yaml``).
        data: its decoded content (None for an empty file).
    """

    name: str
    data: Any


@dataclass
class _Origins:
    """Where each part of the joined estate came from: a file per key, a (file, index in that file)
    per item of a list key."""

    folder: str
    keys: dict[str, str] = field(default_factory=dict)
    items: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    _PATH = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?(.*)$", re.DOTALL)

    def locate(self, path: str) -> tuple[str, str]:
        """``(file, path inside it)`` of a key path of the joined estate (``hosts[7].bmc`` ->
        ``("…/hosts/rack-b.yaml", "hosts[2].bmc")``); the folder itself when no file holds it."""
        m = self._PATH.match(path)
        if m is None:
            return self.folder, path
        key, index, rest = m.group(1), m.group(2), m.group(3)
        if key in self.items and index is not None and int(index) < len(self.items[key]):
            name, local = self.items[key][int(index)]
            return name, f"{key}[{local}]{rest}"
        if key in self.items and len({n for n, _ in self.items[key]}) == 1:
            return self.items[key][0][0], path
        return self.keys.get(key, self.folder), path

    def describe(self, text: str) -> str:
        """``text`` with every ``key[i]`` reference of a list key rewritten as the item's place in
        its file (``first at hosts[7].name`` -> ``first at hosts[2].name in …/rack-b.yaml``)."""

        def one(m: re.Match[str]) -> str:
            name, local = self.locate(m.group(0))
            return f"{local} in {name}"

        keys = "|".join(re.escape(k) for k in self.items)
        if not keys:
            return text
        return re.sub(rf"\b(?:{keys})\[\d+\](?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*", one, text)


def read_inventory(folder: Path, *, shown_as: str | None = None) -> list[InventoryFile]:
    """Every ``*.yaml`` file below ``folder``, decoded, in sorted order of its path inside it.

    Args:
        folder: the inventory folder.
        shown_as: how messages name the folder (default: ``str(folder)``), e.g. the path as the
            stack config writes it.

    Raises:
        EstateConfigError: the folder is missing or holds no YAML file, or a file cannot be read or
            is not YAML (one problem per such file, naming it; for YAML the line and column).
    """
    shown = shown_as if shown_as is not None else str(folder)
    if not folder.is_dir():
        problem = ConfigProblem("", "the inventory folder does not exist", file=shown)
        raise EstateConfigError([problem], key=f"{FULL_INVENTORY_KEY} {shown}")
    paths = sorted(folder.rglob("*.yaml"), key=lambda p: p.relative_to(folder).as_posix())
    files, problems = [], []
    for path in paths:
        name = f"{shown.rstrip('/')}/{path.relative_to(folder).as_posix()}"
        try:
            files.append(InventoryFile(name, yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)))
        except OSError as exc:
            problems.append(ConfigProblem("", f"cannot read: {exc.strerror or exc}", file=name))
        except UnicodeDecodeError:
            problems.append(ConfigProblem("", "cannot read: not UTF-8 text", file=name))
        except yaml.YAMLError as exc:
            problems.append(ConfigProblem("", f"not valid YAML: {_yaml_error_summary(exc)}", file=name))
    if problems:
        raise EstateConfigError(problems, key=f"{FULL_INVENTORY_KEY} {shown}")
    if not files:
        problem = ConfigProblem("", "no *.yaml file in the inventory folder", file=shown)
        raise EstateConfigError([problem], key=f"{FULL_INVENTORY_KEY} {shown}")
    return files


def join_inventory(
    files: Sequence[InventoryFile], folder: str
) -> tuple[dict[str, Any], _Origins, list[ConfigProblem]]:
    """Join the files' mappings into one raw estate (pure).

    Returns:
        ``(raw estate, origins, problems)``: a file that is not a mapping, and a key other than a
        list key written in a second file, are problems naming the file (the first file's value is
        kept); secrets written in a file are problems too (:func:`secrets_in_files`).
    """
    raw: dict[str, Any] = {}
    origins = _Origins(folder)
    problems: list[ConfigProblem] = []
    for f in files:
        if f.data is None:
            continue
        if not isinstance(f.data, Mapping):
            problems.append(ConfigProblem(
                "", f"expected a mapping of estate keys (hosts, tenants, ...), got {type(f.data).__name__}",
                file=f.name))
            continue
        for key, value in f.data.items():
            key = str(key)
            if key in LIST_KEYS and isinstance(value, list):
                raw.setdefault(key, [])
                if isinstance(raw[key], list):
                    origins.items.setdefault(key, []).extend((f.name, i) for i in range(len(value)))
                    raw[key].extend(value)
                    continue
            if key in origins.keys or key in origins.items:
                first = origins.keys.get(key) or origins.items[key][0][0]
                problems.append(ConfigProblem(
                    key, f"is also set in {first}; write it in one file (only "
                    f"{', '.join(LIST_KEYS)} are lists joined over files)", file=f.name))
                continue
            raw[key] = value
            origins.keys[key] = f.name
    problems += secrets_in_files(files)
    return raw, origins, problems


def secrets_in_files(files: Sequence[InventoryFile]) -> list[ConfigProblem]:
    """A problem for every secret (password, private key) written in an inventory file, encrypted or
    not: the files are plain text in the repository, so a secret belongs in a credential set of the
    stack config. The message names file and key, never the value."""
    problems = []
    for f in files:
        for holder, key, _field, path in _secret_fields(EstateConfig, f.data):
            if key in holder and holder[key] is not None:
                how = "in plain text" if _is_plain_text(holder[key]) else "encrypted"
                problems.append(ConfigProblem(
                    path, f"a secret {how} in an inventory file is refused; name a credential set "
                    f"instead ({CREDENTIAL_REF}: <name>) and store it with: "
                    f"{set_credential_command('<name>', key)}", file=f.name))
    return problems


def _secret_holders(
    model: type[BaseModel], data: Any, where: str = ""
) -> Iterator[tuple[Any, type[BaseModel], str]]:
    """Every mapping in ``data`` validated by a model that declares a secret field, with that model
    and its key path (``fabric.director``, ``hosts[0].bmc``, ``hosts[0].dpu.prep``)."""
    if not isinstance(data, Mapping):
        return
    fields = _fields_by_key(model)
    if any(_is_secret(f.annotation) for f in fields.values()):
        yield data, model, where
    for key, f in fields.items():
        sub = _model_of(f.annotation)
        value = data.get(key)
        if sub is None or value is None:
            continue
        cls, many = sub
        path = f"{where}.{key}" if where else key
        if not many:
            yield from _secret_holders(cls, value, path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from _secret_holders(cls, item, f"{path}[{i}]")


def parse_credentials(raw: Any) -> tuple[dict[str, CredentialSet], set[str], list[ConfigProblem]]:
    """Validate ``composable-gpu:credentials`` (a mapping of set name -> :class:`CredentialSet`).

    Returns:
        ``(valid sets, names of invalid sets, problems)``; each problem's path is
        ``credentials.<name>[.<key>]`` in the stack config. Absent (None) is no set and no problem.
    """
    if raw is None:
        return {}, set(), []
    if not isinstance(raw, Mapping):
        kind = type(raw).__name__
        problem = ConfigProblem(CREDENTIALS_KEY, f"expected a mapping of set name -> set, got {kind}")
        return {}, set(), [problem]
    sets: dict[str, CredentialSet] = {}
    invalid: set[str] = set()
    problems: list[ConfigProblem] = []
    for name, value in raw.items():
        where = f"{CREDENTIALS_KEY}.{name}"
        found = []
        try:
            _SET_NAME.validate_python(name)
        except ValidationError as exc:
            found += [ConfigProblem(where, str(e.get("msg"))) for e in exc.errors()]
        try:
            cred = CredentialSet.model_validate(value)
        except ValidationError as exc:
            for err in exc.errors():
                p = _problem_from_pydantic(err, CredentialSet)
                found.append(ConfigProblem(f"{where}.{p.path}" if p.path else where, p.message))
        if found:
            invalid.add(str(name))
            problems += found
        else:
            sets[str(name)] = cred
    return sets, invalid, problems


def resolve_credentials(
    raw: Mapping[str, Any],
    sets: Mapping[str, CredentialSet],
    *,
    fill_missing: bool = False,
    invalid: frozenset[str] | set[str] = frozenset(),
) -> tuple[dict[str, Any], list[ConfigProblem]]:
    """Copy of the joined estate with every ``credential: <name>`` replaced by the set's fields (pure).

    Each mapping of a model that takes a secret must name a set; the set's ``username``, ``password``
    and ``private_key`` land in the model's fields (``username`` is an SSH connection's ``user``).

    Args:
        raw: the joined raw estate (:func:`join_inventory`).
        sets: the stack's credential sets, secrets decrypted (or placeholders offline).
        fill_missing: put a placeholder for a secret the referenced set does not hold yet (offline
            validation of a stack whose secrets are set per deployment).
        invalid: names of sets that are in the config but invalid (reported by
            :func:`parse_credentials`): references to them are not reported again.

    Returns:
        ``(resolved estate, problems)``; problems have estate key paths: a missing reference, an
        unknown set (with a close spelling and the commands that add it), a key set both in the
        mapping and by its set, a set field the mapping does not take, a secret the set lacks.
    """
    resolved = _copy(raw)
    problems: list[ConfigProblem] = []
    for holder, model, path in _secret_holders(EstateConfig, resolved):
        fields = _fields_by_key(model)
        name = holder.pop(CREDENTIAL_REF, None)
        secret_keys = [k for k, f in fields.items() if _is_secret(f.annotation)]
        if name is None:
            if not any(k in holder for k in secret_keys):  # a secret written in a file is reported apart
                problems.append(ConfigProblem(
                    f"{path}.{CREDENTIAL_REF}",
                    f"required key is missing: name the credential set that holds its "
                    f"{'/'.join(secret_keys)} (store it with: "
                    f"{set_credential_command('<name>', secret_keys[0])})"))
                _stub(holder, fields)
            continue
        name = str(name)
        cred = sets.get(name)
        if cred is None and name in invalid:
            _stub(holder, fields)
            continue
        if cred is None:
            close = close_spelling(name, sets)
            hint = f"did you mean {close!r}?" if close else (
                f"it has {', '.join(repr(s) for s in sets)}" if sets else "it has none")
            problems.append(ConfigProblem(
                f"{path}.{CREDENTIAL_REF}",
                f"credential set {name!r} is not in {FULL_CREDENTIALS_KEY} ({hint}); add it with: "
                f"{set_credential_command(name, secret_keys[0])}"))
            _stub(holder, fields)
            continue
        for source, targets in _TARGET_FIELDS.items():
            value = getattr(cred, source)
            target = next((t for t in targets if t in fields), None)
            if value is None:
                if target in secret_keys and target not in holder:
                    if not fill_missing:
                        problems.append(ConfigProblem(
                            f"{path}.{target}",
                            f"required key is missing (credential set {name!r} has no {source}; set it "
                            f"with: {set_credential_command(name, source)})", missing_secret=True))
                    holder[target] = SECRET_PLACEHOLDER  # reported above (or accepted): not again
                continue
            if target is None:
                problems.append(ConfigProblem(
                    f"{path}.{CREDENTIAL_REF}", f"credential set {name!r} has a {source}, which this "
                    f"mapping does not take (it takes {', '.join(t for t in _targets(fields))})"))
                continue
            if target in holder and target in secret_keys:
                continue  # a secret written in the file: refused by secrets_in_files
            if target in holder:
                problems.append(ConfigProblem(
                    f"{path}.{target}", f"is set here and by credential set {name!r}; keep one"))
                continue
            holder[target] = value.get_secret_value() if hasattr(value, "get_secret_value") else value
    return resolved, problems


def _stub(holder: dict[str, Any], fields: Mapping[str, Any]) -> None:
    """Fill a mapping whose credential set could not be used with placeholders, so that only the
    reference's problem is reported, not the secrets and user it would have provided."""
    for target in _targets(fields):
        holder.setdefault(target, SECRET_PLACEHOLDER)


def _targets(fields: Mapping[str, Any]) -> list[str]:
    return [t for targets in _TARGET_FIELDS.values() for t in targets if t in fields]


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def load_inventory(
    files: Sequence[InventoryFile],
    credentials: Any,
    *,
    folder: str,
    fill_missing_secrets: bool = False,
) -> EstateConfig:
    """Validate an inventory folder's files with the stack's credential sets into an :class:`EstateConfig`.

    Args:
        files: the folder's files (:func:`read_inventory`).
        credentials: the raw value of ``composable-gpu:credentials`` (secrets decrypted, or
            placeholders offline), or None.
        folder: the folder as messages name it.
        fill_missing_secrets: accept secrets that referenced sets do not hold yet (offline checks).

    Raises:
        EstateConfigError: every problem (files, credential sets, references, models, rules); each
            names the file and the key inside it (:attr:`ConfigProblem.file`), or the stack
            config's ``credentials.<name>.<key>``.
    """
    raw, origins, problems = join_inventory(files, folder)
    sets, invalid, cred_problems = parse_credentials(credentials)
    resolved, ref_problems = resolve_credentials(
        raw, sets, fill_missing=fill_missing_secrets, invalid=invalid
    )
    estate_problems: list[ConfigProblem] = list(ref_problems)
    estate: EstateConfig | None = None
    if not problems and not cred_problems:
        try:
            estate = load_estate(resolved)
        except EstateConfigError as exc:
            estate_problems += exc.problems
    located = [_located(p, origins) for p in estate_problems]
    found = [*problems, *cred_problems, *located]
    if found or estate is None:
        raise EstateConfigError(found, key=f"{FULL_INVENTORY_KEY} {folder}")
    return estate


def estate_from_config(
    values: Mapping[str, Any], *, root: Path, fill_missing_secrets: bool = False
) -> EstateConfig:
    """The estate a stack's config describes: its inventory folder with its credential sets, or the
    inline ``composable-gpu:estate`` of a stack not migrated yet (``python -m stack_config migrate``).

    Args:
        values: the stack config's values of the project's namespace by short key (``inventory``,
            ``credentials``, ``estate``), secrets decrypted (or placeholders offline); absent keys
            may be missing or None.
        root: the folder a relative inventory path is relative to (the one holding ``Pulumi.yaml``
            and the stack file).
        fill_missing_secrets: accept secrets not set yet (offline checks of example stacks).

    Raises:
        EstateConfigError: neither or both forms set, credential sets beside an inline estate, the
            folder unreadable, or any problem of the estate (see :func:`load_inventory`).
    """
    folder, estate = values.get(INVENTORY_KEY), values.get(CONFIG_KEY)
    if folder is not None and estate is not None:
        raise EstateConfigError([ConfigProblem(
            FULL_CONFIG_KEY, f"is set beside {FULL_INVENTORY_KEY}; keep one (python -m stack_config "
            "migrate moves an inline estate into the inventory folder)")])
    if folder is None:
        if values.get(CREDENTIALS_KEY) is not None:
            raise EstateConfigError([ConfigProblem(
                FULL_CREDENTIALS_KEY, f"is read only with {FULL_INVENTORY_KEY} (an inline estate holds "
                "its secrets itself)")])
        if estate is None:
            raise EstateConfigError([ConfigProblem(
                "", f"the stack config has neither {FULL_INVENTORY_KEY} (the estate's folder) nor "
                f"{FULL_CONFIG_KEY}")])
        return load_estate(fill_missing_secrets_in(EstateConfig, estate) if fill_missing_secrets else estate)
    if not isinstance(folder, str) or not folder.strip():
        raise EstateConfigError([ConfigProblem(
            FULL_INVENTORY_KEY, f"expected the inventory folder's path, got {folder!r}")])
    path = Path(folder).expanduser()
    files = read_inventory(path if path.is_absolute() else root / path, shown_as=folder)
    return load_inventory(
        files, values.get(CREDENTIALS_KEY), folder=folder, fill_missing_secrets=fill_missing_secrets
    )


def _located(problem: ConfigProblem, origins: _Origins) -> ConfigProblem:
    """``problem`` (a path of the joined estate) as the file and the path inside it."""
    name, local = origins.locate(problem.path)
    return ConfigProblem(local, origins.describe(problem.message), problem.missing_secret, file=name)
