"""``DirectorAccount``: a Director endpoint and the account that logs in to it, as validated inputs.

The inputs every Director resource shares (``GpuComposition``, ``DirectorEndpoint``,
``ComposerGpuGuard``): the base URL (LIQID: HTTP 8080 / HTTPS 8443, base path
``/liqid/api/v2``, docs/domain.md "LIQID Director REST API") and an account, whose username and
password are secret inputs of each resource (``kit.DynamicResource.secret_inputs``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: The account's inputs, kept secret in state and outputs.
SECRET_KEYS = ("username", "password")
_ENDPOINT = r"^https?://[^\s/:]+(:[0-9]{1,5})?(/\S*)?$"


class DirectorAccount(BaseModel):
    """A Director endpoint and account.

    Attributes:
        endpoint: the Director's base URL, ``http(s)://host[:port]``.
        username / password: the account (never printed: ``repr=False``).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    endpoint: str
    username: str = Field(min_length=1, repr=False)
    password: str = Field(min_length=1, repr=False)

    @field_validator("endpoint", mode="before")
    @classmethod
    def _endpoint(cls, value: Any) -> Any:
        if not isinstance(value, str) or not re.match(_ENDPOINT, value):
            raise ValueError(f"must be http(s)://host:port, got {value!r}")
        return value


class DirectorEndpointSpec(DirectorAccount):
    """The inputs of ``DirectorEndpoint``: the account and whether to verify TLS.

    Attributes:
        verify_tls: verify the Director's certificate on https (default True).
    """

    verify_tls: bool = True


class ComposerGuardSpec(DirectorEndpointSpec):
    """The inputs of ``ComposerGpuGuard``.

    Attributes:
        owner_tag: the composer's owner tag (the GPUs' user description).
        group: the Director group of the composer's pool.
    """

    owner_tag: str = Field(min_length=1, max_length=255)
    group: str = Field(min_length=1, max_length=63)
