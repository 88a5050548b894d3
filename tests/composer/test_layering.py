"""Import layering of the composer's folders, as ``composer.LAYERS`` / ``PURE`` state it.

- A module of a folder imports only its own folder and folders of lower layers (siblings of
  one layer not each other); ``composer/__init__.py`` imports nothing of the composer.
- The pure folders import none of ``composer.FORBIDDEN_IN_PURE`` at top level.
- Only ``composer.shell.kube`` (calls) and ``composer.shell.cache`` (watches) use the Kubernetes API.
- The lab's GPU-Operator stand-in imports nothing from ``composer`` or ``dynamic_providers``.
"""

from __future__ import annotations

import re

import pytest

from composer import FORBIDDEN_IN_PURE, LAYERS, PURE
from tests.imports import ROOT, imported_names

COMPOSER = ROOT / "composer"
LEVEL = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}


def _hits(mods: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if any(m == b or m.startswith(b + ".") for b in banned))


def _wrong_imports(folder: str) -> list[str]:
    """``module -> composer.<other>`` for every import of a folder it may not import."""
    out = []
    for path in sorted((COMPOSER / folder).rglob("*.py")):
        for name in imported_names(path):
            parts = name.split(".")
            if parts[0] != "composer" or len(parts) < 2 or parts[1] == folder:
                continue
            if parts[1] not in LEVEL or LEVEL[parts[1]] >= LEVEL[folder]:
                out.append(f"{path.relative_to(ROOT)} -> {name}")
    return out


def test_every_folder_is_in_a_layer():
    folders = {p.name for p in COMPOSER.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(LEVEL)
    assert PURE <= set(LEVEL)


@pytest.mark.parametrize("folder", sorted(LEVEL))
def test_folder_imports_only_itself_and_lower_layers(folder):
    assert _wrong_imports(folder) == []


def test_package_root_imports_nothing_of_the_composer():
    assert _hits(imported_names(COMPOSER / "__init__.py"), ("composer",)) == []


@pytest.mark.parametrize("folder", sorted(PURE))
def test_pure_folders_import_no_io(folder):
    for path in sorted((COMPOSER / folder).rglob("*.py")):
        mods = imported_names(path, top_level_only=True)
        assert _hits(mods, FORBIDDEN_IN_PURE) == [], path


def test_only_kube_module_uses_the_kubernetes_api():
    kube_api = ("kubernetes.client", "kubernetes.config", "kubernetes.watch")
    allowed = {COMPOSER / "shell" / "kube.py", COMPOSER / "shell" / "cache.py"}
    for path in COMPOSER.rglob("*.py"):
        if path not in allowed:
            assert _hits(imported_names(path), kube_api) == [], path


def test_lab_agent_does_not_import_the_product():
    for path in (ROOT / "lab" / "gpu_agent").glob("*.py"):
        assert _hits(imported_names(path), ("composer", "dynamic_providers")) == [], path


def _doc_tree_rows() -> dict[str, str]:
    """``folder -> its row's text`` from the ``composer/`` tree in docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("```\ncomposer/\n", 1)[1].split("```", 1)[0]
    rows: dict[str, str] = {}
    folder = ""
    for line in block.splitlines():
        head = line[2:].split(" ", 1)[0] if line.startswith("  ") and not line.startswith("   ") else ""
        if head.endswith("/"):
            folder = head[:-1]
            rows[folder] = line
        elif folder:
            rows[folder] += " " + line
    return rows


def test_architecture_doc_tree_names_every_module_in_its_folder():
    rows = _doc_tree_rows()
    assert set(rows) == set(LEVEL)
    missing = [
        f"{folder}/{path.stem}"
        for folder in LEVEL
        for path in sorted((COMPOSER / folder).glob("*.py"))
        if path.stem != "__init__" and path.stem not in re.split(r"[\s,()]+", rows[folder])
    ]
    assert not missing, f"docs/architecture.md's composer/ tree does not name {missing}"
