"""Kubeconfig documents for tests that need a file naming a server (no cluster behind it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


def write_kubeconfig(path: Path, server: str, *, cluster: Mapping[str, Any] | None = None,
                     user: Mapping[str, Any] | None = None) -> Path:
    """Write a one-context kubeconfig (context and cluster ``lab``, user ``u``) to ``path``.

    Args:
        path: where to write it.
        server: the API server URL.
        cluster: more fields of the cluster entry (``certificate-authority``,
            ``insecure-skip-tls-verify``).
        user: the user entry (default: bearer token ``t``).

    Returns:
        ``path``.
    """
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": server, **(cluster or {})}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "u"}}],
        "users": [{"name": "u", "user": dict(user or {"token": "t"})}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path
