"""Preview-time endpoint checks shared by the dynamic providers.

A wrong password or an unreachable endpoint should stop ``pulumi preview``, not surface in
the middle of ``pulumi up`` after other resources changed. Each provider's ``check`` calls
``endpoint_failure`` with a read-only probe (an authenticated GET, an SSH login): the probe
runs once per endpoint and identity per provider process (the engine starts one process per
run and calls ``check`` on several threads), and its verdict is cached. A refusal becomes one
``CheckFailure`` line naming the endpoint, what was refused and what to do; the engine prints
it under the resource's name and stops before any resource is touched.

Air-gapped previews (a CI runner that cannot reach the BMCs, the Director or the hosts) turn
the probes off with ``COMPOSABLE_GPU_PREFLIGHT=off`` in the environment of ``pulumi``; the
local input checks still run.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable

#: Environment variable that switches the probes off (``off``, ``0``, ``false`` or ``no``).
PREFLIGHT_ENV = "COMPOSABLE_GPU_PREFLIGHT"
_OFF_VALUES = {"off", "0", "false", "no"}

_lock = threading.Lock()
_verdicts: dict[tuple[str, str, str], str | None] = {}
_key_locks: dict[tuple[str, str, str], threading.Lock] = {}


def enabled() -> bool:
    """False when ``COMPOSABLE_GPU_PREFLIGHT`` is ``off``/``0``/``false``/``no`` (any case)."""
    return os.environ.get(PREFLIGHT_ENV, "").strip().lower() not in _OFF_VALUES


def _fingerprint(identity: str, secret: str) -> str:
    # The cache key must tell two passwords apart without holding either in memory as text.
    return hashlib.sha256(f"{identity}\0{secret}".encode()).hexdigest()


def endpoint_failure(kind: str, endpoint: str, *, identity: str, secret: str,
                     probe: Callable[[], None], explain: Callable[[Exception], str | None]) -> str | None:
    """Run ``probe`` once per (kind, endpoint, identity, secret) and return its verdict.

    Args:
        kind: what is probed, e.g. ``"BMC"``, ``"Director"``, ``"SSH host"`` (cache namespace).
        endpoint: the URL or ``host:port`` probed, quoted in the verdict.
        identity: user name or key fingerprint; part of the cache key.
        secret: password or key material; only its hash is kept.
        probe: a read-only call that raises when the endpoint or the credentials are refused.
        explain: turns the probe's exception into the one-line reason (what was refused and
            what to do), or returns None for an exception that is not a verdict on the
            endpoint (it is then re-raised: a bug must not pass as "unreachable").

    Returns:
        None when the probe passed or preflight is off; else the reason, one line.
    """
    if not enabled():
        return None
    key = (kind, endpoint, _fingerprint(identity, secret))
    with _lock:
        if key in _verdicts:
            return _verdicts[key]
        key_lock = _key_locks.setdefault(key, threading.Lock())
    with key_lock:  # one probe per key, even when the engine calls check on several threads
        with _lock:
            if key in _verdicts:
                return _verdicts[key]
        try:
            probe()
            verdict = None
        except Exception as exc:  # noqa: BLE001 - classified by the caller's explain()
            reason = explain(exc)
            if reason is None:
                raise
            verdict = f"{kind} {endpoint}: {reason}"
        with _lock:
            _verdicts[key] = verdict
        return verdict


def forget() -> None:
    """Drop every cached verdict (tests; a long-lived process that wants fresh probes)."""
    with _lock:
        _verdicts.clear()
        _key_locks.clear()
