"""ops.dashboard_png: the dashboard's main panels queried with the dashboard's own PromQL (variables
substituted) and drawn into a PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ops import dashboard_png as dp


def test_main_panels_are_on_the_dashboard_and_a_missing_one_is_named() -> None:
    dash = json.loads(dp.DASHBOARD.read_text())
    assert [p["title"] for p in dp.main_panels(dash)] == list(dp.MAIN_PANELS)
    with pytest.raises(KeyError, match="Nope"):
        dp.main_panels(dash, ["Nope"])


def test_queries_are_the_dashboards_with_its_variables_filled_and_every_series_is_a_line(
    tmp_path: Path,
) -> None:
    dash = json.loads(dp.DASHBOARD.read_text())
    asked: list[tuple[str, float]] = []

    def fake(q: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        asked.append((q, step))
        if "composer_free_gpus" in q:
            return [{"metric": {"pool": "default", "model": "Tesla-T4"}, "values": [[100, "2"], [110, "0"]]}]
        return [{"metric": {}, "values": [[100, "NaN"]]}]

    panels = dp.collect(dash, fake, namespace="gpu-composer", start=100, end=400, step=10, scrape_seconds=2)
    assert len(asked) == sum(len(p["targets"]) for p in dp.main_panels(dash))
    assert all("$" not in q and 'namespace="gpu-composer"' in q for q, _ in asked)
    assert any("[12s]" in q for q, _ in asked)  # $__rate_interval: max(4 x 2 s, 10 s + 2 s)
    free = panels[0]
    assert free.series[0].legend == "default Tesla-T4" and free.series[0].values == (2.0, 0.0)
    assert all(not p.series for p in panels[1:])  # NaN-only answers draw nothing
    png = dp.draw(panels, tmp_path / "d.png", title="t")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rate_interval_and_legends_follow_grafana() -> None:
    assert dp.rate_interval(5, 10) == "20s" and dp.rate_interval(2, 30) == "32s"
    assert dp.legend("compose failed: {{reason}}", {"reason": "DirectorConflictError"}) == (
        "compose failed: DirectorConflictError"
    )
    assert dp.legend("", {}) == "value"
