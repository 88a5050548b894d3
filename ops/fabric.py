"""``python -m ops.fabric status``: the composable GPU fabric at a glance, for an operator.

Reads the LIQID Director (every GPU: pool, model, state, machine, owner tag; every machine) and
the cluster (Nodes with the composer's annotations, Pods, the composer's Events) once, read-only,
and prints pools, each GPU (free / composed to which host / used by which pod / idle since / held
by which reclaim guard), hosts, gated pods with why, and the composer's recent Warning Events
(what is joined how: :mod:`ops.fabric_view`).

Usage::

    python -m ops.fabric status --director-url http://director:8080 [--director-username admin]
        [--kubeconfig FILE] [--context NAME] [--namespace NS ...] [--since-minutes 60]
        [--output text|json]

The Director password comes from ``$LIQID_DIRECTOR_PASSWORD`` or ``--director-password-file``
(never the command line); ``--director-url`` and ``--director-username`` default to
``$LIQID_DIRECTOR_URL`` and ``$LIQID_DIRECTOR_USERNAME`` (else ``admin``). The cluster is the
kubeconfig's current context (``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``).

Exit status: 0 printed; 1 the Director or the API server could not be read (unreachable, or
refusing the credentials), with one line on stderr naming which and why; 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from composer.model.annotations import COMPONENT
from dynamic_providers.director.client import DirectorClient
from dynamic_providers.director.errors import DirectorError
from ops.fabric_view import FabricStatus, build, render_text

#: Per-request timeout of every read, seconds.
REQUEST_TIMEOUT = 10.0


class Unreachable(Exception):
    """The Director or the API server could not be read; the message is the one line printed."""


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:400]


def read_director(url: str, username: str, password: str) -> tuple[list[Any], list[str]]:
    """(GPUs, machine names) of the Director at ``url``.

    Raises:
        Unreachable: any Director error (connection refused, timeout, 401/403, bad answer).
    """
    try:
        with DirectorClient(url, username=username, password=password, timeout=REQUEST_TIMEOUT,
                            retries=0) as d:
            return d.gpus(), [m.mach_name for m in d.machines()]
    except DirectorError as exc:
        raise Unreachable(f"Director {url} could not be read: {_one_line(exc)}") from exc


def _items(response: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(response.data).get("items") or []
    return items


Objects = list[dict[str, Any]]


def read_cluster(kubeconfig: str | None, context: str | None) -> tuple[str, Objects, Objects, Objects]:
    """(API server URL, Nodes, Pods, the composer's Events) as core/v1 JSON objects.

    Raises:
        Unreachable: no usable kubeconfig, the API server does not answer or refuses a list.
    """
    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=context)
    except (ConfigException, OSError, TypeError) as exc:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise Unreachable(f"no usable kubeconfig ({where}): {_one_line(exc)}") from exc
    server = str(api.configuration.host)
    core = client.CoreV1Api(api)
    kw: dict[str, Any] = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
    try:
        nodes = _items(core.list_node(**kw))
        pods = _items(core.list_pod_for_all_namespaces(**kw))
        events = _items(core.list_event_for_all_namespaces(
            field_selector=f"reportingComponent={COMPONENT}", **kw))
    except ApiException as exc:
        raise Unreachable(f"API server {server} refused a read: HTTP {exc.status} {exc.reason}") from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unreachable(f"API server {server} could not be read: {_one_line(exc)}") from exc
    finally:
        api.close()
    return server, nodes, pods, events


def status(*, director_url: str, username: str, password: str, kubeconfig: str | None,
           context: str | None, since_seconds: float, namespaces: Sequence[str] = ()) -> FabricStatus:
    """Read the Director and the cluster once and join them (:func:`ops.fabric_view.build`).

    Raises:
        Unreachable: see :func:`read_director` and :func:`read_cluster`.
    """
    gpus, machines = read_director(director_url, username, password)
    server, nodes, pods, events = read_cluster(kubeconfig, context)
    now = time.time()
    return build(director=director_url, cluster=server, read_at=now, gpus=gpus, machines=machines,
                 nodes=nodes, pods=pods, events=events, since=now - since_seconds, namespaces=namespaces)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m ops.fabric", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("status", help="pools, GPUs, hosts, gated pods and recent failures")
    st.add_argument("--director-url", default=os.environ.get("LIQID_DIRECTOR_URL"),
                    help="Director base URL (default $LIQID_DIRECTOR_URL)")
    st.add_argument("--director-username", default=os.environ.get("LIQID_DIRECTOR_USERNAME", "admin"))
    st.add_argument("--director-password-file", type=Path,
                    help="file holding the Director password (default: $LIQID_DIRECTOR_PASSWORD)")
    st.add_argument("--kubeconfig", help="kubeconfig file (default $KUBECONFIG, then ~/.kube/config)")
    st.add_argument("--context", help="kubeconfig context (default: its current context)")
    st.add_argument("--namespace", action="append", default=[],
                    help="only gated pods and failures of this namespace (repeatable; default: all)")
    st.add_argument("--since-minutes", type=float, default=60.0,
                    help="show the composer's Warning Events of this many minutes (default 60)")
    st.add_argument("--output", choices=("text", "json"), default="text")
    args = ap.parse_args(argv)
    if not args.director_url:
        ap.error("--director-url (or $LIQID_DIRECTOR_URL) is required")
    if args.director_password_file is not None:
        try:
            password = args.director_password_file.read_text().strip()
        except OSError as exc:
            ap.error(f"--director-password-file: {exc}")
    else:
        password = os.environ.get("LIQID_DIRECTOR_PASSWORD", "")
    if not password:
        ap.error("the Director password: set $LIQID_DIRECTOR_PASSWORD or --director-password-file")
    try:
        s = status(director_url=args.director_url, username=args.director_username, password=password,
                   kubeconfig=args.kubeconfig, context=args.context, since_seconds=args.since_minutes * 60,
                   namespaces=args.namespace)
    except Unreachable as exc:
        print(f"fabric status: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(s.to_json(), indent=2))
    else:
        print(render_text(s), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
