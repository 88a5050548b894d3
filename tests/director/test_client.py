"""DirectorClient against the simulator over real HTTP: reads, transactions, every injected fault."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import requests

from dynamic_providers.director import client as client_mod
from dynamic_providers.director import errors
from dynamic_providers.director.client import DirectorClient, edits_left_open, inherit_edits_left_open

from .conftest import Sim, make_client


def _names(gpus: list) -> list[str]:
    return [g.name for g in gpus]


# ---------------------------------------------------------------------------- reads
def test_gpus_join_status_info_and_placement(client: DirectorClient) -> None:
    gpus = {g.name: g for g in client.gpus()}
    assert list(gpus) == [f"gpu{i}" for i in range(10)]
    g0, g4, g7, g8, g9 = gpus["gpu0"], gpus["gpu4"], gpus["gpu7"], gpus["gpu8"], gpus["gpu9"]
    assert (g0.model, g0.director_model, g0.vendor, g0.memory_mib) == (
        "Tesla-T4",
        "Tesla T4",
        "NVIDIA Corporation",
        15360,
    )
    assert g4.model == "NVIDIA-A100-PCIE-40GB" and g4.memory_mib == 40960
    assert g0.in_system_pool and not g0.attached and g0.healthy
    assert (g7.group, g7.machine, g7.attached) == ("gpu-pool", "blade-slot-4", True)
    assert (g8.group, g8.machine) == ("reserved", None)
    assert not g9.healthy
    assert len({g.swit_gid for g in gpus.values()}) == 3
    assert all(g.fabr_gid and g.dev_id and g.port_gid for g in gpus.values())


def test_free_gpus_by_group_and_attached_gpus(client: DirectorClient) -> None:
    assert _names(client.free_gpus()) == ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu8"]
    assert _names(client.free_gpus("gpu-pool")) == ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6"]
    assert _names(client.free_gpus("reserved")) == ["gpu0", "gpu1", "gpu3", "gpu4", "gpu5", "gpu6", "gpu8"]
    assert _names(client.attached_gpus("blade-slot-4")) == ["gpu7"]
    assert client.machine("blade-slot-2").mach_id == client.machine(2).mach_id == 2
    assert client.group("reserved").grp_id == 2
    assert client.machine_details("blade-slot-4").gpu_count == 1
    # LIQID DeviceType values (liqidsdk-go enums_gen.go:114,122)
    assert {d.device_type for d in client.device_statuses()} == {"compute", "gpu"}


def test_unknown_machine_group_gpu_are_not_found_with_the_known_names(client: DirectorClient) -> None:
    with pytest.raises(errors.DirectorNotFoundError, match="blade-slot-1, blade-slot-2") as info:
        client.machine("blade-slot-9")
    assert info.value.machine == "blade-slot-9"
    with pytest.raises(errors.DirectorNotFoundError, match="gpu-pool, reserved"):
        client.group("nope")
    with pytest.raises(errors.DirectorNotFoundError, match="gpu42") as info:
        client.compose("blade-slot-1", ["gpu42"])
    assert info.value.device == "gpu42"


# ---------------------------------------------------------------------------- transactions
def test_compose_moves_pool_attaches_and_is_idempotent(sim: Sim, client: DirectorClient) -> None:
    assert client.compose("blade-slot-1", ["gpu0", "gpu2"]) is None
    got = client.attached_gpus("blade-slot-1")
    assert _names(got) == ["gpu0", "gpu2"] and all(g.machine == "blade-slot-1" for g in got)
    assert sim.gpu("gpu0")["grp_id"] == 1  # moved from the system pool into gpu-pool
    assert sim.calls("POST predevice/gpu") == 1
    assert sim.calls("POST fabric/reprogram") == 1
    assert sim.state()["edits"] == {}
    client.compose("blade-slot-1", ["gpu0", "gpu2"])
    assert _names(client.attached_gpus("blade-slot-1")) == ["gpu0", "gpu2"]
    assert sim.calls("POST fabric/edit") == 1  # nothing to do the second time


def test_before_change_runs_after_the_reads_and_before_the_first_change(
    sim: Sim, client: DirectorClient
) -> None:
    """The compose calls ``before_change`` once, when it has read the fabric and changed
    nothing yet; what it raises stops the compose with the fabric untouched."""
    changes_seen: list[list[str]] = []

    tag_reads: list[int] = []

    def before_change() -> None:
        counters = sim.state()["counters"]
        changes_seen.append(sorted(k for k in counters if not k.startswith("GET ")))
        tag_reads.append(sum(n for k, n in counters.items() if k.startswith("GET device/info/gpu")))

    client.compose("blade-slot-1", ["gpu0"], owner_tag="gpu-composer", before_change=before_change)
    assert changes_seen == [[]]  # called once, with only reads behind it
    assert tag_reads[0] >= 1  # the owner-tag read too: the caller's write overlaps every read
    assert sim.calls("GET status/gpu") >= 1 and sim.calls("POST fabric/reprogram") == 1
    client.compose("blade-slot-1", ["gpu0"], before_change=before_change)
    assert len(changes_seen) == 1  # nothing left to attach: not called

    class Refused(Exception):
        pass

    def refuse() -> None:
        raise Refused

    before = sim.fabric_state()
    with pytest.raises(Refused):
        client.compose("blade-slot-1", ["gpu1"], owner_tag="gpu-composer", before_change=refuse)
    assert sim.fabric_state() == before


def test_a_compose_takes_status_records_another_client_read_and_reads_again_after_a_failure(
    sim: Sim,
) -> None:
    """With ``reuse_statuses_seconds`` a compose takes its GPUs' ``status/gpu`` records from the
    whole list another client of the process read, reads ``GET group`` once, and still reads
    ``predevice``; after a failed transaction its retry, and the next compose, read the list."""
    with make_client(sim.url) as reader, make_client(sim.url, reuse_statuses_seconds=30.0) as c:
        reader.gpus()  # the background refresh's whole read
        before = {k: sim.calls(k) for k in ("GET status/gpu", "GET group", "GET predevice")}
        c.compose("blade-slot-1", ["gpu0"])
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu0"]
        assert sim.calls("GET status/gpu") - before["GET status/gpu"] == 1  # attached_gpus' read only
        assert sim.calls("GET group") - before["GET group"] == 2  # the compose's one, attached_gpus' one
        assert sim.calls("GET predevice") > before["GET predevice"]  # placement is always read
        reader.gpus()
        sim.fault(kind="error", method="POST", path="relate/gpu", status=500, times=1)
        before = sim.calls("GET status/gpu")
        c.compose("blade-slot-1", ["gpu1"])  # fails once, retried from a fresh read
        assert sim.calls("GET status/gpu") - before == 1
        c.compose("blade-slot-1", ["gpu2"])  # the failure dropped the shared list
        assert sim.calls("GET status/gpu") - before == 2
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu0", "gpu1", "gpu2"]
    with make_client(sim.url) as plain:
        plain.gpus()
        before = sim.calls("GET status/gpu")
        plain.compose("blade-slot-2", ["gpu3"])  # reuse is off by default
        assert sim.calls("GET status/gpu") - before == 1


def test_decompose_leaves_gpus_in_the_group_pool_and_skips_detached(sim: Sim, client: DirectorClient) -> None:
    client.compose("blade-slot-1", ["gpu0", "gpu1"])
    client.decompose("blade-slot-1", ["gpu1", "gpu3"])  # gpu3 was never there
    assert _names(client.attached_gpus("blade-slot-1")) == ["gpu0"]
    assert sim.gpu("gpu1")["grp_id"] == 1 and sim.gpu("gpu1")["mach_id"] is None
    client.decompose("blade-slot-1", ["gpu1"])  # already detached: no transaction
    assert sim.calls("DELETE relate/gpu") == 1
    assert client.release_to_system_pool(["gpu1", "gpu0", "gpu3"]) == ["gpu1"]
    assert sim.gpu("gpu1")["grp_id"] is None


def test_the_dev_lab_scenario_two_gpus_move_between_hosts(dev_sim: Sim) -> None:
    with make_client(dev_sim.url) as c:
        free = _names(c.free_gpus("gpu-pool"))
        assert free == ["gpu0", "gpu1"]
        c.compose("blade-slot-1", free)
        assert c.free_gpus("gpu-pool") == []
        c.decompose("blade-slot-1", free)
        c.compose("blade-slot-2", free)
        assert _names(c.attached_gpus("blade-slot-2")) == ["gpu0", "gpu1"]
        assert _names(c.attached_gpus("blade-slot-1")) == []


@pytest.mark.parametrize(
    ("device", "match"),
    [("gpu7", "attached to machine blade-slot-4"), ("gpu8", "pool of group reserved")],
)
def test_compose_refuses_gpus_held_elsewhere_and_changes_nothing(
    sim: Sim, client: DirectorClient, device: str, match: str
) -> None:
    before = sim.fabric_state()
    with pytest.raises(errors.DirectorConflictError, match=match) as info:
        client.compose("blade-slot-1", ["gpu0", device])
    assert (info.value.machine, info.value.device) == ("blade-slot-1", device)
    assert sim.fabric_state() == before


# ---------------------------------------------------------------------------- faults
def test_5xx_on_reads_is_retried_transparently(sim: Sim, client: DirectorClient) -> None:
    sim.fault(kind="error", method="GET", path="status/gpu", status=503, times=2)
    assert len(client.gpus()) == 10
    assert sim.calls("GET status/gpu") == 3


def test_5xx_on_reads_beyond_retries_is_a_server_error(sim: Sim, client: DirectorClient) -> None:
    sim.fault(kind="error", method="GET", path="machine", status=500, times=None, message="db down")
    with pytest.raises(errors.DirectorServerError, match="db down") as info:
        client.machine("blade-slot-1")
    assert info.value.transient and info.value.status == 500


def test_relate_failure_cancels_then_retries_from_fresh_state(sim: Sim, client: DirectorClient) -> None:
    sim.fault(kind="error", method="POST", path="relate/gpu", status=500, times=1)
    client.compose("blade-slot-1", ["gpu2", "gpu3"])
    assert _names(client.attached_gpus("blade-slot-1")) == ["gpu2", "gpu3"]
    assert sim.calls("POST fabric/edit/cancel") == 1
    assert sim.calls("POST fabric/edit") == 2
    assert sim.calls("POST fabric/reprogram") == 1
    assert sim.state()["edits"] == {}


def test_relate_failing_every_time_rolls_everything_back(sim: Sim, client: DirectorClient) -> None:
    before = sim.fabric_state()
    sim.fault(kind="error", method="POST", path="relate/gpu", status=500, times=None, message="switch busy")
    with pytest.raises(errors.DirectorServerError, match="switch busy") as info:
        client.compose("blade-slot-1", ["gpu0", "gpu1"])
    assert (info.value.method, info.value.path, info.value.machine) == ("POST", "relate/gpu", "blade-slot-1")
    assert sim.calls("POST fabric/edit") == client.retries + 1
    assert sim.fabric_state() == before  # pool moves undone, no edit open


def test_reprogram_answer_lost_after_it_took_effect_is_not_resent(sim: Sim) -> None:
    sim.fault(kind="delay", method="POST", path="fabric/reprogram", delay_seconds=1.0, after=True)
    with make_client(sim.url, timeout=0.3, reprogram_timeout=0.3) as c:
        c.compose("blade-slot-1", ["gpu2"])
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu2"]
    assert sim.calls("POST fabric/reprogram") == 1
    assert sim.calls("POST relate/gpu") == 1
    assert sim.gpu("gpu2")["mach_id"] == sim.machine_id("blade-slot-1")


def test_request_timeout_before_the_change_is_retried_after_reading_state(sim: Sim) -> None:
    sim.fault(kind="delay", method="POST", path="relate/gpu", delay_seconds=0.6)
    with make_client(sim.url, timeout=0.3) as c:
        c.compose("blade-slot-1", ["gpu2"])
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu2"]
    assert sim.calls("POST fabric/edit/cancel") == 1
    assert sim.state()["edits"] == {}


def test_fabric_edit_opened_but_its_answer_lost_is_cancelled(sim: Sim) -> None:
    # The Director opens the edit and answers after the client's timeout: the next opening,
    # refused, cancels it once no job of it can run any more (job_timeout), or the machine's
    # edit stays open and every later edit gets 409.
    sim.fault(kind="delay", method="POST", path="fabric/edit", delay_seconds=0.6, after=True)
    with make_client(sim.url, timeout=0.3, edit_wait=2.0, job_timeout=0.8) as c:
        c.compose("blade-slot-1", ["gpu2"])
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu2"]
    assert sim.calls("POST fabric/edit/cancel") == 1
    assert sim.state()["edits"] == {}


def test_pool_edit_opened_but_its_answer_lost_is_cancelled(sim: Sim) -> None:
    sim.fault(kind="delay", method="POST", path="pool/edit", delay_seconds=0.6, after=True)
    with make_client(sim.url, timeout=0.3, edit_wait=2.0, job_timeout=0.8) as c:
        c.compose("blade-slot-1", ["gpu0"])  # from the system pool: a pool transaction first
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu0"]
    assert sim.calls("POST pool/cancel") == 1
    assert sim.state()["pool_edits"] == {} and sim.state()["edits"] == {}


def test_a_fabric_edit_whose_opening_job_failed_is_cancelled(sim: Sim) -> None:
    # fabric/edit answers 202 and its job ends in FAILURE, the edit open: the job is over, so the
    # client cancels the edit at once. Left open, every later edit on the machine got 409 until
    # something cancelled it (the soak found one open 91 s).
    sim.fault(kind="async", method="POST", path="fabric/edit", delay_seconds=0.1, fail=True, times=1)
    with make_client(sim.url, retries=0, edit_wait=0.5) as c:
        with pytest.raises(errors.DirectorJobFailedError):
            c.compose("blade-slot-1", ["gpu2"])
        assert sim.state()["edits"] == {}
        c.compose("blade-slot-1", ["gpu2"])  # the machine is free again
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu2"]
    assert sim.calls("POST fabric/edit/cancel") == 1


def test_a_pool_edit_whose_opening_job_failed_is_cancelled(sim: Sim) -> None:
    sim.fault(kind="async", method="POST", path="pool/edit", delay_seconds=0.1, fail=True, times=1)
    with make_client(sim.url, retries=0, edit_wait=0.5) as c:
        with pytest.raises(errors.DirectorJobFailedError):
            c.compose("blade-slot-1", ["gpu0"])  # from the system pool: a pool transaction first
        assert sim.state()["pool_edits"] == {}
        c.compose("blade-slot-1", ["gpu0"])
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu0"]
    assert sim.calls("POST pool/cancel") == 1


def test_edit_whose_answer_was_lost_while_its_job_ran_is_cancelled_at_the_next_opening(sim: Sim) -> None:
    # fabric/edit answers 202 with a job, too late to be seen: no cancel while the job may run
    # (the simulator records one as a violation), one after the longest job wait.
    sim.fault(kind="async", method="POST", path="fabric/edit", delay_seconds=1.0, times=1)
    sim.fault(kind="delay", method="POST", path="fabric/edit", delay_seconds=0.6, after=True, times=1)
    with make_client(sim.url, timeout=0.3, edit_wait=3.0, job_timeout=1.5) as c:
        c.compose("blade-slot-1", ["gpu2"])
        assert _names(c.attached_gpus("blade-slot-1")) == ["gpu2"]
    assert sim.state()["edits"] == {}
    assert sim.state()["violations"] == []


def test_an_edit_left_open_by_a_process_that_died_is_cancelled_by_the_one_it_handed_over_to(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old leader's fabric/edit answer is lost and it dies before its next opening: what it
    # hands over (edits_left_open, written into the Lease) lets the new leader cancel the edit once
    # no job of it can still run; without it the new leader gets 409 for good.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    sim.fault(kind="delay", method="POST", path="fabric/edit", delay_seconds=0.6, after=True, times=1)
    with make_client(sim.url, timeout=0.3, retries=0) as old, pytest.raises(errors.DirectorUnavailableError):
        old.compose("blade-slot-1", ["gpu2"])
    handed = edits_left_open(sim.url)
    assert list(handed) == [f"machine:{sim.machine_id('blade-slot-1')}"]
    assert abs(handed[f"machine:{sim.machine_id('blade-slot-1')}"] - time.time()) < 5
    time.sleep(0.4)  # the Director opened the edit after the old leader gave up on the answer
    assert sim.state()["edits"] != {}
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})  # a new process
    with make_client(sim.url, edit_wait=0.5, job_timeout=1.0) as new:
        with pytest.raises(errors.DirectorConflictError, match="still open on machine blade-slot-1"):
            new.compose("blade-slot-1", ["gpu2"])
        inherit_edits_left_open(sim.url + "/", handed)
        new.compose("blade-slot-1", ["gpu2"])
        assert _names(new.attached_gpus("blade-slot-1")) == ["gpu2"]
    assert sim.calls("POST fabric/edit/cancel") == 1
    assert sim.state()["edits"] == {}


def test_an_edit_handed_over_but_closed_does_not_hold_up_the_new_leader(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old leader closed its edit before it stopped: the new one's opening goes through at once,
    # not after the job timeout, and nothing is cancelled.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    monkeypatch.setattr(client_mod, "_INHERITED", set())
    inherit_edits_left_open(sim.url, {f"machine:{sim.machine_id('blade-slot-1')}": time.time()})
    t0 = time.monotonic()
    with make_client(sim.url, edit_wait=0.5, job_timeout=300) as c:
        c.compose("blade-slot-1", ["gpu2"])
    assert time.monotonic() - t0 < 10
    assert sim.calls("POST fabric/edit/cancel") == 0
    assert edits_left_open(sim.url) == {}


def test_reprogram_failing_half_way_once_converges(sim: Sim, client: DirectorClient) -> None:
    sim.fault(kind="reprogram_half")
    client.compose("blade-slot-1", ["gpu0", "gpu1"])
    assert _names(client.attached_gpus("blade-slot-1")) == ["gpu0", "gpu1"]
    assert sim.calls("POST fabric/reprogram") == 2
    assert sim.calls("POST relate/gpu") == 3  # 2, then only the one still missing
    assert sim.state()["edits"] == {}


def test_reprogram_failing_half_way_on_every_attempt_rolls_back(sim: Sim, client: DirectorClient) -> None:
    before = sim.fabric_state()
    sim.fault(kind="reprogram_half", times=client.retries + 1)  # every compose attempt; the rollback works
    with pytest.raises(errors.DirectorServerError, match="failed after") as info:
        client.compose("blade-slot-1", ["gpu0", "gpu1", "gpu3"])
    assert info.value.path == "fabric/reprogram" and info.value.machine == "blade-slot-1"
    assert sim.fabric_state() == before
    assert sim.calls("DELETE relate/gpu") >= 1  # what the failed attempts left attached was detached


def test_edit_left_open_gives_a_clear_conflict_then_works_once_cancelled(
    sim: Sim, client: DirectorClient
) -> None:
    sim.fault(kind="open_edit", machine="blade-slot-1")
    before = sim.fabric_state()
    t0 = time.monotonic()
    with pytest.raises(errors.DirectorConflictError, match="still open on machine blade-slot-1") as info:
        client.compose("blade-slot-1", ["gpu0"])
    assert time.monotonic() - t0 < 3
    assert "cancel_edit" in str(info.value) and info.value.status == 409
    assert sim.fabric_state() == before
    client.cancel_edit("blade-slot-1")
    client.compose("blade-slot-1", ["gpu0"])
    assert _names(client.attached_gpus("blade-slot-1")) == ["gpu0"]


def test_an_edit_that_closes_while_waiting_is_waited_for(sim: Sim) -> None:
    sim.fault(kind="open_edit", machine="blade-slot-1")

    def other_client_finishes() -> None:
        time.sleep(0.3)
        with make_client(sim.url) as other:
            other.cancel_edit("blade-slot-1")

    t = threading.Thread(target=other_client_finishes)
    t.start()
    try:
        with make_client(sim.url, edit_wait=5.0) as c:
            c.compose("blade-slot-1", ["gpu0"])
            assert _names(c.attached_gpus("blade-slot-1")) == ["gpu0"]
    finally:
        t.join()
    assert sim.calls("POST fabric/edit") >= 2


def test_envelope_only_failure_is_classified(sim: Sim, client: DirectorClient) -> None:
    sim.fault(
        kind="error",
        method="POST",
        path="fabric/edit",
        status=409,
        http_status=200,
        times=None,
        message="fabric locked by maintenance",
    )
    with pytest.raises(errors.DirectorConflictError, match="fabric locked by maintenance") as info:
        client.compose("blade-slot-1", ["gpu2"])
    assert info.value.status == 200


def test_director_down_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = make_client(f"http://127.0.0.1:{port}", retries=1)
    t0 = time.monotonic()
    with pytest.raises(errors.DirectorUnavailableError, match="cannot reach") as info:
        c.gpus()
    assert time.monotonic() - t0 < 5 and info.value.transient
    assert not isinstance(info.value, errors.DirectorTimeoutError)


def test_wrong_password_is_an_auth_error(sim: Sim) -> None:
    with pytest.raises(errors.DirectorAuthError, match="Authentication required"):
        make_client(sim.url, password="nope").groups()
    with pytest.raises(errors.DirectorAuthError):
        make_client(sim.url, password="nope", use_digest=True).groups()


def test_digest_session_reauthenticates_after_expiry_and_is_deleted_on_close(sim: Sim) -> None:
    with make_client(sim.url, use_digest=True) as c:
        assert len(c.groups()) == 2
        assert len(sim.state()["digests"]) == 1
        requests.post(f"{sim.url}/_sim/digests/expire", timeout=5).raise_for_status()
        assert len(c.machines()) == 4  # one 401, one new digest, then success
        assert sim.calls("POST " + "digest/" + sim.state()["digests"][0]) == 2
    assert sim.state()["digests"] == []


def test_a_compose_reads_the_fabric_once_and_not_the_models(sim: Sim, client: DirectorClient) -> None:
    """One read of where the GPUs are (status/gpu, and predevice once per group: the Director
    wants ``grp_id``) per transaction, no model read (device/info/gpu); the check after the
    reprogram reads only the machine's devices (``predevice?grp_id=&mach_id=``). With 1,000 GPUs
    a full read costs ~0.2 s of CPU."""
    client.machine("blade-slot-1")  # the machine/group lookups are not what is counted here
    before = {k: sim.calls(k) for k in ("GET status/gpu", "GET device/info/gpu", "GET predevice")}
    client.compose("blade-slot-1", ["gpu0", "gpu2"])
    after = {k: sim.calls(k) - before[k] for k in before}
    groups = len(client.groups())
    assert after == {"GET status/gpu": 1, "GET device/info/gpu": 0, "GET predevice": groups + 1}
    got = client.attached_gpus("blade-slot-1")
    assert _names(got) == ["gpu0", "gpu2"] and all(g.group == "gpu-pool" for g in got)


def test_a_machine_is_looked_up_by_name_not_by_listing_every_machine(client: DirectorClient) -> None:
    """A name is resolved with ``GET machine?mach_name=`` (LiqidClient.java:2555-2565
    ``getMachineByName``), an id with ``?mach_id=``: one record instead of the whole fleet."""

    def no_full_list() -> list:
        raise AssertionError("listed every machine again")

    client.machines = no_full_list  # type: ignore[method-assign]
    first = client.machine("blade-slot-2")
    again = client.machine("blade-slot-2")
    assert (again.mach_id, again.mach_name) == (first.mach_id, first.mach_name)
    assert client.machine(first.mach_id).mach_name == "blade-slot-2"
    with pytest.raises(AssertionError, match="listed every machine"):
        client.machine("blade-slot-9")  # unknown names still take the full list (and its error)
