"""Host and DPU preparation over SSH inside the ``Host`` and ``Dpu`` components.

Under Pulumi mocks: with a ``prep`` section the Host registers ``HostKernelPrep`` and the Dpu
``DpuMlxconfig`` as their children (derived names, inputs from the host/DPU config, the private key
only as a secret, ordering after the posture / the DPU's mlxconfig), the optional contract properties
and the ``reboot_pending`` / ``firmware_reset_pending`` outputs reach the estate report and summary;
without the section nothing of it is registered.

Through the real CLI (``lab``, ``cli``, ``slow``): the program with a one-host stack config whose
``prep`` sections point at a private lab sshd; ``pulumi up`` changes the stand-ins' GRUB file and
mlxconfig state, a second ``up`` changes nothing and runs no command on the target.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components import Estate, EstateArgs, Host, HostArgs
from components._base import Mothership
from lab import settings
from stack_config import load_estate
from stack_config.models import DEFAULT_MLXCONFIG
from stack_config.summary import render_summary
from tests.components.conftest import (
    Recorder,
    _Mocks,
    _RecordingMonitor,
    is_secret,
    plain_occurrences,
    run,
    unwrap,
    value,
)
from tests.config.factories import (
    SSH_HOST_KEY,
    SSH_KEY_MARKER,
    SSH_PRIVATE_KEY,
    dpu_prep,
    host_prep,
    valid_estate,
)
from tests.pulumi_project import file_backend, local_project

HOST = "composable:infra:Host"
DPU = "composable:infra:Dpu"
KERNEL_PREP = "pulumi-python:dynamic/ssh:HostKernelPrep"
MLXCONFIG = "pulumi-python:dynamic/ssh:DpuMlxconfig"
POSTURE = "pulumi-python:dynamic/redfish:DpuPosture"


class _SshMocks(_Mocks):
    """The suite's mocks, plus plausible outputs of the SSH resources (a first run: settings written,
    reboot and firmware reset still pending)."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        rid, outs = super().new_resource(args)
        if self.preview:
            return rid, outs
        if args.typ == KERNEL_PREP:
            outs = {
                **outs,
                "changed": ["grub", "modprobe", "initramfs"],
                "reboot_pending": True,
                "rebooted": False,
            }
        elif args.typ == MLXCONFIG:
            outs = {
                **outs,
                "changed": sorted(outs["parameters"]),
                "reset_pending": True,
                "reset_performed": False,
            }
        return rid, outs


class _DependencyMonitor(_RecordingMonitor):
    """Also records each resource's ``depends_on`` URNs, by resource name."""

    def __init__(self, mocks: pulumi.runtime.Mocks, recorder: Recorder) -> None:
        super().__init__(mocks, recorder)
        self.dependencies: dict[str, list[str]] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        self.dependencies[request.name] = list(request.dependencies)
        return super().RegisterResource(request)


@pytest.fixture
def ssh_mocks() -> Iterator[tuple[Recorder, _DependencyMonitor]]:
    recorder = Recorder()
    m = _SshMocks()
    monitor = _DependencyMonitor(m, recorder)
    pulumi.runtime.set_mocks(m, project="composable-gpu", stack="test", preview=False, monitor=monitor)
    yield recorder, monitor


def _raw(*, host: dict[str, Any] | None = None, dpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """The valid estate with prep sections on hv-1 (hosts[0]) and its DPU."""
    raw = valid_estate()
    if host is not None:
        raw["hosts"][0]["prep"] = host
    if dpu is not None:
        raw["hosts"][0]["dpu"]["prep"] = dpu
    return raw


def _host(raw: dict[str, Any]) -> Host:
    cfg = load_estate(raw).hosts[0]
    ms = Mothership(provider=k8s.Provider("mothership", kubeconfig="/dev/null"), namespace="infra")
    return Host(cfg.name, HostArgs(config=cfg, mothership=ms))


def test_host_prep_registers_kernel_prep_as_a_child(ssh_mocks: tuple[Recorder, _DependencyMonitor]) -> None:
    mocks, _ = ssh_mocks
    host = run(lambda: _host(_raw(host=host_prep(port=2222))))

    prep = mocks.named("hv-1-kernel-prep", KERNEL_PREP)
    assert prep.parent == mocks.urn_of("hv-1", HOST) and prep.custom
    inputs = prep.inputs
    assert inputs["kernel_args"] == ["intel_iommu=on", "iommu=pt", "pci=realloc"]
    assert inputs["blacklisted_modules"] == ["nouveau"]
    assert (inputs["allow_reboot"], inputs["sysroot"], inputs["use_sudo"]) == (False, "", False)
    assert is_secret(inputs["connection"])
    assert unwrap(inputs["connection"]) == {
        "host": "10.0.2.1",
        "port": 2222,
        "user": "gpuprep",
        "private_key": SSH_PRIVATE_KEY,
        "host_key": SSH_HOST_KEY,
    }
    assert mocks.named("hv-1", HOST).inputs["allow_reboot"] is False
    assert value(host.reboot_pending) is True
    assert host.kernel_prep is not None and mocks.of_type(MLXCONFIG) == []  # the DPU has no prep


def test_host_settings_and_opt_ins_reach_the_resource(ssh_mocks: tuple[Recorder, _DependencyMonitor]) -> None:
    mocks, _ = ssh_mocks
    raw = _raw(host=host_prep(allow_reboot=True, use_sudo=True, sysroot="/srv/lab/sysroot"))
    raw["environment"] = "lab"
    raw["hosts"][0]["kernel_args"] = ["intel_iommu=on", "iommu=pt"]
    raw["hosts"][0]["blacklisted_modules"] = ["nouveau", "nvidiafb"]
    run(lambda: _host(raw))
    inputs = mocks.named("hv-1-kernel-prep", KERNEL_PREP).inputs
    assert inputs["kernel_args"] == ["intel_iommu=on", "iommu=pt"]
    assert inputs["blacklisted_modules"] == ["nouveau", "nvidiafb"]
    assert (inputs["allow_reboot"], inputs["sysroot"], inputs["use_sudo"]) == (True, "/srv/lab/sysroot", True)
    assert mocks.named("hv-1", HOST).inputs["allow_reboot"] is True


def test_dpu_prep_registers_mlxconfig_after_the_posture(
    ssh_mocks: tuple[Recorder, _DependencyMonitor],
) -> None:
    mocks, monitor = ssh_mocks
    raw = _raw(host=host_prep(), dpu=dpu_prep(device="03:00.0", allow_firmware_reset=True))
    raw["hosts"][0]["dpu"]["mlxconfig"] = {
        "VIRTIO_NET_EMULATION_ENABLE": "true",
        "VIRTIO_NET_EMULATION_NUM_PF": 4,
    }
    host = run(lambda: _host(raw))

    mlx = mocks.named("dpu-hv-1-mlxconfig", MLXCONFIG)
    assert mlx.parent == mocks.urn_of("dpu-hv-1", DPU)
    assert mlx.inputs["device"] == "03:00.0"
    assert mlx.inputs["parameters"] == {
        "VIRTIO_NET_EMULATION_ENABLE": "true",
        "VIRTIO_NET_EMULATION_NUM_PF": 4,
    }
    assert mlx.inputs["allow_firmware_reset"] is True
    assert is_secret(mlx.inputs["connection"])
    assert unwrap(mlx.inputs["connection"])["host"] == "10.0.3.1"
    assert mocks.named("dpu-hv-1", DPU).inputs["allow_firmware_reset"] is True

    # the firmware step waits for the posture (which may reset the DPU); the host's reboot waits for it
    assert monitor.dependencies["dpu-hv-1-mlxconfig"] == [mocks.urn_of("dpu-hv-1-posture", POSTURE)]
    assert monitor.dependencies["hv-1-kernel-prep"] == [mlx.urn]

    assert host.dpu is not None
    assert value(host.dpu.firmware_reset_pending) is True
    assert value(host.dpu.reset_pending) is False  # the posture's, unchanged


def test_private_key_is_only_ever_a_secret(ssh_mocks: tuple[Recorder, _DependencyMonitor]) -> None:
    mocks, _ = ssh_mocks
    run(lambda: _host(_raw(host=host_prep(), dpu=dpu_prep())))
    assert len(mocks.of_type(KERNEL_PREP)) == len(mocks.of_type(MLXCONFIG)) == 1
    assert plain_occurrences([r.inputs for r in mocks.registrations], SSH_KEY_MARKER) == []


def test_without_prep_nothing_is_registered_over_ssh(ssh_mocks: tuple[Recorder, _DependencyMonitor]) -> None:
    mocks, _ = ssh_mocks
    host = run(lambda: _host(valid_estate()))
    assert mocks.of_type(KERNEL_PREP) == [] and mocks.of_type(MLXCONFIG) == []
    assert host.kernel_prep is None and host.dpu is not None and host.dpu.mlxconfig_prep is None
    assert "allow_reboot" not in mocks.named("hv-1", HOST).inputs
    assert "allow_firmware_reset" not in mocks.named("dpu-hv-1", DPU).inputs
    assert value(host.reboot_pending) is None and value(host.dpu.firmware_reset_pending) is None


def test_pending_flags_reach_the_report_and_summary(
    ssh_mocks: tuple[Recorder, _DependencyMonitor], tmp_path: Path
) -> None:
    mocks, _ = ssh_mocks
    cfg = load_estate(_raw(host=host_prep(), dpu=dpu_prep()))
    estate = run(lambda: Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path)))
    report = value(estate.report)

    hosts = {h["name"]: h for h in report["hosts"]}
    assert hosts["hv-1"]["reboot_pending"] is True
    assert "reboot_pending" not in hosts["bm-1"]  # not prepared over SSH
    dpus = {d["name"]: d for d in report["dpus"]}
    assert dpus["dpu-hv-1"]["firmware_reset_pending"] is True
    assert "firmware_reset_pending" not in dpus["dpu-bm-1"]
    assert SSH_KEY_MARKER not in json.dumps(report)

    lines = render_summary(report).splitlines()
    host_line = next(ln for ln in lines if ln.strip().startswith("hv-1 "))
    assert host_line.endswith("reboot pending yes")
    assert not any("reboot pending" in ln for ln in lines if ln.strip().startswith("bm-1 "))
    dpu_line = next(ln for ln in lines if ln.strip().startswith("dpu-hv-1 "))
    assert "reset pending no" in dpu_line and dpu_line.endswith("firmware reset pending yes")


# ---------------------------------------------------------------------------------------------
# The real CLI: the program against a private lab sshd (and the lab's API server and Redfish BMC).

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ("pulumi", "pulumi-language-python", "kube-apiserver", "etcd")
MISSING = [b for b in NEEDED if not (ROOT / ".toolchain" / "bin" / b).exists()]


@pytest.fixture(scope="module")
def prep_sshd() -> Iterator[Any]:
    """A private lab sshd (user ``gpuprep-c<pid>``, a ``mkdtemp`` dir), stopped and wiped after the module."""
    from lab import processes, sshd

    reason = sshd.unavailable_reason()
    if reason:
        pytest.skip(reason)
    try:
        with sshd.temporary(prefix="gpuprep-components-", user=f"gpuprep-c{os.getpid()}") as lab_sshd:
            yield lab_sshd
    except processes.LabProcessError as exc:
        pytest.fail(f"lab sshd did not start: {exc}")


def _estate_config(lab: Any, lab_sshd: Any, run_id: str) -> dict[str, Any]:
    """A one-host lab estate whose host and DPU are prepared over SSH on ``lab_sshd``; the secrets
    (passwords, private key) are set encrypted afterwards."""

    ca = str(lab.lab_dir / "sim-state" / "redfish" / "tls" / "ca.pem")
    connection = {
        "host": "127.0.0.1",
        "port": lab_sshd.port,
        "user": lab_sshd.user,
        "host_key": lab_sshd.host_key,
    }
    return {
        "environment": "lab",
        "mothership": {"kubeconfig": str(lab.kubeconfig), "namespace": f"{run_id}-infra"},
        "fabric": {
            "director": {"endpoint": settings.director_url(), "username": settings.DIRECTOR_USER},
            "pools": [{"name": "gpu-pool", "models": ["Tesla-T4"]}],
        },
        "hosts": [
            {
                "name": "prep-host",
                "role": "baremetal-worker",
                "boot_mac": "52:54:00:00:0c:01",
                "bmc": {"endpoint": "https://127.0.0.1:18451", "username": settings.BMC_USER},
                "prep": {**connection, "sysroot": str(lab_sshd.sysroot)},
                "dpu": {
                    "bmc": {
                        "endpoint": f"https://127.0.0.1:{settings.DPU_BMC_PORTS['dpu-blade-slot-1']}",
                        "username": settings.BMC_USER,
                        "ca_bundle": ca,
                    },
                    "prep": {**connection, "device": lab_sshd.device},
                },
            }
        ],
    }


@pytest.mark.lab
@pytest.mark.cli
@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason=f"lab binaries missing ({', '.join(MISSING)}): run make setup")
def test_pulumi_up_prepares_host_and_dpu_then_converges(lab: Any, prep_sshd: Any, tmp_path: Path) -> None:
    from pulumi import automation as auto

    from lab import sshd

    sshd.reset_state(prep_sshd)
    run_id = f"prep-{secrets.token_hex(3)}"
    work = local_project(tmp_path)
    estate = _estate_config(lab, prep_sshd, run_id)
    (work / "Pulumi.prep.yaml").write_text(json.dumps({"config": {"composable-gpu:estate": estate}}))
    env = {"PULUMI_BACKEND_URL": file_backend(work), "PULUMI_CONFIG_PASSPHRASE": "test-only"}
    stack = auto.create_stack("prep", work_dir=str(work), opts=auto.LocalWorkspaceOptions(env_vars=env))
    for path, secret_value in (
        ("fabric.director.password", settings.DIRECTOR_PASSWORD),
        ("hosts[0].bmc.password", settings.BMC_PASSWORD),
        ("hosts[0].dpu.bmc.password", settings.BMC_PASSWORD),
        ("hosts[0].prep.private_key", prep_sshd.client_private_key()),
        ("hosts[0].dpu.prep.private_key", prep_sshd.client_private_key()),
    ):
        stack.set_config(f"estate.{path}", auto.ConfigValue(secret_value, secret=True), path=True)
    stack_file = (work / "Pulumi.prep.yaml").read_text()
    assert "PRIVATE KEY" not in stack_file and stack_file.count("secure:") == 5

    try:
        first = stack.up(on_output=lambda _line: None)
        assert first.summary.result == "succeeded"
        report = first.outputs["estate"].value
        assert report["hosts"][0]["reboot_pending"] is True
        assert report["dpus"][0]["firmware_reset_pending"] is True

        # the stand-ins' state changed: GRUB args, the blacklist, the DPU's next-boot mlxconfig values
        grub = prep_sshd.read("/etc/default/grub")
        assert 'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt pci=realloc"' in grub
        assert "blacklist nouveau" in prep_sshd.read("/etc/modprobe.d/composable-gpu-blacklist.conf")
        mlx = prep_sshd.mlx_state()
        assert {k: mlx[k]["next"] for k in DEFAULT_MLXCONFIG} == DEFAULT_MLXCONFIG
        assert mlx["VIRTIO_NET_EMULATION_NUM_PF"]["current"] == 0  # waits for mlxfwreset (not allowed)
        sets = [r for r in prep_sshd.invocations("mlxconfig") if "set" in r["argv"]]
        assert len(sets) == 1 and len(prep_sshd.invocations("update-grub")) == 1
        assert prep_sshd.invocations("reboot") == [] and prep_sshd.invocations("mlxfwreset") == []

        exported = subprocess.run(  # the CLI's own export keeps secrets encrypted
            ["pulumi", "stack", "export", "--stack", "prep"],
            cwd=work,
            env={**os.environ, **env},
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        assert "PRIVATE KEY" not in exported and '"ciphertext"' in exported

        # a second up changes nothing and runs nothing on the target
        ran = len(prep_sshd.invocations())
        second = stack.up(on_output=lambda _line: None)
        assert set(second.summary.resource_changes or {}) == {"same"}
        assert len(prep_sshd.invocations()) == ran
    finally:
        stack.destroy(on_output=lambda _line: None)
