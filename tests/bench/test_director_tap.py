"""bench.director_tap: the Director simulator with a timestamp tap, driven by the real client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from bench.reaction import inventory
from dynamic_providers.director.client import DirectorClient
from lab import readiness

ROOT = Path(__file__).resolve().parents[2]


def test_tap_records_compose_requests_with_their_machine(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(inventory(["blade-slot-1", "blade-slot-2"], 4)))
    tap, url_file = tmp_path / "tap.jsonl", tmp_path / "url"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.director_tap",
            "--inventory",
            str(inv),
            "--hotplug-latency",
            "0.05",
            "--tap-file",
            str(tap),
            "--url-file",
            str(url_file),
        ],
        cwd=ROOT,
        env={**os.environ, "DIRECTOR_SIM_PASSWORD": "pw", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        url = readiness.wait_until(lambda: url_file.exists() and url_file.read_text(), what="director tap",
                                   timeout_seconds=120, interval_seconds=0.05,
                                   alive=lambda: proc.poll() is None)
        before = time.time()
        with DirectorClient(url, username="admin", password="pw", retries=0) as c:
            c.compose("blade-slot-2", ["gpu0", "gpu1"])
            mach = c.machine("blade-slot-2").mach_id
        recs = [json.loads(x) for x in tap.read_text().splitlines()]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    paths = [r["path"] for r in recs]
    assert paths[0] == "fabric/edit" and paths[-1] == "fabric/reprogram"
    assert paths.count("relate/gpu") == 2
    edit, reprogram = recs[0], recs[-1]
    assert edit["mach_id"] == mach == reprogram["mach_id"]
    assert before <= edit["t0"] <= edit["t1"] <= reprogram["t0"]
    assert reprogram["t1"] - reprogram["t0"] >= 0.05  # the hot-plug latency is inside the answer
    assert all(r["status"] == 200 for r in recs)


def test_tap_refuses_to_start_without_a_password(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.director_tap",
            "--inventory",
            "x.yaml",
            "--tap-file",
            str(tmp_path / "t"),
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "DIRECTOR_SIM_PASSWORD"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "DIRECTOR_SIM_PASSWORD" in out.stderr
