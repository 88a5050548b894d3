"""Provider ``check`` and ``diff`` without Pulumi or SSH: validation before anything runs,
unknowns during preview, no key material in messages, idempotent diffs."""

from __future__ import annotations

import base64

import pytest

from dynamic_providers import preflight
from dynamic_providers.ssh.models import SshTarget
from dynamic_providers.ssh.provider import DpuMlxconfigProvider, HostKernelPrepProvider

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi.runtime.rpc.UNKNOWN
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPk7QQyorUMUBNFyEv+OJflqKnT3t9VcSIjUW9bYs/ly"
OTHER_HOST_KEY = "ssh-ed25519 " + base64.b64encode(
    b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + bytes(range(32))).decode()
KEY_TEXT = ("-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n"
            "-----END OPENSSH PRIVATE KEY-----\n")
CONN = {"host": "10.0.0.5", "port": 22, "user": "gpuprep", "private_key": KEY_TEXT, "host_key": HOST_KEY}
PARAMS = {"VIRTIO_NET_EMULATION_ENABLE": 1, "VIRTIO_NET_EMULATION_NUM_PF": 10,
          "VIRTIO_NET_EMULATION_NUM_VF": 10, "PCI_SWITCH_EMULATION_ENABLE": 1,
          "PCI_SWITCH_EMULATION_NUM_PORT": 10}


@pytest.fixture(autouse=True)
def _no_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    """These checks are local: the login probe (tested against the lab sshd) is switched off."""
    monkeypatch.setenv(preflight.PREFLIGHT_ENV, "off")


def dpu_inputs(**over: object) -> dict:
    return {"connection": CONN, "device": "/dev/mst/mt41692_pciconf0", "parameters": PARAMS,
            "allow_firmware_reset": False, "reset_level": 3, "use_sudo": False, "triggers": [], **over}


def test_check_accepts_the_bluefield_emulation_settings() -> None:
    result = DpuMlxconfigProvider().check({}, dpu_inputs())
    assert result.failures == []
    assert result.inputs["parameters"] == PARAMS


def test_check_names_each_bad_parameter() -> None:
    params = {**PARAMS, "VIRTIO_NET_EMULATION_NUM_PF": 40, "VIRTIO_NET_EMULATION_NUM_PFX": 1}
    failures = DpuMlxconfigProvider().check({}, dpu_inputs(parameters=params)).failures
    assert {f.property for f in failures} == {"parameters"}
    reasons = [f.reason for f in failures]
    assert any(r.startswith("VIRTIO_NET_EMULATION_NUM_PFX: unknown mlxconfig parameter") for r in reasons)
    assert any(r.startswith("VIRTIO_NET_EMULATION_NUM_PF: 40 is out of range 0..31") for r in reasons)


def test_check_skips_values_unknown_during_preview_but_validates_the_known_ones() -> None:
    provider = DpuMlxconfigProvider()
    all_unknown = dpu_inputs(parameters=UNKNOWN, connection=UNKNOWN, device=UNKNOWN)
    assert provider.check({}, all_unknown).failures == []
    partial = {"VIRTIO_NET_EMULATION_NUM_PF": UNKNOWN, "PCI_SWITCH_EMULATION_NUM_PORT": 99}
    (failure,) = provider.check({}, dpu_inputs(parameters=partial)).failures
    assert failure.reason.startswith("PCI_SWITCH_EMULATION_NUM_PORT: 99 is out of range")


@pytest.mark.parametrize(("conn", "fragment"), [
    ({**CONN, "host_key": "not-a-key"}, "connection.host_key"),
    ({**CONN, "port": 70000}, "connection.port"),
    ({k: v for k, v in CONN.items() if k != "user"}, "connection.user"),
])
def test_check_reports_bad_connection_fields_without_echoing_secrets(conn: dict, fragment: str) -> None:
    for provider, inputs in ((DpuMlxconfigProvider(), dpu_inputs(connection=conn)),
                             (HostKernelPrepProvider(), {"connection": conn})):
        failures = provider.check({}, inputs).failures
        assert [f.property for f in failures] == ["connection"]
        assert fragment in failures[0].reason
        assert "c2VjcmV0" not in failures[0].reason and "PRIVATE KEY" not in failures[0].reason


def test_host_check_rejects_shell_metacharacters_in_kernel_args() -> None:
    inputs = {"connection": CONN, "kernel_args": ["iommu=pt; rm -rf /"]}
    failures = HostKernelPrepProvider().check({}, inputs).failures
    assert failures and failures[0].property == "kernel_args"


def outputs_after_apply(inputs: dict, **observed: object) -> dict:
    """What create would have stored for ``inputs`` (echo + observed values)."""
    fingerprint = SshTarget.model_validate(inputs["connection"]).host_key_fingerprint
    echo = {k: inputs[k] for k in ("device", "parameters", "allow_firmware_reset", "reset_level", "use_sudo",
                                   "triggers")}
    return {**echo, "host_key_fingerprint": fingerprint, "reset_pending": True, **observed}


def test_diff_is_empty_for_the_same_inputs_even_with_a_rotated_key_or_string_values() -> None:
    provider = DpuMlxconfigProvider()
    olds = outputs_after_apply(dpu_inputs())
    assert provider.diff("id", olds, dpu_inputs()).changes is False
    rotated = {**CONN, "private_key": KEY_TEXT.replace("c2Vj", "b3Ro")}
    assert provider.diff("id", olds, dpu_inputs(connection=rotated)).changes is False
    as_strings = {k: str(v) for k, v in PARAMS.items()}
    assert provider.diff("id", olds, dpu_inputs(parameters=as_strings)).changes is False


@pytest.mark.parametrize("change", [
    {"parameters": {**PARAMS, "VIRTIO_NET_EMULATION_NUM_VF": 8}},
    {"device": "/dev/mst/mt41692_pciconf0.1"},
    {"triggers": ["recheck-1"]},
    {"allow_firmware_reset": True},
    {"connection": {**CONN, "host_key": OTHER_HOST_KEY}},
    {"parameters": UNKNOWN},
])
def test_diff_reports_changes(change: dict) -> None:
    provider = DpuMlxconfigProvider()
    olds = outputs_after_apply(dpu_inputs())
    news = dpu_inputs(**change)
    if news["connection"] is not CONN:
        SshTarget.model_validate(news["connection"])  # a valid key: the change, not an error, is detected
    result = provider.diff("id", olds, news)
    assert result.changes is True
    assert not result.replaces


def test_diff_requests_an_update_when_a_pending_reset_becomes_allowed_only() -> None:
    provider = DpuMlxconfigProvider()
    inputs = dpu_inputs(allow_firmware_reset=True)
    assert provider.diff("id", outputs_after_apply(inputs, reset_pending=True), inputs).changes is True
    assert provider.diff("id", outputs_after_apply(inputs, reset_pending=False), inputs).changes is False


def test_state_without_a_connection_refreshes_as_recorded_and_delete_touches_nothing() -> None:
    """A resource recorded before its outputs carried the (secret) connection cannot be reached:
    refresh keeps what was recorded instead of failing. (Live reads: tests/ssh/test_ssh_lab.py.)"""
    provider = DpuMlxconfigProvider()
    state = outputs_after_apply(dpu_inputs())
    assert provider.read("dpu-1", state).outs == state
    assert provider.delete("dpu-1", state) is None
