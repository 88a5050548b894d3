"""Shared plumbing of the Director simulator's handlers: context, envelope, body parsing."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from flask import Response, current_app, jsonify, request

from .faults import Faults
from .jobs import Jobs
from .state import Fabric, SimError

EXTENSION = "director_sim"


@dataclass
class Digest:
    """A live message digest (session key)."""

    digest_id: int
    label: str
    key: str
    created: float


@dataclass
class SimContext:
    """Everything the handlers share: the fabric, the fault rules, credentials and digests."""

    fabric: Fabric
    username: str
    password: str
    digest_ttl: float | None = None
    faults: Faults = field(default_factory=Faults)
    digests: dict[str, Digest] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counters: dict[str, int] = field(default_factory=dict)
    async_seconds: float | None = None
    jobs: Jobs = field(default_factory=Jobs)
    calls: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def record(self, method: str, path: str, query: dict[str, str], *, client: str | None = None,
               body: Any = None) -> dict[str, Any]:
        """Append a call to the ordered log (``GET /_sim/calls``); the status is filled in later.
        ``client``: the caller's IP address (which of several clients sharing one Director sent
        it); ``body``: the JSON request body (None without one)."""
        entry: dict[str, Any] = {"method": method, "path": path, "query": query, "status": None,
                                 "client": client, "body": body}
        with self.lock:
            self.calls.append(entry)
            if len(self.calls) > 20000:
                del self.calls[:10000]
        return entry

    def violation(self, text: str) -> None:
        """Note a call the client should not have sent (a change while a job runs)."""
        with self.lock:
            self.violations.append(text)

    def new_digest(self, label: str) -> Digest:
        """Create (or replace) the digest of ``label``."""
        with self.lock:
            d = Digest(
                digest_id=len(self.digests) + 1, label=label, key=secrets.token_hex(16), created=time.time()
            )
            self.digests[label] = d
            return d

    def digest_valid(self, key: str) -> bool:
        """True when ``key`` is a live digest key."""
        with self.lock:
            for d in self.digests.values():
                if secrets.compare_digest(d.key, key):
                    return self.digest_ttl is None or time.time() - d.created < self.digest_ttl
        return False

    def count(self, what: str) -> None:
        """Count a call (``METHOD path``), for tests that assert on traffic."""
        with self.lock:
            self.counters[what] = self.counters.get(what, 0) + 1


def ctx() -> SimContext:
    """The current app's :class:`SimContext`."""
    return current_app.extensions[EXTENSION]


def ok(data: list[Any]) -> Response:
    """Success envelope: ``code`` 0, ``errors`` null (``liqidinc/liqidsdk-go``
    ``liqidsdk/client.go:491`` fails a call whose ``errors`` is not nil, so ``[]`` would fail)."""
    return jsonify({"response": {"code": 0, "errors": None, "data": data}})


def fail(err: SimError) -> tuple[Response, int]:
    """Error envelope for a refusal."""
    body = {
        "response": {
            "code": err.envelope_code,
            "data": [],
            "errors": [{"code": err.status, "message": err.message, "type": err.type}],
        }
    }
    return jsonify(body), err.http_status


def json_body() -> dict[str, Any]:
    """The JSON object body. Raises SimError 400."""
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise SimError(400, "Request body must be a JSON object", type_="BadRequestException")
    return data


def field_of(data: dict[str, Any], *path: str) -> Any:
    """``data[path0][path1]...``. Raises SimError 400 naming the missing field."""
    cur: Any = data
    for p in path:
        if not isinstance(cur, dict) or p not in cur or cur[p] is None:
            raise SimError(400, f"Missing field {'.'.join(path)}", type_="BadRequestException")
        cur = cur[p]
    return cur
