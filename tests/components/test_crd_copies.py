"""The lab's CRDs (``lab/crds``) are what ``lab.crdsync`` makes from their upstream files.

The stripping rules are checked on small documents; the copy itself is compared with a fresh run
over the upstream files of every project they can be found for: the Go module cache for projects
taken from a Go module release (``make setup`` downloads Flux source-controller's), and a folder
holding upstream files (laid out ``<project>/<file>`` as in ``lab/crds/sources.yaml``) when
``$COMPOSABLE_GPU_UPSTREAM_CRDS`` names one. Nothing outside the checkout is searched for: a clone
runs this test with what the README's setup installs. When no project's files are found the
comparison skips (and under ``CI=true`` fails, tests/ci_skips.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lab import crdsync

ROOT = Path(__file__).resolve().parents[2]


def _shelf_projects(folder: Path, sources: list[crdsync.Source]) -> set[str]:
    """The projects of ``sources`` whose every file ``folder`` holds as ``<project>/<file>``."""
    projects = {s.project for s in sources}
    return {p for p in projects if all((folder / s.project / s.file).is_file()
                                       for s in sources if s.project == p)}


def upstream_shelf() -> Path | None:
    """The folder named by ``$COMPOSABLE_GPU_UPSTREAM_CRDS`` (upstream files laid out
    ``<project>/<file>``), or None when the variable is unset or empty."""
    named = os.environ.get("COMPOSABLE_GPU_UPSTREAM_CRDS", "")
    return Path(named) if named else None


def _module_file(source: crdsync.Source) -> Path | None:
    """The upstream file of a source taken from a Go module release (``module@version``), in
    the Go module cache (``go env GOMODCACHE``), or None when it is not there."""
    if "@" not in source.commit:
        return None
    try:
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    module, _, version = source.commit.partition("@")
    escaped = "".join(f"!{c.lower()}" if c.isupper() else c for c in module)  # the cache's case escaping
    path = Path(cache) / f"{escaped}@{version}" / source.path
    return path if cache and path.is_file() else None


def gather_upstream(into: Path) -> list[str]:
    """Copy every upstream file that can be found (the folder named by
    ``$COMPOSABLE_GPU_UPSTREAM_CRDS``, the Go module cache) into ``into`` laid out
    ``<project>/<file>``; returns the projects gathered whole."""
    sources = crdsync.load_sources()
    shelf = upstream_shelf()
    on_shelf = _shelf_projects(shelf, sources) if shelf else set()
    gathered = []
    for project in sorted({s.project for s in sources}):
        files = [s for s in sources if s.project == project]
        found = {s.file: (shelf / project / s.file if project in on_shelf and shelf else _module_file(s))
                 for s in files}
        if all(found.values()):
            (into / project).mkdir(parents=True)
            for name, path in found.items():
                assert path is not None
                shutil.copyfile(path, into / project / name)
            gathered.append(project)
    return gathered


def test_strip_keeps_schema_facts_and_property_names() -> None:
    schema = {
        "description": "prose",
        "type": "object",
        "required": ["description"],
        "properties": {
            "description": {"type": "string", "description": "a property called description"},
            "size": {"type": "integer", "minimum": 1, "default": 2, "description": "prose"},
            "mode": {"type": "string", "enum": ["a", "b"], "pattern": "^[ab]$"},
            "list": {"type": "array", "items": {"type": "string", "description": "prose"}},
            "map": {"type": "object", "additionalProperties": {"type": "string", "description": "x"}},
            "either": {"x-kubernetes-int-or-string": True,
                       "anyOf": [{"type": "integer", "description": "x"}]},
        },
        "x-kubernetes-validations": [{"rule": "self.size > 0", "message": "size must be positive"}],
    }
    assert crdsync.strip_schema(schema) == {
        "type": "object",
        "required": ["description"],
        "properties": {
            "description": {"type": "string"},
            "size": {"type": "integer", "minimum": 1, "default": 2},
            "mode": {"type": "string", "enum": ["a", "b"], "pattern": "^[ab]$"},
            "list": {"type": "array", "items": {"type": "string"}},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "either": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}]},
        },
        "x-kubernetes-validations": [{"rule": "self.size > 0", "message": "size must be positive"}],
    }


def test_render_strips_printer_column_prose_and_refuses_other_kinds() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "versions": [{
            "name": "v1", "served": True, "storage": True,
            "additionalPrinterColumns": [{"name": "Ready", "type": "string", "jsonPath": ".status.ready",
                                          "description": "prose"}],
            "schema": {"openAPIV3Schema": {"type": "object", "description": "prose"}},
        }]},
    }
    out = yaml.safe_load(crdsync.render_file(yaml.safe_dump(crd)))
    version = out["spec"]["versions"][0]
    assert version["additionalPrinterColumns"] == [
        {"name": "Ready", "type": "string", "jsonPath": ".status.ready"}
    ]
    assert version["schema"] == {"openAPIV3Schema": {"type": "object"}}
    with pytest.raises(crdsync.CrdSyncError, match="not a CustomResourceDefinition"):
        crdsync.render_file("kind: ConfigMap\n")


def test_every_source_has_its_file_and_readme_and_no_prose() -> None:
    sources = crdsync.load_sources()
    assert {s.project for s in sources} == {p.name for p in crdsync.CRD_DIR.iterdir() if p.is_dir()}
    for s in sources:
        text = (crdsync.CRD_DIR / s.project / s.file).read_text()
        for doc in yaml.safe_load_all(text):
            assert crdsync.strip_crd(doc) == doc, f"{s.project}/{s.file} still holds a description"
        readme = (crdsync.CRD_DIR / s.project / "README.md").read_text()
        assert s.repository in readme and s.commit in readme and s.path in readme


def test_the_copy_matches_a_fresh_run_over_the_upstream_files(tmp_path: Path) -> None:
    gathered = gather_upstream(tmp_path)
    if not gathered:
        pytest.skip("no upstream CRD files: Flux source-controller's module is not in the Go module "
                    "cache (make setup downloads it) and COMPOSABLE_GPU_UPSTREAM_CRDS names no folder")
    sources = [s for s in crdsync.load_sources() if s.project in gathered]
    expected = crdsync.expected_tree(tmp_path, sources)
    assert crdsync.differences(expected) == [], f"compared projects: {gathered}"


def test_differences_names_a_drifted_a_missing_and_an_extra_file(tmp_path: Path) -> None:
    expected = {Path("p/a.yaml"): "a\n", Path("p/b.yaml"): "b\n", Path("p/README.md"): "r\n"}
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a.yaml").write_text("a changed\n")
    (tmp_path / "p" / "README.md").write_text("r\n")
    (tmp_path / "p" / "old.yaml").write_text("x\n")
    assert crdsync.differences(expected, tmp_path) == [
        "p/a.yaml", "p/b.yaml", "p/old.yaml (not produced by sources.yaml)"
    ]


def test_project_option_needs_only_that_projects_upstream_files(tmp_path: Path) -> None:
    # The repository's copy is already stripped, so it serves as its own upstream: a fresh run
    # over it is identical. Only one project's files are in the folder.
    project = "prometheus-operator"
    (tmp_path / project).mkdir()
    for f in (crdsync.CRD_DIR / project).glob("*.yaml"):
        (tmp_path / project / f.name).write_text(f.read_text())
    assert crdsync.main(["--upstream", str(tmp_path), "--project", project, "--check"]) == 0
    # every project is needed without the option, and a project sources.yaml lacks is refused
    assert crdsync.main(["--upstream", str(tmp_path), "--check"]) == 2
    assert crdsync.main(["--upstream", str(tmp_path), "--project", "no-such", "--check"]) == 2
