"""No import circles in the product or the lab (docs/architecture.md "Layering").

Counted on the source (``tests/imports.py``): imports inside functions and under
``TYPE_CHECKING`` tie modules together as much as top-level ones.
"""

from __future__ import annotations

from pathlib import Path

from tests.imports import cycles, graph


def test_no_module_imports_itself_round_a_circle() -> None:
    found = cycles(graph())
    assert found == [], "import circles (one circle spelled out, then every module in it):\n" + "\n".join(
        "  " + "; ".join(c) for c in found
    )


def test_the_graph_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import c\n")
    (pkg / "sub" / "c.py").write_text("from .. import a\nimport os\n")
    (pkg / "d.py").write_text("from pkg.a import f\n")
    g = graph(("pkg",), tmp_path)
    assert set(g.edges) == {
        ("pkg.a", "pkg.b"), ("pkg.b", "pkg.sub.c"), ("pkg.sub.c", "pkg.a"), ("pkg.d", "pkg.a")}
    assert cycles(g) == [["pkg.a -> pkg.b -> pkg.sub.c -> pkg.a", "pkg.a", "pkg.b", "pkg.sub.c"]]
