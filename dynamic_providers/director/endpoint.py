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

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult

from dynamic_providers import kit, oneline, preflight
from dynamic_providers.director.account import SECRET_KEYS, DirectorEndpointSpec
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


class DirectorEndpointProvider(kit.RecordProvider):
    """Dynamic provider of :class:`DirectorEndpoint` (stateless; nothing is written anywhere)."""

    inputs = ("endpoint", "username", "password", "verify_tls")

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """Validate the inputs (:class:`DirectorEndpointSpec`), then probe the Director; inputs
        unknown at preview are not judged, and the probe waits until all are known."""
        checked = kit.check_known(DirectorEndpointSpec, news)
        if checked.spec is None or checked.unknown & set(self.inputs):
            return CheckResult(news, checked.failures)
        spec = checked.spec
        reason = director_failure(spec.endpoint, username=spec.username, password=spec.password,
                                  verify_tls=spec.verify_tls)
        return CheckResult(news, [CheckFailure("endpoint", reason)] if reason else [])

    def new_id(self, props: Mapping[str, Any], outs: Mapping[str, Any]) -> str:
        """The endpoint URL."""
        return str(props["endpoint"])


class DirectorEndpoint(kit.DynamicResource, module="director", name="DirectorEndpoint"):
    """A Director endpoint and account that ``pulumi preview`` checks before anything uses them.

    Args:
        resource_name: Pulumi name.
        endpoint: ``http(s)://host:port`` of the Director.
        username, password: the account (secret inputs and outputs).
        verify_tls: verify the certificate on https (default True).
        opts: resource options.
    """

    endpoint: pulumi.Output[str]

    secret_inputs = SECRET_KEYS

    def __init__(self, resource_name: str, *, endpoint: pulumi.Input[str], username: pulumi.Input[str],
                 password: pulumi.Input[str], verify_tls: pulumi.Input[bool] = True,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(DirectorEndpointProvider(), resource_name,
                         {"endpoint": endpoint, "username": username, "password": password,
                          "verify_tls": verify_tls}, opts)
