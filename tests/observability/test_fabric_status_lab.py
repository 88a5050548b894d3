"""``python -m ops.fabric status`` against the handover scenario (two hosts hand over two pooled
GPUs) played by the chart's Deployment: mid-handover (GPUs idle on host A, pod B gated on host B)
and after it, its GPUs, hosts and gated pods are the Director's and the cluster's state, and pod B's
why is the composer's latest Warning Event about it (not the Normal ``Gated`` written in the same
second); with the API server or the Director unreachable it exits 1 with one line naming which. The
text output mid-handover is printed (the README shows it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from domain.labels import GATE, IDLE_SINCE
from dynamic_providers.director.client import DirectorClient
from lab import processes
from lab.settings import ROOT
from tests.composer import deployed as dep
from tests.composer.harness import SIM_PASSWORD, SIM_USER, wait_for
from tests.observability.test_alerts_lab import uninstall

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def fabric_status(
    d: dep.Deployed, *extra: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the command as an operator would, the password in the environment."""
    env = {**os.environ, "LIQID_DIRECTOR_PASSWORD": SIM_PASSWORD, "LIQID_DIRECTOR_USERNAME": SIM_USER}
    argv = [
        sys.executable,
        "-m",
        "ops.fabric",
        "status",
        "--director-url",
        d.sc.director_url,
        "--kubeconfig",
        str(kubeconfig or d.kubeconfig),
        "--namespace",
        d.sc.ns,
        *extra,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT, check=False)


def as_json(d: dep.Deployed) -> dict[str, Any]:
    out = fabric_status(d, "--output", "json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def composer_warnings(d: dep.Deployed, pod: str) -> list[tuple[str, str]]:
    """(reason, message) of the Warning Events the release's Pods posted about ``pod``, oldest
    first by their last time."""
    evs = d.sc.core.list_namespaced_event(d.sc.ns, field_selector=f"involvedObject.name={pod}").items
    return [
        (e.reason, e.message)
        for e in sorted(evs, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
        if e.type == "Warning" and (e.reporting_instance or "").startswith(d.release)
    ]


def assert_matches_the_director(d: dep.Deployed, status: dict[str, Any]) -> None:
    """Every GPU's place and owner tag as the Director reports them; the composer's annotation
    marks the managed ones; the gated pods are the pods carrying the gate."""
    with DirectorClient(d.sc.director_url, username=SIM_USER, password=SIM_PASSWORD) as director:
        truth = {
            g.name: (g.machine, g.owner_tag or None, "composed" if g.attached else "free")
            for g in director.gpus()
        }
        machines = sorted(m.mach_name for m in director.machines())
    seen = {g["name"]: (g["host"], g["owner_tag"], g["state"]) for g in status["gpus"]}
    assert seen == truth
    assert [h["name"] for h in status["hosts"]] == machines
    for h in status["hosts"]:
        node = d.sc.core.read_node(h["name"])
        managed = sorted(
            x
            for x in ((node.metadata.annotations or {}).get("composer.liqid.io/devices") or "").split(",")
            if x
        )
        assert sorted(h["managed_gpus"]) == managed
    gated = sorted(
        f"{p.metadata.namespace}/{p.metadata.name}"
        for p in d.sc.core.list_namespaced_pod(d.sc.ns).items
        if any(g.name == GATE for g in p.spec.scheduling_gates or [])
    )
    assert sorted(g["pod"] for g in status["gated"]) == gated


def test_status_through_the_handover_and_one_line_when_unreachable(
    make_deployed: Any, tmp_path: Path
) -> None:
    with make_deployed(install=False) as d:
        sc = d.sc
        try:
            d.helm(
                "install",
                composer={"idleTimeoutSeconds": 20, "unservedWaitSeconds": 120},
                webhook={"enabled": True},
            )
            wait_for(lambda: len(d.ready_pods()) == 2, timeout=120, what="two Ready Pods")
            a, b = sc.node("blade-slot-1"), sc.node("blade-slot-2")
            sc.gpu_pod("train-a", 2, host=a)
            wait_for(lambda: sc.running_on("train-a") == a, timeout=90, what="pod A running on host A")
            running = as_json(d)
            assert_matches_the_director(d, running)
            on_a = [g for g in running["gpus"] if g["host"] == a]
            assert len(on_a) == 2 and all(g["managed"] and g["pods"] == [f"{sc.ns}/train-a"] for g in on_a)

            sc.delete_pod("train-a")
            wait_for(
                lambda: IDLE_SINCE in (sc.core.read_node(a).metadata.annotations or {}),
                timeout=30,
                what="host A idle",
            )
            sc.gpu_pod("train-b", 2, host=b)
            wait_for(
                lambda: composer_warnings(d, "train-b"),
                timeout=30,
                what="the composer's Warning about pod B",
            )
            mid = as_json(d)
            assert_matches_the_director(d, mid)
            assert {g["host"] for g in mid["gpus"]} == {a} and all(g["idle_since"] for g in mid["gpus"])
            (gated_b,) = [g for g in mid["gated"] if g["pod"] == f"{sc.ns}/train-b"]
            # why it waits: the composer's Warning about it (its Normal Gated is often the same second)
            reason, message = composer_warnings(d, "train-b")[-1]
            assert gated_b["why"] == f"{reason}: {message}", (gated_b, d.composer_events("train-b"))
            text = fabric_status(d)
            assert text.returncode == 0 and "GATED PODS" in text.stdout
            assert f"{sc.ns}/train-b" in text.stdout and gated_b["why"] in text.stdout
            print("\n--- ops.fabric status mid-handover ---\n" + text.stdout)
            (tmp_path / "status-mid-handover.txt").write_text(text.stdout)

            wait_for(lambda: sc.running_on("train-b") == b, timeout=120, what="pod B running on host B")
            after = as_json(d)
            assert_matches_the_director(d, after)
            assert {g["host"] for g in after["gpus"]} == {b}
            assert all(g["pods"] == [f"{sc.ns}/train-b"] and g["idle_since"] is None for g in after["gpus"])

            config = yaml.safe_load(d.kubeconfig.read_text())
            for c in config["clusters"]:
                c["cluster"]["server"] = f"https://127.0.0.1:{processes.free_port()}"
            dead = tmp_path / "unreachable.kubeconfig"
            dead.write_text(yaml.safe_dump(config))
            out = fabric_status(d, kubeconfig=dead)
            assert out.returncode == 1 and out.stdout == ""
            assert len(out.stderr.strip().splitlines()) == 1 and "API server https://127.0.0.1:" in out.stderr

            sc.procs["director-sim"].stop()
            out = fabric_status(d)
            assert out.returncode == 1 and out.stdout == ""
            assert len(out.stderr.strip().splitlines()) == 1
            assert f"Director {sc.director_url} could not be read: DirectorUnavailableError" in out.stderr
        except AssertionError:
            print(d.describe(), sc.diagnostics())
            raise
        finally:
            uninstall(d)
