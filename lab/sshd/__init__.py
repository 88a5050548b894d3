"""The lab's real SSH server for host/DPU preparation, with hardware-tool stand-ins.

A real ``/usr/sbin/sshd`` (Debian's openssh-server) on ``127.0.0.1`` at a high free port,
with its own ``sshd_config``, host key, pid file and log, all inside one instance
directory. Authentication is public-key only, for one dedicated unprivileged user (default
``gpuprep``) whose home is ``<instance>/home``. Through ``SetEnv`` the user's ``PATH`` starts
with ``<instance>/bin``, where wrappers named ``mlxconfig``, ``mlxfwreset``, ``update-grub``,
``update-initramfs`` and ``reboot`` run the HARDWARE STAND-INS of :mod:`lab.sshd.standins`
on a file tree that mirrors a host (``<home>/sysroot``: ``etc/default/grub``,
``proc/cmdline``, ...). The providers are pointed at that tree with ``sysroot=...``.

Use::

    from lab import sshd
    lab = sshd.start(Path(".lab/sshd"))      # as root: creates the user, starts sshd
    lab.port, lab.host_key, lab.client_private_key()
    sshd.stop(Path(".lab/sshd"))             # stops sshd, deletes the user it created

``start`` needs root (it creates the user and sshd must switch to it), ``/usr/sbin/sshd``
(``apt-get install openssh-server``) and ``/usr/bin/python3`` (runs the stand-ins).
Instance directories must be reachable by the user (mode 0755 along the path); pytest's
``/tmp/pytest-of-root`` is not, so tests use a ``mkdtemp`` directory.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from lab import processes
from lab.sshd.standins import TOOLS

__all__ = ["DEFAULT_DEVICE", "SshdLab", "load", "reset_state", "start", "status", "stop"]

SSHD = Path("/usr/sbin/sshd")
SYSTEM_PYTHON = Path("/usr/bin/python3")
STANDINS = Path(__file__).resolve().parent / "standins"
PROCESS_NAME = "sshd"
#: The BlueField-3 mst device the stand-in emulates.
DEFAULT_DEVICE = "/dev/mst/mt41692_pciconf0"

_GRUB_DEFAULTS = """\
# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""
"""
_ROOT_UUID = "3f1c5a2e-8d4b-4c1e-9f7a-2b6d0e9c4a11"
_HARDWARE_MODULES = [
    "nouveau 2797568 0 - Live 0x0000000000000000",
    "mlx5_core 2179072 0 - Live 0x0000000000000000",
    "vfio_pci 16384 0 - Live 0x0000000000000000",
    "e1000e 335872 0 - Live 0x0000000000000000",
]


def _bf3_params() -> dict[str, dict[str, object]]:
    """Factory configuration of the emulated BlueField-3 (defaults as real queries show)."""
    def p(kind: str, default: int, maximum: int) -> dict[str, object]:
        return {"kind": kind, "default": default, "current": default, "next": default, "max": maximum}
    return {
        "INTERNAL_CPU_MODEL": p("int", 1, 1),
        "PCI_SWITCH_EMULATION_ENABLE": p("bool", 0, 1),
        "PCI_SWITCH_EMULATION_NUM_PORT": p("int", 16, 32),
        "PER_PF_NUM_SF": p("bool", 0, 1),
        "PF_TOTAL_SF": p("int", 0, 2048),
        "SRIOV_EN": p("bool", 0, 1),
        "VIRTIO_NET_EMULATION_ENABLE": p("bool", 0, 1),
        "VIRTIO_NET_EMULATION_NUM_MSIX": p("int", 2, 64),
        "VIRTIO_NET_EMULATION_NUM_PF": p("int", 0, 31),
        "VIRTIO_NET_EMULATION_NUM_VF": p("int", 0, 504),
    }


@dataclass(frozen=True)
class SshdLab:
    """A running (or recorded) lab sshd instance.

    Attributes:
        instance_dir: everything of this instance (config, keys, home, logs, pids).
        port: TCP port on 127.0.0.1.
        user: the dedicated login user.
        created_user: True if :func:`start` created the user (then :func:`stop` deletes it).
        host_key: the server's public host key, ``"ssh-ed25519 <base64>"`` (pin this).
        client_key_path: private key authorised for ``user`` (root-readable only).
        sysroot: the stand-ins' emulated root (pass as the providers' ``sysroot``).
        device: the emulated DPU's mst device.
    """

    instance_dir: Path
    port: int
    user: str
    created_user: bool
    host_key: str
    client_key_path: Path
    sysroot: Path
    device: str = DEFAULT_DEVICE

    @property
    def home(self) -> Path:
        """The user's home directory."""
        return self.instance_dir / "home"

    @property
    def invocation_log(self) -> Path:
        """JSON lines ``{"tool", "argv", "time"}``, one per stand-in invocation."""
        return self.sysroot / "var" / "log" / "standin-invocations.jsonl"

    def client_private_key(self) -> str:
        """The authorised client private key (OpenSSH format)."""
        return self.client_key_path.read_text()

    def invocations(self, tool: str | None = None) -> list[dict[str, object]]:
        """Logged stand-in invocations, oldest first, optionally only of ``tool``."""
        if not self.invocation_log.exists():
            return []
        rows = [json.loads(line) for line in self.invocation_log.read_text().splitlines() if line.strip()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def mlx_state(self) -> dict[str, dict[str, object]]:
        """The emulated device's parameters ``{name: {"default", "current", "next", ...}}``."""
        path = self.sysroot / "var" / "lib" / "mlxconfig-standin" / "devices.json"
        return json.loads(path.read_text())[self.device]["params"]

    def read(self, absolute: str) -> str:
        """Content of emulated file ``absolute`` (``/proc/cmdline``)."""
        return (self.sysroot / absolute.lstrip("/")).read_text()


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise processes.LabProcessError(f"lab sshd: {' '.join(argv[:2])} failed: {detail}") from exc
    return done.stdout


def _record(instance_dir: Path) -> Path:
    return instance_dir / "lab.json"


def _ensure_user(user: str, home: Path) -> bool:
    """Create ``user`` (home ``home``, shell /bin/sh, no password, not locked); True if created."""
    try:
        pwd.getpwnam(user)
        _run(["usermod", "--home", str(home), user])
        created = False
    except KeyError:
        _run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", str(home),
              "--shell", "/bin/sh", user])
        created = True
    # '*' = no password can match, but unlike useradd's '!' the account is not "locked"
    # (sshd refuses public-key logins to locked accounts when UsePAM is off).
    _run(["usermod", "--password", "*", user])
    return created


def _chown_tree(root: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    os.chown(root, entry.pw_uid, entry.pw_gid)


def _seed_sysroot(sysroot: Path, device: str) -> None:
    if sysroot.exists():
        shutil.rmtree(sysroot)
    files = {
        "etc/default/grub": _GRUB_DEFAULTS,
        "proc/cmdline": f"BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID={_ROOT_UUID} ro quiet\n",
        "proc/modules": "".join(f"{m}\n" for m in _HARDWARE_MODULES),
        "proc/sys/kernel/random/boot_id": f"{uuid.uuid4()}\n",
        "var/lib/host-standin/hardware-modules": "".join(f"{m}\n" for m in _HARDWARE_MODULES),
        "var/lib/mlxconfig-standin/devices.json": json.dumps({device: {
            "type": "BlueField3",
            "name": "900-9D3B6-00CV-A_Ax",
            "description": "NVIDIA BlueField-3 B3220 P-Series FHHL DPU; 200GbE (default mode) / NDR200 IB; "
                           "Dual-port QSFP112; PCIe Gen5.0 x16 with x16 PCIe extension option; 16 Arm cores; "
                           "32GB on-board DDR; integrated BMC; Crypto Enabled",
            "params": _bf3_params(),
        }}, indent=1, sort_keys=True),
        "var/log/standin-invocations.jsonl": "",
    }
    for rel, text in files.items():
        path = sysroot / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for rel in ("etc/modprobe.d", "boot/grub"):
        (sysroot / rel).mkdir(parents=True, exist_ok=True)


def reset_state(lab: SshdLab) -> None:
    """Put the emulated host and DPU back to factory state (GRUB without our args, nouveau
    loaded, mlxconfig defaults) and empty the invocation log."""
    _seed_sysroot(lab.sysroot, lab.device)
    _chown_tree(lab.sysroot, lab.user)


def _sshd_config(instance_dir: Path, port: int, user: str, sysroot: Path) -> str:
    etc = instance_dir / "etc"
    path_env = f"{instance_dir / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    return "\n".join([
        "# Lab-only sshd (composable-gpu): key-only login for one user on loopback.",
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {etc / 'ssh_host_ed25519_key'}",
        f"PidFile {instance_dir / 'sshd.pid'}",
        "AuthenticationMethods publickey",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "HostbasedAuthentication no",
        "PermitRootLogin no",
        "PermitEmptyPasswords no",
        f"AllowUsers {user}",
        "UsePAM no",
        "StrictModes yes",
        "AuthorizedKeysFile .ssh/authorized_keys",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        "AllowStreamLocalForwarding no",
        "X11Forwarding no",
        "PermitTunnel no",
        "PermitUserEnvironment no",
        "PrintMotd no",
        "MaxStartups 64:30:128",
        "LogLevel VERBOSE",
        f"SetEnv PATH={path_env} STANDIN_SYSROOT={sysroot}",
        "",
    ])


def _install_standins(instance_dir: Path) -> None:
    code = instance_dir / "standins"
    if code.exists():
        shutil.rmtree(code)
    shutil.copytree(STANDINS, code, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    bin_dir = instance_dir / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool, module in TOOLS.items():
        wrapper = bin_dir / tool
        wrapper.write_text(f'#!/bin/sh\n# Lab HARDWARE STAND-IN for {tool}; see {code / module}\n'
                           f'exec {SYSTEM_PYTHON} -B {code / module} "$@"\n')
        wrapper.chmod(0o755)
    for d in (code, bin_dir):
        d.chmod(0o755)


def load(instance_dir: Path) -> SshdLab | None:
    """The instance recorded in ``instance_dir`` (running or not), or None."""
    record = _record(instance_dir)
    if not record.exists():
        return None
    data = json.loads(record.read_text())
    return SshdLab(**{**data, "instance_dir": Path(data["instance_dir"]),
                      "client_key_path": Path(data["client_key_path"]), "sysroot": Path(data["sysroot"])})


def status(instance_dir: Path) -> int | None:
    """Pid of the instance's sshd if it runs, else None (creates nothing)."""
    if not (instance_dir / "pids" / f"{PROCESS_NAME}.pid").exists():
        return None
    return processes.running(instance_dir, PROCESS_NAME)


def start(instance_dir: Path, *, user: str = "gpuprep", port: int | None = None,
          timeout_seconds: float = 20.0) -> SshdLab:
    """Start (idempotently) the lab sshd of ``instance_dir`` and return its details.

    A running instance is returned as is. Otherwise: create/adjust ``user``, generate the
    host key and an authorised client key (once), seed the emulated host and DPU (only when
    the sysroot does not exist yet), write ``sshd_config`` (checked with ``sshd -t``) and
    start ``sshd -D -e`` on ``port`` (a free one if None).

    Raises:
        processes.LabProcessError: not root, sshd or python3 missing, a setup command
            failed, or sshd did not accept connections within ``timeout_seconds``.
    """
    instance_dir = instance_dir.resolve()
    if status(instance_dir) and (known := load(instance_dir)) is not None:
        return known
    if os.geteuid() != 0:
        raise processes.LabProcessError("lab sshd: must run as root (it creates the SSH user)")
    for needed, hint in ((SSHD, "apt-get install -y openssh-server"),
                         (SYSTEM_PYTHON, "apt-get install -y python3")):
        if not needed.exists():
            raise processes.LabProcessError(f"lab sshd: {needed} is missing ({hint})")
    closed = [p for p in instance_dir.parents if p.exists() and not os.stat(p).st_mode & 0o001]
    if closed:
        raise processes.LabProcessError(
            f"lab sshd: the SSH user cannot reach {instance_dir} ({closed[0]} is not searchable by others); "
            "use an instance directory under /tmp or another 0755 path")
    instance_dir.mkdir(parents=True, exist_ok=True)
    instance_dir.chmod(0o755)
    etc, home = instance_dir / "etc", instance_dir / "home"
    etc.mkdir(mode=0o700, exist_ok=True)
    home.mkdir(exist_ok=True)
    created = _ensure_user(user, home)
    previous = load(instance_dir)
    created = created or bool(previous and previous.created_user and previous.user == user)

    host_key = etc / "ssh_host_ed25519_key"
    if not host_key.exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "lab-sshd-host", "-f", str(host_key)])
    client_key = etc / "client_ed25519"
    if not client_key.exists():
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"lab-client@{user}", "-f",
              str(client_key)])
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
    ssh_dir.chmod(0o700)
    (ssh_dir / "authorized_keys").chmod(0o600)
    home.chmod(0o755)

    sysroot = home / "sysroot"
    if not sysroot.exists():
        _seed_sysroot(sysroot, DEFAULT_DEVICE)
    _chown_tree(home, user)
    _install_standins(instance_dir)

    port = port or processes.free_port()
    config = etc / "sshd_config"
    config.write_text(_sshd_config(instance_dir, port, user, sysroot))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # Debian sshd's privilege-separation dir
    _run([str(SSHD), "-t", "-f", str(config)])

    lab = SshdLab(instance_dir=instance_dir, port=port, user=user, created_user=created,
                  host_key=" ".join(Path(f"{host_key}.pub").read_text().split()[:2]),
                  client_key_path=client_key, sysroot=sysroot)
    record = {**asdict(lab), "instance_dir": str(instance_dir), "client_key_path": str(client_key),
              "sysroot": str(sysroot)}
    _record(instance_dir).write_text(json.dumps(record, indent=1))
    processes.start(instance_dir, PROCESS_NAME, [str(SSHD), "-D", "-e", "-f", str(config)])
    processes.wait_until(lambda: processes.port_open(port), what="lab sshd", timeout_seconds=timeout_seconds,
                         lab_dir=instance_dir, name=PROCESS_NAME)
    return lab


def stop(instance_dir: Path, *, wipe: bool = False) -> bool:
    """Stop the instance's sshd; delete the user if :func:`start` created it.

    Args:
        wipe: also delete ``instance_dir`` (keys, emulated state, logs).
    Returns:
        True if an sshd was running.
    """
    instance_dir = instance_dir.resolve()
    if not instance_dir.exists():
        return False
    was_running = processes.stop(instance_dir, PROCESS_NAME, grace_seconds=5.0)
    lab = load(instance_dir)
    if lab is not None and lab.created_user and os.geteuid() == 0:
        try:
            pwd.getpwnam(lab.user)
            subprocess.run(["userdel", "--force", lab.user], check=False, capture_output=True, timeout=30)
        except KeyError:
            pass
    if wipe:
        shutil.rmtree(instance_dir, ignore_errors=True)
    return was_running


def unavailable_reason() -> str | None:
    """Why a lab sshd cannot start on this machine (not root; sshd or python3 missing), or None."""
    if os.geteuid() != 0:
        return "the lab sshd needs root (it creates the SSH user)"
    if not SSHD.exists() or not SYSTEM_PYTHON.exists():
        return "openssh-server or /usr/bin/python3 missing: run `make setup`"
    return None


@contextmanager
def temporary(*, prefix: str, user: str) -> Iterator[SshdLab]:
    """A private lab sshd in a fresh ``mkdtemp`` directory, for tests; on exit it is stopped,
    its user deleted and its directory removed.

    Raises:
        processes.LabProcessError: it did not start (everything created is cleaned up first).
    """
    instance = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield start(instance, user=user)
    finally:
        stop(instance, wipe=True)
        shutil.rmtree(instance, ignore_errors=True)
