"""A short soak on the lab (``bench.soak``, fixed seed): random GPU pods against the composer while
every fault kind of ``bench.soak.plan.FAULT_KINDS`` is injected once at least (seed 46 draws all
sixteen in 120 s), then the invariants are checked from the Director simulator and the cluster.
``make soak`` runs the long one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.soak.__main__ import flags
from bench.soak.plan import FAULT_KINDS, timeline
from bench.soak.proxy import Relay
from bench.soak.run import SoakLab, soak, soak_config
from tests.composer import harness

pytestmark = [pytest.mark.lab, pytest.mark.slow]
SEED = 46


def test_short_soak_keeps_every_invariant(make_scenario: Any, composer_lab: Any, tmp_path: Path) -> None:
    with make_scenario(inventory="rich.yaml", hotplug_latency=0.2) as sc:
        relay = Relay(int(sc.director_url.rsplit(":", 1)[1]))
        try:
            lab = SoakLab(sc, composer_lab, relay, [*flags(), *sc.enable_gating()], harness.free_port())
            cfg = soak_config(seconds=120, mean_fault_gap=6, settle_seconds=150,
                              hosts=tuple(sorted(sc.hosts.values())))
            tl = timeline(SEED, cfg)
            assert {f.kind for f in tl.faults} == set(FAULT_KINDS)
            data = soak(lab, tl, cfg, out_dir=tmp_path)
        finally:
            relay.close()
        if data["violations"]:
            print(sc.diagnostics())
    assert data["violations"] == [], data["violations"]
    done = {k for k, c in data["faults_by_kind"].items() if c.get("done")}
    errors = [f for f in data["faults"] if f["outcome"] == "error"]
    assert errors == [] and done >= set(FAULT_KINDS) - {"gpu_detach_by_hand"}, data["faults_by_kind"]
    assert data["pods_running"] >= 3 and data["checks_run"] >= 3 and data["samples_missed"] < data["samples"]
