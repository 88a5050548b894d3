"""Real ``pulumi up`` runs of HostKernelPrep and DpuMlxconfig against the lab sshd.

A small Pulumi project in ``tmp_path`` imports the providers from this checkout (through
``PYTHONPATH``) and takes every connection detail from stack config secrets. The stand-ins'
invocation log proves what ran on the "hardware".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from pulumi import automation as auto

from tests.cli_assertions import error_lines
from tests.ssh import drift

pytestmark = [pytest.mark.cli, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SEED_002 = {"VIRTIO_NET_EMULATION_ENABLE": 1, "VIRTIO_NET_EMULATION_NUM_PF": 10,
            "VIRTIO_NET_EMULATION_NUM_VF": 10, "PCI_SWITCH_EMULATION_ENABLE": 1,
            "PCI_SWITCH_EMULATION_NUM_PORT": 10}

PROGRAM = '''
import pulumi
from dynamic_providers.ssh.provider import DpuMlxconfig, HostKernelPrep

cfg = pulumi.Config()
connection = {
    "host": cfg.require_secret("sshHost"),
    "port": cfg.require_int("sshPort"),
    "user": cfg.require_secret("sshUser"),
    "private_key": cfg.require_secret("sshPrivateKey"),
    "host_key": cfg.require("sshHostKey"),
}
dpu = DpuMlxconfig("dpu-blade-slot-1-mlxconfig", connection=connection, device=cfg.require("device"),
                   parameters=cfg.require_object("mlxParams"),
                   allow_firmware_reset=cfg.get_bool("allowFirmwareReset") or False)
host = HostKernelPrep("blade-slot-1-kernel", connection=connection, sysroot=cfg.require("sysroot"),
                      allow_reboot=cfg.get_bool("allowReboot") or False)
for key in ("changed", "next_boot", "current", "reset_pending", "reset_performed", "host_key_fingerprint"):
    pulumi.export(f"dpu_{key}", getattr(dpu, key))
for key in ("changed", "configured_kernel_args", "reboot_pending", "rebooted", "loaded_blacklisted_modules"):
    pulumi.export(f"host_{key}", getattr(host, key))
'''


def make_stack(tmp_path: Path, ssh_lab, name: str = "dev") -> auto.Stack:
    project = tmp_path / "project"
    if not project.exists():
        project.mkdir()
        (project / "Pulumi.yaml").write_text(textwrap.dedent(f"""\
            name: ssh-prep-test
            runtime:
              name: python
              options:
                virtualenv: {ROOT / '.venv'}
            """))
        (project / "__main__.py").write_text(PROGRAM)
        (tmp_path / "state").mkdir()
    env = {"PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}", "PULUMI_CONFIG_PASSPHRASE": "test-only",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    stack = auto.create_or_select_stack(stack_name=name, work_dir=str(project),
                                        opts=auto.LocalWorkspaceOptions(env_vars=env))
    stack.set_all_config({
        "sshHost": auto.ConfigValue("127.0.0.1", secret=True),
        "sshPort": auto.ConfigValue(str(ssh_lab.port)),
        "sshUser": auto.ConfigValue(ssh_lab.user, secret=True),
        "sshPrivateKey": auto.ConfigValue(ssh_lab.client_private_key(), secret=True),
        "sshHostKey": auto.ConfigValue(ssh_lab.host_key),
        "device": auto.ConfigValue(ssh_lab.device),
        "sysroot": auto.ConfigValue(str(ssh_lab.sysroot)),
        "mlxParams": auto.ConfigValue(json.dumps(SEED_002)),
    })
    return stack


def params_json(**over: int) -> auto.ConfigValue:
    return auto.ConfigValue(json.dumps({**SEED_002, **over}))


def outputs(result: auto.UpResult) -> dict:
    return {k: v.value for k, v in result.outputs.items()}


def set_calls(ssh_lab) -> list[list[str]]:
    return [r["argv"] for r in ssh_lab.invocations("mlxconfig") if "set" in r["argv"]]


def cli_export(stack: auto.Stack) -> str:
    """Output of the plain CLI ``pulumi stack export`` (secrets stay encrypted)."""
    env = {**os.environ, **stack.workspace.env_vars}
    argv = ["pulumi", "stack", "export", "--stack", stack.name, "--cwd", stack.workspace.work_dir]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=120)
    return done.stdout


def resources(stack: auto.Stack, kind: str) -> list[dict]:
    """Resources of ``kind`` in the state, secrets decrypted (Automation API export)."""
    deployment = stack.export_stack().deployment
    return [r for r in deployment.get("resources", []) if r["type"].endswith(f":{kind}")]


def test_up_applies_then_converges_and_changes_only_what_differs(ssh_lab, tmp_path: Path) -> None:
    stack = make_stack(tmp_path, ssh_lab)

    first = stack.up(on_output=None)
    out = outputs(first)
    assert first.summary.result == "succeeded"
    assert out["dpu_changed"] == sorted(SEED_002) and out["dpu_next_boot"] == SEED_002
    assert out["dpu_reset_pending"] is True and out["dpu_reset_performed"] is False
    assert out["host_changed"] == ["grub", "modprobe", "initramfs"]
    assert out["host_configured_kernel_args"] == ["intel_iommu=on", "iommu=pt", "pci=realloc"]
    assert out["host_reboot_pending"] is True and out["host_rebooted"] is False
    expected = [f"{k}={v}" for k, v in sorted(SEED_002.items())]
    assert set_calls(ssh_lab) == [["-d", ssh_lab.device, "-y", "set", *expected]]
    assert ssh_lab.invocations("mlxfwreset") == [] and ssh_lab.invocations("reboot") == []

    # `pulumi stack export` holds no key material and no secret connection detail in plaintext.
    exported = cli_export(stack)
    key_body = "".join(ssh_lab.client_private_key().splitlines()[1:-1])
    assert "PRIVATE KEY" not in exported and key_body[:40] not in exported
    assert ssh_lab.user not in exported and '"ciphertext"' in exported
    # Decrypted, the key is only in the secret connection (input, and output for refresh).
    for kind in ("DpuMlxconfig", "HostKernelPrep"):
        (res,) = resources(stack, kind)
        others = {k: v for k, v in res["outputs"].items() if k != "connection"}
        assert "PRIVATE KEY" not in json.dumps(others)
        assert "PRIVATE KEY" in json.dumps(res["inputs"]["connection"])
        assert "PRIVATE KEY" in json.dumps(res["outputs"]["connection"])
    assert out["dpu_host_key_fingerprint"].startswith("SHA256:")

    # A second up changes nothing and runs nothing on the target.
    before = len(ssh_lab.invocations())
    second = stack.up(on_output=None)
    assert set(second.summary.resource_changes or {}) == {"same"}
    assert len(ssh_lab.invocations()) == before

    # A fresh stack against the already-prepared target queries but sets nothing.
    fresh = make_stack(tmp_path, ssh_lab, name="fresh")
    fresh_out = outputs(fresh.up(on_output=None))
    assert fresh_out["dpu_changed"] == [] and fresh_out["host_changed"] == []
    assert len(set_calls(ssh_lab)) == 1 and len(ssh_lab.invocations("update-grub")) == 1
    fresh.destroy(on_output=None)
    assert ssh_lab.mlx_state()["VIRTIO_NET_EMULATION_NUM_PF"]["next"] == 10  # destroy leaves firmware alone

    # Changing one parameter sets exactly that one.
    stack.set_config("mlxParams", params_json(VIRTIO_NET_EMULATION_NUM_VF=8))
    third = outputs(stack.up(on_output=None))
    assert third["dpu_changed"] == ["VIRTIO_NET_EMULATION_NUM_VF"]
    assert set_calls(ssh_lab)[-1] == ["-d", ssh_lab.device, "-y", "set", "VIRTIO_NET_EMULATION_NUM_VF=8"]
    assert len(set_calls(ssh_lab)) == 2 and len(ssh_lab.invocations("update-grub")) == 1

    # Reset and reboot happen only once the stack opts in.
    stack.set_config("allowFirmwareReset", auto.ConfigValue("true"))
    stack.set_config("allowReboot", auto.ConfigValue("true"))
    fourth = outputs(stack.up(on_output=None))
    assert fourth["dpu_reset_performed"] is True and fourth["dpu_reset_pending"] is False
    assert fourth["dpu_current"]["VIRTIO_NET_EMULATION_NUM_VF"] == 8
    assert fourth["host_rebooted"] is True and fourth["host_reboot_pending"] is False
    assert fourth["host_loaded_blacklisted_modules"] == []
    assert len(ssh_lab.invocations("mlxfwreset")) == 1 and len(ssh_lab.invocations("reboot")) == 1
    assert len(set_calls(ssh_lab)) == 2


def failing_up(stack: auto.Stack) -> str:
    with pytest.raises(auto.CommandError) as err:
        stack.up(on_output=None)
    if os.environ.get("SSH_TEST_SHOW_ERRORS"):
        print(str(err.value))
    return str(err.value)


def test_errors_are_clear_and_leave_state_consistent(ssh_lab, tmp_path: Path) -> None:
    stack = make_stack(tmp_path, ssh_lab)

    # Unknown parameter: rejected by check, before any connection; nothing created.
    stack.set_config("mlxParams", params_json(VIRTIO_NET_EMULATION_NUM_PFS=4))
    message = failing_up(stack)
    assert "VIRTIO_NET_EMULATION_NUM_PFS: unknown mlxconfig parameter" in message
    assert "did you mean VIRTIO_NET_EMULATION_NUM_PF" in message
    assert ssh_lab.invocations("mlxconfig") == [] and resources(stack, "DpuMlxconfig") == []

    stack.set_config("mlxParams", auto.ConfigValue(json.dumps(SEED_002)))
    stack.up(on_output=None)
    (baseline,) = resources(stack, "DpuMlxconfig")
    ran = len(ssh_lab.invocations())

    # Out-of-range value: rejected by check; state and target untouched.
    stack.set_config("mlxParams", params_json(VIRTIO_NET_EMULATION_NUM_PF=40))
    message = failing_up(stack)
    assert "VIRTIO_NET_EMULATION_NUM_PF: 40 is out of range 0..31" in message
    assert len(ssh_lab.invocations()) == ran
    assert resources(stack, "DpuMlxconfig")[0]["outputs"] == baseline["outputs"]

    # SSH auth failure during an update: clear error, nothing ran, previous state kept.
    other_key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True)
    stack.set_config("mlxParams", params_json(VIRTIO_NET_EMULATION_NUM_PF=4))
    stack.set_config("sshPrivateKey", auto.ConfigValue(other_key.read_text(), secret=True))
    message = failing_up(stack)
    # the preview-time login probe refuses it, before create/update could connect
    assert "the private key was refused" in message and "PRIVATE KEY" not in message
    assert len(ssh_lab.invocations()) == ran
    (after,) = resources(stack, "DpuMlxconfig")
    assert after["outputs"] == baseline["outputs"]
    assert not stack.export_stack().deployment.get("pending_operations")

    # With the right key again the same change goes through, setting only that parameter.
    stack.set_config("sshPrivateKey", auto.ConfigValue(ssh_lab.client_private_key(), secret=True))
    result = outputs(stack.up(on_output=None))
    assert result["dpu_changed"] == ["VIRTIO_NET_EMULATION_NUM_PF"]
    assert set_calls(ssh_lab)[-1] == ["-d", ssh_lab.device, "-y", "set", "VIRTIO_NET_EMULATION_NUM_PF=4"]


def test_preview_stops_on_a_refused_key_in_one_line_and_runs_nothing(ssh_lab, tmp_path: Path) -> None:
    stack = make_stack(tmp_path, ssh_lab)
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    stack.set_config("sshPrivateKey", auto.ConfigValue(stranger.read_text(), secret=True))
    env = {**os.environ, **stack.workspace.env_vars}
    preview = subprocess.run(["pulumi", "preview", "--non-interactive", "--stack", stack.name],
                             cwd=stack.workspace.work_dir, env=env, capture_output=True, text=True,
                             timeout=300)
    text = preview.stdout + preview.stderr
    assert preview.returncode != 0, text
    # host and user are secret config values: the CLI masks them in every line it prints
    where = f"[secret]@[secret]:{ssh_lab.port}"
    # The engine stops the preview at the first failed check, so one or both resources report;
    # each reports one error (printed on its progress line and again under "Diagnostics:").
    reported = 0
    for resource in ("dpu-blade-slot-1-mlxconfig", "blade-slot-1-kernel"):
        lines = error_lines(text, resource, where)
        assert len(lines) <= 1, text
        if lines:
            reported += 1
            assert "private key was refused" in lines.pop(), text
    assert reported >= 1, text
    assert "PRIVATE KEY" not in text and ssh_lab.user not in text
    assert ssh_lab.invocations() == []


def cli(stack: auto.Stack, *args: str) -> str:
    """Run the plain ``pulumi`` CLI on the stack; its output (fails the test on a non-zero exit)."""
    env = {**os.environ, **stack.workspace.env_vars}
    done = subprocess.run(["pulumi", *args, "--non-interactive", "--stack", stack.name],
                          cwd=stack.workspace.work_dir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_refresh_shows_out_of_band_changes_and_up_repairs_them(ssh_lab, tmp_path: Path) -> None:
    stack = make_stack(tmp_path, ssh_lab)
    stack.set_config("allowFirmwareReset", auto.ConfigValue("true"))
    stack.set_config("allowReboot", auto.ConfigValue("true"))
    settled = outputs(stack.up(on_output=None))
    assert settled["host_reboot_pending"] is False and settled["dpu_reset_pending"] is False

    # Behind Pulumi's back: GRUB loses an argument, the host booted without another, nouveau is
    # no longer blacklisted, one mlxconfig value is staged for the next boot, another applied.
    drift.drop_kernel_arg(ssh_lab, "pci=realloc")
    drift.boot_without(ssh_lab, "iommu=pt")
    drift.unblacklist(ssh_lab, "nouveau")
    drift.set_mlx(ssh_lab, "VIRTIO_NET_EMULATION_NUM_PF", next_boot=2)
    drift.set_mlx(ssh_lab, "PCI_SWITCH_EMULATION_ENABLE", next_boot=0, current=0)
    ran = len(ssh_lab.invocations())

    refreshed = cli(stack, "refresh", "--yes", "--diff")
    assert re.search(r'~ VIRTIO_NET_EMULATION_NUM_PF\s*: 10 => 2', refreshed), refreshed
    assert re.search(r'~ PCI_SWITCH_EMULATION_ENABLE\s*: 1 => 0', refreshed), refreshed
    assert re.search(r'- \[2\]: "pci=realloc"', refreshed), refreshed
    assert re.search(r'~ reboot_pending\s*: false => true', refreshed), refreshed
    assert re.search(r'- \[0\]: "nouveau"', refreshed), refreshed
    assert "PRIVATE KEY" not in refreshed
    during = ssh_lab.invocations()[ran:]
    assert during and all(r["tool"] == "mlxconfig" and "query" in r["argv"] for r in during), during
    (dpu,) = resources(stack, "DpuMlxconfig")
    assert dpu["outputs"]["pending_parameters"] == ["VIRTIO_NET_EMULATION_NUM_PF"]
    (host,) = resources(stack, "HostKernelPrep")
    assert host["outputs"]["missing_active_kernel_args"] == ["iommu=pt"]
    exported = cli_export(stack)
    assert "PRIVATE KEY" not in exported and ssh_lab.user not in exported, "the connection stays a secret"

    preview = cli(stack, "preview", "--diff")
    assert re.search(r'~ VIRTIO_NET_EMULATION_NUM_PF\s*: 2 => 10', preview), preview
    assert re.search(r'\+ \[2\]: "pci=realloc"', preview), preview

    repaired = outputs(stack.up(on_output=None))
    assert set_calls(ssh_lab)[-1] == ["-d", ssh_lab.device, "-y", "set", "PCI_SWITCH_EMULATION_ENABLE=1",
                                      "VIRTIO_NET_EMULATION_NUM_PF=10"]
    assert repaired["dpu_next_boot"] == SEED_002 and repaired["dpu_current"] == SEED_002
    assert repaired["host_configured_kernel_args"] == ["intel_iommu=on", "iommu=pt", "pci=realloc"]
    assert "blacklist nouveau" in ssh_lab.read(drift.BLACKLIST)
    assert repaired["host_rebooted"] is True and repaired["host_reboot_pending"] is False
    assert "iommu=pt" in ssh_lab.read(drift.CMDLINE).split()
    after = cli(stack, "preview", "--diff", "--refresh")
    assert "3 unchanged" in after and "to update" not in after, after
