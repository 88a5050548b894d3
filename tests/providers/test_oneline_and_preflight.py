"""dynamic_providers.oneline and .preflight as units (the real-CLI cases live beside each provider)."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
import types

import pytest

from dynamic_providers import oneline, preflight
from dynamic_providers.redfish import errors as redfish_errors
from dynamic_providers.ssh.errors import SshAuthError

# The shape of pulumi.dynamic.__main__: every method formats a failure with traceback.format_exc().
SERVER = textwrap.dedent('''
    import traceback

    def _abort_with_traceback(fn):
        return fn

    def handle(fn):
        try:
            fn()
        except Exception:
            return traceback.format_exc()
''')


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("pulumi.dynamic.__main__")
    exec(SERVER, module.__dict__)  # noqa: S102 - a stand-in for the SDK's server module
    monkeypatch.setitem(sys.modules, "pulumi.dynamic.__main__", module)
    return module


def _raise(exc: Exception):
    def fn() -> None:
        raise exc
    return fn


def test_typed_errors_become_one_line_and_bugs_keep_their_traceback(server: types.ModuleType) -> None:
    assert oneline.install() and oneline.install()  # idempotent
    auth = redfish_errors.AuthError("login refused for user 'root'", method="POST", url="https://bmc/x",
                                    status=401)
    shown = server.handle(_raise(auth))
    assert shown.startswith("AuthError: ") and "\n" not in shown and "login refused" in shown
    assert server.handle(_raise(SshAuthError("public-key authentication failed", target="u@h:22"))) \
        == "SshAuthError: public-key authentication failed [u@h:22]"
    bug = server.handle(_raise(KeyError("oops")))
    assert bug.startswith("Traceback (most recent call last)") and "KeyError: 'oops'" in bug


def test_install_does_nothing_outside_the_provider_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "pulumi.dynamic.__main__", raising=False)
    assert oneline.install() is False  # pytest's __main__ has no _abort_with_traceback


def test_preflight_probes_once_per_key_even_from_many_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(preflight.PREFLIGHT_ENV, raising=False)
    preflight.forget()
    calls: list[str] = []

    def probe() -> None:
        calls.append("probe")
        time.sleep(0.2)
        raise redfish_errors.AuthError("refused")

    def explain(exc: Exception) -> str | None:
        return "credentials refused" if isinstance(exc, redfish_errors.AuthError) else None

    verdicts: list[str | None] = []
    threads = [threading.Thread(target=lambda: verdicts.append(preflight.endpoint_failure(
        "BMC", "https://bmc", identity="root", secret="pw", probe=probe, explain=explain))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["probe"] and verdicts == ["BMC https://bmc: credentials refused"] * 8
    # another secret is another verdict; an unexplained exception is a bug and propagates
    with pytest.raises(ZeroDivisionError):
        preflight.endpoint_failure("BMC", "https://bmc", identity="root", secret="other",
                                   probe=lambda: 1 // 0, explain=explain)
    preflight.forget()


def test_preflight_off_never_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("off", "0", "FALSE", "no"):
        monkeypatch.setenv(preflight.PREFLIGHT_ENV, value)
        assert preflight.endpoint_failure("BMC", "x", identity="", secret="", probe=lambda: 1 // 0,
                                          explain=lambda e: "never") is None
