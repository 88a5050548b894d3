"""The project's import graph, read from the source (no module is imported).

Every ``import`` and ``from ... import`` statement counts, wherever it stands: at the top, inside a
function, or under ``if TYPE_CHECKING:`` (an import that only a type checker follows still ties
the two modules together). ``from pkg import name`` counts as an import of the module
``pkg.name`` when that module exists, else of ``pkg``. Relative imports are resolved against the
importing module's package.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
#: The project's own top-level packages (``__main__.py`` at the root is the program).
PACKAGES = ("bench", "components", "composer", "domain", "dynamic_providers", "lab", "ops", "policies",
            "stack_config")


def module_name(path: Path, root: Path = ROOT) -> str:
    """``lab/redfish_sim/app.py`` -> ``lab.redfish_sim.app``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    return {module_name(p, root): p
            for pkg in packages for p in sorted((root / pkg).rglob("*.py"))
            if not any(part.startswith(".") for part in p.relative_to(root).parts)}


def imported_names(
    path: Path, *, top_level_only: bool = False, modules: set[str] | None = None, root: Path = ROOT
) -> set[str]:
    """Every module name an import statement of ``path`` names, project or not.

    ``import a.b`` gives ``a.b``; ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module
    or a name defined in ``a``), or, when the set of existing ``modules`` is given, only ``a.b`` if
    it is one of them, else ``a``. Relative imports are resolved against the module's package.
    ``top_level_only`` keeps only the statements at the module's top level (not those inside
    functions, classes or ``if`` blocks).
    """
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in tree.body if top_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if modules is None:
                    out.update((base, full))
                else:
                    out.add(full if full in modules else base)
    return out


@cache
def graph(packages: tuple[str, ...] = PACKAGES, root: Path = ROOT) -> nx.DiGraph:
    """Directed graph over the project's modules: an edge ``a -> b`` when ``a`` imports ``b``
    (only modules of ``packages`` are nodes; imports of anything else are left out)."""
    modules = _modules(root, packages)
    known = set(modules)
    g: nx.DiGraph = nx.DiGraph()
    g.add_nodes_from(known)
    for name, path in modules.items():
        for target in imported_names(path, modules=known, root=root) & known - {name}:
            g.add_edge(name, target)
    return g


def cycles(g: nx.DiGraph) -> list[list[str]]:
    """Each group of modules that import one another in a circle (a strongly connected component
    of more than one module), sorted, with one circle through its first module spelled out first."""
    out = []
    for component in nx.strongly_connected_components(g):
        if len(component) > 1:
            sub = g.subgraph(component)
            circle = [edge[0] for edge in nx.find_cycle(sub, source=min(component))]
            start = circle.index(min(circle))
            circle = circle[start:] + circle[:start]
            out.append([" -> ".join([*circle, circle[0]]), *sorted(component)])
    return sorted(out)
