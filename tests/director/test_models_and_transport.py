"""Payload fixtures parse into the typed models; the transport maps every error shape to its exception.

The fixtures are replayed with ``responses`` (no server), so these tests pin the client to the
published shapes independently of the simulator.
"""

from __future__ import annotations

import pytest
import responses

from dynamic_providers.director import errors
from dynamic_providers.director._transport import Transport, api_root
from dynamic_providers.director.api import parse_records
from dynamic_providers.director.client import DirectorClient
from dynamic_providers.director.liqid import JOB_POLL_INTERVAL_SECONDS, JOB_TIMEOUT_SECONDS
from dynamic_providers.director.models import (
    DeviceStatus,
    DigestInfo,
    Envelope,
    GpuInfo,
    Group,
    Machine,
    MachineDetails,
    PreDevice,
    gfd_product_name,
)

from .conftest import FIXTURES, load_fixture

BASE = "http://director.test:8080"
ROOT = BASE + "/liqid/api/v2/"

RECORD_MODELS = {
    "status_gpu.json": DeviceStatus,
    "status.json": DeviceStatus,
    "device_info_gpu.json": GpuInfo,
    "group.json": Group,
    "machine.json": Machine,
    "machine_details.json": MachineDetails,
    "predevice.json": PreDevice,
    "digest.json": DigestInfo,
    "fabric_edit.json": Machine,
    "fabric_reprogram.json": Machine,
}


#: Records read only (never sent back): placeholders and string numbers are parsed, not kept.
READ_ONLY = {"device_info_gpu.json", "predevice.json"}


@pytest.mark.parametrize("name", sorted(RECORD_MODELS))
def test_fixture_records_parse_and_round_trip(name: str) -> None:
    fx = load_fixture(name)
    env = Envelope.model_validate(fx["body"])
    assert not env.failed
    records = [RECORD_MODELS[name].model_validate(r) for r in env.data]
    assert records
    if name in READ_ONLY:
        return
    # Unknown fields survive, so a record read can be sent back as a request body verbatim.
    wire = records[0].wire()
    expected = dict(env.data[0])
    if name == "digest.json":  # a SecretStr: masked when dumped, never sent back
        assert wire.pop("digest_key") == "**********"
        expected.pop("digest_key")
    assert {k: wire[k] for k in expected} == expected


def test_every_fixture_is_documented_and_classified() -> None:
    names = sorted(p.name for p in FIXTURES.glob("*.json") if p.name != "sdk_types.json")
    assert len(names) >= 30
    for name in names:
        fx = load_fixture(name)
        assert fx["description"] and fx["source"], name
        assert {"method", "path"} <= set(fx["request"]), name
        env = Envelope.model_validate(fx["body"])
        assert env.failed == name.startswith("error_"), name


def test_gpu_model_fields_and_gfd_names() -> None:
    info = GpuInfo.model_validate(load_fixture("device_info_gpu.json")["body"]["response"]["data"][0])
    want = ("NVIDIA Corporation", "Tesla T4", 15360, None)  # dram_size "15360", udesc "n/a" on the wire
    assert (info.vendor, info.model, info.dram_size, info.udesc) == want
    assert gfd_product_name("Tesla T4") == "Tesla-T4"
    assert gfd_product_name("NVIDIA A100-PCIE-40GB") == "NVIDIA-A100-PCIE-40GB"
    assert gfd_product_name("  NVIDIA  L40S ") == "NVIDIA-L40S"
    pre = [PreDevice.model_validate(r) for r in load_fixture("predevice.json")["body"]["response"]["data"]]
    assert [(p.name, p.mach_id, p.mname) for p in pre] == [("gpu0", None, None), ("gpu1", 1, "blade-slot-1")]


def test_digest_key_is_not_printed() -> None:
    d = DigestInfo.model_validate(load_fixture("digest.json")["body"]["response"]["data"][0])
    assert d.digest_key.get_secret_value() not in repr(d)


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("http://h:8080", "http://h:8080/liqid/api/v2/"),
        ("http://h:8080/", "http://h:8080/liqid/api/v2/"),
        ("https://h/liqid/api/v2", "https://h/liqid/api/v2/"),
        ("https://h/liqid/api/v2/", "https://h/liqid/api/v2/"),
    ],
)
def test_api_root(url: str, root: str) -> None:
    assert api_root(url) == root


def test_api_root_rejects_other_schemes() -> None:
    with pytest.raises(ValueError, match="http"):
        api_root("ftp://h")


def _replay(rsps: responses.RequestsMock, fixture: str) -> dict:
    fx = load_fixture(fixture)
    rsps.add(fx["request"]["method"], ROOT + fx["request"]["path"], json=fx["body"], status=fx["status"])
    return fx


@pytest.mark.parametrize(
    ("fixture", "exc", "status"),
    [
        ("error_unauthorized.json", errors.DirectorAuthError, 401),
        ("error_not_found.json", errors.DirectorNotFoundError, 404),
        ("error_edit_open.json", errors.DirectorConflictError, 409),
        ("error_device_held.json", errors.DirectorConflictError, 409),
        # HTTP 200, failure only in the envelope: classified by errors[].code.
        ("error_relate_without_edit.json", errors.DirectorConflictError, 200),
        ("error_server.json", errors.DirectorServerError, 500),
    ],
)
def test_error_envelopes_map_to_exceptions(
    fixture: str, exc: type[errors.DirectorError], status: int
) -> None:
    with responses.RequestsMock() as rsps:
        fx = _replay(rsps, fixture)
        t = Transport(BASE, username="u", password="p", retries=0)
        with pytest.raises(exc) as info:
            t.request(fx["request"]["method"], fx["request"]["path"], machine="blade-slot-1", device="gpu1")
    e = info.value
    assert (e.method, e.path, e.status) == (fx["request"]["method"], fx["request"]["path"], status)
    assert e.director_message == fx["body"]["response"]["errors"][0]["message"]
    assert e.machine == "blade-slot-1" and e.device == "gpu1"
    assert fx["body"]["response"]["errors"][0]["message"] in str(e)
    assert e.transient == (exc is errors.DirectorServerError)


def test_plain_404_page_without_envelope_is_not_found() -> None:
    with responses.RequestsMock() as rsps:
        rsps.add("GET", ROOT + "machine", body="<html>no</html>", status=404)
        with pytest.raises(errors.DirectorNotFoundError, match="no"):
            Transport(BASE, username="u", password="p").request("GET", "machine")


def test_success_status_without_envelope_is_a_protocol_error() -> None:
    with responses.RequestsMock() as rsps:
        rsps.add("GET", ROOT + "machine", body="plain text", status=200)
        with pytest.raises(errors.DirectorProtocolError):
            Transport(BASE, username="u", password="p").request("GET", "machine")


def test_a_malformed_record_names_its_index_and_field() -> None:
    with pytest.raises(errors.DirectorProtocolError, match=r"GpuInfo record .*first: record 2, name: "):
        parse_records(GpuInfo, [{"name": "gpu0"}, None, {"name": 7}], method="GET", path="device/info/gpu")


def test_success_envelope_with_null_errors_is_success() -> None:
    with responses.RequestsMock() as rsps:
        rsps.add(
            "GET", ROOT + "group", json={"response": {"code": 0, "errors": None, "data": [{"grp_id": 1}]}}
        )
        assert Transport(BASE, username="u", password="p").request("GET", "group") == [{"grp_id": 1}]


def test_basic_auth_header_and_query() -> None:
    with responses.RequestsMock() as rsps:
        fx = _replay(rsps, "status_gpu.json")
        Transport(BASE, username="u", password="p").request("GET", "status/gpu", params={"filter": "false"})
        sent = rsps.calls[0].request
    assert sent.headers["Authorization"].startswith("Basic ")
    assert sent.url.endswith("status/gpu?filter=false")
    assert fx["request"]["query"] == {"filter": "false"}


def test_digest_auth_reauthenticates_once_on_401_then_fails_loudly() -> None:
    digest = load_fixture("digest.json")["body"]
    unauthorized = load_fixture("error_unauthorized.json")["body"]
    with responses.RequestsMock() as rsps:
        rsps.add("DELETE", ROOT + "digest/fixed-label", json=load_fixture("digest_delete.json")["body"])
        rsps.add("POST", ROOT + "digest/fixed-label", json=digest)
        rsps.add("GET", ROOT + "machine", json=unauthorized, status=401)
        t = Transport(BASE, username="u", password="p", use_digest=True, digest_label="fixed-label")
        with pytest.raises(errors.DirectorAuthError):
            t.request("GET", "machine")
        paths = [(c.request.method, c.request.path_url) for c in rsps.calls]
        key_headers = [c.request.headers.get("X-API-Key") for c in rsps.calls if c.request.method == "GET"]
    # (delete the label, create the digest), call (401), again, call (401): one re-authentication.
    assert paths == [
        ("DELETE", "/liqid/api/v2/digest/fixed-label"),
        ("POST", "/liqid/api/v2/digest/fixed-label"),
        ("GET", "/liqid/api/v2/machine"),
    ] * 2
    assert key_headers == ["3f9c2a7d5e1b48c0a6d2f0e9b7c4a1d8"] * 2


def test_get_is_retried_on_503_but_post_is_not() -> None:
    ok = load_fixture("group.json")["body"]
    with responses.RequestsMock() as rsps:
        rsps.add(
            "GET", ROOT + "group", json={"response": {"code": 503, "errors": [], "data": []}}, status=503
        )
        rsps.add("GET", ROOT + "group", json=ok)
        t = Transport(BASE, username="u", password="p", retries=2, backoff_factor=0)
        assert t.request("GET", "group")[0]["group_name"] == "gpu-pool"
        assert len(rsps.calls) == 2
    with responses.RequestsMock() as rsps:
        rsps.add(
            "POST",
            ROOT + "fabric/reprogram",
            json={"response": {"code": 503, "errors": [], "data": []}},
            status=503,
        )
        t = Transport(BASE, username="u", password="p", retries=2, backoff_factor=0)
        with pytest.raises(errors.DirectorServerError):
            t.request("POST", "fabric/reprogram", json={})
        assert len(rsps.calls) == 1


def test_an_option_the_transport_does_not_know_is_refused() -> None:
    # The options are forwarded as keywords (TransportOptions): a misspelt one must not be dropped.
    with pytest.raises(TypeError, match="timout"):
        Transport(BASE, username="u", password="p", timout=1.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="timout"):
        DirectorClient(BASE, username="u", password="p", timout=1.0)  # type: ignore[call-arg]


def test_transport_options_reach_the_client_and_defaults_hold() -> None:
    t = Transport(BASE, username="u", password="p")
    assert (t.timeout, t.retries, t.backoff_factor) == (10.0, 3, 0.5)
    assert (t.job_poll_interval, t.job_timeout) == (JOB_POLL_INTERVAL_SECONDS, JOB_TIMEOUT_SECONDS)
    with DirectorClient(BASE, username="u", password="p", retries=5, backoff_factor=0.25, timeout=2.0) as c:
        assert (c.retries, c.backoff_factor, c._t.timeout) == (5, 0.25, 2.0)


def test_error_message_is_clipped() -> None:
    e = errors.DirectorServerError("boom", director_message="x" * 5000)
    assert e.director_message is not None and len(e.director_message) == errors.MAX_MESSAGE_CHARS
