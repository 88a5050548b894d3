"""DirectorEndpoint and the Director's preview probe against the simulator (no Pulumi engine)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from pulumi.runtime import rpc

from dynamic_providers import preflight
from dynamic_providers.director.endpoint import DirectorEndpointProvider, director_failure

from .conftest import PASSWORD, USER, Sim


@pytest.fixture(autouse=True)
def fresh_preflight(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(preflight.PREFLIGHT_ENV, raising=False)
    preflight.forget()
    yield
    preflight.forget()


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_the_probe_accepts_the_right_account_and_changes_nothing(sim: Sim) -> None:
    before = sim.fabric_state()
    assert director_failure(sim.url, username=USER, password=PASSWORD) is None
    assert sim.fabric_state() == before
    assert not sim.state()["digests"]  # Basic auth: no API key was created
    counters = sim.state()["counters"]
    assert all(call.startswith("GET ") for call in counters), counters


def test_a_wrong_password_is_one_line_naming_the_endpoint(sim: Sim) -> None:
    reason = director_failure(sim.url, username=USER, password="definitely-wrong")
    assert reason is not None and reason.startswith(f"Director {sim.url}: credentials refused")
    assert "pulumi config set --secret" in reason and "definitely-wrong" not in reason and "\n" not in reason


def test_an_unreachable_director_says_how_to_skip_the_probe() -> None:
    url = _dead_url()
    reason = director_failure(url, username=USER, password=PASSWORD)
    assert reason is not None and reason.startswith(f"Director {url}: no answer")
    assert f"{preflight.PREFLIGHT_ENV}=off" in reason


def test_the_provider_check_fails_on_a_refused_account_and_passes_unknowns(sim: Sim) -> None:
    provider = DirectorEndpointProvider()
    inputs = {"endpoint": sim.url, "username": USER, "password": "nope", "verify_tls": True}
    (failure,) = provider.check({}, inputs).failures
    assert failure.property == "endpoint" and "credentials refused" in failure.reason
    assert provider.check({}, {**inputs, "password": PASSWORD}).failures == []
    assert provider.check({}, {**inputs, "password": rpc.UNKNOWN}).failures == []
    bad = provider.check({}, {**inputs, "endpoint": "director:8080"}).failures
    assert [f.property for f in bad] == ["endpoint"] and "must be http(s)://" in bad[0].reason
