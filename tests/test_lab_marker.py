"""A test that uses the lab fixture must carry the ``lab`` marker (tests/conftest.py refuses the
run otherwise), so ``-m "not lab"`` really leaves the lab alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.conftest import unmarked_lab_tests


@dataclass
class _Item:
    nodeid: str
    fixturenames: tuple[str, ...]
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_a_lab_test_without_the_marker_is_named() -> None:
    items = [
        _Item("a.py::marked", ("lab", "tmp_path"), {"lab"}),
        _Item("b.py::unmarked", ("tmp_path", "lab")),  # through another fixture: still listed
        _Item("c.py::no_lab", ("tmp_path",)),
        _Item("d.py::cli_only", ("lab",), {"cli"}),
    ]
    assert unmarked_lab_tests(items) == ["b.py::unmarked", "d.py::cli_only"]
