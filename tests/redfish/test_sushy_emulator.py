"""Independent check: the client's generic parts against sushy-tools' Redfish emulator.

sushy-tools (OpenStack, not written here) runs as ``sushy-emulator --config FILE`` with the
fake systems driver (``SUSHY_EMULATOR_FAKE_DRIVER = True`` in the config file, see the
sushy-tools docs "Systems resource driver: fake") and Basic auth from an htpasswd file
(``SUSHY_EMULATOR_AUTH_FILE``, bcrypt). It has no SessionService, so the client's ``auto``
auth must fall back to Basic; sessions proper are covered against our simulator.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from dynamic_providers.redfish import errors
from dynamic_providers.redfish.client import RedfishClient
from lab import readiness

USER, PASSWORD = "admin", "emulator-pass-31"
UUID = "27946b59-9e44-4fa7-8e91-f3527a1ef094"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = shutil.which("sushy-emulator") or str(Path(sys.executable).with_name("sushy-emulator"))
    if not Path(exe).exists():
        pytest.skip("sushy-emulator (sushy-tools) not installed")
    d = tmp_path_factory.mktemp("sushy")
    htpasswd = d / "htpasswd"
    htpasswd.write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()}\n")
    port = _free_port()
    config = d / "emulator.conf"
    config.write_text(
        "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\n"
        f"SUSHY_EMULATOR_LISTEN_PORT = {port}\n"
        "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
        f"SUSHY_EMULATOR_STATE_DIR = {str(d / 'state')!r}\n"
        f"SUSHY_EMULATOR_AUTH_FILE = {str(htpasswd)!r}\n"
        "SUSHY_EMULATOR_FAKE_SYSTEMS = [{'uuid': %r, 'name': 'fake', 'power_state': 'On',\n"
        "    'nics': [{'mac': '00:5c:52:31:3a:9c', 'ip': '172.22.0.100'}]}]\n" % UUID
    )
    log = (d / "emulator.log").open("wb")
    proc = subprocess.Popen([exe, "--config", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "SUSHY_EMULATOR_CONFIG": str(config)})
    url = f"http://127.0.0.1:{port}"
    try:
        log_path = d / "emulator.log"
        try:
            readiness.wait_until(readiness.http_probe(url + "/redfish/v1/"), what="sushy-emulator",
                                 timeout_seconds=120, alive=lambda: proc.poll() is None, log=log_path)
        except readiness.NotReadyError as exc:
            pytest.fail(str(exc))
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def bmc(url, password=PASSWORD, **kw):
    return RedfishClient(url, username=USER, password=password, retries=1, backoff_seconds=0.01, **kw)


def test_auth_falls_back_to_basic_without_session_service(emulator):
    with bmc(emulator) as client:
        assert client.service_root().sessions_path is None
        assert client.system_ids() == [UUID]
        assert client.auth_method == "basic" and client.session_uri is None
    with pytest.raises(errors.AuthError) as info, bmc(emulator, password="wrong") as client:
        client.system_ids()
    assert info.value.status == 401
    with pytest.raises(errors.ProtocolError, match="SessionService"), bmc(emulator, auth="session") as client:
        client.system_ids()


def test_system_power_and_reset(emulator):
    with bmc(emulator) as client:
        system = client.system(UUID)
        assert system.name == "fake" and system.power_state == "On"
        assert "ForceRestart" in client.reset_types(UUID)
        assert client.reset_system(UUID, "ForceRestart") == "ForceRestart"
        # the fake driver drops power at once and brings it back 1-11 s later
        assert client.system(UUID).power_state == "Off"
        with pytest.raises(errors.BadRequestError, match="not allowed"):
            client.reset_system(UUID, "PowerCycle")
        assert client.reset_system(UUID) == "GracefulRestart", "picked from the emulator's allowed values"


def test_boot_override(emulator):
    with bmc(emulator) as client:
        system = client.set_boot_override(UUID, target="Pxe", enabled="Continuous")
        assert system.boot.override_target == "Pxe"
        assert client.set_boot_override(UUID, target="Hdd").boot.override_target == "Hdd"
        with pytest.raises(errors.BadRequestError, match="not allowed"):
            client.set_boot_override(UUID, target="Floppy")


def test_errors_from_a_foreign_implementation(emulator):
    with bmc(emulator) as client, pytest.raises(errors.NotFoundError) as info:
        client.system("no-such-system")
    assert info.value.status == 404
    with bmc(emulator) as client:
        assert client.manager().id
