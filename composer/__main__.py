"""``python -m composer``: run the composer controller.

Configuration: ``COMPOSER_*`` environment variables or flags (``python -m composer --help``;
see :mod:`composer.shell.config`). Minimal lab example::

    COMPOSER_DIRECTOR_PASSWORD=... python -m composer \\
        --director-url http://127.0.0.1:18080 --kubeconfig .lab/composer.kubeconfig \\
        --namespace gpu-composer --idle-timeout-seconds 30 --probe-port 0

With ``--webhook-port`` (and ``--webhook-cert-file``/``--webhook-key-file``) every replica also
serves the pod-gating admission webhook over HTTPS (:mod:`composer.shell.webhook`).

``--mode dra`` runs the DRA driver instead (:mod:`domain.composer_mode`, ``docs/dra.md``): at start
it checks that the API server supports DRA mode and applies the DeviceClass
(:func:`composer.run.dra_start.start_dra`), then runs DRA rounds in the same loop, under the same
leader election; there is no webhook in that mode (the settings refuse ``--webhook-port``).

Exit codes: 0 after SIGTERM/SIGINT, 1 when the Lease was lost (the pod restarts and
campaigns again) or DRA mode's start check could not reach the API server, 2 for bad
configuration (or a webhook that cannot be served, or an API server without DRA mode's features).
"""

from __future__ import annotations

import logging
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import cast

from pydantic import ValidationError

from composer.run.dra_start import DraUnsupported, start_dra
from composer.run.loop import run_loop
from composer.run.wiring import build, fabric_factory
from composer.shell import config
from composer.shell.edit_handover import EditCanceller, edit_handover, sweep
from composer.shell.health import Probes, serve
from composer.shell.kube import KubeError
from composer.shell.leader import LeaseElector
from composer.shell.webhook import PATH as WEBHOOK_PATH
from composer.shell.webhook import serve_webhook

log = logging.getLogger("composer")

#: The interpreter's thread switch interval in the composer, seconds (CPython's default is
#: 0.005). The node workers spend their time waiting on the Director and the API server; each
#: answer needs the GIL back, and while the loop thread plans a round (CPU-bound, tens of
#: milliseconds at 1,000 nodes) a waiting worker gets it only when the interval runs out. A
#: 1 ms interval bounds that wait per answer at 1 ms instead of 5 (``sys.setswitchinterval``).
SWITCH_INTERVAL_SECONDS = 0.001

#: The format of the composer's log lines (``logging.basicConfig``); ``composer.shell.pod_steps``
#: lines are read back from it by the benchmark.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s"


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    try:
        settings = config.load(argv)
    except ValidationError as exc:
        print(f"composer: bad configuration:\n{exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=LOG_FORMAT,
    )
    # composer.shell.cache logs each failed list/watch in one line with its backoff; the client's
    # informer would add a full traceback per attempt, urllib3 a line per retry.
    logging.getLogger("kubernetes.informer.informer").setLevel(logging.CRITICAL)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    stop = threading.Event()
    wake = threading.Event()
    wired = build(settings, instance=settings.identity, on_change=wake.set)
    kube, metrics, ctrl = wired.kube, wired.metrics, wired.controller
    if settings.mode == "dra":
        try:
            start_dra(kube)
        except DraUnsupported as exc:
            print(f"composer: {exc}", file=sys.stderr)
            return 2
        except KubeError as exc:
            print(f"composer: mode dra: the start check got no answer: {exc}", file=sys.stderr)
            return 1
    stall = max(900.0, settings.resync_seconds * 10)
    probes = Probes(stall_seconds=stall, clock=time.monotonic)
    server = serve(settings.probe_address, settings.probe_port, probes, metrics.render)
    log.info("probes and metrics on %s:%d", *server.server_address[:2])
    hook = None
    if settings.webhook_port:
        assert settings.webhook_cert_file is not None and settings.webhook_key_file is not None
        try:
            hook = serve_webhook(
                settings.webhook_address,
                settings.webhook_port,
                cert_file=settings.webhook_cert_file,
                key_file=settings.webhook_key_file,
                namespaces=frozenset(settings.namespaces),
                on_gated=metrics.pods_gated.inc,
            )
        except (OSError, ssl.SSLError) as exc:
            print(f"composer: cannot serve the admission webhook: {exc}", file=sys.stderr)
            server.shutdown()
            return 2
        log.info("admission webhook (HTTPS) on %s:%d%s", *hook.server_address[:2], WEBHOOK_PATH)

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()
        wake.set()

    def on_leading(lead: bool) -> None:
        metrics.leader.set(1 if lead else 0)
        wake.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    elector = None
    if settings.leader_election:
        elector = LeaseElector(kube, settings, handover=edit_handover(settings.director_url))
        threading.Thread(
            target=elector.run,
            args=(stop,),
            kwargs={"on_change": on_leading},
            name="composer-lease",
            daemon=True,
        ).start()
    else:
        metrics.leader.set(1)
    leading = (lambda: elector.is_leader) if elector is not None else (lambda: True)
    threading.Thread(
        target=sweep,
        args=(settings.director_url, cast(Callable[[], EditCanceller], fabric_factory(settings))),
        kwargs={"leading": leading, "stop": stop},
        name="composer-edit-sweep",
        daemon=True,
    ).start()
    if wired.cache is not None:
        wired.cache.start()  # rounds are skipped until every kind has been listed once

    try:
        code = run_loop(
            ctrl,
            stop,
            resync_seconds=settings.resync_seconds,
            wake=wake,
            elector=elector,
            probes=probes,
            stall_seconds=stall,
        )
    finally:
        stop.set()
        if wired.cache is not None:
            wired.cache.stop()
        ctrl.close()
        if elector is not None:
            elector.release()
        server.shutdown()
        if hook is not None:
            hook.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
