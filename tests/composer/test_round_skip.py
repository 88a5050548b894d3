"""A round whose Kubernetes or Director read fails is skipped, in both modes, with the warning on
the mode's own logger and ``composer_round_failures_total`` counted at the failure's stage
(composer.run.skip); the log text is what the alert runbook quotes (docs/composer-alerts.md)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from composer.run.dra_loop import DraController
from composer.shell.kube import KubeError
from composer.shell.metrics import Metrics
from dynamic_providers.director.errors import DirectorError
from tests.composer import test_dra_driver
from tests.composer.fakes import Clock
from tests.composer.test_controller import handover_world, make

KUBE = KubeError("GET", "pods", 503, "unavailable")
DIRECTOR = DirectorError("fabric busy")

CASES = [
    ("deviceplugin", KUBE, "observe-kubernetes", "composer.run.controller",
     f"round skipped, Kubernetes read failed: {KUBE}"),
    ("deviceplugin", DIRECTOR, "observe-director", "composer.run.controller",
     "round skipped, Director read failed: fabric busy"),
    ("dra", KUBE, "observe-kubernetes", "composer.run.dra_loop",
     f"DRA round skipped, Kubernetes read or slice write failed: {KUBE}"),
    ("dra", DIRECTOR, "observe-director", "composer.run.dra_loop",
     "DRA round skipped, Director read failed: fabric busy"),
]


def _failing(mode: str, error: Exception) -> Any:
    """A controller of ``mode`` over the fakes whose next pods list or GPU read raises ``error``."""
    if mode == "dra":
        w, kube, driver, clock = test_dra_driver.setup()
        ctrl: Any = DraController(driver, Metrics(), clock=clock)
    else:
        w = handover_world()
        ctrl = make(w, Clock())
    if isinstance(error, DirectorError):
        w.fabric.fail["gpus"] = [error]
    else:
        def list_pods() -> list[dict[str, Any]]:
            raise error

        w.kube.list_pods = list_pods  # type: ignore[method-assign]
    return ctrl


@pytest.mark.parametrize(("mode", "error", "stage", "logger", "message"), CASES)
def test_a_failed_read_skips_the_round_with_its_warning_and_stage(
    mode: str, error: Exception, stage: str, logger: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    ctrl = _failing(mode, error)
    with caplog.at_level(logging.WARNING):
        assert ctrl.round() is None
    assert (logger, logging.WARNING, message) in caplog.record_tuples
    failures = {s: ctrl.metrics.round_failures.labels(s)._value.get()
                for s in ("observe-kubernetes", "observe-director")}
    assert failures == {s: float(s == stage) for s in failures}
    assert ctrl.metrics.rounds._value.get() == 0 and ctrl.last_round_ok == 0.0
    ctrl.close()
