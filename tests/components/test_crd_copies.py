"""The lab's CRDs (``lab/crds``) are what ``lab.crdsync`` makes from their upstream files.

The stripping rules are checked on small documents; the copy itself is compared with a fresh run
over the upstream files when a folder holding them (laid out ``<project>/<file>`` as in
``lab/crds/sources.yaml``) is named by ``$COMPOSABLE_GPU_UPSTREAM_CRDS`` or sits near the
checkout. Without one that comparison skips (and under ``CI=true`` fails, tests/ci_skips.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from lab import crdsync

ROOT = Path(__file__).resolve().parents[2]


def _holds_upstream(folder: Path, sources: list[crdsync.Source]) -> bool:
    return all((folder / s.project / s.file).is_file() for s in sources)


def upstream_dir() -> Path | None:
    """``$COMPOSABLE_GPU_UPSTREAM_CRDS``, else the first folder outside the checkout, at most two
    levels below one of its ancestors, that holds every upstream file of ``sources.yaml``."""
    sources = crdsync.load_sources()
    if os.environ.get("COMPOSABLE_GPU_UPSTREAM_CRDS"):
        return Path(os.environ["COMPOSABLE_GPU_UPSTREAM_CRDS"])
    for ancestor in list(ROOT.parents)[:3]:
        for child in sorted(p for p in ancestor.iterdir() if p.is_dir() and p != ROOT):
            for folder in (child, *sorted(p for p in child.iterdir() if p.is_dir())):
                if _holds_upstream(folder, sources):
                    return folder
    return None


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


def test_the_copy_matches_a_fresh_run_over_the_upstream_files() -> None:
    found = upstream_dir()
    if found is None:
        pytest.skip("upstream CRD files not found near the checkout (set COMPOSABLE_GPU_UPSTREAM_CRDS "
                    "to a folder holding them as <project>/<file>)")
    expected = crdsync.expected_tree(found, crdsync.load_sources())
    assert crdsync.differences(expected) == []


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
