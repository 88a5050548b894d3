"""HTTP transport to the Director: connection reuse, auth, timeouts, retries, envelope, errors.

Only this module performs I/O. It knows nothing of GPUs; the resource modules in
``dynamic_providers.director.api`` shape the requests.

Facts used (BRIEF.md "Domain facts"; LIQID SDK ``base_client`` / ``messageDigest_gen.go``):
base path ``/liqid/api/v2/``; envelope ``{"response": {"code", "errors", "data"}}`` where a
non-zero ``code`` or any ``errors`` means failure, also under HTTP 200; auth is HTTP Basic, or
``POST digest/{label}`` (with Basic) whose ``digest_key`` is then sent as ``X-API-Key`` and
deleted at the end with ``DELETE digest/{label}``.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import requests
from pydantic import ValidationError
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from .errors import (
    DirectorAuthError,
    DirectorConflictError,
    DirectorError,
    DirectorNotFoundError,
    DirectorProtocolError,
    DirectorRequestError,
    DirectorServerError,
    DirectorTimeoutError,
    DirectorUnavailableError,
)
from .models import DigestInfo, Envelope

log = logging.getLogger(__name__)

API_PREFIX = "/liqid/api/v2/"

#: HTTP status -> error class; other 4xx are DirectorRequestError, other 5xx DirectorServerError.
_STATUS_ERRORS: dict[int, type[DirectorError]] = {
    401: DirectorAuthError,
    403: DirectorAuthError,
    404: DirectorNotFoundError,
    408: DirectorTimeoutError,
    409: DirectorConflictError,
    504: DirectorTimeoutError,
}


def api_root(base_url: str) -> str:
    """``http://host:port[/liqid/api/v2]`` -> ``http://host:port/liqid/api/v2/``.

    Raises:
        ValueError: the URL is not http(s).
    """
    url = base_url.strip()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"Director URL must start with http:// or https://, got {url!r}")
    url = url.rstrip("/")
    if url.endswith(API_PREFIX.rstrip("/")):
        url = url[: -len(API_PREFIX.rstrip("/"))]
    return url + API_PREFIX


def error_class(status: int | None) -> type[DirectorError]:
    """The exception class for an HTTP status, or for an envelope's pseudo status.

    ``None`` (an envelope failure without any HTTP-like code) maps to :class:`DirectorRequestError`.
    """
    if status is None:
        return DirectorRequestError
    if status in _STATUS_ERRORS:
        return _STATUS_ERRORS[status]
    if status >= 500:
        return DirectorServerError
    return DirectorRequestError


def _pseudo_status(http_status: int, envelope: Envelope | None) -> int | None:
    """The status that classifies a failure: HTTP's if it is an error, else the envelope's codes."""
    if http_status >= 400:
        return http_status
    if envelope is None:
        return None
    for err in envelope.response.errors or []:
        if 400 <= err.code <= 599:
            return err.code
    code = envelope.response.code
    return code if 400 <= code <= 599 else None


class Transport:
    """A reusable, authenticated HTTP session to one Director.

    Args:
        base_url: ``http(s)://host:port`` (``/liqid/api/v2`` appended when absent).
        username / password: Director credentials (HTTP Basic; also used to create digests).
        timeout: per-request read/connect timeout in seconds.
        retries: how many times urllib3 retries GETs on 500/502/503/504 and any method on
            connection errors raised before the request was sent (never a POST/PUT/DELETE
            that may have reached the Director).
        backoff_factor: urllib3 exponential backoff factor, seconds.
        use_digest: authenticate with a message digest (``X-API-Key``) instead of Basic.
        verify_tls: verify the Director's certificate on https.

    Use as a context manager, or call :meth:`close` (deletes the digest, closes sockets).
    One instance per thread: ``requests.Session`` is not thread-safe.
    """

    def __init__(
        self,
        base_url: str,
        *,
        username: str,
        password: str,
        timeout: float = 10.0,
        retries: int = 3,
        backoff_factor: float = 0.5,
        use_digest: bool = False,
        verify_tls: bool = True,
    ) -> None:
        self.root = api_root(base_url)
        self.timeout = timeout
        self._basic = requests.auth.HTTPBasicAuth(username, password)
        self._use_digest = use_digest
        self._digest: DigestInfo | None = None
        self._digest_label = f"pulumi-{uuid.uuid4().hex[:8]}"
        self._session = requests.Session()
        self._session.verify = verify_tls
        self._session.headers.update({"Accept": "application/json", "User-Agent": "composable-gpu/0.1"})
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            other=0,
            allowed_methods=frozenset({"GET"}),
            status_forcelist=(500, 502, 503, 504),
            backoff_factor=backoff_factor,
            raise_on_status=False,
            respect_retry_after_header=True,
        )
        adapter = HTTPAdapter(max_retries=retry, pool_connections=2, pool_maxsize=4)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Delete the digest (best effort) and close the connection pool."""
        if self._digest is not None:
            try:
                self._send(
                    "DELETE", f"digest/{self._digest.digest_label}", auth_header=True, timeout=self.timeout
                )
            except (requests.RequestException, DirectorError) as exc:
                log.debug("could not delete digest %s: %s", self._digest.digest_label, exc)
            self._digest = None
        self._session.close()

    # ------------------------------------------------------------------ requests
    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        timeout: float | None = None,
        machine: str | int | None = None,
        device: str | None = None,
    ) -> list[Any]:
        """Send one API call and return the envelope's ``data`` list.

        Args:
            method: HTTP method.
            path: path relative to ``/liqid/api/v2/`` (``fabric/edit``).
            params / json: query parameters and JSON body.
            timeout: read timeout in seconds (default: the transport's).
            machine / device: named in any error raised, for the operator.

        Raises:
            DirectorError subclass: see ``errors.py``; a 401 re-authenticates once (digest)
            before :class:`DirectorAuthError` is raised.
        """
        timeout = self.timeout if timeout is None else timeout
        ctx = {"method": method, "path": path, "machine": machine, "device": device}
        for attempt in (1, 2):
            resp = self._send(method, path, params=params, json=json, timeout=timeout, ctx=ctx)
            if resp.status_code == 401 and self._use_digest and attempt == 1:
                log.info("Director answered 401 to %s %s; creating a new digest once", method, path)
                self._digest = None
                continue
            return self._parse(resp, ctx)
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        timeout: float,
        ctx: dict[str, Any] | None = None,
        auth_header: bool = False,
    ) -> requests.Response:
        ctx = ctx or {"method": method, "path": path}
        headers: dict[str, str] = {}
        auth: requests.auth.AuthBase | None = self._basic
        if auth_header or (self._use_digest and not path.startswith("digest/")):
            if self._digest is None:
                self._digest = self._create_digest(timeout)
            headers["X-API-Key"] = self._digest.digest_key.get_secret_value()
            auth = None
        try:
            return self._session.request(
                method,
                self.root + path,
                params=params,
                json=json,
                headers=headers,
                auth=auth,
                timeout=(min(timeout, 10.0), timeout),
            )
        except requests.exceptions.ConnectTimeout as exc:
            raise DirectorUnavailableError(
                f"cannot reach the Director at {self.root}: connect timeout", **ctx
            ) from exc
        except requests.exceptions.Timeout as exc:
            raise DirectorTimeoutError(f"no answer from the Director within {timeout:g} s", **ctx) from exc
        except requests.exceptions.RetryError as exc:
            raise DirectorServerError(f"the Director kept failing: {exc.__class__.__name__}", **ctx) from exc
        except requests.exceptions.ConnectionError as exc:
            reason = getattr(exc.args[0], "reason", None) if exc.args else None
            if isinstance(reason, ReadTimeoutError):
                raise DirectorTimeoutError(
                    f"no answer from the Director within {timeout:g} s (retried)", **ctx
                ) from exc
            raise DirectorUnavailableError(f"cannot reach the Director at {self.root}", **ctx) from exc

    def _create_digest(self, timeout: float) -> DigestInfo:
        path = f"digest/{self._digest_label}"
        ctx = {"method": "POST", "path": path}
        resp = self._send("POST", path, timeout=timeout, ctx=ctx)
        data = self._parse(resp, ctx)
        if len(data) != 1:
            raise DirectorProtocolError(f"expected one digest record, got {len(data)}", **ctx)
        try:
            return DigestInfo.model_validate(data[0])
        except ValidationError as exc:
            raise DirectorProtocolError(
                f"malformed digest record: {exc.error_count()} problem(s)", **ctx
            ) from exc

    @staticmethod
    def _parse(resp: requests.Response, ctx: dict[str, Any]) -> list[Any]:
        envelope: Envelope | None
        try:
            envelope = Envelope.model_validate(resp.json())
        except (ValueError, ValidationError):
            envelope = None
        status = resp.status_code
        if envelope is not None and not envelope.failed and status < 400:
            return envelope.data
        if envelope is None and status < 400:
            raise DirectorProtocolError(
                "response is not the Director's JSON envelope",
                status=status,
                director_message=resp.text[:200],
                **ctx,
            )
        pseudo = _pseudo_status(status, envelope)
        if envelope is not None:
            messages = [e.message for e in envelope.response.errors or [] if e.message]
            director_message = "; ".join(messages) or f"envelope code {envelope.response.code}"
        else:
            director_message = resp.text[:200] or resp.reason
        cls = error_class(pseudo)
        raise cls(
            f"the Director refused {ctx['method']} {ctx['path']}",
            status=status,
            director_message=director_message,
            **ctx,
        )
