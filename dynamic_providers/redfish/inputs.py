"""Typed inputs of the Redfish providers (pydantic; ``check`` validates with them).

- :class:`BmcConnection`: where the BMC is, the account, TLS and reset settings both resources take.
- :class:`DpuPostureSpec`: a :class:`BmcConnection` and the DPU's ``mode``, ``host_privilege``
  and ``host_rshim``.
- :class:`BiosAttributesSpec`: a :class:`BmcConnection`, the ``attributes`` map and ``system_id``.

Error messages name the rule and never the value of ``username`` or ``password``; an endpoint
is shown only when it carries no ``user@`` part (the error for that case does not echo it).
``dynamic_providers.kit.validation_failures`` turns the errors into ``CheckFailure``\\ s.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator
from pydantic_core import PydanticCustomError

from dynamic_providers.redfish import posture
from dynamic_providers.redfish.models import AttrValue, DpuMode, EnabledDisabled, PrivilegeLevel

__all__ = [
    "DEFAULT_RESET_TIMEOUT_SECONDS",
    "MAX_RESET_TIMEOUT_SECONDS",
    "BiosAttributesSpec",
    "BmcConnection",
    "DpuPostureSpec",
]

DEFAULT_RESET_TIMEOUT_SECONDS = 600
MAX_RESET_TIMEOUT_SECONDS = 3600


class BmcConnection(BaseModel):
    """The inputs both Redfish resources take.

    Attributes:
        bmc_endpoint: ``http(s)://host[:port]``, no path (the client adds ``/redfish/v1``) and no
            ``user@`` part.
        username, password: the BMC account, non-empty (never shown in a message or repr).
        verify_tls: verify the BMC's certificate (a JSON boolean, default True).
        ca_bundle: path of the PEM CA bundle to verify with, or None (system CAs).
        apply_reset: reset when one of the resource's settings awaits a reset (default False).
        reset_timeout_seconds: how long to wait for a reset to apply them, seconds, in
            ``(0, 3600]`` (default 600).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    bmc_endpoint: str
    username: str = Field(min_length=1, repr=False)
    password: str = Field(min_length=1, repr=False)
    verify_tls: StrictBool = True
    ca_bundle: str | None = Field(default=None, strict=True)
    apply_reset: StrictBool = False
    reset_timeout_seconds: float = Field(default=DEFAULT_RESET_TIMEOUT_SECONDS, strict=True, gt=0,
                                         le=MAX_RESET_TIMEOUT_SECONDS)

    @field_validator("bmc_endpoint", mode="before")
    @classmethod
    def _endpoint(cls, value: Any) -> Any:
        if isinstance(value, str) and "@" in value:
            raise PydanticCustomError("endpoint_credentials", "must not carry credentials "
                                      "(user@ or user:password@); use username/password")
        parts = urlsplit(value) if isinstance(value, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise PydanticCustomError("endpoint_form", "must be https://host[:port], got {got}",
                                      {"got": repr(value)})
        if parts.path not in ("", "/"):
            raise PydanticCustomError("endpoint_path", "must have no path (the client adds /redfish/v1)")
        return value

    @field_validator("ca_bundle", mode="before")
    @classmethod
    def _ca_bundle(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise PydanticCustomError("ca_bundle", "must be a path to a PEM file or null")
        return value


class DpuPostureSpec(BmcConnection):
    """Inputs of ``DpuPosture``: the posture (values as :mod:`dynamic_providers.redfish.posture`
    names them: ``DPU_MODES``, ``PRIVILEGE_LEVELS``, ``RSHIM_STATES``)."""

    mode: DpuMode = "DpuMode"
    host_privilege: PrivilegeLevel = "Restricted"
    host_rshim: EnabledDisabled = "Disabled"


class BiosAttributesSpec(BmcConnection):
    """Inputs of ``BiosAttributes``.

    Attributes:
        attributes: non-empty map of BIOS attribute name to a string, number or boolean;
            integral numbers become ints (the engine carries every number as a float).
        system_id: the ComputerSystem id (``"1"``): non-empty, no ``/``.
    """

    attributes: dict[str, AttrValue]
    system_id: str = "1"

    @field_validator("attributes", mode="before")
    @classmethod
    def _attributes(cls, value: Any) -> Any:
        if not isinstance(value, dict) or not value:
            raise PydanticCustomError("attributes", "must be a non-empty map of attribute to value")
        bad = [k for k, v in value.items() if not isinstance(v, str | int | float | bool)]
        if bad:
            raise PydanticCustomError("attribute_values", "values must be string/number/bool: {bad}",
                                      {"bad": repr(bad)})
        return {str(k): posture.normalise_value(v) for k, v in value.items()}

    @field_validator("system_id", mode="before")
    @classmethod
    def _system_id(cls, value: Any) -> Any:
        if not isinstance(value, str) or not value or "/" in value:
            raise PydanticCustomError("system_id", "must be a system id such as '1', got {got}",
                                      {"got": repr(value)})
        return value
