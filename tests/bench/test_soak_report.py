"""SOAK.md states how long the composer was cut off from the Director, from the run's data."""

from __future__ import annotations

import json
from pathlib import Path

from bench.soak import report

ROOT = Path(__file__).resolve().parents[2]


def test_the_report_gives_the_cut_off_windows_or_says_they_were_not_recorded() -> None:
    data = json.loads((ROOT / "bench" / "results" / "soak-1209.json").read_text())
    data.pop("director_cut_off", None)
    data.pop("edits_past_bound_counting_cut_off", None)
    md = report.render(data, commit={"sha": "abc"})
    assert md.count("| not recorded |") == 2
    data["director_cut_off"] = [[10.0, 22.5], [100.0, 140.0]]
    data["edits_past_bound_counting_cut_off"] = [{"subject": "fabric:n1", "detail": "open since 1"}]
    md = report.render(data, commit={"sha": "abc"})
    assert "| 2 window(s), 52 s in all |" in md
    assert "had cut-off time counted | 1 |" in md
