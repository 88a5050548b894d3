"""The simulator answers with LIQID's SDK types and values, checked without our client.

Every fixture under ``tests/fixtures/director/`` and every answer the simulator gives to a
compose / decompose / pool cycle is checked against :mod:`tests.director.sdk_schema` (types
transcribed from the SDK), with plain ``requests`` calls.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from .conftest import FIXTURES, PASSWORD, USER, Sim, load_fixture
from .sdk_schema import envelope_problems, problems

AUTH = (USER, PASSWORD)


class Raw:
    """Raw calls to the simulator that check every answer against the SDK types."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.seen: set[str] = set()

    def __call__(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        expect: int = 200,
    ) -> list[Any]:
        r = requests.request(
            method, f"{self.sim.url}/liqid/api/v2/{path}", params=params, json=json, auth=AUTH, timeout=5
        )
        assert r.status_code == expect, (method, path, r.status_code, r.text[:300])
        found = envelope_problems(r.json(), method, path, status=r.status_code)
        assert not found, (method, path, found)
        self.seen.add(f"{method} {path.split('/0x')[0]}")
        return r.json()["response"]["data"]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in FIXTURES.glob("*.json") if p.name != "sdk_types.json")
)
def test_fixture_conforms_to_the_sdk_types(name: str) -> None:
    fx = load_fixture(name)
    assert fx["description"] and fx["source"], name
    req = fx["request"]
    found = envelope_problems(fx["body"], req["method"], req["path"], status=fx["status"])
    assert not found, found
    if "json" in req and req["method"] in ("POST", "PUT", "DELETE") and not name.startswith("error_"):
        body_type = {
            "fabric": "Machine",
            "pool/": "GroupPool",
            "predevice/gpu": "GroupGPUDeviceRelator",
            "relate/gpu": "MachineGPUDeviceRelator",
            "device/udesc": "DeviceUserDescription",
        }
        t = next(v for k, v in body_type.items() if req["path"].startswith(k))
        assert not problems(req["json"], t), (name, problems(req["json"], t))


def test_simulator_answers_conform_to_the_sdk_types(sim: Sim) -> None:
    raw = Raw(sim)
    gpus = {g["name"]: g for g in raw("GET", "status/gpu", params={"filter": "false"})}
    assert {g["device_state"] for n, g in gpus.items() if n != "gpu9"} == {"active | online"}
    assert {g["device_type"] for g in gpus.values()} == {"gpu"}
    raw("GET", "status/gpu", params={"filter": "true"})
    raw("GET", "status")
    infos = {i["name"]: i for i in raw("GET", "device/info/gpu")}
    assert infos["gpu0"]["udesc"] == "n/a"
    assert raw("GET", "device/info/gpu/gpu0") == [infos["gpu0"]]
    raw("GET", "device/info/gpu/gpu404", expect=404)
    groups = raw("GET", "group")
    grp = next(g for g in groups if g["group_name"] == "gpu-pool")
    machine = raw("GET", "machine", params={"mach_name": "blade-slot-1"})
    assert [m["mach_name"] for m in machine] == ["blade-slot-1"]
    m = machine[0]
    raw("GET", f"machine/details/{m['mach_id']}")
    raw("GET", "machine", params={"grp_id": str(grp["grp_id"])})
    pre = {
        p["name"]: p
        for p in raw("GET", "predevice", params={"dev_type": "gpu", "grp_id": str(grp["grp_id"])})
    }
    assert (
        pre["gpu2"]["mach_id"] == "n/a" and pre["gpu2"]["mname"] == "n/a" and pre["gpu2"]["owner_id"] == "n/a"
    )
    coords = raw("GET", "coordinates")[0]
    fabric_id = raw("GET", "fabric/id")[0]
    pool = {"coordinates": coords, "fabr_id": fabric_id, "grp_id": grp["grp_id"]}

    # pool transaction: system free pool -> group pool (gpu0), then back
    raw("POST", "pool/edit", json=pool)
    raw("POST", "predevice/gpu", json={"deviceStatus": gpus["gpu0"], "group": grp})
    raw("POST", "pool/done", json=pool)
    # fabric transaction: attach gpu0
    raw("POST", "fabric/edit", json=m)
    rel = {"groupDeviceRelator": {"deviceStatus": gpus["gpu0"], "group": grp}, "machine": m}
    raw("POST", "relate/gpu", json=rel)
    raw("POST", "fabric/reprogram", json=m)
    pre = {
        p["name"]: p
        for p in raw("GET", "predevice", params={"grp_id": str(grp["grp_id"]), "mach_id": str(m["mach_id"])})
    }
    assert pre["gpu0"]["mach_id"] == str(m["mach_id"]) and pre["gpu0"]["mname"] == "blade-slot-1"
    # decompose, cancelled once, then done
    raw("POST", "fabric/edit", json=m)
    raw("DELETE", "relate/gpu", json=rel)
    raw("POST", "fabric/edit/cancel", json=m)
    raw("POST", "fabric/edit", json=m)
    raw("DELETE", "relate/gpu", json=rel)
    raw("POST", "fabric/reprogram", json=m)
    raw("POST", "fabric/reprogram/cancel", json=m)
    raw("POST", "pool/edit", json=pool)
    raw("DELETE", "predevice/gpu", json={"deviceStatus": gpus["gpu0"], "group": grp})
    raw("POST", "pool/cancel", json=pool)
    raw("POST", "pool/edit", json=pool)
    raw("DELETE", "predevice/gpu", json={"deviceStatus": gpus["gpu0"], "group": grp})
    raw("POST", "pool/done", json=pool)
    # owner tags and digests
    assert raw("PUT", f"device/udesc/gpu/{gpus['gpu0']['dev_id']}", json={"udesc": "mine"}) == [
        {"udesc": "mine"}
    ]
    assert raw("DELETE", f"device/udesc/gpu/{gpus['gpu0']['dev_id']}") == [{"udesc": "n/a"}]
    raw("POST", "digest/conformance")
    assert raw("DELETE", "digest/conformance") == ["conformance"]
    assert len(raw.seen) >= 25, sorted(raw.seen)


def test_simulator_202_answers_and_job_polls_conform(sim: Sim) -> None:
    sim.fault(kind="async", method="POST", path="fabric/edit", delay_seconds=0.3)
    raw = Raw(sim)
    m = raw("GET", "machine", params={"mach_name": "blade-slot-1"})[0]
    r = requests.post(f"{sim.url}/liqid/api/v2/fabric/edit", json=m, auth=AUTH, timeout=5)
    assert r.status_code == 202
    assert not envelope_problems(r.json(), "POST", "fabric/edit", status=202)
    href = r.json()["response"]["data"][0]["links"][0]["href"]
    poll = requests.get(href, auth=AUTH, timeout=5)
    assert poll.status_code == 200
    assert not envelope_problems(poll.json(), "GET", "job/1")
    assert poll.json()["response"]["data"][0]["command_execution_state"] == "Pending"
    time.sleep(0.4)
    assert requests.get(href, auth=AUTH, timeout=5).status_code == 404  # done (LiqidClientBase.java:219)


def test_error_answers_are_error_messages(sim: Sim) -> None:
    m = requests.get(
        f"{sim.url}/liqid/api/v2/machine", params={"mach_name": "blade-slot-1"}, auth=AUTH, timeout=5
    ).json()["response"]["data"][0]
    assert requests.post(f"{sim.url}/liqid/api/v2/fabric/edit", json=m, auth=AUTH, timeout=5).ok
    r = requests.post(f"{sim.url}/liqid/api/v2/fabric/edit", json=m, auth=AUTH, timeout=5)
    assert not r.ok
    body = r.json()
    assert not envelope_problems(body, "POST", "fabric/edit", status=r.status_code)
    # LIQID's own wording (MockLiqidClient.java:1622)
    assert body["response"]["errors"][0]["message"] == f"Machine 0x{m['mach_id']:08x} is already being edited"
