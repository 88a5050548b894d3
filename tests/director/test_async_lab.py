"""The composer's handover scenario (two hosts hand over two pooled GPUs) against a Director
that answers every change with HTTP 202 and a job that ends 2 s later.

LIQID's SDK waits for every job before its next call (``liqidinc/liqidsdk-java``
``LiqidClientBase.java:176-237``); the simulator refuses, and records as a violation, any change
that arrives while a job still holds its machine or group, a cancel included. The scenario runs
on the lab like ``tests/composer/test_e2e_lab.py`` (same harness and fixtures).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.composer.conftest import chart_identity, composer_lab, lab_api, make_scenario  # noqa: F401
from tests.composer.harness import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]

T4 = "Tesla-T4"


def test_the_handover_scenario_when_every_change_answers_202(
    make_scenario: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DIRECTOR_SIM_ASYNC_SECONDS", "2")  # read by python -m lab.director_sim
    with make_scenario(inventory="dev.yaml") as sc:
        a, b = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        sc.start_agent()
        sc.start_composer("--idle-timeout-seconds", "2")
        try:
            sc.gpu_pod("train-a", 2, product=T4, host=a)
            assert wait_for(lambda: sc.running_on("train-a"), timeout=120, what="pod A running") == a
            assert sc.attached() == {a: ["gpu0", "gpu1"]}
            assert [r for _, r, _ in sc.events("train-a")].count("Composed") >= 1

            sc.delete_pod("train-a")
            wait_for(lambda: sc.attached() == {}, timeout=120, what="GPUs back in the free pool")

            sc.gpu_pod("train-b", 2, host=b)
            assert wait_for(lambda: sc.running_on("train-b"), timeout=120, what="pod B running") == b
            assert sc.attached() == {b: ["gpu0", "gpu1"]}

            calls = sc.sim("GET", "calls")
            changes = [c for c in calls if c["method"] != "GET" and not c["path"].startswith("digest")]
            accepted = [c for c in changes if c["status"] < 400]  # a refusal (409) is no job
            assert len(accepted) >= 20 and all(c["status"] == 202 for c in accepted), changes
            assert sc.sim("GET", "state")["violations"] == []  # no call, no cancel while a job ran
        except AssertionError:
            print(sc.diagnostics())
            for c in sc.sim("GET", "calls"):
                if c["method"] != "GET":
                    print("director change:", c["method"], c["path"], c["status"])
            raise
