"""HTTP transport to the Director: connection reuse, auth, timeouts, retries, envelope, errors.

Only this module performs I/O. It knows nothing of GPUs; the resource modules in
``dynamic_providers.director.api`` shape the requests.

Facts used, from LIQID's SDKs:

- base path ``/liqid/api/v2/`` (``liqidsdk-go`` ``liqidsdk/client.go:24``);
- envelope ``{"response": {"code", "errors", "data"}}``: a non-zero ``code`` or any ``errors``
  means failure, also under HTTP 200 (``liqidsdk-java`` ``Wrapper.java:48-57``);
- auth is HTTP Basic, or a message digest: ``DELETE digest/{label}`` then ``POST digest/{label}``
  (with Basic) for a fixed label, whose ``digest_key`` is then sent as ``X-API-Key``, and
  ``DELETE digest/{label}`` at the end (``client.go:233-299``; ``LiqidClientBase.java:143-204``);
- an HTTP 202 answer to any call is a job: its link ``data[0].links[0].href`` is polled with GET,
  one second apart, until it answers 404 (done) or a ``command_execution_state`` other than
  ``Pending`` (``LiqidClientBase.java:176-237``). ``FAILURE`` is raised as
  :class:`DirectorJobFailedError`; any other state ends the wait, as in the SDK. A job still
  ``Pending`` after ``job_timeout`` raises :class:`DirectorJobRunningError`.
- error classes: LIQID's messages first (:data:`~.liqid.MESSAGE_RULES`), then the HTTP status,
  then an HTTP-like ``errors[].code`` (this project's assumption about the Director's codes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack
from urllib.parse import urljoin

import requests
from pydantic import ValidationError
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from .errors import (
    DirectorAuthError,
    DirectorConflictError,
    DirectorError,
    DirectorJobFailedError,
    DirectorJobRunningError,
    DirectorNotFoundError,
    DirectorProtocolError,
    DirectorRequestError,
    DirectorServerError,
    DirectorTimeoutError,
    DirectorUnavailableError,
)
from .liqid import (
    DEFAULT_DIGEST_LABEL,
    JOB_FAILURE,
    JOB_PENDING,
    JOB_POLL_INTERVAL_SECONDS,
    JOB_TIMEOUT_SECONDS,
    classify_message,
)
from .models import AsyncStatus, DigestInfo, Envelope

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


@dataclass(frozen=True)
class Call:
    """One HTTP request as :class:`Transport` sends it.

    Attributes:
        method: HTTP method.
        path: path relative to ``/liqid/api/v2/`` (``fabric/edit``), or a whole URL (a job link)
            when ``absolute``.
        params / json: query parameters and JSON body, or None.
        absolute: ``path`` is a whole URL, sent as it is.
    """

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    absolute: bool = False


class TransportOptions(TypedDict, total=False):
    """How a :class:`Transport` talks to its Director; every key may be left out.

    Declared once here: :class:`Transport` and
    :class:`~dynamic_providers.director.client.DirectorClient` take these as keyword arguments.

    Keys (default in brackets):
        timeout: per-request read/connect timeout, seconds (10).
        retries: how many times urllib3 retries GETs on 500/502/503/504 and any method on
            connection errors raised before the request was sent, never a POST/PUT/DELETE
            that may have reached the Director (3).
        backoff_factor: urllib3 exponential backoff factor, seconds (0.5).
        use_digest: authenticate with a message digest (``X-API-Key``) instead of HTTP Basic
            (False).
        digest_label: the fixed digest label, deleted before it is created and at close
            (:data:`~.liqid.DEFAULT_DIGEST_LABEL`). Clients sharing a label replace each other's
            digest: give concurrent tools their own.
        verify_tls: verify the Director's certificate on https (True).
        job_poll_interval: pause before each poll of an HTTP 202 job link, seconds
            (:data:`~.liqid.JOB_POLL_INTERVAL_SECONDS`, LIQID's SDK: 1).
        job_timeout: longest wait for one job, seconds (:data:`~.liqid.JOB_TIMEOUT_SECONDS`,
            LIQID's SDK: 300).
    """

    timeout: float
    retries: int
    backoff_factor: float
    use_digest: bool
    digest_label: str
    verify_tls: bool
    job_poll_interval: float
    job_timeout: float


class Transport:
    """A reusable, authenticated HTTP session to one Director.

    Args:
        base_url: ``http(s)://host:port`` (``/liqid/api/v2`` appended when absent).
        username / password: Director credentials (HTTP Basic; also used to create digests).
        options: :class:`TransportOptions` (timeouts, retries, digest, TLS, job waits).

    Attributes:
        root: the API base URL (``http(s)://host:port/liqid/api/v2/``).
        timeout / retries / backoff_factor / job_poll_interval / job_timeout: the options in
            effect (:class:`TransportOptions`).

    Raises:
        ValueError: a URL that is not http(s), or a digest label with blanks or ``slurm``.
        TypeError: an option :class:`TransportOptions` does not name.

    Use as a context manager, or call :meth:`close` (deletes the digest, closes sockets).
    One instance per thread: ``requests.Session`` is not thread-safe.
    """

    def __init__(
        self, base_url: str, *, username: str, password: str, **options: Unpack[TransportOptions]
    ) -> None:
        unknown = options.keys() - TransportOptions.__optional_keys__
        if unknown:
            raise TypeError(f"unknown Director transport option(s): {', '.join(sorted(unknown))}")
        digest_label = options.get("digest_label", DEFAULT_DIGEST_LABEL)
        if not digest_label or " " in digest_label or digest_label.lower() == "slurm":
            raise ValueError(f"digest label {digest_label!r}: no blanks, and 'slurm' is reserved")
        self.root = api_root(base_url)
        self.timeout = options.get("timeout", 10.0)
        self.retries = options.get("retries", 3)
        self.backoff_factor = options.get("backoff_factor", 0.5)
        self.job_poll_interval = options.get("job_poll_interval", JOB_POLL_INTERVAL_SECONDS)
        self.job_timeout = options.get("job_timeout", JOB_TIMEOUT_SECONDS)
        self._basic = requests.auth.HTTPBasicAuth(username, password)
        self._use_digest = options.get("use_digest", False)
        self._digest: DigestInfo | None = None
        self._digest_label = digest_label
        #: Called with (job link, False) when a call answers HTTP 202 and (job link, True) once
        #: its wait saw the job end, so a caller can hand over the jobs whose end it has not seen.
        self.on_job: Callable[[str, bool], None] | None = None
        self._session = requests.Session()
        self._session.verify = options.get("verify_tls", True)
        self._session.headers.update({"Accept": "application/json", "User-Agent": "composable-gpu/0.1"})
        retry = Retry(
            total=self.retries,
            connect=self.retries,
            read=self.retries,
            status=self.retries,
            other=0,
            allowed_methods=frozenset({"GET"}),
            status_forcelist=(500, 502, 503, 504),
            backoff_factor=self.backoff_factor,
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
                self._send(Call("DELETE", f"digest/{self._digest.digest_label}"), auth_header=True,
                           timeout=self.timeout)
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

        An HTTP 202 answer is waited for: the job link is polled until the job ends, and the
        answer's ``data`` is returned without its ``links``.

        Raises:
            DirectorError subclass: see ``errors.py``; a 401 re-authenticates once (digest)
            before :class:`DirectorAuthError` is raised. :class:`DirectorJobFailedError` /
            :class:`DirectorJobRunningError` for a job that failed / still runs.
        """
        timeout = self.timeout if timeout is None else timeout
        ctx = {"method": method, "path": path, "machine": machine, "device": device}
        call = Call(method, path, params, json)
        for attempt in (1, 2):
            resp = self._send(call, timeout=timeout, ctx=ctx)
            if resp.status_code == 401 and self._use_digest and attempt == 1:
                log.info("Director answered 401 to %s %s; creating a new digest once", method, path)
                self._digest = None
                continue
            data = self._parse(resp, ctx)
            if resp.status_code == 202:
                href = self._job_link(data, ctx)
                if self.on_job is not None:
                    self.on_job(href, False)
                self._wait_for_job(href, ctx)
                data = [{k: v for k, v in data[0].items() if k != "links"}, *data[1:]]
            return data
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _job_link(data: list[Any], ctx: dict[str, Any]) -> str:
        try:
            href = data[0]["links"][0]["href"]
        except (IndexError, KeyError, TypeError) as exc:
            raise DirectorProtocolError("HTTP 202 without data[0].links[0].href", status=202, **ctx) from exc
        if not isinstance(href, str) or not href:
            raise DirectorProtocolError("HTTP 202 with an empty job link", status=202, **ctx)
        return href

    def _wait_for_job(self, href: str, ctx: dict[str, Any]) -> None:
        """Poll a job link until the job ends (``LiqidClientBase.java:188-237``).

        Raises:
            DirectorJobFailedError: the job ended in ``FAILURE``.
            DirectorJobRunningError: still ``Pending`` after :attr:`job_timeout` seconds.
            DirectorError: the poll itself failed (other than 404).
            Every error but the first carries ``href`` as its ``job``: the job's end is unknown.
        """
        deadline = time.monotonic() + self.job_timeout
        try:
            while True:
                time.sleep(self.job_poll_interval)
                if self.job_ended(href, ctx=ctx):
                    if self.on_job is not None:
                        self.on_job(href, True)
                    return
                if time.monotonic() >= deadline:
                    raise DirectorJobRunningError(
                        f"an asynchronous job still runs after {self.job_timeout:g} s",
                        status=202,
                        director_message=href,
                        **ctx,
                    )
        except DirectorJobFailedError:
            if self.on_job is not None:
                self.on_job(href, True)
            raise
        except DirectorError as exc:
            exc.job = exc.job or href
            raise

    def job_ended(self, href: str, *, ctx: dict[str, Any] | None = None) -> bool:
        """Poll a job link once: True when the job has ended (HTTP 404, or a state other than
        ``Pending``), False while it is ``Pending``.

        Args:
            href: the job link of an HTTP 202 answer (``data[0].links[0].href``).
            ctx: the fields of any error raised (default: ``GET <href>``).

        Raises:
            DirectorJobFailedError: the job ended in ``FAILURE``.
            DirectorError: the poll itself failed (no answer, another status, a malformed body).
        """
        url = urljoin(self.root, href)
        ctx = ctx or {"method": "GET", "path": href}
        resp = self._send(Call("GET", url, absolute=True), timeout=self.timeout, ctx=ctx)
        if resp.status_code == 404:
            return True
        if resp.status_code != 200:
            raise error_class(resp.status_code)(
                f"cannot tell the result of the job {href}", status=resp.status_code, **ctx
            )
        records = self._parse(resp, ctx)
        try:
            state = AsyncStatus.model_validate(records[0]).command_execution_state
        except (IndexError, ValidationError) as exc:
            raise DirectorProtocolError(f"malformed status of the job {href}", **ctx) from exc
        if state == JOB_FAILURE:
            raise DirectorJobFailedError(
                "an asynchronous job failed", status=200, director_message=f"{href}: {state}", **ctx
            )
        return state != JOB_PENDING

    def _send(
        self, call: Call, *, timeout: float, ctx: dict[str, Any] | None = None, auth_header: bool = False
    ) -> requests.Response:
        """Send ``call`` once (urllib3's retries aside) and return the raw response.

        Args:
            call: the request.
            timeout: read timeout, seconds (the connect timeout is at most 10 s).
            ctx: the fields of any error raised (default: ``call``'s method and path).
            auth_header: send the digest (``X-API-Key``) even when the transport uses Basic.

        Raises:
            DirectorUnavailableError / DirectorTimeoutError / DirectorServerError: no usable answer.
        """
        ctx = ctx or {"method": call.method, "path": call.path}
        headers: dict[str, str] = {}
        auth: requests.auth.AuthBase | None = self._basic
        if auth_header or (self._use_digest and (call.absolute or not call.path.startswith("digest/"))):
            if self._digest is None:
                self._digest = self._create_digest(timeout)
            headers["X-API-Key"] = self._digest.digest_key.get_secret_value()
            auth = None
        try:
            return self._session.request(
                call.method,
                call.path if call.absolute else self.root + call.path,
                params=call.params,
                json=call.json,
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
        try:  # a digest left by a crashed run of this tool (client.go:259-260)
            self._send(Call("DELETE", path), timeout=timeout)
        except DirectorError as exc:
            log.debug("could not delete the digest %s before creating it: %s", path, exc)
        resp = self._send(Call("POST", path), timeout=timeout, ctx=ctx)
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
        messages = [e.message for e in envelope.response.errors or [] if e.message] if envelope else []
        if envelope is not None:
            director_message = "; ".join(messages) or f"envelope code {envelope.response.code}"
        else:
            director_message = resp.text[:200] or resp.reason
        cls = classify_message(messages) or error_class(pseudo)
        raise cls(
            f"the Director refused {ctx['method']} {ctx['path']}",
            status=status,
            director_message=director_message,
            **ctx,
        )
