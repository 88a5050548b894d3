"""One test per point where our Director client and simulator disagreed with LIQID's code.

1. ``"n/a"`` placeholders (``PreDevice.mach_id``/``mname``/``owner_id``, an empty ``udesc``);
2. device states are LIQID's strings (``"active | online"``), held as data;
3. pool moves in their own ``pool/edit`` -> ``predevice/gpu`` -> ``pool/done`` transaction before
   the fabric edit (exact call order recorded by the simulator);
4. HTTP 202 answers: the job link is polled to the end before the next step, and no edit is
   cancelled while a job runs;
5. ``GET predevice`` with ``grp_id``, string-typed numbers, a fixed digest label deleted before
   it is created, error classification by LIQID's messages.

Sources are cited in each test; the payloads come from ``tests/fixtures/director/``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import requests
import responses

from dynamic_providers.director import errors
from dynamic_providers.director.api import predevice as predevice_api
from dynamic_providers.director.api import status as status_api
from dynamic_providers.director.client import DirectorClient

from .conftest import PASSWORD, USER, Sim, load_fixture, make_client, start_sim

BASE = "http://director.test:8080"
ROOT = BASE + "/liqid/api/v2/"


def _serve(
    rsps: responses.RequestsMock, method: str, path: str, fixture: str | None = None, **kw: Any
) -> None:
    body = load_fixture(fixture)["body"] if fixture else kw.pop("json")
    rsps.add(method, ROOT + path, json=body, status=kw.pop("status", 200), **kw)


def _offline_client() -> DirectorClient:
    return DirectorClient(BASE, username="u", password="p", retries=0, backoff_factor=0.0)


def _read_fixtures(rsps: responses.RequestsMock, *, predevice: bool = True) -> None:
    _serve(rsps, "GET", "status/gpu", "status_gpu.json")
    _serve(rsps, "GET", "device/info/gpu", "device_info_gpu.json")
    _serve(rsps, "GET", "group", "group.json")
    if predevice:
        _serve(rsps, "GET", "predevice", "predevice.json")
    else:
        _serve(rsps, "GET", "predevice", json={"response": {"code": 0, "errors": None, "data": []}})


# ------------------------------------------------------------------ 1. placeholders
@responses.activate
def test_placeholders_n_a_parse_as_absent_and_a_free_gpu_is_free() -> None:
    """PreDevice.java:136-147 (mach_id "n/a" -> none), MockLiqidClient.java:265 (udesc "n/a")."""
    _read_fixtures(responses.mock)
    with _offline_client() as c:
        gpus = {g.name: g for g in c.gpus()}
        assert gpus["gpu0"].machine_id is None and gpus["gpu0"].machine is None
        assert gpus["gpu0"].group_id == 1 and gpus["gpu0"].owner_tag is None  # "n/a" is no owner tag
        assert gpus["gpu1"].machine_id == 1 and gpus["gpu1"].machine == "blade-slot-1"
        assert gpus["gpu1"].owner_tag == "pulumi:composable-gpu/dev/static-gpus"
        assert gpus["gpu0"].memory_mib == 15360  # dram_size is a string in the SDK (types_gen.go:1358)
        assert [g.name for g in c.free_gpus()] == ["gpu0"]


# ------------------------------------------------------------------ 2. device states
@responses.activate
def test_liqid_device_states_are_healthy() -> None:
    """MockLiqidClient.java:243 sets "active | online" on every device it creates."""
    _read_fixtures(responses.mock, predevice=False)
    with _offline_client() as c:
        assert {g.device_state for g in c.gpus()} == {"active | online"}
        assert [g.name for g in c.free_gpus()] == ["gpu0", "gpu1"]


# ------------------------------------------------------------------ 3. call order
def _calls(sim: Sim) -> list[dict[str, Any]]:
    r = requests.get(f"{sim.url}/_sim/calls", timeout=5)
    r.raise_for_status()
    return r.json()


def _changes(calls: list[dict[str, Any]]) -> list[str]:
    return [f"{c['method']} {c['path']}" for c in calls if c["method"] != "GET"]


def test_compose_and_decompose_follow_liqids_call_order(sim: Sim) -> None:
    """AssignToGroupAction.java:56-64, ReconfigureMachineAction.java:75-93, RemoveFromGroupAction.java:61-69;
    pool/edit needs the coordinates and the fabric id (LiqidClient.java:3461-3478)."""
    with make_client(sim.url) as c:
        requests.delete(f"{sim.url}/_sim/calls", timeout=5).raise_for_status()
        c.compose("blade-slot-1", ["gpu0", "gpu2"])  # gpu0: system free pool; gpu2: gpu-pool's pool
        calls = _calls(sim)
        assert _changes(calls) == [
            "POST pool/edit",
            "POST predevice/gpu",
            "POST pool/done",
            "POST fabric/edit",
            "POST relate/gpu",
            "POST relate/gpu",
            "POST fabric/reprogram",
        ]
        first_pool_edit = next(i for i, x in enumerate(calls) if x["path"] == "pool/edit")
        reads = [f"{x['method']} {x['path']}" for x in calls[:first_pool_edit]]
        assert "GET coordinates" in reads and "GET fabric/id" in reads

        requests.delete(f"{sim.url}/_sim/calls", timeout=5).raise_for_status()
        c.decompose("blade-slot-1", ["gpu0", "gpu2"])
        assert c.release_to_system_pool(["gpu0"]) == ["gpu0"]
        assert _changes(_calls(sim)) == [
            "POST fabric/edit",
            "DELETE relate/gpu",
            "DELETE relate/gpu",
            "POST fabric/reprogram",
            "POST pool/edit",
            "DELETE predevice/gpu",
            "POST pool/done",
        ]
    assert sim.gpu("gpu0")["grp_id"] is None and sim.gpu("gpu2")["mach_id"] is None


def test_compose_with_an_owner_tag_tags_before_the_fabric_changes(sim: Sim) -> None:
    """The owner tag (``PUT device/udesc/gpu/{id}``; LiqidClient.java ``createDeviceDescription``) is
    the durable record of who attached a GPU, so it is written before ``fabric/edit``, and after
    the pool move from the system free pool (the move is the claim between clients sharing that
    pool: a tag's read-then-write is not); a GPU that carries it already is not written again;
    one carrying another tag is refused with nothing changed."""
    with make_client(sim.url) as c:
        requests.delete(f"{sim.url}/_sim/calls", timeout=5).raise_for_status()
        c.compose("blade-slot-1", ["gpu0"], owner_tag="gpu-composer")
        calls = _calls(sim)
        changes = _changes(calls)
        assert changes[:3] == ["POST pool/edit", "POST predevice/gpu", "POST pool/done"], changes
        assert changes[3].startswith("PUT device/udesc/gpu/") and changes[4] == "POST fabric/edit", changes
        # the tag is read for the GPU to attach only (GetGPUDeviceInfoByName), not the fabric's every GPU
        reads = [c["path"] for c in calls if c["method"] == "GET" and c["path"].startswith("device/info")]
        assert reads == ["device/info/gpu/gpu0"], reads
        assert {g.name: g.owner_tag for g in c.gpus()}["gpu0"] == "gpu-composer"
        c.decompose("blade-slot-1", ["gpu0"])
        requests.delete(f"{sim.url}/_sim/calls", timeout=5).raise_for_status()
        c.compose("blade-slot-1", ["gpu0"], owner_tag="gpu-composer")  # tagged already
        assert not [x for x in _changes(_calls(sim)) if "udesc" in x]
        c.set_owner_tag(["gpu1"], "pulumi:dev/alpha")
        requests.delete(f"{sim.url}/_sim/calls", timeout=5).raise_for_status()
        refused = "gpu1 carries the owner tag 'pulumi:dev/alpha'"
        with pytest.raises(errors.DirectorConflictError, match=refused):
            c.compose("blade-slot-1", ["gpu1"], owner_tag="gpu-composer")
        assert _changes(_calls(sim)) == []
    assert sim.gpu("gpu1")["mach_id"] is None


def test_a_compose_validates_the_status_records_of_its_own_gpus_only(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GET status/gpu`` answers every GPU of the fabric; a compose validates only the records
    of the GPUs it attaches (on a fabric of 1,000 GPUs validating all of them was most of the
    compose's own time), while a full read still validates every record."""
    validated: list[int] = []
    real = status_api.parse_records

    def counting(model: Any, data: list[Any], **kw: Any) -> Any:
        validated.append(len(data))
        return real(model, data, **kw)

    monkeypatch.setattr(status_api, "parse_records", counting)
    with make_client(sim.url) as c:
        everything = len(c.gpu_statuses())
        assert everything > 2 and validated == [everything]
        validated.clear()
        c.compose("blade-slot-1", ["gpu0", "gpu1"], owner_tag="gpu-composer")
        assert validated and all(n <= 2 for n in validated), validated
        assert sorted(g.name for g in c.attached_gpus("blade-slot-1")) == ["gpu0", "gpu1"]
        with pytest.raises(errors.DirectorNotFoundError, match="no such GPU on the fabric: gpu-nope"):
            c.compose("blade-slot-1", ["gpu-nope"])


def test_clients_of_one_process_take_turns_on_a_groups_pool(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two composes at once onto two machines of one group (the composer runs a client per
    worker thread): the second waits in the process for the first's pool transaction instead
    of being refused by the Director (409 on ``pool/edit``) and polling."""
    real_add = predevice_api.add_gpu_to_group
    first_inside = threading.Event()

    def slow_add(*args: Any, **kw: Any) -> Any:
        if threading.current_thread().name == "first":
            first_inside.set()
            time.sleep(0.3)  # the first client holds its pool edit open
        return real_add(*args, **kw)

    monkeypatch.setattr(predevice_api, "add_gpu_to_group", slow_add)
    requests.delete(f"{sim.url}/_sim/calls", timeout=5).raise_for_status()
    failures: list[BaseException] = []

    def compose(machine: str, gpu: str) -> None:
        try:
            with make_client(sim.url) as c:
                c.compose(machine, [gpu])
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    first = threading.Thread(target=compose, args=("blade-slot-1", "gpu0"), name="first")
    second = threading.Thread(target=compose, args=("blade-slot-2", "gpu1"), name="second")
    first.start()
    assert first_inside.wait(5)
    second.start()
    first.join(10)
    second.join(10)
    assert failures == []
    refused = [c for c in _calls(sim) if c["path"] == "pool/edit" and c["status"] == 409]
    assert refused == []
    assert sim.gpu("gpu0")["mach_id"] is not None and sim.gpu("gpu1")["mach_id"] is not None


# ------------------------------------------------------------------ 4. asynchronous answers
def _violations(sim: Sim) -> list[str]:
    return sim.state()["violations"]


def test_every_change_answered_202_is_polled_before_the_next_step(sim: Sim) -> None:
    """LiqidClientBase.java:176-232: on 202 poll data[0].links[0].href until 404 (or not Pending)."""
    for method in ("POST", "PUT", "DELETE"):
        sim.fault(kind="async", method=method, delay_seconds=0.2, times=None)
    with make_client(sim.url, job_poll_interval=0.05) as c:
        c.compose("blade-slot-1", ["gpu0", "gpu2"])
        assert sim.gpu("gpu0")["mach_id"] == sim.machine_id("blade-slot-1")
        c.decompose("blade-slot-1", ["gpu0"])
        assert sim.gpu("gpu0")["mach_id"] is None
    assert _violations(sim) == []
    assert sum(1 for x in _calls(sim) if x["status"] == 202) >= 10


def test_a_failed_job_is_cancelled_only_after_it_ended(sim: Sim) -> None:
    sim.fault(kind="async", method="POST", path="relate/gpu", delay_seconds=0.3, fail=True)
    with (
        make_client(sim.url, job_poll_interval=0.05, retries=0) as c,
        pytest.raises(errors.DirectorJobFailedError),
    ):
        c.compose("blade-slot-1", ["gpu2"])
    assert _violations(sim) == []
    assert "POST fabric/edit/cancel" in _changes(_calls(sim))
    assert sim.gpu("gpu2")["mach_id"] is None and sim.state()["edits"] == {}


def test_no_cancel_while_a_job_still_runs() -> None:
    s = start_sim()
    try:
        s.fault(kind="async", method="POST", path="fabric/reprogram", delay_seconds=1.5)
        with make_client(s.url, job_poll_interval=0.05, job_timeout=0.3) as c:
            with pytest.raises(errors.DirectorJobRunningError):
                c.compose("blade-slot-1", ["gpu2"])
        assert "POST fabric/edit/cancel" not in _changes(_calls(s))
        assert _violations(s) == []
        time.sleep(1.5)
        assert s.gpu("gpu2")["mach_id"] == s.machine_id("blade-slot-1")  # the job finished on its own
    finally:
        s.server.stop()


@responses.activate
def test_transport_polls_the_job_link_until_404() -> None:
    accepted = load_fixture("async_accepted.json")["body"]
    job = accepted["response"]["data"][0]["links"][0]["href"]
    responses.add("POST", ROOT + "fabric/edit", json=accepted, status=202)
    responses.add("GET", job, json=load_fixture("async_status.json")["body"])
    responses.add("GET", job, json=load_fixture("async_status.json")["body"])
    responses.add("GET", job, json=load_fixture("error_not_found.json")["body"], status=404)
    with DirectorClient(BASE, username="u", password="p", job_poll_interval=0.0) as c:
        c._t.request("POST", "fabric/edit", json={})
    assert [call.request.method for call in responses.calls] == ["POST", "GET", "GET", "GET"]


# ------------------------------------------------------------------ 5. smaller ones
def test_predevice_is_read_with_grp_id(sim: Sim) -> None:
    """LiqidClient.java:1378-1393: getPreDevices requires and sends grp_id."""
    with make_client(sim.url) as c:
        c.gpus()
        c.compose("blade-slot-1", ["gpu2"])
    reads = [x for x in _calls(sim) if x["path"] == "predevice"]
    assert reads and all("grp_id" in x["query"] for x in reads)


def test_success_envelope_has_errors_null(sim: Sim) -> None:
    """liqidsdk-go client.go:491 fails a call whose errors field is not nil (so [] would fail)."""
    r = requests.get(f"{sim.url}/liqid/api/v2/group", auth=(USER, PASSWORD), timeout=5)
    assert r.json()["response"]["errors"] is None


def test_fixed_digest_label_is_deleted_before_it_is_created(sim: Sim) -> None:
    """liqidsdk-go client.go:259-263 and LiqidClientBase.java:165-172 (login deletes the label first)."""
    with make_client(sim.url, use_digest=True) as c:
        c.groups()
    seen = [f"{x['method']} {x['path']}" for x in _calls(sim)]
    assert seen[:3] == ["DELETE digest/composable-gpu", "POST digest/composable-gpu", "GET group"]
    assert seen[-1] == "DELETE digest/composable-gpu"
    assert sim.state()["digests"] == []


@responses.activate
def test_edit_already_open_is_a_conflict_by_liqids_message() -> None:
    """MockLiqidClient.java:1622 ("Machine 0x%08x is already being edited"); the code is not HTTP-like."""
    machine = load_fixture("machine.json")["body"]["response"]["data"][0]
    body = {
        "response": {
            "code": 1,
            "errors": [
                {"code": 1, "message": "Machine 0x00000001 is already being edited", "type": "LiqidException"}
            ],
            "data": [],
        }
    }
    responses.add("POST", ROOT + "fabric/edit", json=body, status=200)
    with _offline_client() as c, pytest.raises(errors.DirectorConflictError):
        from dynamic_providers.director.api import fabric as fabric_api
        from dynamic_providers.director.models import Machine

        fabric_api.open_edit(c._t, machine=Machine.model_validate(machine))


def test_a_pool_edit_left_open_is_waited_for_then_reported(sim: Sim) -> None:
    """A crashed client's pool edit: the compose waits ``edit_wait``, then fails without changing
    anything; ``cancel_pool_edit`` clears it (LiqidClient.java:653-667)."""
    requests.post(f"{sim.url}/_sim/faults", json={"kind": "open_pool_edit", "group": "gpu-pool"}, timeout=5)
    before = sim.fabric_state()
    with make_client(sim.url) as c:
        with pytest.raises(errors.DirectorConflictError, match="pool of group gpu-pool is still being"):
            c.compose("blade-slot-1", ["gpu0"])
        assert sim.fabric_state() == before
        assert "POST fabric/edit" not in _changes(_calls(sim))
        c.cancel_pool_edit("gpu-pool")
        c.compose("blade-slot-1", ["gpu0"])
    assert sim.gpu("gpu0")["mach_id"] == sim.machine_id("blade-slot-1")
