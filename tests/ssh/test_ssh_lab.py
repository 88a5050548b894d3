"""The SSH runner and the idempotent operations against the lab's real sshd and stand-ins."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr

from dynamic_providers import preflight
from dynamic_providers.ssh import operations
from dynamic_providers.ssh.client import SshRunner
from dynamic_providers.ssh.errors import SshAuthError, SshCommandError, SshHostKeyError, SshUnavailableError
from dynamic_providers.ssh.models import DpuMlxconfigSpec, HostKernelPrepSpec, SshTarget
from dynamic_providers.ssh.provider import DpuMlxconfigProvider, HostKernelPrepProvider
from lab import processes
from tests.ssh import drift

SEED_002 = {"VIRTIO_NET_EMULATION_ENABLE": 1, "VIRTIO_NET_EMULATION_NUM_PF": 10,
            "VIRTIO_NET_EMULATION_NUM_VF": 10, "PCI_SWITCH_EMULATION_ENABLE": 1,
            "PCI_SWITCH_EMULATION_NUM_PORT": 10}


def new_key(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def test_commands_run_as_the_lab_user_with_stand_ins_first_on_path(ssh_lab, target: SshTarget) -> None:
    with SshRunner(target) as ssh:
        assert ssh.run(["id", "-un"]).stdout.strip() == ssh_lab.user
        found = ssh.run(["sh", "-c", "command -v mlxconfig"]).stdout.strip()
        assert found == str(ssh_lab.instance_dir / "bin" / "mlxconfig")
        assert ssh.run(["cat"], stdin="echo; $(rm -rf /)\n").stdout == "echo; $(rm -rf /)\n"  # no shell eval
        assert ssh.read_file(str(ssh_lab.sysroot / "no/such/file")) is None
        with pytest.raises(SshCommandError) as failed:
            ssh.run(["mlxconfig", "-d", "/dev/mst/none", "query"])
        assert failed.value.exit_status == 1 and "Failed to open the device" in (failed.value.stderr or "")
        assert failed.value.command == "mlxconfig query"


def test_a_host_key_other_than_the_pinned_one_is_refused_before_login(ssh_lab, target: SshTarget,
                                                                      tmp_path: Path) -> None:
    other = " ".join(Path(f"{new_key(tmp_path, 'other_host')}.pub").read_text().split()[:2])
    with pytest.raises(SshHostKeyError) as err:
        SshRunner(target.model_copy(update={"host_key": other}), connect_retries=0).connect()
    assert "host key mismatch" in str(err.value) and ssh_lab.host_key.split()[1] not in str(err.value)
    assert ssh_lab.invocations() == []


def test_an_unauthorised_key_fails_authentication(ssh_lab, target: SshTarget, tmp_path: Path) -> None:
    stranger = new_key(tmp_path, "stranger").read_text()
    with pytest.raises(SshAuthError) as err:
        SshRunner(target.model_copy(update={"private_key": SecretStr(stranger)}), connect_retries=0).connect()
    assert "public-key authentication failed" in str(err.value)
    assert f"{ssh_lab.user}@127.0.0.1:{ssh_lab.port}" in str(err.value)
    assert "PRIVATE KEY" not in str(err.value)


def test_a_closed_port_is_unavailable_not_auth(target: SshTarget) -> None:
    closed = target.model_copy(update={"port": processes.free_port()})
    with pytest.raises(SshUnavailableError):
        SshRunner(closed, connect_retries=0).connect()


def set_calls(ssh_lab) -> list[list[str]]:
    return [r["argv"] for r in ssh_lab.invocations("mlxconfig") if "set" in r["argv"]]


def test_dpu_is_configured_once_and_reset_only_when_allowed(ssh_lab, target: SshTarget) -> None:
    spec = DpuMlxconfigSpec(device=ssh_lab.device, parameters=SEED_002)
    first = operations.configure_dpu(target, spec)
    assert first["changed"] == sorted(SEED_002) and first["reset_pending"] is True
    assert first["next_boot"] == SEED_002 and first["current"]["PCI_SWITCH_EMULATION_NUM_PORT"] == 16
    assert {n: p["next"] for n, p in ssh_lab.mlx_state().items() if n in SEED_002} == SEED_002

    again = operations.configure_dpu(target, spec)
    assert again["changed"] == [] and again["reset_pending"] is True and again["reset_performed"] is False
    assert len(set_calls(ssh_lab)) == 1 and ssh_lab.invocations("mlxfwreset") == []

    one = operations.configure_dpu(target, spec.model_copy(
        update={"parameters": {**SEED_002, "VIRTIO_NET_EMULATION_NUM_VF": 8}}))
    assert one["changed"] == ["VIRTIO_NET_EMULATION_NUM_VF"]
    assert set_calls(ssh_lab)[-1][-2:] == ["set", "VIRTIO_NET_EMULATION_NUM_VF=8"]

    reset = operations.configure_dpu(target, spec.model_copy(update={"allow_firmware_reset": True}))
    assert reset["changed"] == ["VIRTIO_NET_EMULATION_NUM_VF"]  # back to 10
    assert reset["reset_performed"] is True and reset["reset_pending"] is False
    assert reset["current"] == SEED_002 and len(ssh_lab.invocations("mlxfwreset")) == 1


def test_host_kernel_prep_changes_files_once_and_reboots_only_when_allowed(ssh_lab, target) -> None:
    spec = HostKernelPrepSpec(sysroot=str(ssh_lab.sysroot))
    first = operations.prepare_host(target, spec)
    assert first["changed"] == ["grub", "modprobe", "initramfs"]
    assert first["missing_active_kernel_args"] == ["intel_iommu=on", "iommu=pt", "pci=realloc"]
    assert first["loaded_blacklisted_modules"] == ["nouveau"]
    assert first["reboot_pending"] is True and first["rebooted"] is False
    assert 'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt pci=realloc"' in ssh_lab.read("/etc/default/grub")
    assert "blacklist nouveau" in ssh_lab.read("/etc/modprobe.d/composable-gpu-blacklist.conf")
    assert "intel_iommu=on" in ssh_lab.read("/boot/grub/grub.cfg")

    again = operations.prepare_host(target, spec)
    assert again["changed"] == [] and again["reboot_pending"] is True
    assert [r["tool"] for r in ssh_lab.invocations()] == ["update-grub", "update-initramfs"]

    rebooted = operations.prepare_host(target, spec.model_copy(update={"allow_reboot": True}))
    assert rebooted["rebooted"] is True and rebooted["reboot_pending"] is False
    assert "intel_iommu=on iommu=pt pci=realloc" in ssh_lab.read("/proc/cmdline")
    assert "nouveau" not in ssh_lab.read("/proc/modules")

    settled = operations.prepare_host(target, spec.model_copy(update={"allow_reboot": True}))
    assert settled["rebooted"] is False and settled["changed"] == []
    assert [r["tool"] for r in ssh_lab.invocations()] == ["update-grub", "update-initramfs", "reboot"]


# --- preview-time login probe (dynamic_providers.preflight) ----------------------------------


def _connection(target: SshTarget, **over: object) -> dict:
    conn = {"host": target.host, "port": target.port, "user": target.user,
            "private_key": target.private_key.get_secret_value(), "host_key": target.host_key,
            "connect_timeout_seconds": 5.0}
    return {**conn, **over}


@pytest.fixture
def fresh_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(preflight.PREFLIGHT_ENV, raising=False)
    preflight.forget()


def test_check_refuses_a_wrong_key_in_one_line_without_running_anything(
        ssh_lab, target: SshTarget, tmp_path: Path, fresh_preflight) -> None:
    stranger = new_key(tmp_path, "stranger").read_text()
    inputs = {"connection": _connection(target, private_key=stranger), "parameters": SEED_002,
              "device": "/dev/mst/mt41692_pciconf0"}
    (failure,) = DpuMlxconfigProvider().check({}, inputs).failures
    assert failure.property == "connection"
    where = f"{target.user}@127.0.0.1:{target.port}"
    assert failure.reason.startswith(f"SSH host {where}: the private key was refused")
    assert "\n" not in failure.reason and "PRIVATE KEY" not in failure.reason
    assert ssh_lab.invocations() == []


def test_check_logs_in_once_per_host_and_key_and_reports_a_closed_port(ssh_lab, target: SshTarget,
                                                                      fresh_preflight) -> None:
    assert HostKernelPrepProvider().check({}, {"connection": _connection(target)}).failures == []
    closed = _connection(target, port=processes.free_port())
    (failure,) = HostKernelPrepProvider().check({}, {"connection": closed}).failures
    assert "no SSH connection" in failure.reason and f"{preflight.PREFLIGHT_ENV}=off" in failure.reason
    assert ssh_lab.invocations() == []  # a login runs no command


# --- refresh reads the live values (provider read) --------------------------------------------


def test_host_refresh_sees_grub_cmdline_and_blacklist_drift_and_update_repairs_it(ssh_lab,
                                                                                 target: SshTarget) -> None:
    provider = HostKernelPrepProvider()
    inputs = {"connection": _connection(target), "sysroot": str(ssh_lab.sysroot), "allow_reboot": True}
    outs = provider.create(inputs).outs
    assert outs["reboot_pending"] is False and outs["connection"] == inputs["connection"]
    ran = len(ssh_lab.invocations())
    assert provider.read("id", outs).outs["kernel_args"] == outs["kernel_args"], "no drift yet"

    drift.drop_kernel_arg(ssh_lab, "iommu=pt")
    drift.boot_without(ssh_lab, "intel_iommu=on")
    drift.unblacklist(ssh_lab, "nouveau")
    read = provider.read("id", outs)
    assert read.outs["configured_kernel_args"] == ["intel_iommu=on", "pci=realloc"]
    assert read.outs["missing_active_kernel_args"] == ["intel_iommu=on"]
    assert read.outs["reboot_pending"] is True
    assert read.outs["kernel_args"] == ["intel_iommu=on", "pci=realloc"] == read.inputs["kernel_args"]
    assert read.outs["blacklisted_modules"] == [] == read.inputs["blacklisted_modules"]
    assert read.inputs["connection"] == inputs["connection"]
    assert read.inputs["sysroot"] == str(ssh_lab.sysroot)
    assert len(ssh_lab.invocations()) == ran, "refresh runs no tool, writes nothing"

    wanted = {**inputs, "kernel_args": outs["kernel_args"],
              "blacklisted_modules": outs["blacklisted_modules"]}
    assert provider.diff("id", read.outs, wanted).changes is True
    repaired = provider.update("id", read.outs, wanted).outs
    assert repaired["changed"] == ["grub", "modprobe", "initramfs"] and repaired["rebooted"] is True
    assert 'GRUB_CMDLINE_LINUX="intel_iommu=on pci=realloc iommu=pt"' in ssh_lab.read("/etc/default/grub")
    assert provider.read("id", repaired).outs["reboot_pending"] is False


def test_dpu_refresh_sees_mlxconfig_drift_and_update_repairs_it(ssh_lab, target: SshTarget) -> None:
    provider = DpuMlxconfigProvider()
    inputs = {"connection": _connection(target), "device": ssh_lab.device, "parameters": SEED_002,
              "allow_firmware_reset": True}
    outs = provider.create(inputs).outs
    assert outs["reset_pending"] is False
    drift.set_mlx(ssh_lab, "VIRTIO_NET_EMULATION_NUM_VF", next_boot=4)            # staged by someone
    drift.set_mlx(ssh_lab, "PCI_SWITCH_EMULATION_NUM_PORT", next_boot=16, current=16)  # and applied
    queries = len(ssh_lab.invocations("mlxconfig"))
    read = provider.read("id", outs)
    assert read.outs["next_boot"]["VIRTIO_NET_EMULATION_NUM_VF"] == 4
    assert read.outs["current"]["VIRTIO_NET_EMULATION_NUM_VF"] == 10
    assert read.outs["pending_parameters"] == ["VIRTIO_NET_EMULATION_NUM_VF"] and read.outs["reset_pending"]
    assert read.outs["current"]["PCI_SWITCH_EMULATION_NUM_PORT"] == 16
    assert read.inputs["parameters"] == {**SEED_002, "VIRTIO_NET_EMULATION_NUM_VF": 4,
                                         "PCI_SWITCH_EMULATION_NUM_PORT": 16}
    calls = ssh_lab.invocations("mlxconfig")[queries:]
    assert [c["argv"][3] for c in calls] == ["query"], "refresh only queries"

    assert provider.diff("id", read.outs, inputs).changes is True
    repaired = provider.update("id", read.outs, inputs).outs
    assert repaired["changed"] == ["PCI_SWITCH_EMULATION_NUM_PORT", "VIRTIO_NET_EMULATION_NUM_VF"]
    assert repaired["next_boot"] == SEED_002 and repaired["current"] == SEED_002
