"""``python -m lab down --wipe`` deletes the lab's state, the templates' chart path included (the
packaged chart repository and source-controller's artifact storage), and keeps the logs. The
processes' stop is replaced, so no lab port is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import __main__ as lab_cli
from lab import controlplane, services


def test_down_wipe_deletes_the_chart_path_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_DIR", str(tmp_path))
    monkeypatch.setattr(controlplane, "stop", lambda cfg, wipe=False: [])
    monkeypatch.setattr(services, "stop_sshd", lambda cfg, wipe=False: False)
    for state in ("charts", "source-controller/helmchart/ns", "sim-state", "logs"):
        (tmp_path / state).mkdir(parents=True)
        (tmp_path / state / "f").write_text("x")

    assert lab_cli.main(["down"]) == 0
    assert (tmp_path / "charts" / "f").exists() and (tmp_path / "source-controller").exists()

    assert lab_cli.main(["down", "--wipe"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
