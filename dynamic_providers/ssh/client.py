"""SSH command runner with host-key pinning and key-only authentication (paramiko).

:class:`SshRunner` is the only place in this package that does I/O. It connects with the
private key of an :class:`~dynamic_providers.ssh.models.SshTarget` (no agent, no key files
from ``~/.ssh``, no passwords), accepts exactly the pinned host key (paramiko
``RejectPolicy`` plus the pinned key as the only known key for ``[host]:port``), and runs
argv lists quoted with :func:`shlex.join`, so no input is ever interpreted by the remote
shell.

Example::

    with SshRunner(target) as ssh:
        out = ssh.run(["mlxconfig", "-d", dev, "-e", "query"]).stdout

Errors map to :mod:`dynamic_providers.ssh.errors`; messages never contain the key.
"""

from __future__ import annotations

import io
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from dynamic_providers.ssh.errors import (
    SshAuthError,
    SshCommandError,
    SshError,
    SshHostKeyError,
    SshTimeoutError,
    SshUnavailableError,
)
from dynamic_providers.ssh.models import SshTarget

__all__ = ["CommandResult", "SshRunner", "load_private_key"]

#: Exit status the runner's ``read_file`` helper uses for "no such file".
_MISSING = 3


@dataclass(frozen=True)
class CommandResult:
    """Outcome of one remote command.

    Attributes:
        argv: what ran (program and arguments).
        exit_status: remote exit status (0 = success).
        stdout: decoded standard output (UTF-8, invalid bytes replaced).
        stderr: decoded standard error.
    """

    argv: tuple[str, ...]
    exit_status: int
    stdout: str
    stderr: str = field(repr=False, default="")


def load_private_key(text: str) -> paramiko.PKey:
    """A paramiko key from OpenSSH or PEM private key ``text`` (Ed25519, ECDSA or RSA).

    Raises:
        SshAuthError: the text is not an unencrypted private key of a supported type
            (the message never quotes the text).
    """
    data = text.encode()
    try:
        try:
            loaded = serialization.load_ssh_private_key(data, password=None)
        except ValueError:
            loaded = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SshAuthError("private_key is not an unencrypted OpenSSH/PEM private key") from exc
    key_class: type[paramiko.PKey]
    if isinstance(loaded, ed25519.Ed25519PrivateKey):
        key_class = paramiko.Ed25519Key
    elif isinstance(loaded, ec.EllipticCurvePrivateKey):
        key_class = paramiko.ECDSAKey
    elif isinstance(loaded, rsa.RSAPrivateKey):
        key_class = paramiko.RSAKey
    else:
        raise SshAuthError(f"private_key type {type(loaded).__name__} is not supported")
    try:
        return key_class.from_private_key(io.StringIO(text))
    except paramiko.SSHException as exc:
        raise SshAuthError("private_key could not be loaded") from exc


class SshRunner:
    """One SSH session to a target; a context manager (closes the connection on exit).

    Args:
        target: connection details and pinned host key.
        connect_retries: extra connection attempts on transient failures (refused,
            timeout), ``retry_delay_seconds`` apart. Auth and host-key failures never retry.
        retry_delay_seconds: pause between attempts.
        sudo: prefix commands run with ``privileged=True`` by ``sudo -n``.
    """

    def __init__(self, target: SshTarget, *, connect_retries: int = 2, retry_delay_seconds: float = 1.0,
                 sudo: bool = False) -> None:
        self.target = target
        self.connect_retries = connect_retries
        self.retry_delay_seconds = retry_delay_seconds
        self.sudo = sudo
        self._client: paramiko.SSHClient | None = None

    def __enter__(self) -> SshRunner:
        self.connect()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def connect(self) -> None:
        """Open the connection (retrying transient failures).

        Raises:
            SshHostKeyError, SshAuthError, SshUnavailableError, SshTimeoutError.
        """
        attempt = 0
        while True:
            try:
                self._client = self._connect_once()
                return
            except SshError as exc:
                if not exc.transient or attempt >= self.connect_retries:
                    raise
                attempt += 1
                time.sleep(self.retry_delay_seconds)

    def _connect_once(self) -> paramiko.SSHClient:
        t = self.target
        key = load_private_key(t.private_key.get_secret_value())
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        known_name = t.host if t.port == 22 else f"[{t.host}]:{t.port}"
        client.get_host_keys().add(known_name, t.host_key_type,
                                   paramiko.PKey.from_type_string(t.host_key_type, t.host_key_bytes))
        timeout = t.connect_timeout_seconds
        try:
            client.connect(t.host, port=t.port, username=t.user, pkey=key, allow_agent=False,
                           look_for_keys=False, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise SshHostKeyError(
                f"host key mismatch: server offered {exc.key.get_name()} {exc.key.fingerprint}, "
                f"pinned {t.host_key_type} {t.host_key_fingerprint}", target=t.label) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise SshAuthError(f"public-key authentication failed for user {t.user!r}",
                               target=t.label) from exc
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise SshHostKeyError(f"the server offers no {t.host_key_type} host key matching the "
                                      f"pinned key {t.host_key_fingerprint}", target=t.label) from None
            if "timeout" in str(exc).lower():
                raise SshTimeoutError(f"SSH handshake timed out after {timeout:g} s", target=t.label) from exc
            raise SshUnavailableError(f"SSH handshake failed: {exc}", target=t.label) from exc
        except TimeoutError as exc:
            client.close()
            raise SshTimeoutError(f"no answer within {timeout:g} s", target=t.label) from exc
        except OSError as exc:  # refused, reset, unreachable, DNS (NoValidConnectionsError is one)
            client.close()
            raise SshUnavailableError(f"cannot connect: {exc.strerror or exc}", target=t.label) from exc
        return client

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
            privileged: bool = False, timeout_seconds: float | None = None) -> CommandResult:
        """Run ``argv`` on the target and wait for it.

        Args:
            argv: program and arguments; quoted with :func:`shlex.join`.
            stdin: text written to the command's standard input, then closed.
            check: raise :class:`SshCommandError` on a non-zero exit status.
            privileged: prefix with ``sudo -n`` when the runner was made with ``sudo=True``.
            timeout_seconds: overrides the target's ``command_timeout_seconds``.
        Raises:
            SshCommandError: non-zero exit and ``check``; carries the program, status and
                the clipped stderr.
            SshTimeoutError: the command did not finish in time.
            SshUnavailableError: the connection dropped.
        """
        if self._client is None:
            raise SshUnavailableError("not connected", target=self.target.label)
        full = ["sudo", "-n", *argv] if privileged and self.sudo else list(argv)
        timeout = timeout_seconds or self.target.command_timeout_seconds
        command = shlex.join(full)
        try:
            chan_in, chan_out, chan_err = self._client.exec_command(command, timeout=timeout)
            if stdin is not None:
                chan_in.write(stdin)
            chan_in.channel.shutdown_write()
            out = chan_out.read().decode(errors="replace")
            err = chan_err.read().decode(errors="replace")
            status = chan_out.channel.recv_exit_status()
        except TimeoutError as exc:
            raise SshTimeoutError(f"command did not finish within {timeout:g} s", target=self.target.label,
                                  command=_name(argv)) from exc
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise SshUnavailableError(f"connection lost: {exc}", target=self.target.label,
                                      command=_name(argv)) from exc
        result = CommandResult(tuple(full), status, out, err)
        if check and status != 0:
            raise SshCommandError("remote command failed", target=self.target.label, command=_name(argv),
                                  exit_status=status, stderr=err.strip() or out)
        return result

    def read_file(self, path: str, *, privileged: bool = False) -> str | None:
        """Content of the remote file ``path``, or ``None`` when it does not exist.

        Raises:
            SshCommandError: it exists but cannot be read.
        """
        script = f'[ -e "$1" ] || exit {_MISSING}; exec cat -- "$1"'
        result = self.run(["sh", "-c", script, "sh", path], check=False, privileged=privileged)
        if result.exit_status == _MISSING:
            return None
        if result.exit_status != 0:
            raise SshCommandError(f"cannot read {path}", target=self.target.label, command="cat",
                                  exit_status=result.exit_status, stderr=result.stderr)
        return result.stdout

    def write_file(self, path: str, content: str, *, privileged: bool = False) -> None:
        """Replace the remote file ``path`` with ``content`` (write a sibling, then rename).

        Raises:
            SshCommandError: the directory is missing or not writable.
        """
        script = 'umask 022; cat > "$1.composable-gpu.tmp" && mv -f -- "$1.composable-gpu.tmp" "$1"'
        self.run(["sh", "-c", script, "sh", path], stdin=content, privileged=privileged)

    def wait_until_back(self, *, timeout_seconds: float, poll_seconds: float = 5.0) -> None:
        """Reconnect after a reboot, polling until SSH answers or ``timeout_seconds`` pass.

        Raises:
            SshTimeoutError: the host did not come back in time.
            SshAuthError, SshHostKeyError: it came back but refused us.
        """
        self.close()
        deadline = time.monotonic() + timeout_seconds
        while True:
            try:
                self._client = self._connect_once()
                return
            except SshError as exc:
                if not exc.transient:
                    raise
                if time.monotonic() >= deadline:
                    raise SshTimeoutError(f"host did not come back within {timeout_seconds:g} s",
                                          target=self.target.label) from exc
                time.sleep(poll_seconds)


def _name(argv: Sequence[str]) -> str:
    """Program plus subcommand for messages (``mlxconfig set``), never the arguments."""
    words = [a for a in argv if not a.startswith("-")]
    if words and words[0] == "sh":
        return "sh"
    subcommands = {"query", "set", "reset", "q", "s", "r"}
    sub = next((w for w in words[1:] if w in subcommands), None)
    return f"{words[0]} {sub}" if words and sub else (words[0] if words else "?")
