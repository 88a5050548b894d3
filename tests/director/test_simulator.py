"""The Director simulator: fixture shapes, refuses what the real one refuses, survives restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from lab.director_sim.inventory import Inventory, load_inventory

from .conftest import INVENTORIES, PASSWORD, ROOT, USER, Sim, load_fixture, start_sim

AUTH = (USER, PASSWORD)


def api(sim: Sim, method: str, path: str, *, auth: Any = AUTH, **kw: Any) -> requests.Response:
    return requests.request(method, f"{sim.url}/liqid/api/v2/{path}", auth=auth, timeout=5, **kw)


def keys(value: Any) -> Any:
    """The key structure of a JSON value (dict keys recursively; first element of lists)."""
    if isinstance(value, dict):
        return {k: keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [keys(value[0])] if value and isinstance(value[0], dict) else []
    return None


@pytest.mark.parametrize(
    ("fixture", "path", "query"),
    [
        ("status_gpu.json", "status/gpu", {"filter": "false"}),
        ("status.json", "status", {}),
        ("device_info_gpu.json", "device/info/gpu", {}),
        ("group.json", "group", {}),
        ("machine.json", "machine", {}),
        ("machine_details.json", "machine/details/1", {}),
        ("predevice.json", "predevice", {"dev_type": "gpu", "grp_id": "1"}),
    ],
)
def test_responses_have_the_fixture_shapes(sim: Sim, fixture: str, path: str, query: dict[str, str]) -> None:
    sim.attach("gpu0", "blade-slot-1")  # so blade-slot-1's connection_history has an entry
    r = api(sim, "GET", path, params=query)
    assert r.status_code == 200
    body = r.json()
    fx = load_fixture(fixture)["body"]
    assert set(body) == set(fx) and set(body["response"]) == set(fx["response"])
    got = body["response"]["data"]
    assert got, path
    # One record of each status type (``status`` mixes compute devices and GPUs).
    first_of_type = {w.get("type"): w for w in reversed(fx["response"]["data"])}
    for want in first_of_type.values():
        record = next(r for r in got if r.get("type") == want.get("type"))
        assert keys(record) == keys(want), path


def test_status_gpu_filter_selects_the_system_free_pool(sim: Sim) -> None:
    all_gpus = {
        g["name"]
        for g in api(sim, "GET", "status/gpu", params={"filter": "false"}).json()["response"]["data"]
    }
    free = {
        g["name"] for g in api(sim, "GET", "status/gpu", params={"filter": "true"}).json()["response"]["data"]
    }
    default = {g["name"] for g in api(sim, "GET", "status/gpu").json()["response"]["data"]}
    assert len(all_gpus) == 10
    # gpu2 (group pool), gpu7 (attached) and gpu8 (reserved pool) are not in the system pool.
    assert free == default == all_gpus - {"gpu2", "gpu7", "gpu8"}


def _relate_body(sim: Sim, device: str, machine: str) -> dict[str, Any]:
    status = next(
        g
        for g in api(sim, "GET", "status/gpu", params={"filter": "false"}).json()["response"]["data"]
        if g["name"] == device
    )
    mach = next(m for m in api(sim, "GET", "machine").json()["response"]["data"] if m["mach_name"] == machine)
    grp = api(sim, "GET", "group", params={"grp_id": mach["grp_id"]}).json()["response"]["data"][0]
    return {"groupDeviceRelator": {"deviceStatus": status, "group": grp}, "machine": mach}


def test_relate_without_open_edit_fails_in_the_envelope_under_http_200(sim: Sim) -> None:
    r = api(sim, "POST", "relate/gpu", json=_relate_body(sim, "gpu2", "blade-slot-1"))
    assert r.status_code == 200
    resp = r.json()["response"]
    assert resp["code"] == 1 and resp["errors"][0]["code"] == 409
    assert (
        resp["errors"][0]["message"] == "Machine 0x00000001 is not in edit mode"
    )  # MockLiqidClient.java:546-553
    assert sim.gpu("gpu2")["mach_id"] is None


def test_second_edit_on_a_machine_is_refused(sim: Sim) -> None:
    body = _relate_body(sim, "gpu2", "blade-slot-1")["machine"]
    assert api(sim, "POST", "fabric/edit", json=body).status_code == 200
    r = api(sim, "POST", "fabric/edit", json=body)
    assert r.status_code == 409
    assert r.json()["response"]["errors"][0]["message"] == "Machine 0x00000001 is already being edited"


def test_attaching_a_gpu_another_machine_holds_is_refused(sim: Sim) -> None:
    body = _relate_body(sim, "gpu7", "blade-slot-1")  # gpu7 is on blade-slot-4
    assert api(sim, "POST", "fabric/edit", json=body["machine"]).status_code == 200
    r = api(sim, "POST", "relate/gpu", json=body)
    assert r.status_code == 409 and "blade-slot-4" in r.json()["response"]["errors"][0]["message"]


def test_full_cycle_edit_relate_reprogram_and_cancel(sim: Sim) -> None:
    body = _relate_body(sim, "gpu2", "blade-slot-1")
    assert api(sim, "POST", "fabric/edit", json=body["machine"]).ok
    assert api(sim, "POST", "relate/gpu", json=body).json()["response"]["code"] == 0
    assert api(sim, "POST", "fabric/edit/cancel", json=body["machine"]).ok
    assert sim.gpu("gpu2")["mach_id"] is None and sim.state()["edits"] == {}
    assert api(sim, "POST", "fabric/edit", json=body["machine"]).ok
    assert api(sim, "POST", "relate/gpu", json=body).ok
    assert api(sim, "POST", "fabric/reprogram", json=body["machine"]).ok
    assert sim.gpu("gpu2")["mach_id"] == sim.machine_id("blade-slot-1")
    assert sim.state()["edits"] == {}
    history = api(sim, "GET", "machine").json()["response"]["data"][0]["connection_history"]
    assert [h["name"] for h in history] == ["gpu2"]


def _pool(sim: Sim, grp_id: int) -> dict[str, Any]:
    coords = api(sim, "GET", "coordinates").json()["response"]["data"][0]
    fabric_id = api(sim, "GET", "fabric/id").json()["response"]["data"][0]
    return {"coordinates": coords, "fabr_id": fabric_id, "grp_id": grp_id}


def test_pool_moves_need_a_pool_edit_and_refuse_attached_devices(sim: Sim) -> None:
    body = _relate_body(sim, "gpu7", "blade-slot-4")["groupDeviceRelator"]
    r = api(sim, "DELETE", "predevice/gpu", json=body)
    assert r.status_code == 200 and r.json()["response"]["code"] == 1  # MockLiqidClient.java:515-523
    assert r.json()["response"]["errors"][0]["message"].endswith("is not in edit mode")
    pool = _pool(sim, body["group"]["grp_id"])
    assert api(sim, "POST", "pool/edit", json=pool).ok
    assert api(sim, "POST", "pool/edit", json=pool).status_code == 409  # already being edited
    r = api(sim, "DELETE", "predevice/gpu", json=body)
    assert r.status_code == 409
    assert api(sim, "POST", "pool/done", json=pool).ok
    assert sim.gpu("gpu7")["grp_id"] is not None


def test_pool_moves_apply_at_done_and_not_at_cancel(sim: Sim) -> None:
    free = _relate_body(sim, "gpu0", "blade-slot-1")["groupDeviceRelator"]
    pool = _pool(sim, free["group"]["grp_id"])
    assert api(sim, "POST", "pool/edit", json=pool).ok
    assert api(sim, "POST", "predevice/gpu", json=free).json()["response"]["code"] == 0
    assert sim.gpu("gpu0")["grp_id"] is None  # queued until pool/done
    assert api(sim, "POST", "pool/cancel", json=pool).ok
    assert sim.gpu("gpu0")["grp_id"] is None and sim.state()["pool_edits"] == {}
    assert api(sim, "POST", "pool/edit", json=pool).ok
    assert api(sim, "POST", "predevice/gpu", json=free).ok
    assert api(sim, "POST", "pool/done", json=pool).ok
    assert sim.gpu("gpu0")["grp_id"] == pool["grp_id"]
    wrong = dict(pool, coordinates={"rack": 1, "shelf": 0, "node": 0})
    assert api(sim, "POST", "pool/edit", json=wrong).status_code == 400


def test_bad_bodies_are_400_envelopes(sim: Sim) -> None:
    r = api(sim, "POST", "fabric/edit", json={"no": "machine"})
    assert r.status_code == 400 and r.json()["response"]["errors"][0]["message"] == "Missing field mach_id"
    r = api(sim, "GET", "no/such/path")
    assert r.status_code == 404 and r.json()["response"]["code"] == 404


def test_auth_basic_digest_and_expiry(sim: Sim) -> None:
    assert api(sim, "GET", "group", auth=None).status_code == 401
    assert api(sim, "GET", "group", auth=(USER, "wrong")).status_code == 401
    d = api(sim, "POST", "digest/t1").json()["response"]["data"][0]
    key = {"X-API-Key": d["digest_key"]}
    assert api(sim, "GET", "group", auth=None, headers=key).status_code == 200
    assert api(sim, "POST", "digest/t2", auth=None, headers=key).status_code == 401  # creating needs Basic
    requests.post(f"{sim.url}/_sim/digests/expire", timeout=5).raise_for_status()
    assert api(sim, "GET", "group", auth=None, headers=key).status_code == 401


def test_injected_error_delay_and_envelope_only_faults(sim: Sim) -> None:
    sim.fault(kind="error", method="GET", path="group", status=503, times=2)
    assert [api(sim, "GET", "group").status_code for _ in range(3)] == [503, 503, 200]
    sim.fault(kind="error", path="machine*", status=409, http_status=200, message="busy")
    r = api(sim, "GET", "machine")
    assert r.status_code == 200 and r.json()["response"]["code"] == 1
    assert r.json()["response"]["errors"] == [{"code": 409, "message": "busy", "type": "InjectedFault"}]
    sim.fault(kind="delay", path="group", delay_seconds=0.3)
    t0 = time.monotonic()
    assert api(sim, "GET", "group").ok
    assert time.monotonic() - t0 >= 0.3
    assert requests.get(f"{sim.url}/_sim/faults", timeout=5).json() == []


def test_reprogram_half_applies_half_and_leaves_the_edit_open(sim: Sim) -> None:
    a, b = _relate_body(sim, "gpu2", "blade-slot-1"), None
    requests.post(f"{sim.url}/_sim/attach", json={"device": "gpu3", "machine": "blade-slot-1"}, timeout=5)
    sim.detach("gpu3")  # gpu3 now in gpu-pool's pool, free
    b = _relate_body(sim, "gpu3", "blade-slot-1")
    api(sim, "POST", "fabric/edit", json=a["machine"])
    api(sim, "POST", "relate/gpu", json=a)
    api(sim, "POST", "relate/gpu", json=b)
    sim.fault(kind="reprogram_half")
    r = api(sim, "POST", "fabric/reprogram", json=a["machine"])
    assert r.status_code == 500 and "after 1 of 2" in r.json()["response"]["errors"][0]["message"]
    mid = sim.machine_id("blade-slot-1")
    assert sim.gpu("gpu2")["mach_id"] == mid and sim.gpu("gpu3")["mach_id"] is None
    assert sim.state()["edits"][str(mid)]["attach"] == ["gpu3"]


def test_open_edit_fault_and_out_of_band_changes(sim: Sim) -> None:
    sim.fault(kind="open_edit", machine="blade-slot-2")
    mid = sim.machine_id("blade-slot-2")
    assert sim.state()["edits"][str(mid)]["opened_by"] == "other-client"
    sim.detach("gpu7")
    assert sim.gpu("gpu7")["mach_id"] is None and sim.gpu("gpu7")["grp_id"] is not None
    sim.attach("gpu0", "blade-slot-3")
    assert sim.gpu("gpu0")["mach_id"] == sim.machine_id("blade-slot-3")


def test_reset_restores_the_inventory(sim: Sim) -> None:
    before = sim.fabric_state()
    sim.attach("gpu0", "blade-slot-3")
    sim.fault(kind="error", path="group")
    requests.post(f"{sim.url}/_sim/reset", timeout=5).raise_for_status()
    assert sim.fabric_state() == before
    assert api(sim, "GET", "group").ok


def test_state_file_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "director.json"
    first = start_sim(state_file=state)
    try:
        first.attach("gpu0", "blade-slot-1")
        first.fault(kind="open_edit", machine="blade-slot-2")
        api(first, "PUT", "device/udesc/gpu/0x00000b00", json={"udesc": "mine"})
    finally:
        first.server.stop()
    second = start_sim(state_file=state)
    try:
        assert second.gpu("gpu0")["mach_id"] == second.machine_id("blade-slot-1")
        assert second.gpu("gpu0")["udesc"] == "mine"
        assert str(second.machine_id("blade-slot-2")) in second.state()["edits"]
    finally:
        second.server.stop()


def test_hotplug_latency_is_applied_per_reprogram(tmp_path: Path) -> None:
    s = start_sim(latency=0.3)
    try:
        body = _relate_body(s, "gpu2", "blade-slot-1")
        api(s, "POST", "fabric/edit", json=body["machine"])
        api(s, "POST", "relate/gpu", json=body)
        t0 = time.monotonic()
        assert api(s, "POST", "fabric/reprogram", json=body["machine"]).ok
        assert time.monotonic() - t0 >= 0.3
    finally:
        s.server.stop()


@pytest.mark.parametrize("name", ["dev.yaml", "rich.yaml", "production.yaml"])
def test_inventories(name: str) -> None:
    inv = load_inventory(INVENTORIES / name)
    models = {g.model for g in inv.gpus}
    if name == "dev.yaml":
        assert [m.name for m in inv.machines] == ["blade-slot-1", "blade-slot-2"]
        assert len(inv.gpus) == 2 and models == {"Tesla T4"} and len({g.switch for g in inv.gpus}) == 1
    elif name == "rich.yaml":
        assert (
            len(inv.gpus) >= 8 and models == {"Tesla T4", "NVIDIA A100-PCIE-40GB"} and len(inv.switches) >= 2
        )
    else:
        assert [m.name for m in inv.machines] == [f"gpu-node-{i:02d}" for i in range(1, 17)]
        assert len(inv.gpus) == 64 and len(models) == 2


def test_inventory_rejects_dangling_references() -> None:
    with pytest.raises(ValueError) as info:
        Inventory.model_validate(
            {
                "switches": [{"name": "sw0"}],
                "groups": [{"name": "g"}],
                "machines": [{"name": "h1", "group": "nope"}],
                "gpus": [
                    {"name": "gpu0", "model": "Tesla T4", "switch": "sw9"},
                    {"name": "gpu0", "model": "Tesla T4", "switch": "sw0", "attached_to": "h1"},
                ],
            }
        )
    msg = str(info.value)
    for part in (
        "duplicate gpu names: gpu0",
        "machine h1: unknown group nope",
        "gpu gpu0: unknown switch sw9",
        "attached to h1 but pool is None",
    ):
        assert part in msg


def test_module_entry_point_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    state = tmp_path / "d.json"
    env = {
        **os.environ,
        "DIRECTOR_SIM_PASSWORD": PASSWORD,
        "DIRECTOR_SIM_USERNAME": USER,
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lab.director_sim",
            "--port",
            "0",
            "--inventory",
            str(INVENTORIES / "dev.yaml"),
            "--state-file",
            str(state),
            "--hotplug-latency",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("director-sim listening on http://127.0.0.1:"), line + proc.stderr.read()
        url = line.rsplit(" ", 1)[1].strip()
        r = requests.get(f"{url}/liqid/api/v2/machine", auth=AUTH, timeout=5)
        assert [m["mach_name"] for m in r.json()["response"]["data"]] == ["blade-slot-1", "blade-slot-2"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert state.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_module_entry_point_refuses_without_password(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DIRECTOR_SIM_PASSWORD"}
    r = subprocess.run(
        [sys.executable, "-m", "lab.director_sim", "--port", "0"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=30,
    )
    assert r.returncode == 2 and "no password" in r.stderr


def test_a_change_while_a_job_runs_is_refused_and_recorded(sim: Sim) -> None:
    """A client must wait for a job before its next call (LiqidClientBase.java:176-237)."""
    sim.fault(kind="async", method="POST", path="fabric/edit", delay_seconds=0.5)
    body = _relate_body(sim, "gpu2", "blade-slot-1")
    assert api(sim, "POST", "fabric/edit", json=body["machine"]).status_code == 202
    r = api(sim, "POST", "fabric/edit/cancel", json=body["machine"])  # the job still runs
    assert r.status_code == 409 and "still running" in r.json()["response"]["errors"][0]["message"]
    assert len(sim.state()["violations"]) == 1
    time.sleep(0.6)
    assert api(sim, "POST", "relate/gpu", json=body).json()["response"]["code"] == 0


def test_a_failed_reprogram_job_leaves_the_edit_open_and_applies_nothing(sim: Sim) -> None:
    body = _relate_body(sim, "gpu2", "blade-slot-1")
    assert api(sim, "POST", "fabric/edit", json=body["machine"]).ok
    assert api(sim, "POST", "relate/gpu", json=body).ok
    sim.fault(kind="async", method="POST", path="fabric/reprogram", delay_seconds=0.2, fail=True)
    r = api(sim, "POST", "fabric/reprogram", json=body["machine"])
    href = r.json()["response"]["data"][0]["links"][0]["href"]
    time.sleep(0.3)
    poll = requests.get(href, auth=AUTH, timeout=5).json()["response"]["data"][0]
    assert poll["command_execution_state"] == "FAILURE"
    mid = sim.machine_id("blade-slot-1")
    assert sim.gpu("gpu2")["mach_id"] is None and sim.state()["edits"][str(mid)]["attach"] == ["gpu2"]
    assert api(sim, "POST", "fabric/edit/cancel", json=body["machine"]).ok


def test_relate_refuses_a_device_with_a_pending_pool_move(sim: Sim) -> None:
    """Otherwise a reprogram could attach a device whose group changed meanwhile."""
    body = _relate_body(sim, "gpu2", "blade-slot-1")
    pool = _pool(sim, body["groupDeviceRelator"]["group"]["grp_id"])
    assert api(sim, "POST", "pool/edit", json=pool).ok
    assert api(sim, "DELETE", "predevice/gpu", json=body["groupDeviceRelator"]).ok  # queued
    assert api(sim, "POST", "fabric/edit", json=body["machine"]).ok
    r = api(sim, "POST", "relate/gpu", json=body)
    assert r.status_code == 409
    assert "pending group pool change" in r.json()["response"]["errors"][0]["message"]
    assert api(sim, "POST", "pool/done", json=pool).ok
    assert sim.gpu("gpu2")["grp_id"] is None and sim.gpu("gpu2")["mach_id"] is None
