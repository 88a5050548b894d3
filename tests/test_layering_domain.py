"""The ``domain`` package is pure and dependency-free: it imports only the standard library.

Every other package may import it (docs/architecture.md "Layers"), so it must import none of
them; checked on the source of every module, including imports inside functions.
"""

from __future__ import annotations

import sys

from tests.imports import ROOT, imported_names

DOMAIN = ROOT / "domain"


def test_domain_has_modules():
    expected = {"__init__", "contract", "gfd", "labels", "mlxconfig", "settings"}
    assert {p.stem for p in DOMAIN.glob("*.py")} >= expected


def test_domain_imports_only_the_standard_library_and_itself():
    for path in sorted(DOMAIN.glob("*.py")):
        allowed = {"domain", "__future__", *sys.stdlib_module_names}
        foreign = {name.split(".")[0] for name in imported_names(path)} - allowed
        assert foreign == set(), f"{path.relative_to(ROOT)} imports {sorted(foreign)}"
