"""RedfishClient against the BMC simulator over real HTTP(S) on 127.0.0.1."""

from __future__ import annotations

import time

import pytest
import requests

from dynamic_providers.redfish import errors
from dynamic_providers.redfish.client import RedfishClient, pick_reset_type

SESSIONS = "/redfish/v1/SessionService/Sessions"
SETTINGS = "/redfish/v1/Systems/Bluefield/Bios/Settings"


def client(sim, name: str = "dpu", **kw) -> RedfishClient:
    kw.setdefault("retries", 2)
    kw.setdefault("backoff_seconds", 0.01)
    if name.endswith("-tls"):
        kw.setdefault("ca_bundle", sim.ca_bundle)
    return RedfishClient(sim.url(name), username=kw.pop("username", sim.username),
                         password=kw.pop("password", sim.password), **kw)


# --- sessions ------------------------------------------------------------------------------


def test_session_created_reused_and_deleted_on_close(sim):
    with client(sim) as bmc:
        assert bmc.auth_method == "session"
        assert bmc.session_uri and bmc.session_uri.startswith(SESSIONS + "/")
        bmc.system("Bluefield")
        bmc.bios("Bluefield")
        bmc.nvidia_system()
        during = sim.state("dpu")
        assert during["sessions_active"] == 1
    after = sim.state("dpu")
    assert after["sessions_created"] == 1, "one session for many calls"
    assert after["sessions_active"] == 0 and after["sessions_deleted"] == 1
    # every authenticated call used the token: no 401 in the log
    assert all(r["status"] != 401 for r in after["requests"])


def test_expired_session_reauthenticates_once(sim):
    with client(sim) as bmc:
        bmc.system("Bluefield")
        sim.expire_sessions("dpu")
        assert bmc.nvidia_system().mode == "DpuMode"
    st = sim.state("dpu")
    assert st["sessions_created"] == 2
    system_gets = sim.requests_to("dpu", "GET", "/redfish/v1/Systems/Bluefield")
    assert [r["status"] for r in system_gets] == [200, 401, 200], "one 401, then retried after login"


def test_reauthentication_failure_is_an_auth_error_after_one_attempt(sim):
    with client(sim) as bmc:
        bmc.system("Bluefield")
        sim.expire_sessions("dpu")
        sim.drift("dpu", password="rotated-elsewhere")
        with pytest.raises(errors.AuthError, match="login refused"):
            bmc.system("Bluefield")
    logins = sim.requests_to("dpu", "POST", SESSIONS)
    assert [r["status"] for r in logins] == [201, 401], "exactly one re-login attempt"


def test_wrong_password_is_auth_error_with_extended_info(sim):
    with pytest.raises(errors.AuthError) as info:
        with client(sim, password="wrong"):
            pass
    err = info.value
    assert err.status == 401 and err.method == "POST" and err.url.endswith(SESSIONS)
    assert err.message_ids == ["Base.1.16.0.ResourceAtUriUnauthorized"]
    assert "wrong" not in str(err) and sim.password not in str(err)


def test_basic_auth_mode(sim):
    with client(sim, auth="basic") as bmc:
        assert bmc.auth_method == "basic"
        assert bmc.system("Bluefield").power_state == "On"
    assert sim.state("dpu")["sessions_created"] == 0
    with pytest.raises(errors.AuthError) as info, client(sim, auth="basic", password="nope") as bmc:
        bmc.system("Bluefield")
    assert info.value.status == 401 and "NoValidSession" in info.value.message_ids[0]


# --- TLS -----------------------------------------------------------------------------------


def test_https_with_ca_bundle(sim):
    with client(sim, "dpu-tls") as bmc:
        assert bmc.endpoint.startswith("https://")
        assert bmc.manager().firmware_version == "BF-24.10-17"


def test_ca_bundle_wins_over_requests_ca_bundle_env(sim, monkeypatch):
    """requests lets REQUESTS_CA_BUNDLE override Session.verify; the client must not."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/nonexistent/bundle.pem")
    monkeypatch.setenv("CURL_CA_BUNDLE", "/nonexistent/bundle.pem")
    with client(sim, "dpu-tls") as bmc:
        assert bmc.system("Bluefield").id == "Bluefield"
    with pytest.warns(Warning), client(sim, "dpu-tls", verify_tls=False, ca_bundle=None) as bmc:
        assert bmc.system("Bluefield").id == "Bluefield"


def test_https_verification_is_on_by_default(sim):
    with pytest.raises(errors.TlsError, match="ca_bundle"), \
            RedfishClient(sim.url("dpu-tls"), username=sim.username, password=sim.password, retries=0) as bmc:
        bmc.system("Bluefield")


def test_https_verification_can_be_switched_off(sim):
    with pytest.warns(Warning), client(sim, "dpu-tls", verify_tls=False, ca_bundle=None) as bmc:
        assert bmc.system("Bluefield").id == "Bluefield"


# --- transport failures and retries -------------------------------------------------------------


def test_unreachable_bmc(free_port):
    t0 = time.monotonic()
    with pytest.raises(errors.UnreachableError, match="unreachable") as info:
        RedfishClient(f"http://127.0.0.1:{free_port}", username="u", password="p", retries=2,
                      backoff_seconds=0.01).open()
    assert info.value.status is None and "127.0.0.1" in info.value.url
    assert time.monotonic() - t0 < 5


def test_get_retried_on_503(sim):
    sim.fault("dpu", method="GET", path="/redfish/v1/Managers/Bluefield_BMC", status=503, count=2)
    with client(sim, retries=3) as bmc:
        assert bmc.manager("Bluefield_BMC").id == "Bluefield_BMC"
    statuses = [r["status"] for r in sim.requests_to("dpu", "GET", "/redfish/v1/Managers/Bluefield_BMC")]
    assert statuses == [503, 503, 200]


def test_5xx_after_retries_is_server_error(sim):
    sim.fault("dpu", method="GET", path="/redfish/v1/Managers/Bluefield_BMC", status=500, count=10)
    with client(sim, retries=1) as bmc, pytest.raises(errors.ServerError) as info:
        bmc.manager("Bluefield_BMC")
    assert info.value.status == 500 and "InternalError" in info.value.message_ids[0]
    assert len(sim.requests_to("dpu", "GET", "/redfish/v1/Managers/Bluefield_BMC")) == 2


def test_post_action_not_retried_on_503(sim):
    target = "/redfish/v1/Systems/Bluefield/Oem/Nvidia/Actions/HostRshim.Set"
    sim.fault("dpu", method="POST", path=target, status=503, count=1)
    with client(sim, retries=3) as bmc, pytest.raises(errors.ServerError):
        bmc.set_host_rshim("Disabled")
    assert len(sim.requests_to("dpu", "POST", target)) == 1
    assert sim.state("dpu")["host_rshim"] == "Enabled"


def test_read_timeout(sim):
    sim.fault("dpu", method="GET", path="/redfish/v1/Systems/Bluefield", delay_seconds=0.6, count=5)
    with client(sim, timeout_seconds=0.2, retries=1) as bmc, pytest.raises(errors.RedfishTimeoutError):
        bmc.system("Bluefield")


# --- resources ------------------------------------------------------------------------------


def test_service_root_and_collections(sim):
    with client(sim) as bmc:
        root = bmc.service_root()
        assert root.vendor == "Nvidia" and root.sessions_path == SESSIONS
        assert bmc.system_ids() == ["Bluefield"]
        assert bmc.manager_ids() == ["Bluefield_BMC"]
    with client(sim, "host") as bmc:
        assert bmc.system_ids() == ["1"]
        assert bmc.manager().firmware_version == "1.0.0"


def test_missing_system_is_not_found(sim):
    with client(sim, "host") as bmc, pytest.raises(errors.NotFoundError) as info:
        bmc.system("Bluefield")
    assert info.value.status == 404 and "ResourceNotFound" in info.value.message_ids[0]
    with client(sim, "host") as bmc, pytest.raises(errors.NotFoundError):
        bmc.nvidia_system("1")


def test_bios_settings_stage_and_apply_on_reset(sim):
    with client(sim, "host") as bmc:
        wanted = {"ProcVirtualization": "Enabled", "SriovGlobalEnable": "Enabled"}
        staged = bmc.set_bios_attributes("1", wanted)
        assert staged.attributes == wanted
        assert bmc.bios("1").attributes["ProcVirtualization"] == "Disabled", "pending until reset"
        assert bmc.reset_system("1") == "GracefulRestart"
        assert bmc.bios("1").attributes["ProcVirtualization"] == "Enabled"
        assert bmc.bios_settings("1").attributes == {}
    patches = sim.requests_to("host", "PATCH", "/redfish/v1/Systems/1/Bios/Settings")
    assert len(patches) == 1


def test_unknown_attribute_error_carries_extended_info(sim):
    with client(sim, "host") as bmc, pytest.raises(errors.UnknownAttributeError) as info:
        bmc.set_bios_attributes("1", {"VirtualizationTech": "Enabled", "IOMMU": "Enabled"})
    err = info.value
    assert err.status == 400 and err.attributes == ["VirtualizationTech"]
    assert "VirtualizationTech is not in the list of valid properties" in str(err)
    assert "Resolution: Remove the unknown property" in str(err)
    assert sim.state("host")["pending"] == {}, "nothing staged when one attribute is bad"


def test_bad_value_is_bad_request(sim):
    with client(sim) as bmc, pytest.raises(errors.BadRequestError) as info:
        bmc.set_bios_attributes("Bluefield", {"HostPrivilegeLevel": "Sometimes"})
    assert not isinstance(info.value, errors.UnknownAttributeError)
    assert "PropertyValueNotInList" in info.value.message_ids[0]


def test_stale_etag_is_precondition_failed(sim):
    with client(sim) as bmc:
        etag = bmc.bios_settings("Bluefield").etag
        assert etag
        sim.drift("dpu", pending={"HostPrivilegeLevel": "Privileged"})
        with pytest.raises(errors.PreconditionFailedError) as info:
            bmc.set_bios_attributes("Bluefield", {"HostPrivilegeLevel": "Restricted"}, etag=etag)
    assert info.value.status == 412 and "PreconditionFailed" in info.value.message_ids[0]
    assert "appropriate ETag" in str(info.value)
    assert sim.state("dpu")["pending"] == {"HostPrivilegeLevel": "Privileged"}


def test_concurrent_writer_between_read_and_patch_is_detected(sim):
    sim.concurrent_write("dpu", {"HostPrivilegeLevel": "Privileged"})
    with client(sim) as bmc, pytest.raises(errors.PreconditionFailedError):
        bmc.set_bios_attributes("Bluefield", {"HostPrivilegeLevel": "Restricted"})
    patch = sim.requests_to("dpu", "PATCH", SETTINGS)
    assert [r["status"] for r in patch] == [412]


def test_bluefield_mode_and_rshim(sim):
    with client(sim) as bmc:
        bmc.set_host_rshim("Disabled")
        bmc.set_dpu_mode("NicMode")
        oem = bmc.nvidia_system()
        assert oem.host_rshim == "Disabled", "rshim applies immediately"
        assert oem.mode == "DpuMode", "mode applies on reset"
        assert bmc.bios_settings("Bluefield").attributes == {"NicMode": "NicMode"}
        assert bmc.reset_types("Bluefield") == ["GracefulRestart", "ForceRestart", "GracefulShutdown",
                                                "PowerCycle"]
        bmc.reset_system("Bluefield")
        assert bmc.nvidia_system().mode == "NicMode"
        with pytest.raises(errors.BadRequestError, match="ActionParameterValueNotInList"):
            bmc.set_dpu_mode("TurboMode")


def test_legacy_firmware_uses_spaced_key(sim):
    with client(sim, "dpu-legacy") as bmc:
        attrs = bmc.bios("Bluefield").attributes
        assert "Host Privilege Level" in attrs and "HostPrivilegeLevel" not in attrs
        with pytest.raises(errors.UnknownAttributeError):
            bmc.set_bios_attributes("Bluefield", {"HostPrivilegeLevel": "Restricted"})
        bmc.set_bios_attributes("Bluefield", {"Host Privilege Level": "Restricted"})
        assert bmc.bios_settings("Bluefield").attributes == {"Host Privilege Level": "Restricted"}


def test_boot_override_and_reset_type_validation(sim):
    with client(sim, "host") as bmc:
        system = bmc.set_boot_override("1", target="Pxe", enabled="Once")
        assert (system.boot.override_target, system.boot.override_enabled) == ("Pxe", "Once")
        with pytest.raises(errors.BadRequestError, match="not allowed"):
            bmc.set_boot_override("1", target="Floppy")
        with pytest.raises(errors.BadRequestError, match="not allowed"):
            bmc.reset_system("1", "Nmi")
        assert bmc.reset_system("1", "ForceOff") == "ForceOff"
        assert bmc.system("1").power_state == "Off"
    assert sim.state("host")["boot"]["BootSourceOverrideTarget"] == "Pxe"


def test_pick_reset_type():
    assert pick_reset_type(None) == "GracefulRestart"
    assert pick_reset_type(["On", "ForceRestart", "PowerCycle"]) == "ForceRestart"
    with pytest.raises(errors.BadRequestError):
        pick_reset_type(["On", "ForceOff"])


def test_endpoint_validation():
    with pytest.raises(ValueError, match="credentials"):
        RedfishClient("https://root:pw@10.0.0.1", username="u", password="p")
    with pytest.raises(ValueError, match="http"):
        RedfishClient("10.0.0.1", username="u", password="p")


def test_sushy_drops_if_match_on_412(sim):
    """Why the client is not built on sushy: its PATCH retries a 412 without If-Match,
    overwriting a concurrent change. If this starts failing, sushy changed; reconsider."""
    from sushy import connector as sushy_connector

    conn = sushy_connector.Connector(sim.url("dpu"), verify=False)
    conn.set_http_basic_auth(sim.username, sim.password)
    auth = (sim.username, sim.password)
    stale = requests.get(sim.url("dpu") + SETTINGS, auth=auth, timeout=5).headers["ETag"]
    sim.drift("dpu", pending={"HostPrivilegeLevel": "Privileged"})
    conn.patch(SETTINGS, data={"Attributes": {"HostPrivilegeLevel": "Restricted"}}, etag=stale)
    assert sim.state("dpu")["pending"] == {"HostPrivilegeLevel": "Restricted"}, "concurrent write lost"
    assert [r["status"] for r in sim.requests_to("dpu", "PATCH", SETTINGS)] == [412, 200]
