"""``python -m lab.crdsync --upstream DIR``: the lab's CRDs (``lab/crds/``) made from upstream files.

The lab installs the CustomResourceDefinitions of the projects whose objects the program creates
(k0rdent kcm, Metal3, DPF, the GPU Operator, Cluster API, its KubeVirt and Metal3 providers,
k0smotron, Multus, Flux source-controller, and prometheus-operator's monitoring kinds the composer
chart creates), so that its API server validates every custom resource the way the real
management cluster would. The repository keeps them as schema facts only: each
upstream file with every ``description`` removed (from the schemas and from the printer columns);
names, versions, types, enums, patterns, required lists, defaults, formats and every
``x-kubernetes-*`` marker (CEL rules with their messages included) are kept as upstream wrote
them.

Which upstream file each one is made from (repository, path inside it, commit, licence) is data,
``lab/crds/sources.yaml``; this module writes each project folder's ``README.md`` from it. A project
the lab also builds from its Go module (Flux source-controller, ``lab/toolchain/build.sh``) names
the module release instead of a commit (``module: <module>@<version>``): its files are the ones in
that module, whose content the Go checksum database pins.

``DIR`` holds the upstream files as the upstream repositories publish them, laid out
``DIR/<project>/<file name>`` (the project folders and file names of ``sources.yaml``). Updating a
CRD is: fetch the new upstream file into that layout, change the commit in ``sources.yaml``, run
this command, review the diff. ``--check`` writes nothing and exits 1 listing every file that
would change (the repository's copy drifted from what its sources produce). ``--project NAME``
(repeatable) limits both to those project folders, so adding or updating one project needs only
that project's upstream files in ``DIR``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

#: Where the lab's CRDs live, one folder per upstream project.
CRD_DIR = Path(__file__).resolve().parent / "crds"
#: The data file naming each CRD's upstream source.
SOURCES_FILE = CRD_DIR / "sources.yaml"

#: JSONSchemaProps keys whose value is a map of names to schemas (the names are data, never
#: keywords: a property may itself be called ``description``).
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "dependencies")
#: JSONSchemaProps keys whose value is one schema or a list of schemas.
_SCHEMA_VALUES = ("items", "additionalProperties", "additionalItems", "not", "allOf", "anyOf", "oneOf")


class CrdSyncError(Exception):
    """An upstream file is missing or is not a CRD, or ``sources.yaml`` is malformed."""


@dataclass(frozen=True)
class Source:
    """One CRD file of the repository and where it comes from.

    Attributes:
        project: the folder under ``lab/crds`` (e.g. ``kcm``).
        file: the file name, the same upstream and here.
        repository: the upstream repository's URL.
        path: the file's path inside the upstream repository.
        commit: the upstream commit the file was taken at (40 hex digits), or the Go module
            release it was taken from (``github.com/fluxcd/source-controller@v1.9.0``).
        license: the SPDX identifier of the upstream file's licence.
    """

    project: str
    file: str
    repository: str
    path: str
    commit: str
    license: str


def load_sources(path: Path = SOURCES_FILE) -> list[Source]:
    """The entries of ``sources.yaml``: ``{project: {repository, commit (or module), license,
    files: {name: path}}}``.

    Raises:
        CrdSyncError: a project lacks one of those keys.
    """
    doc = yaml.safe_load(path.read_text()) or {}
    out: list[Source] = []
    for project, entry in sorted(doc.items()):
        try:
            for name, upstream_path in sorted(entry["files"].items()):
                revision = entry["module"] if "module" in entry else entry["commit"]
                out.append(Source(project, name, entry["repository"], upstream_path,
                                  revision, entry["license"]))
        except (KeyError, TypeError, AttributeError) as exc:
            raise CrdSyncError(f"{path}: project {project!r} needs repository, commit (or module), "
                               f"license and files (name: upstream path): {exc!r} is missing or "
                               "malformed") from exc
    return out


def strip_schema(schema: Any) -> Any:
    """A JSONSchemaProps tree without its ``description`` keywords; every other key kept as is.

    ``schema`` is a mapping (one schema), a list of schemas or a plain value (returned unchanged).
    Names under ``properties`` and the other name-to-schema maps are kept even when a property is
    called ``description``.
    """
    if isinstance(schema, list):
        return [strip_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: strip_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_VALUES:
            out[key] = strip_schema(value)
        else:
            out[key] = value
    return out


def strip_crd(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A CustomResourceDefinition document with the schema facts only (see the module docstring).

    Raises:
        CrdSyncError: ``doc`` is not a CustomResourceDefinition.
    """
    if doc.get("kind") != "CustomResourceDefinition":
        raise CrdSyncError(f"not a CustomResourceDefinition (kind {doc.get('kind')!r})")
    out = dict(doc)
    spec = dict(doc["spec"])
    versions = []
    for version in spec.get("versions", []):
        v = dict(version)
        if "schema" in v and "openAPIV3Schema" in v["schema"]:
            v["schema"] = {**v["schema"], "openAPIV3Schema": strip_schema(v["schema"]["openAPIV3Schema"])}
        if "additionalPrinterColumns" in v:
            v["additionalPrinterColumns"] = [
                {k: c for k, c in col.items() if k != "description"} for col in v["additionalPrinterColumns"]
            ]
        versions.append(v)
    spec["versions"] = versions
    out["spec"] = spec
    return out


def render_file(upstream_text: str) -> str:
    """The repository copy of one upstream CRD file (all its documents), as YAML text.

    Raises:
        CrdSyncError: a document in it is not a CustomResourceDefinition.
    """
    docs = [d for d in yaml.safe_load_all(upstream_text) if d]
    return "---\n".join(
        yaml.safe_dump(strip_crd(d), sort_keys=False, width=10_000, allow_unicode=True) for d in docs
    )


def render_readme(project: str, sources: list[Source]) -> str:
    """The README of one project folder: the upstream file behind each CRD file and its licence."""
    rows = [s for s in sources if s.project == project]
    lines = [
        f"# `{project}`: upstream CRDs, schema facts only",
        "",
        "Made by `python -m lab.crdsync` from the upstream files below, with every `description`",
        "removed; nothing else is changed. Edit `lab/crds/sources.yaml` and rerun it, never these files.",
        "",
        "| file | upstream repository | path | commit or module release | licence |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| `{s.file}` | {s.repository} | `{s.path}` | `{s.commit}` | {s.license} |" for s in rows]
    return "\n".join(lines) + "\n"


def expected_tree(upstream: Path, sources: list[Source]) -> dict[Path, str]:
    """Every file ``lab/crds`` should hold, by path relative to it, made from ``upstream``.

    Raises:
        CrdSyncError: an upstream file is missing, unreadable or not a CRD (named in the message).
    """
    out: dict[Path, str] = {}
    for s in sources:
        src = upstream / s.project / s.file
        try:
            out[Path(s.project) / s.file] = render_file(src.read_text())
        except (OSError, yaml.YAMLError, CrdSyncError) as exc:
            raise CrdSyncError(f"{src}: {exc}") from exc
    for project in sorted({s.project for s in sources}):
        out[Path(project) / "README.md"] = render_readme(project, sources)
    return out


def differences(expected: Mapping[Path, str], target: Path = CRD_DIR) -> list[str]:
    """Relative paths under ``target`` that differ from ``expected``, are missing, or are extra
    (a ``*.yaml`` or ``README.md`` in a project folder that no source produces)."""
    diff = [str(rel) for rel, text in sorted(expected.items())
            if not (target / rel).is_file() or (target / rel).read_text() != text]
    projects = {rel.parts[0] for rel in expected}
    for project in sorted(projects):
        for f in sorted((target / project).glob("*")):
            rel = f.relative_to(target)
            if rel not in expected:
                diff.append(f"{rel} (not produced by sources.yaml)")
    return diff


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (0 written or in sync, 1 out of sync with ``--check``,
    2 an upstream file or ``sources.yaml`` is unusable)."""
    ap = argparse.ArgumentParser(prog="python -m lab.crdsync", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", type=Path, required=True,
                    help="folder holding the upstream files as <project>/<file>")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when lab/crds differs")
    ap.add_argument("--project", action="append", default=[],
                    help="only this project folder (repeatable; default: every project)")
    args = ap.parse_args(argv)
    try:
        sources = load_sources()
        unknown = sorted(set(args.project) - {s.project for s in sources})
        if unknown:
            raise CrdSyncError(f"{SOURCES_FILE}: no project {', '.join(unknown)}")
        if args.project:
            sources = [s for s in sources if s.project in args.project]
        tree = expected_tree(args.upstream, sources)
    except CrdSyncError as exc:
        print(f"crdsync: {exc}", file=sys.stderr)
        return 2
    if args.check:
        diff = differences(tree)
        for d in diff:
            print(f"out of sync: lab/crds/{d}", file=sys.stderr)
        return 1 if diff else 0
    for rel, text in tree.items():
        (CRD_DIR / rel).parent.mkdir(parents=True, exist_ok=True)
        (CRD_DIR / rel).write_text(text)
    print(f"wrote {len(tree)} files under lab/crds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
