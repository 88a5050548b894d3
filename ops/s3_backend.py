"""Shared Pulumi state on an S3-compatible object store (a Pulumi "DIY" backend).

What this module knows, and where the facts come from:

- **The login URL.** Pulumi v3.260 opens ``s3://`` URLs with gocloud.dev's ``s3blob`` on
  aws-sdk-go-v2 (gocloud.dev ``blob/s3blob`` URLOpener and ``aws.V2ConfigFromURLParams``). The
  query parameters that matter for a self-hosted store (MinIO, Ceph RGW, moto) are
  ``region``, ``endpoint`` (full URL with scheme), ``use_path_style=true`` (address the
  bucket as ``http://host/bucket/key``; without it the SDK asks DNS for ``bucket.host``) and
  ``response_checksum_validation=when_required`` (stores that send no CRC headers otherwise
  make the SDK print "Response has no supported checksum" on every read). Unknown parameters
  are rejected by gocloud ("unknown query parameter"). The legacy v1 names
  ``s3ForcePathStyle``/``disableSSL`` are still accepted, but this module emits the v2 names.
  Verified against a moto server by ``tests/ops/test_s3_backend.py``.
- **The object layout** (pulumi ``pkg/backend/diy``, project-scoped stacks, ``meta.yaml``
  version 1), relative to the URL's path prefix::

      .pulumi/meta.yaml
      .pulumi/stacks/<project>/<stack>.json                      # the checkpoint (state)
      .pulumi/history/<project>/<stack>/<stack>-<n>.{history,checkpoint}.json
      .pulumi/locks/organization/<project>/<stack>/<uuid>.json    # one per running update

  A lock object is ``{"pid": int, "username": str, "hostname": str, "timestamp": RFC 3339}``.
  ``pulumi up/refresh/destroy`` take it, ``pulumi preview`` does not. A crashed update leaves
  it behind; ``pulumi cancel --yes --stack <stack>`` deletes it (supported for DIY backends
  since pulumi/pulumi#9100). See ``docs/environments.md`` "Stale locks".

Only :meth:`S3Backend.client` and the functions taking a client do I/O; URL building is pure.
``boto3`` (a dependency of ``moto``, in requirements-dev) is imported lazily.

CLI::

    python -m ops.s3_backend url --bucket B [--prefix P] [--endpoint URL] [--region R]
    python -m ops.s3_backend locks --bucket B ... --project composable-gpu --stack staging
    python -m ops.s3_backend audit --bucket B ... --secret-env BMC_PASSWORD [--secret-env ...]

``audit`` exits 1 if any stored object contains one of the given secret values in plaintext
(the values are read from the named environment variables, never from the command line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlencode, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:  # pragma: no cover - typing only
    from botocore.client import BaseClient

#: S3 bucket naming rules (AWS S3 User Guide, "Bucket naming rules"): 3-63 characters,
#: lower-case letters, digits, '.' and '-', starting and ending with a letter or digit.
BUCKET_PATTERN = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"

#: Pulumi's bookkeeping directory inside the backend (pulumi ``workspace.BookkeepingDir``).
BOOKKEEPING_DIR = ".pulumi"


class S3BackendError(Exception):
    """Base of this module's errors (bad backend description, unreadable lock object)."""


class S3Backend(BaseModel):
    """Where a team's Pulumi state lives on an S3-compatible store.

    Fields:
        bucket: bucket name (AWS naming rules, :data:`BUCKET_PATTERN`).
        prefix: optional folder inside the bucket, e.g. ``composable-gpu``; no leading or
            trailing ``/``. Several projects or teams can share one bucket this way.
        endpoint: ``http(s)://host[:port]`` of a self-hosted store (MinIO, Ceph, moto);
            ``None`` for AWS S3 itself.
        region: AWS region name sent with every request (any value for most self-hosted
            stores; default ``us-east-1``).
        path_style: address the bucket in the path (``host/bucket/key``) instead of the host
            name (``bucket.host/key``). Default: ``True`` when ``endpoint`` is set.

    Raises ``pydantic.ValidationError`` on a bad bucket name, prefix or endpoint.

    Example::

        >>> S3Backend(bucket="pulumi-state", endpoint="http://127.0.0.1:9000").url
        's3://pulumi-state?region=us-east-1&endpoint=http://127.0.0.1:9000&use_path_style=true&response_checksum_validation=when_required'
    """

    model_config = ConfigDict(frozen=True)

    bucket: Annotated[str, Field(pattern=BUCKET_PATTERN)]
    prefix: str = ""
    endpoint: str | None = None
    region: Annotated[str, Field(pattern=r"^[a-z0-9-]+$")] = "us-east-1"
    path_style: bool = False

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if value.startswith("/") or value.endswith("/") or "//" in value or "?" in value:
            raise ValueError(f"prefix {value!r} must be a relative folder like 'team/project' (no '?', no "
                             "leading, trailing or doubled '/')")
        return value

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(f"endpoint {value!r} must be http(s)://host[:port] with no path")
        return value.rstrip("/")

    @model_validator(mode="before")
    @classmethod
    def _default_path_style(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("path_style") is None:
            data = {**data, "path_style": data.get("endpoint") is not None}
        return data

    @property
    def url(self) -> str:
        """The ``pulumi login`` / ``PULUMI_BACKEND_URL`` value.

        Shape: ``s3://<bucket>[/<prefix>]?region=<r>[&endpoint=<url>&use_path_style=true
        &response_checksum_validation=when_required]``. ``:`` and ``/`` stay unescaped in the
        query (RFC 3986 allows them), so the URL reads as documented.
        """
        params: dict[str, str] = {"region": self.region}
        if self.endpoint:
            params["endpoint"] = self.endpoint
        if self.path_style:
            params["use_path_style"] = "true"
        if self.endpoint:
            params["response_checksum_validation"] = "when_required"
        path = f"/{self.prefix}" if self.prefix else ""
        return f"s3://{self.bucket}{path}?{urlencode(params, safe=':/')}"

    def key(self, *parts: str) -> str:
        """Object key of ``.pulumi/<parts...>`` under this backend's prefix."""
        return "/".join(p for p in (self.prefix, BOOKKEEPING_DIR, *parts) if p)

    def stack_key(self, project: str, stack: str) -> str:
        """Key of a stack's checkpoint: ``[prefix/].pulumi/stacks/<project>/<stack>.json``."""
        return self.key("stacks", project, f"{stack}.json")

    def lock_prefix(self, project: str, stack: str) -> str:
        """Key prefix of a stack's locks: ``[prefix/].pulumi/locks/organization/<project>/<stack>/``."""
        return self.key("locks", "organization", project, stack) + "/"

    def client(self) -> BaseClient:
        """A boto3 S3 client for this store (credentials from the standard AWS chain:
        ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, profile, instance role).

        Timeouts: 5 s connect, 30 s read; 3 attempts (botocore "standard" retry mode).
        """
        import boto3
        from botocore.config import Config

        cfg = Config(
            region_name=self.region,
            connect_timeout=5,
            read_timeout=30,
            retries={"max_attempts": 3, "mode": "standard"},
            s3={"addressing_style": "path" if self.path_style else "auto"},
        )
        return boto3.client("s3", endpoint_url=self.endpoint, config=cfg)


class StateLock(BaseModel):
    """One lock object written by a running ``pulumi up/refresh/destroy``.

    Fields: ``key`` (object key), ``pid``, ``username``, ``hostname`` of the process that took
    it, ``timestamp`` (UTC) when it was taken.
    """

    key: str
    pid: int
    username: str
    hostname: str
    timestamp: datetime

    def age_seconds(self, now: datetime | None = None) -> float:
        """Seconds since the lock was taken (``now`` defaults to the current UTC time)."""
        return ((now or datetime.now(UTC)) - self.timestamp).total_seconds()


class PlaintextFinding(BaseModel):
    """A stored object that contains a secret value in plaintext.

    ``secret_index`` is the position of the secret in the list given to
    :func:`find_plaintext`; the value itself is never repeated.
    """

    key: str
    secret_index: int


def _iter_keys(client: BaseClient, bucket: str, prefix: str) -> Iterable[str]:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            yield obj["Key"]


def list_locks(client: BaseClient, backend: S3Backend, *, project: str, stack: str) -> list[StateLock]:
    """The lock objects currently held on ``project/stack``, oldest first. A lock listed but gone
    when read (its update ended in between: Pulumi deletes the object, ``Unlock`` in pulumi/pulumi
    ``pkg/backend/diy/lock.go``) is not held and left out.

    Raises :class:`S3BackendError` if a lock object is not the JSON shape Pulumi writes;
    botocore's ``ClientError`` on other S3 failures.
    """
    locks: list[StateLock] = []
    for key in _iter_keys(client, backend.bucket, backend.lock_prefix(project, stack)):
        try:
            body = client.get_object(Bucket=backend.bucket, Key=key)["Body"].read()
        except client.exceptions.NoSuchKey:
            continue
        try:
            locks.append(StateLock.model_validate({**json.loads(body), "key": key}))
        except (ValueError, TypeError) as exc:
            raise S3BackendError(f"lock object {key!r} is not a Pulumi lock: {str(exc)[:200]}") from exc
    return sorted(locks, key=lambda lock: lock.timestamp)


def find_plaintext(client: BaseClient, backend: S3Backend, secrets: Sequence[str]) -> list[PlaintextFinding]:
    """Scan every object under the backend's ``.pulumi/`` folder for the given secret values.

    ``secrets``: plaintext values that must never be stored (each at least 4 characters, so
    that the scan cannot match by accident). Returns one finding per (object, secret) hit;
    an empty list means the state is clean. Raises ``ValueError`` on a too-short secret.
    """
    needles = [s.encode() for s in secrets]
    if any(len(n) < 4 for n in needles):
        raise ValueError("every secret to look for must be at least 4 characters long")
    findings: list[PlaintextFinding] = []
    for key in _iter_keys(client, backend.bucket, backend.key()):
        body = client.get_object(Bucket=backend.bucket, Key=key)["Body"].read()
        findings.extend(PlaintextFinding(key=key, secret_index=i) for i, n in enumerate(needles) if n in body)
    return findings


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bucket", required=True)
    common.add_argument("--prefix", default="")
    common.add_argument("--endpoint", default=os.environ.get("STATE_S3_ENDPOINT") or None,
                        help="http(s)://host:port of a self-hosted store (default: $STATE_S3_ENDPOINT; "
                             "AWS S3 if unset)")
    common.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"))
    parser = argparse.ArgumentParser(prog="python -m ops.s3_backend", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("url", parents=[common], help="print the pulumi login URL")
    locks = sub.add_parser("locks", parents=[common], help="list a stack's lock objects and their age")
    audit = sub.add_parser("audit", parents=[common], help="fail if a stored object holds a plaintext secret")
    locks.add_argument("--project", required=True)
    locks.add_argument("--stack", required=True)
    audit.add_argument("--secret-env", action="append", default=[], required=True, metavar="VAR",
                       help="environment variable holding a secret value to look for (repeatable)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the process exit code (0 ok, 1 audit finding, 2 usage error)."""
    args = _parser().parse_args(argv)
    backend = S3Backend(bucket=args.bucket, prefix=args.prefix, endpoint=args.endpoint, region=args.region)
    if args.command == "url":
        print(backend.url)
        return 0
    client = backend.client()
    if args.command == "locks":
        for lock in list_locks(client, backend, project=args.project, stack=args.stack):
            print(f"{lock.key}\tpid {lock.pid} on {lock.username}@{lock.hostname}\t"
                  f"taken {lock.timestamp.isoformat()} ({lock.age_seconds():.0f} s ago)")
        return 0
    missing = [v for v in args.secret_env if not os.environ.get(v)]
    if missing:
        print(f"environment variables not set: {', '.join(missing)}", file=sys.stderr)
        return 2
    findings = find_plaintext(client, backend, [os.environ[v] for v in args.secret_env])
    for f in findings:
        print(f"PLAINTEXT {args.secret_env[f.secret_index]} in s3://{backend.bucket}/{f.key}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
