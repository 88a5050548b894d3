"""The ``domain`` package is pure and dependency-free: it imports only the standard library.

Every other package may import it (docs/architecture.md "Layers"), so it must import none of
them; checked on the source of every module, including imports inside functions.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOMAIN = ROOT / "domain"


def _imported_roots(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: stays inside domain/
                continue
            out.add((node.module or "").split(".")[0])
    return out


def test_domain_has_modules():
    expected = {"__init__", "contract", "gfd", "labels", "mlxconfig", "settings"}
    assert {p.stem for p in DOMAIN.glob("*.py")} >= expected


def test_domain_imports_only_the_standard_library_and_itself():
    for path in sorted(DOMAIN.glob("*.py")):
        allowed = {"domain", "__future__", *sys.stdlib_module_names}
        foreign = _imported_roots(path) - allowed
        assert foreign == set(), f"{path.relative_to(ROOT)} imports {sorted(foreign)}"
