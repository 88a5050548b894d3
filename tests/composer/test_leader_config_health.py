"""Leader election on a Lease (fake API with optimistic concurrency), settings, probes."""

from __future__ import annotations

import copy
import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from pydantic import ValidationError

from composer.shell.config import Settings, load
from composer.shell.edit_handover import EDITS_ANNOTATION, edit_handover
from composer.shell.health import Probes, serve
from composer.shell.kube import KubeError
from composer.shell.leader import Handover, LeaseElector
from composer.shell.metrics import Metrics
from dynamic_providers.director import client as client_mod


class FakeLeases:
    """Leases with resourceVersion checks, like the API server."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.lock = threading.Lock()

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return copy.deepcopy(self.lease)

    def create_lease(self, namespace: str, body: dict[str, Any]) -> None:
        with self.lock:
            if self.lease is not None:
                raise KubeError("POST", "leases", 409, "already exists")
            self.rv += 1
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(self.rv)

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        with self.lock:
            assert self.lease is not None
            if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
                raise KubeError("PUT", "leases", 409, "the object has been modified")
            self.rv += 1
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(self.rv)


class Mono:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def elector(api: FakeLeases, who: str, mono: Mono) -> LeaseElector:
    settings = Settings(
        director_url="http://d",
        director_password="pw",
        namespace="ns",
        lease_name="lease",
        identity=who,
        lease_duration_seconds=15,
        lease_retry_seconds=1,
    )
    return LeaseElector(api, settings, monotonic=mono)


def test_one_leader_then_takeover_after_the_lease_expires():
    api, mono = FakeLeases(), Mono()
    a, b = elector(api, "a", mono), elector(api, "b", mono)
    assert a.try_acquire_or_renew() and a.is_leader
    assert not b.try_acquire_or_renew() and not b.is_leader
    mono.t += 10
    assert a.try_acquire_or_renew()  # renewed: b keeps waiting
    mono.t += 10
    assert not b.try_acquire_or_renew()
    assert api.lease["spec"]["holderIdentity"] == "a"
    mono.t += 16  # a stopped renewing (crashed): b takes over after a full duration
    assert not a.is_leader  # past its own renew deadline a stops acting
    assert b.try_acquire_or_renew() and b.is_leader
    assert api.lease["spec"]["holderIdentity"] == "b"
    assert api.lease["spec"]["leaseTransitions"] == 1


def test_the_handover_annotations_go_with_every_write_and_reach_the_next_leader_only():
    api, mono = FakeLeases(), Mono()
    left_open = {"composer.liqid.io/director-edits-left-open": '{"machine:1": 1.5}'}
    got: list[dict[str, str]] = []
    a = elector(api, "a", mono)
    a.handover = Handover(annotations=lambda: left_open, inherit=got.append)
    b = elector(api, "b", mono)
    b.handover = Handover(annotations=dict, inherit=got.append)
    assert a.try_acquire_or_renew()
    assert api.lease["metadata"]["annotations"] == left_open
    mono.t += 5
    assert a.try_acquire_or_renew() and got == []  # its own renewal inherits nothing
    assert not b.try_acquire_or_renew() and got == []  # a follower takes nothing over
    mono.t += 16  # a died
    assert b.try_acquire_or_renew() and b.is_leader
    assert got == [left_open]
    assert api.lease["metadata"]["annotations"] == {}  # b's own (none left open) from now on


def test_the_director_edits_a_leader_left_open_reach_the_next_leaders_client(monkeypatch):
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})
    url = "http://director:8080"
    client_mod._left_open(url, "machine:3", mark=True)
    handover = edit_handover(url + "/")
    written = dict(handover.annotations())
    assert list(json.loads(written[EDITS_ANNOTATION])) == ["machine:3"]
    monkeypatch.setattr(client_mod, "_LEFT_OPEN", {})  # the next leader's process
    assert edit_handover(url).annotations() == {}
    edit_handover(url).inherit(written)
    assert client_mod._left_open(url, "machine:3") is not None
    edit_handover(url).inherit({EDITS_ANNOTATION: "not json"})  # ignored, logged


def test_racing_candidates_get_one_winner():
    api, mono = FakeLeases(), Mono()
    old = elector(api, "old", mono)
    assert old.try_acquire_or_renew()
    a, b = elector(api, "a", mono), elector(api, "b", mono)
    assert not a.try_acquire_or_renew() and not b.try_acquire_or_renew()  # both observe "old"
    mono.t += 16  # "old" died; both candidates read the same expired record...
    stale = api.read_lease("ns", "lease")

    class StaleRead:
        def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
            return copy.deepcopy(stale)

        create_lease = api.create_lease
        replace_lease = api.replace_lease

    b.api = StaleRead()
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # ...and b's write is refused (409 on resourceVersion)
    assert a.is_leader and not b.is_leader
    assert api.lease["spec"]["holderIdentity"] == "a"


def test_release_hands_over_at_once():
    api, mono = FakeLeases(), Mono()
    a, b = elector(api, "a", mono), elector(api, "b", mono)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert api.lease["spec"]["holderIdentity"] == ""
    assert b.try_acquire_or_renew()


def test_release_reads_again_when_its_own_renewal_wrote_in_between(caplog):
    """At shutdown the election thread may renew between release's read and its write: the
    409 is retried with a fresh read, the Lease is handed over and nothing is logged."""
    api, mono = FakeLeases(), Mono()
    a = elector(api, "a", mono)
    assert a.try_acquire_or_renew()
    real_replace = api.replace_lease
    renewals = []

    def renew_first(namespace: str, name: str, body: dict[str, Any]) -> None:
        if not renewals:  # the election thread's renewal lands first: body is stale now
            renewals.append(1)
            current = copy.deepcopy(api.lease)
            real_replace(namespace, name, current)
        real_replace(namespace, name, body)

    api.replace_lease = renew_first  # type: ignore[method-assign]
    a.release()
    assert api.lease["spec"]["holderIdentity"] == ""
    assert "could not release" not in caplog.text


def test_run_sets_lost_when_leadership_goes():
    api, mono = FakeLeases(), Mono()
    a = elector(api, "a", mono)
    a.retry = 0.01
    stop = threading.Event()
    changes: list[bool] = []
    t = threading.Thread(target=a.run, args=(stop,), kwargs={"on_change": changes.append})
    t.start()
    try:
        for _ in range(200):
            if changes:
                break
            threading.Event().wait(0.01)
        assert changes == [True]
        api.lease["spec"]["holderIdentity"] = "intruder"  # someone else took it
        api.rv += 1
        api.lease["metadata"]["resourceVersion"] = str(api.rv)
        assert a.lost.wait(5)
    finally:
        stop.set()
        t.join(5)
    assert changes == [True, False]


def test_settings_from_env_and_flags(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPOSER_DIRECTOR_URL", "http://director:8080")
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "s3cr3t")
    monkeypatch.setenv("COMPOSER_POOLS", '[{"name": "team-a", "quotaGpus": 4, "devices": ["gpu3"]}]')
    monkeypatch.setenv("COMPOSER_EXCLUDED_DEVICES", '["gpu7"]')
    s = load(["--idle-timeout-seconds", "30", "--units-per-gpu", '{"nvidia.com/gpu.shared": 4}'])
    assert s.idle_timeout_seconds == 30 and s.password() == "s3cr3t"
    assert "s3cr3t" not in repr(s)
    p = s.policy()
    assert p.quotas == {"team-a": 4} and p.device_pools == {"gpu3": "team-a"}
    assert p.excluded == {"gpu7"} and p.units_per_gpu == {"nvidia.com/gpu.shared": 4}
    f = tmp_path / "pw"
    f.write_text("from-file\n")
    assert load(["--director-password-file", str(f)]).password() == "from-file"


def test_settings_validation(monkeypatch):
    monkeypatch.setenv("COMPOSER_DIRECTOR_URL", "http://director:8080")
    with pytest.raises(ValidationError, match="PASSWORD"):
        Settings()
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "x")
    with pytest.raises(ValidationError):
        Settings(idle_timeout_seconds=-1)
    with pytest.raises(ValidationError):
        Settings(pools=[{"name": "a"}, {"name": "a"}])
    with pytest.raises(ValidationError, match="cache_resync_seconds must be 0"):
        Settings(cache_resync_seconds=0.5)  # a relist of the whole cluster every second
    assert Settings(cache_resync_seconds=0).cache_resync_seconds == 0
    assert Settings(cache_resync_seconds=30).cache_resync_seconds == 30


def test_probes_and_metrics_endpoints():
    now = [0.0]
    probes = Probes(stall_seconds=10, clock=lambda: now[0])
    metrics = Metrics()
    metrics.compositions.inc()
    server = serve("127.0.0.1", 0, probes, metrics.render)
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def status(path: str) -> int:
        try:
            return urllib.request.urlopen(base + path, timeout=5).status
        except urllib.error.HTTPError as exc:
            return exc.code

    try:
        assert status("/healthz") == 200
        assert status("/readyz") == 503  # no round yet
        probes.beat(ready=True, detail="leader")
        assert status("/readyz") == 200
        now[0] = 11.0  # the loop stalled
        assert status("/healthz") == 503 and status("/readyz") == 503
        body = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        assert "composer_compositions_total 1.0" in body
        assert status("/nope") == 404
    finally:
        server.shutdown()


def test_the_composer_shortens_the_interpreters_switch_interval(monkeypatch, capsys):
    """``python -m composer`` sets the 1 ms switch interval before anything else (so its
    workers get the GIL back soon after each Director or API server answer), even when the
    configuration is then refused."""
    import sys

    from composer import __main__ as entry

    calls: list[float] = []
    monkeypatch.setattr(sys, "setswitchinterval", calls.append)  # the test process keeps its own
    assert entry.main(["--idle-timeout-seconds", "-5"]) == 2
    assert "bad configuration" in capsys.readouterr().err
    assert calls == [entry.SWITCH_INTERVAL_SECONDS] and entry.SWITCH_INTERVAL_SECONDS == 0.001


def test_the_director_job_timeout_setting_reaches_the_director_client():
    from composer.run.wiring import fabric_factory

    settings = Settings(director_url="http://d", director_password="pw", director_job_timeout_seconds=60)
    client = fabric_factory(settings)()
    assert client._t.job_timeout == 60  # type: ignore[attr-defined]
    assert fabric_factory(Settings(director_url="http://d", director_password="pw"))()._t.job_timeout == 300  # type: ignore[attr-defined]
