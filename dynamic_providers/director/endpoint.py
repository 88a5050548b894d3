"""The Director's preview-time probe, and ``DirectorEndpoint``: a resource that only checks.

``director_failure`` logs in to a Director with HTTP Basic and reads ``GET group`` (a
read-only call: no digest is created, nothing is edited), once per endpoint and account per
provider process (``dynamic_providers.preflight``). It returns one line naming the endpoint,
what was refused and what to do, or None.

``DirectorEndpoint`` carries no state of its own: its ``check`` runs the probe, so a wrong
password or an unreachable Director stops ``pulumi preview`` (and ``pulumi up`` before
anything that depends on it). The composer component makes its credentials Secret depend on
one, so that Secret is never replaced with credentials the Director refuses.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, Resource, ResourceProvider

from dynamic_providers import kit, oneline, preflight
from dynamic_providers.director.client import DirectorClient
from dynamic_providers.director.errors import DirectorAuthError, DirectorError, DirectorUnavailableError

#: Per-request timeout of the probe, seconds.
PROBE_TIMEOUT_SECONDS = 10.0

oneline.install()


#: One line for a probe's failure: what was refused and what to do.
_explain = kit.explainer(
    (DirectorAuthError, lambda exc: kit.refused_credentials(str(exc), "Director account")),
    (DirectorUnavailableError, lambda exc: kit.unreachable(
        "no answer", str(exc), "the Director endpoint and that it is reachable")),
    (DirectorError, lambda exc: f"probe failed: {exc}"),
)


def director_failure(endpoint: str, *, username: str, password: str, verify_tls: bool = True) -> str | None:
    """Probe the Director read-only; None when it answers and accepts the account.

    Args:
        endpoint: ``http(s)://host:port`` of the Director (LIQID: HTTP 8080 / HTTPS 8443).
        username, password: the account; only a hash of the password is kept for the cache.
        verify_tls: verify the certificate on https.

    Returns:
        One line ``Director <endpoint>: <what was refused>: <what to do>``, or None (also when
        ``COMPOSABLE_GPU_PREFLIGHT=off``).
    """

    def probe() -> None:
        with DirectorClient(endpoint, username=username, password=password, timeout=PROBE_TIMEOUT_SECONDS,
                            retries=1, backoff_factor=0.2, verify_tls=verify_tls) as client:
            client.groups()

    return preflight.endpoint_failure("Director", endpoint, identity=username, secret=password,
                                      probe=probe, explain=_explain)


class DirectorEndpointProvider(ResourceProvider):
    """Dynamic provider of :class:`DirectorEndpoint` (stateless; nothing is written anywhere)."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """Validate the endpoint's shape, then probe it (skipped while a value is unknown)."""
        failures: list[CheckFailure] = []
        endpoint = news.get("endpoint")
        if not kit.is_unknown(endpoint):
            parts = urlsplit(endpoint) if isinstance(endpoint, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                failures.append(CheckFailure("endpoint", f"must be http(s)://host:port, got {endpoint!r}"))
        for key in ("username", "password"):
            value = news.get(key)
            if not kit.is_unknown(value) and (not isinstance(value, str) or not value):
                failures.append(CheckFailure(key, "must be a non-empty string"))
        known = not kit.is_unknown([news.get(k) for k in ("endpoint", "username", "password", "verify_tls")])
        if not failures and known:
            reason = director_failure(news["endpoint"], username=news["username"], password=news["password"],
                                      verify_tls=bool(news.get("verify_tls", True)))
            if reason:
                failures.append(CheckFailure("endpoint", reason))
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """A change of any input is an in-place update (the check already ran on the new values)."""
        keys = ("endpoint", "username", "password", "verify_tls")
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in keys))

    def create(self, props: dict[str, Any]) -> CreateResult:
        """Record the checked endpoint; the ID is the endpoint URL."""
        return CreateResult(props["endpoint"], dict(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        """Record the new values (already checked)."""
        return pulumi.dynamic.UpdateResult(dict(news))


def account_resource_args(
    endpoint: pulumi.Input[str], username: pulumi.Input[str], password: pulumi.Input[str],
    verify_tls: pulumi.Input[bool], opts: pulumi.ResourceOptions | None,
) -> tuple[dict[str, Any], pulumi.ResourceOptions]:
    """The inputs and options of a dynamic resource that logs in to the Director: ``endpoint``,
    ``username``, ``password``, ``verify_tls``, with the account as Pulumi secrets (inputs and
    outputs), and ``opts`` merged in. Used by :class:`DirectorEndpoint` and
    :class:`dynamic_providers.director.destroy_guard.ComposerGpuGuard`."""
    inputs = {"endpoint": endpoint, "username": pulumi.Output.secret(username),
              "password": pulumi.Output.secret(password), "verify_tls": verify_tls}
    secret_opts = pulumi.ResourceOptions(additional_secret_outputs=["username", "password"])
    return inputs, pulumi.ResourceOptions.merge(secret_opts, opts)


class DirectorEndpoint(Resource, module="director", name="DirectorEndpoint"):
    """A Director endpoint and account that ``pulumi preview`` checks before anything uses them.

    Args:
        resource_name: Pulumi name.
        endpoint: ``http(s)://host:port`` of the Director.
        username, password: the account (stored as secrets).
        verify_tls: verify the certificate on https (default True).
    """

    endpoint: pulumi.Output[str]

    def __init__(self, resource_name: str, *, endpoint: pulumi.Input[str], username: pulumi.Input[str],
                 password: pulumi.Input[str], verify_tls: pulumi.Input[bool] = True,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        inputs, options = account_resource_args(endpoint, username, password, verify_tls, opts)
        super().__init__(DirectorEndpointProvider(), resource_name, inputs, options)
