"""The sweep that cancels the Director edits this process may have left open, on the simulator
over real HTTP: edits handed over by a previous leader, edits whose own opening lost its answer,
the composer process running it from its start, and the races it must not lose to a transaction."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

import composer.__main__ as entry
from composer.shell import edit_handover
from composer.shell.edit_handover import sweep
from composer.shell.metrics import Metrics
from dynamic_providers.director import client as client_mod
from dynamic_providers.director import errors
from dynamic_providers.director.client import edits_left_open, inherit_edits_left_open

from .conftest import PASSWORD, USER, Sim, make_client


def _compose_while_relates_job_outlasts_the_wait(sim: Sim, *, seconds: float, job_timeout: float) -> None:
    """A compose onto blade-slot-1 whose relate/gpu answers 202 with a job of ``seconds``,
    longer than the client's ``job_timeout``: DirectorJobRunningError, the fabric edit left open."""
    sim.fault(kind="async", method="POST", path="relate/gpu", delay_seconds=seconds, times=1)
    with (
        make_client(sim.url, retries=0, job_timeout=job_timeout, job_poll_interval=0.05) as c,
        pytest.raises(errors.DirectorJobRunningError),
    ):
        c.compose("blade-slot-1", ["gpu2"])


def test_edits_handed_over_that_no_opening_comes_to_are_cancelled_by_the_sweep(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Killed while a fabric edit and a pool edit were open (jobs past the old leader's patience):
    # the new leader opens neither, and the sweep cancels both once no job of them can run.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    sim.fault(kind="open_edit", machine="blade-slot-2")
    slot2 = sim.machine_id("blade-slot-2")
    group = next(m["grp_id"] for m in sim.state()["machines"] if m["name"] == "blade-slot-2")
    name = next(g["name"] for g in sim.state()["groups"] if g["grp_id"] == group)
    sim.fault(kind="open_pool_edit", group=name)
    handed = {f"machine:{slot2}": time.time(), f"group:{group}": time.time()}
    inherit_edits_left_open(sim.url, handed)
    with make_client(sim.url, job_timeout=0.6) as c:
        assert c.cancel_edits_left_open() == []  # a job of them may still run
    assert sim.state()["edits"] != {}
    _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=0.6))
    assert sim.state()["edits"] == {} and sim.state()["pool_edits"] == {}
    assert sim.calls("POST fabric/edit/cancel") == 1 and sim.calls("POST pool/cancel") == 1
    assert edits_left_open(sim.url) == {}


def _sweep_until_closed(sim: Sim, client, *, leading=lambda: True, within: float = 10.0) -> bool:
    """Run the composer's sweep on a thread until the simulator has no edit open (True) or
    ``within`` seconds pass (False); the sweep is stopped either way."""
    stop = threading.Event()
    t = threading.Thread(
        target=sweep, args=(sim.url, client), kwargs={"leading": leading, "every": 0.1, "stop": stop}
    )
    t.start()
    try:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            st = sim.state()
            if not st["edits"] and not st["pool_edits"] and not edits_left_open(sim.url):
                return True
            time.sleep(0.05)
        return False
    finally:
        stop.set()
        t.join(5)


def test_a_pool_edit_whose_own_opening_lost_its_answer_is_cancelled_by_the_sweep_alone(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pool/edit is applied but its answer comes too late: the Director holds the edit open and
    # refuses every other client's pool edit of the group until this process cancels it. No later
    # compose comes to open it again; the sweep cancels it once its job can no longer run, and
    # only while this process leads.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    sim.fault(kind="delay", method="POST", path="pool/edit", delay_seconds=0.6, after=True, times=1)
    with make_client(sim.url, timeout=0.3, retries=0) as c, pytest.raises(errors.DirectorUnavailableError):
        c.compose("blade-slot-1", ["gpu0"])  # from the system pool: a pool transaction first
    time.sleep(0.4)
    assert sim.state()["pool_edits"] != {}
    group = next(iter(edits_left_open(sim.url)))
    assert group.startswith("group:")
    assert not _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=0.6), leading=lambda: False,
                                   within=1.5)
    assert sim.calls("POST pool/cancel") == 0  # a follower sends nothing
    assert _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=0.6))
    assert sim.calls("POST pool/cancel") == 1
    assert sim.state()["violations"] == []  # nothing was sent while its job could still run


def test_the_sweep_never_cancels_an_edit_a_transaction_of_this_process_holds(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lost answer on machine blade-slot-1 fell due; meanwhile a compose of this process holds
    # the machine's edit lock (it opened a new edit of its own): the sweep leaves the key to it.
    # A key recorded anew since it fell due is left too.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    slot1 = f"machine:{sim.machine_id('blade-slot-1')}"
    client_mod._left_open(sim.url, slot1, mark=True)
    sim.fault(kind="open_edit", machine="blade-slot-1")
    time.sleep(0.7)
    with make_client(sim.url, job_timeout=0.6) as c:
        with client_mod.edit_lock(sim.url, slot1):
            assert c.cancel_edits_left_open() == []
        assert sim.state()["edits"] != {} and sim.calls("POST fabric/edit/cancel") == 0
        assert edits_left_open(sim.url) != {}
        real = client_mod._left_open

        def marked_anew_after_the_due_check(director, key, *, mark=None):
            if mark is None:  # the re-check under the lock sees a newer lost answer
                client_mod._LEFT_OPEN[(director, key)] = time.monotonic()
            return real(director, key, mark=mark)

        monkeypatch.setattr(client_mod, "_left_open", marked_anew_after_the_due_check)
        assert c.cancel_edits_left_open() == []
        assert sim.calls("POST fabric/edit/cancel") == 0
        monkeypatch.setattr(client_mod, "_left_open", real)
        time.sleep(0.7)
        assert c.cancel_edits_left_open() == [slot1]
    assert sim.state()["edits"] == {} and sim.calls("POST fabric/edit/cancel") == 1


def test_the_composer_process_cancels_an_edit_its_own_lost_answer_left_open(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `python -m composer` (no leader election, so it leads) lost the answer to a pool/edit of
    # its own, and no compose of that group follows: the sweep it starts with the process cancels
    # the edit once the Director's job can no longer run, while the loop runs. The loop and the
    # cluster side are replaced; the Director client, its settings and the sweep are the real ones.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    monkeypatch.setattr(edit_handover, "SWEEP_EVERY_SECONDS", 0.1)
    group = next(g for g in sim.state()["groups"] if g["name"] == "gpu-pool")
    sim.fault(kind="open_pool_edit", group="gpu-pool")
    client_mod._left_open(sim.url, f"group:{group['grp_id']}", mark=True)

    class Controller:
        def close(self) -> None:
            pass

    monkeypatch.setattr(
        entry, "build", lambda settings, **_: type("W", (), {"kube": None, "metrics": Metrics(),
                                                             "controller": Controller(), "cache": None})()
    )
    seen: dict[str, Any] = {}

    def loop(ctrl: object, stop: threading.Event, **_: object) -> int:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sim.state()["pool_edits"]:
            time.sleep(0.05)
        seen["open_at_end"] = sim.state()["pool_edits"]
        return 0

    monkeypatch.setattr(entry, "run_loop", loop)
    monkeypatch.setenv("COMPOSER_LEADER_ELECTION", "false")
    monkeypatch.setenv("COMPOSER_DIRECTOR_USERNAME", USER)
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", PASSWORD)
    code = entry.main(["--director-url", sim.url, "--director-job-timeout-seconds", "0.5",
                       "--probe-port", "0", "--kubeconfig", "/nonexistent"])
    assert code == 0
    assert seen["open_at_end"] == {}
    assert sim.calls("POST pool/cancel") == 1
    assert edits_left_open(sim.url) == {}
    assert sim.state()["violations"] == []


def test_a_pool_edit_whose_cancel_failed_after_a_failed_step_is_recorded_and_swept(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pool edit opened, adding the GPU failed, and the pool/cancel after it failed too (the
    # soak's partition): the edit is open on the Director with no opening of this process to
    # come. It is recorded as left open, so the sweep cancels it once no job of it can run.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    sim.fault(kind="error", method="POST", path="predevice/gpu", status=500, times=1)
    sim.fault(kind="error", method="POST", path="pool/cancel", status=503, times=1)
    with make_client(sim.url, retries=0, job_timeout=0.6) as c, pytest.raises(errors.DirectorServerError):
        c.compose("blade-slot-1", ["gpu0"])  # from the system pool: a pool transaction first
    assert sim.state()["pool_edits"] != {}
    assert [k for k in edits_left_open(sim.url) if k.startswith("group:")]
    assert _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=0.6))
    assert sim.calls("POST pool/cancel") == 2


def test_a_fabric_edit_left_open_while_its_job_runs_is_recorded_and_swept_after_it(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # relate/gpu answers 202 and its job outlasts the client's wait: nothing is cancelled while
    # it runs (the simulator records a call sent meanwhile as a violation), and the fabric edit is
    # recorded as left open, so the sweep cancels it after the job wait, with no violation.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    _compose_while_relates_job_outlasts_the_wait(sim, seconds=1.5, job_timeout=0.4)
    assert sim.state()["edits"] != {} and sim.calls("POST fabric/edit/cancel") == 0
    assert f"machine:{sim.machine_id('blade-slot-1')}" in edits_left_open(sim.url)
    # the job ends 1.5 s after it started: a sweep with that job wait cancels after it, not before
    assert _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=1.6))
    assert sim.calls("POST fabric/edit/cancel") == 1
    assert sim.state()["violations"] == []


def test_the_sweep_keeps_an_edit_whose_cancel_got_no_answer(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sweep's cancel that fails with a server error leaves the key recorded for the next one.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    slot1 = f"machine:{sim.machine_id('blade-slot-1')}"
    sim.fault(kind="open_edit", machine="blade-slot-1")
    client_mod._left_open(sim.url, slot1, mark=True)
    sim.fault(kind="error", method="POST", path="fabric/edit/cancel", status=503, times=1)
    time.sleep(0.7)
    with make_client(sim.url, retries=0, job_timeout=0.6) as c:
        assert c.cancel_edits_left_open() == []
        assert slot1 in edits_left_open(sim.url) and sim.state()["edits"] != {}
        assert c.cancel_edits_left_open() == [slot1]
    assert sim.state()["edits"] == {} and edits_left_open(sim.url) == {}


@pytest.mark.parametrize(
    ("path", "device", "edits"),
    [("fabric/edit", "gpu2", "edits"), ("pool/edit", "gpu0", "pool_edits")],
    ids=["fabric", "pool"],
)
def test_an_edit_whose_opening_job_outlasts_the_wait_is_recorded_and_swept_after_it(
    sim: Sim, monkeypatch: pytest.MonkeyPatch, path: str, device: str, edits: str
) -> None:
    # The opening itself answers 202 and its job outlasts the client's wait: the edit opens when
    # the job ends, with no transaction left to close it. It is recorded as left open, so the
    # sweep cancels it after the job wait, and nothing is sent while the job runs.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    sim.fault(kind="async", method="POST", path=path, delay_seconds=1.0, times=1)
    with (
        make_client(sim.url, retries=0, job_timeout=0.4, job_poll_interval=0.05) as c,
        pytest.raises(errors.DirectorJobRunningError),
    ):
        c.compose("blade-slot-1", [device])  # gpu0 from the system pool: a pool edit first
    assert edits_left_open(sim.url), "the opening whose job still runs is not recorded"
    time.sleep(1.0)
    assert sim.state()[edits] != {}  # the job ended: the Director holds the edit open
    assert _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=1.2))
    assert sim.state()["violations"] == []


def test_an_edit_whose_job_runs_past_twice_the_wait_is_cancelled_only_after_the_job_ended(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # relate/gpu's job runs 2 s against a 0.4 s wait: the edit falls due 0.4 s after the wait
    # ended, while the job still runs. The sweep polls the job's link and cancels only after it
    # ended (the simulator records any change sent while the job runs as a violation).
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    monkeypatch.setattr(client_mod, "_LEFT_JOBS", {})
    _compose_while_relates_job_outlasts_the_wait(sim, seconds=2.0, job_timeout=0.4)
    assert _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=0.4))
    assert sim.calls("POST fabric/edit/cancel") == 1
    assert sim.state()["violations"] == []


@pytest.mark.parametrize(
    ("path", "device", "cancel"),
    [("relate/gpu", "gpu2", "POST fabric/edit/cancel"), ("pool/edit", "gpu0", "POST pool/cancel"),
     ("predevice/gpu", "gpu0", "POST pool/cancel")],
    ids=["relate", "pool-opening", "predevice"],
)
def test_an_edit_whose_job_could_not_be_polled_is_left_alone_until_the_job_ended(
    sim: Sim, monkeypatch: pytest.MonkeyPatch, path: str, device: str, cancel: str
) -> None:
    # A step answers 202 and the first poll of its job fails (503): the job's end is unknown, so
    # nothing is cancelled, undone or retried over it; the edit is recorded with the job's link
    # and the sweep cancels it once a poll shows the job ended.
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    monkeypatch.setattr(client_mod, "_LEFT_JOBS", {})
    sim.fault(kind="async", method="POST", path=path, delay_seconds=1.5, times=1)
    sim.fault(kind="error", method="GET", path="job/*", status=503, times=3)  # past the GET retries
    with (
        make_client(sim.url, retries=1, job_timeout=0.4, job_poll_interval=0.05) as c,
        pytest.raises(errors.DirectorServerError) as raised,
    ):
        c.compose("blade-slot-1", [device])
    assert raised.value.job is not None
    assert sim.calls(cancel) == 0 and edits_left_open(sim.url)
    assert _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=0.4))
    assert sim.calls(cancel) == 1
    assert sim.state()["violations"] == []


def _fresh_process_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """The module-wide records as a newly started process has them: empty."""
    for name in ("_LEFT_OPEN", "_LEFT_JOBS", "_EDITING", "_EDITING_JOBS"):
        monkeypatch.setattr(client_mod, name, {})
    monkeypatch.setattr(client_mod, "_INHERITED", set())


def test_a_job_the_leader_is_waiting_for_is_in_its_lease_handover(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While a transaction waits for relate/gpu's job, the Lease annotations name the edit and
    # the job's link; once the transaction is over, neither.
    _fresh_process_state(monkeypatch)
    sim.fault(kind="async", method="POST", path="relate/gpu", delay_seconds=1.0, times=1)
    handover = edit_handover.edit_handover(sim.url)
    with make_client(sim.url, job_timeout=5.0, job_poll_interval=0.05) as c:
        t = threading.Thread(target=c.compose, args=("blade-slot-1", ["gpu2"]))
        t.start()
        deadline = time.monotonic() + 5
        seen: dict[str, str] = {}
        while time.monotonic() < deadline and not seen.get(edit_handover.EDIT_JOBS_ANNOTATION):
            seen = dict(handover.annotations())
            time.sleep(0.02)
        t.join(10)
    key = f"machine:{sim.machine_id('blade-slot-1')}"
    assert json.loads(seen[edit_handover.EDIT_JOBS_ANNOTATION])[key].endswith("/job/1")
    assert key in json.loads(seen[edit_handover.EDITS_ANNOTATION])
    assert handover.annotations() == {}
    assert sim.gpu("gpu2")["mach_id"] == sim.machine_id("blade-slot-1")


def test_a_new_leader_cancels_a_handed_over_edit_only_after_its_job_ended(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old leader left a fabric edit open with relate/gpu's 2 s job still running, then
    # died. The new leader's job timeout (0.3 s) runs out long before the job ends: with the
    # job's link handed over, it polls the job and cancels the edit after it, with no violation.
    _fresh_process_state(monkeypatch)
    _compose_while_relates_job_outlasts_the_wait(sim, seconds=2.0, job_timeout=0.3)
    lease = dict(edit_handover.edit_handover(sim.url).annotations())
    assert edit_handover.EDIT_JOBS_ANNOTATION in lease
    _fresh_process_state(monkeypatch)  # the new leader's process
    edit_handover.edit_handover(sim.url).inherit(lease)
    assert _sweep_until_closed(sim, lambda: make_client(sim.url, job_timeout=0.3))
    assert sim.calls("POST fabric/edit/cancel") == 1
    assert sim.state()["violations"] == []
