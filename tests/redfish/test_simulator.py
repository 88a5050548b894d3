"""The BMC simulator itself: auth, sessions, settings/reset semantics, persistence, CLI, TLS."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import requests

from lab.redfish_sim import tls
from lab.redfish_sim.__main__ import parse_args
from lab.redfish_sim.state import BmcSpec, BmcState, uses_spaced_keys

SYSTEM = "/redfish/v1/Systems/Bluefield"


def call(sim, name, method, path, **kw):
    kw.setdefault("auth", (sim.username, sim.password))
    return requests.request(method, sim.url(name) + path, timeout=5, **kw)


def test_service_root_is_open_everything_else_needs_auth(sim):
    assert call(sim, "dpu", "GET", "/redfish/v1", auth=None).status_code == 200
    resp = call(sim, "dpu", "GET", SYSTEM, auth=None)
    assert resp.status_code == 401
    assert resp.json()["error"]["code"].endswith("NoValidSession")
    assert call(sim, "dpu", "GET", SYSTEM, auth=(sim.username, "x")).status_code == 401


def test_session_token_works_until_deleted(sim):
    login = call(sim, "dpu", "POST", "/redfish/v1/SessionService/Sessions", auth=None,
                 json={"UserName": sim.username, "Password": sim.password})
    assert login.status_code == 201
    token, location = login.headers["X-Auth-Token"], login.headers["Location"]
    assert "Password" not in login.json()
    hdr = {"X-Auth-Token": token}
    assert call(sim, "dpu", "GET", SYSTEM, auth=None, headers=hdr).status_code == 200
    assert call(sim, "dpu", "DELETE", location, auth=None, headers=hdr).status_code == 204
    assert call(sim, "dpu", "GET", SYSTEM, auth=None, headers=hdr).status_code == 401


def test_mode_set_is_pending_until_reset_and_cancellable(sim):
    oem = SYSTEM + "/Oem/Nvidia"
    assert call(sim, "dpu", "POST", oem + "/Actions/Mode.Set", json={"Mode": "NicMode"}).status_code == 200
    assert call(sim, "dpu", "GET", oem).json()["Mode"] == "DpuMode"
    assert call(sim, "dpu", "GET", SYSTEM + "/Bios/Settings").json()["Attributes"] == {"NicMode": "NicMode"}
    call(sim, "dpu", "POST", oem + "/Actions/Mode.Set", json={"Mode": "DpuMode"})
    assert call(sim, "dpu", "GET", SYSTEM + "/Bios/Settings").json()["Attributes"] == {}
    resp = call(sim, "dpu", "POST", oem + "/Actions/Mode.Set", json={})
    assert resp.status_code == 400 and resp.json()["error"]["code"].endswith("ActionParameterMissing")


def test_reset_types_and_power(sim):
    call(sim, "host", "PATCH", "/redfish/v1/Systems/1/Bios/Settings", json={"Attributes": {"VTd": "Enabled"}})
    reset = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
    call(sim, "host", "POST", reset, json={"ResetType": "ForceOff"})
    st = sim.state("host")
    assert st["power_state"] == "Off" and st["pending"] == {"VTd": "Enabled"}, "power off applies nothing"
    call(sim, "host", "POST", reset, json={"ResetType": "On"})
    st = sim.state("host")
    assert st["power_state"] == "On" and st["attributes"]["VTd"] == "Enabled" and st["pending"] == {}
    bad = call(sim, "dpu", "POST", SYSTEM + "/Actions/ComputerSystem.Reset", json={"ResetType": "On"})
    assert bad.status_code == 400, "BlueField's ResetActionInfo does not list On"


def test_bios_is_read_only_and_bad_json(sim):
    assert call(sim, "dpu", "PATCH", SYSTEM + "/Bios", json={"Attributes": {}}).status_code == 405
    resp = call(sim, "dpu", "PATCH", SYSTEM + "/Bios/Settings", data="{not json",
                headers={"Content-Type": "application/json"})
    assert resp.status_code == 400 and resp.json()["error"]["code"].endswith("MalformedJSON")
    resp = call(sim, "dpu", "PATCH", SYSTEM + "/Bios/Settings", json={"Attributes": {"CeThreshold": "high"}})
    assert resp.json()["error"]["code"].endswith("PropertyValueTypeError")


def test_if_match_star_and_etag_changes(sim):
    s1 = call(sim, "dpu", "GET", SYSTEM + "/Bios/Settings")
    etag = s1.headers["ETag"]
    assert s1.json()["@odata.etag"] == etag
    ok = call(sim, "dpu", "PATCH", SYSTEM + "/Bios/Settings", headers={"If-Match": "*"},
              json={"Attributes": {"HostPrivilegeLevel": "Restricted"}})
    assert ok.status_code == 200 and ok.headers["ETag"] != etag
    stale = call(sim, "dpu", "PATCH", SYSTEM + "/Bios/Settings", headers={"If-Match": etag},
                 json={"Attributes": {"HostPrivilegeLevel": "Privileged"}})
    assert stale.status_code == 412
    assert sim.state("dpu")["pending"] == {"HostPrivilegeLevel": "Restricted"}


def test_control_path_rejects_unknown_drift_keys(sim):
    resp = requests.post(sim.url("dpu") + "/_sim/state", json={"colour": "blue"}, timeout=5)
    assert resp.status_code == 400 and "colour" in resp.json()["error"]


@pytest.mark.parametrize(("text", "kind", "firmware"), [
    ("dpu-blade-slot-1=18441", "bluefield", "BF-24.10-17"),
    ("bmc-blade-slot-1=18451", "host", "1.0.0"),
    ("x=0:BF-24.04-5", "bluefield", "BF-24.04-5"),
    ("dpu-x=0:2.1.0", "host", "2.1.0"),
])
def test_bmc_spec(text, kind, firmware):
    spec = BmcSpec.parse(text)
    assert (spec.kind, spec.firmware) == (kind, firmware)


def test_bmc_spec_errors_and_key_switch():
    with pytest.raises(ValueError, match="NAME=PORT"):
        BmcSpec.parse("dpu:18441")
    assert uses_spaced_keys("BF-24.07-3") and uses_spaced_keys("BF-23.10-1")
    assert not uses_spaced_keys("BF-24.10-17") and not uses_spaced_keys("BF-25.04-1")
    assert not uses_spaced_keys("1.0.0")


def test_state_is_file_backed(tmp_path):
    spec = BmcSpec.parse("dpu=0")
    a = BmcState(spec, tmp_path, username="u", password="p")
    a.patch_settings({"HostPrivilegeLevel": "Restricted"}, None)
    a.set_host_rshim("Disabled")
    b = BmcState(spec, tmp_path, username="u", password="p")
    assert b.pending == {"HostPrivilegeLevel": "Restricted"} and b.data["host_rshim"] == "Disabled"
    # a firmware change is a new device image: factory state with that firmware's keys
    c = BmcState(BmcSpec.parse("dpu=0:BF-24.04-5"), tmp_path, username="u", password="p")
    assert c.pending == {} and "Host Privilege Level" in c.attributes


def test_cli_needs_credentials(monkeypatch, capsys):
    monkeypatch.delenv("REDFISH_SIM_USERNAME", raising=False)
    monkeypatch.delenv("REDFISH_SIM_PASSWORD", raising=False)
    with pytest.raises(SystemExit):
        parse_args(["--state-dir", "/tmp/x", "--bmc", "dpu=0"])
    assert "credentials" in capsys.readouterr().err
    monkeypatch.setenv("REDFISH_SIM_USERNAME", "root")
    monkeypatch.setenv("REDFISH_SIM_PASSWORD", "pw")
    args = parse_args(["--state-dir", "/tmp/x", "--bmc", "dpu=0", "--bmc", "bmc-h=0"])
    assert [b.kind for b in args.bmc] == ["bluefield", "host"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl CLI")
def test_openssl_fallback_makes_a_verifiable_chain(tmp_path):
    files = tls.TlsFiles(ca=tmp_path / "ca.pem", cert=tmp_path / "server.pem",
                         key=tmp_path / "server-key.pem")
    tls._with_openssl(files)
    out = subprocess.run(["openssl", "verify", "-CAfile", str(files.ca), str(files.cert)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    text = subprocess.run(["openssl", "x509", "-in", str(files.cert), "-noout", "-ext", "subjectAltName"],
                          capture_output=True, text=True, check=True).stdout
    assert "IP Address:127.0.0.1" in text


def test_tls_files_are_reused(tmp_path):
    first = tls.ensure_tls(tmp_path)
    pem = first.ca.read_bytes()
    assert tls.ensure_tls(tmp_path).ca.read_bytes() == pem
    assert oct(first.key.stat().st_mode & 0o777) == "0o600"


# --- protocol rules (DSP0266), checked with plain HTTP ---------------------------------------


def test_odata_documents_are_open_and_well_formed(sim):
    import xml.etree.ElementTree as ET

    doc = call(sim, "dpu", "GET", "/redfish/v1/odata", auth=None)
    assert doc.status_code == 200 and doc.headers["Content-Type"].startswith("application/json")
    body = doc.json()
    assert body["@odata.context"] == "/redfish/v1/$metadata"
    assert {"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"} in body["value"]
    meta = call(sim, "dpu", "GET", "/redfish/v1/$metadata", auth=None)
    assert meta.status_code == 200 and meta.headers["Content-Type"].startswith("application/xml")
    root = ET.fromstring(meta.content)
    container = root.find(".//{http://docs.oasis-open.org/odata/ns/edm}EntityContainer")
    assert container is not None and container.get("Extends") == "ServiceRoot.v1_15_0.ServiceContainer"


def test_unsupported_odata_version_and_dollar_queries_are_refused(sim):
    assert call(sim, "dpu", "GET", "/redfish/v1/", headers={"OData-Version": "4.1"}).status_code == 412
    assert call(sim, "dpu", "GET", "/redfish/v1/", headers={"OData-Version": "4.0"}).status_code == 200
    resp = call(sim, "dpu", "GET", "/redfish/v1/Systems?$expand=*")
    assert resp.status_code == 501 and "$expand" in resp.json()["error"]["message"]
    assert call(sim, "dpu", "GET", "/redfish/v1/Systems?other=1").status_code == 200


def test_allow_cache_control_and_link_headers(sim):
    root = call(sim, "dpu", "GET", "/redfish/v1/")
    assert root.headers["Allow"] == "GET, HEAD" and root.headers["Cache-Control"] == "no-cache"
    assert root.links["describedby"]["url"] == "https://redfish.dmtf.org/schemas/v1/ServiceRoot.v1_15_0.json"
    sessions = call(sim, "dpu", "HEAD", "/redfish/v1/SessionService/Sessions")
    assert sessions.headers["Allow"] == "GET, HEAD, POST" and sessions.headers["Cache-Control"] == "no-store"
    for method in ("DELETE", "PATCH", "POST"):
        refused = call(sim, "dpu", method, "/redfish/v1/", json={})
        assert refused.status_code == 405 and refused.headers["Allow"] == "GET, HEAD", method
    bios = call(sim, "dpu", "PATCH", "/redfish/v1/Systems/Bluefield/Bios", json={"Attributes": {}})
    assert bios.status_code == 405 and bios.headers["Allow"] == "GET, HEAD", "writes go to Bios/Settings"


def test_login_at_the_members_uri_and_predefined_roles(sim):
    login = call(sim, "dpu", "POST", "/redfish/v1/SessionService/Sessions/Members", auth=None,
                 json={"UserName": sim.username, "Password": sim.password})
    assert login.status_code == 201 and login.headers["X-Auth-Token"]
    roles = {}
    for name in ("Administrator", "Operator", "ReadOnly"):
        role = call(sim, "dpu", "GET", f"/redfish/v1/AccountService/Roles/{name}")
        roles[name] = set(role.json()["AssignedPrivileges"])
    assert roles["ReadOnly"] == {"Login", "ConfigureSelf"} and "ConfigureUsers" in roles["Administrator"]
    assert call(sim, "dpu", "PATCH", "/redfish/v1/AccountService/Roles/ReadOnly",
                json={"AssignedPrivileges": []}).status_code == 405
    account = call(sim, "dpu", "GET", f"/redfish/v1/AccountService/Accounts/{sim.username}")
    assert account.headers["ETag"] and "Password" not in account.json()
