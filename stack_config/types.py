"""Constrained scalar types shared by the stack-config models.

Every constrained type validates with a message that names the offending value and the
accepted range or shape (the loader prefixes it with the key path), and carries the same
constraint into the exported JSON schema (``minimum``/``maximum``/``pattern``), so editors
and the loader agree.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, WithJsonSchema
from pydantic_core import PydanticCustomError

from domain import reclaim

#: RFC 1123 label, as Kubernetes requires for Namespace and most object names.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
#: ``aa:bb:cc:dd:ee:ff`` (the pattern Metal3's BareMetalHost.spec.bootMACAddress accepts).
MAC_PATTERN = r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$"
_MAC = re.compile(MAC_PATTERN)
#: mlxconfig parameter names (``mlxconfig -d <dev> set NAME=VALUE``): upper case, digits, ``_``.
MLXCONFIG_KEY_PATTERN = r"^[A-Z][A-Z0-9_]*$"
_MLX_KEY = re.compile(MLXCONFIG_KEY_PATTERN)


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise PydanticCustomError(
            "dns_label",
            "'{value}' is not a DNS label (lower-case letters, digits and '-', at most 63 characters, "
            "starting and ending with a letter or digit)",
            {"value": value},
        )
    return value


def bounded(lo: int, hi: int) -> Callable[[int], int]:
    """Return a validator that accepts ``lo <= value <= hi``.

    Raises (inside pydantic) ``PydanticCustomError('range')`` with the message
    ``"<value> is outside <lo>..<hi>"``.
    """

    def check(value: int) -> int:
        if not lo <= value <= hi:
            raise PydanticCustomError(
                "range", "{value} is outside {lo}..{hi}", {"value": value, "lo": lo, "hi": hi}
            )
        return value

    return check


def bounded_int(lo: int, hi: int) -> Any:
    """An ``int`` type accepting ``lo..hi`` inclusive, with the bounds in its JSON schema."""
    return Annotated[
        int, AfterValidator(bounded(lo, hi)), Field(json_schema_extra={"minimum": lo, "maximum": hi})
    ]


def _at_least(lo: int) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value < lo:
            raise PydanticCustomError("range", "{value} is less than {lo}", {"value": value, "lo": lo})
        return value

    return check


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError("http_url", "'{value}' is not an http:// or https:// URL", {"value": value})
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise PydanticCustomError("http_url", "'{value}' has an invalid port", {"value": value}) from None
    return value.rstrip("/")


def _cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise PydanticCustomError(
            "cidr", "'{value}' is not a valid CIDR ({reason})", {"value": value, "reason": str(exc)}
        ) from None
    return str(net)


def _mac(value: str) -> str:
    if not _MAC.match(value):
        raise PydanticCustomError(
            "mac", "'{value}' is not a MAC address like 52:54:00:aa:bb:01", {"value": value}
        )
    return value.lower()


def _mlx_key(value: str) -> str:
    if not _MLX_KEY.match(value):
        raise PydanticCustomError(
            "mlxconfig_key", "'{value}' is not an mlxconfig parameter name (A-Z, 0-9, _)", {"value": value}
        )
    return value


def _non_empty(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("empty", "must not be empty", {})
    return value


def _kernel_arg(value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise PydanticCustomError(
            "kernel_arg", "'{value}' is not a single kernel argument (no spaces)", {"value": value}
        )
    return value


DnsLabel = Annotated[
    str, AfterValidator(_dns_label), Field(json_schema_extra={"pattern": DNS_LABEL_PATTERN, "maxLength": 63})
]
"""A Kubernetes-style name: RFC 1123 label, at most 63 characters."""

NonEmptyStr = Annotated[str, AfterValidator(_non_empty), Field(json_schema_extra={"minLength": 1})]
"""Any non-blank string."""

HttpUrl = Annotated[
    str, AfterValidator(_http_url), Field(json_schema_extra={"format": "uri", "pattern": r"^https?://"})
]
"""``http://`` or ``https://`` URL with a host (trailing ``/`` dropped)."""

Cidr = Annotated[str, AfterValidator(_cidr), Field(json_schema_extra={"examples": ["10.10.0.0/24"]})]
"""IPv4 or IPv6 network in CIDR notation, host bits zero (``10.10.0.0/24``)."""

MacAddress = Annotated[str, AfterValidator(_mac), Field(json_schema_extra={"pattern": MAC_PATTERN})]
"""Ethernet MAC address ``aa:bb:cc:dd:ee:ff`` (normalised to lower case)."""

MlxconfigKey = Annotated[
    str, AfterValidator(_mlx_key), Field(json_schema_extra={"pattern": MLXCONFIG_KEY_PATTERN})
]
"""An mlxconfig parameter name such as ``VIRTIO_NET_EMULATION_ENABLE``."""

KernelArg = Annotated[str, AfterValidator(_kernel_arg), Field(json_schema_extra={"pattern": r"^\S+$"})]
"""One kernel command-line argument (``intel_iommu=on``)."""

VxlanId = Annotated[
    int,
    AfterValidator(bounded(1, 16_777_215)),
    Field(json_schema_extra={"minimum": 1, "maximum": 16_777_215}),
]
"""VXLAN network identifier (24 bits, RFC 7348 section 5); 0 is reserved here."""

VlanId = Annotated[
    int, AfterValidator(bounded(1, 4094)), Field(json_schema_extra={"minimum": 1, "maximum": 4094})
]
"""IEEE 802.1Q VLAN ID; 0 and 4095 are reserved."""

PositiveInt = Annotated[int, AfterValidator(_at_least(1)), Field(json_schema_extra={"minimum": 1})]
"""An integer >= 1."""

NonNegativeInt = Annotated[int, AfterValidator(_at_least(0)), Field(json_schema_extra={"minimum": 0})]
"""An integer >= 0."""

#: JSON schema of Pulumi's encrypted config value, ``{secure: v1:...}``, as written by ``pulumi config
#: set --secret --path``: the only form a secret takes in a stack file (a plain value is refused,
#: :func:`stack_config.loader.plaintext_secrets`).
PULUMI_SECURE_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
}

#: JSON schema of a one-line secret (a password): only Pulumi's encrypted form.
SECRET_JSON_SCHEMA: dict[str, Any] = {
    **PULUMI_SECURE_JSON_SCHEMA,
    "description": "Secret: set with `pulumi config set --secret --path ...` (it prompts for the value) so "
    "that the stack file holds only the encrypted form; a plain-text value is rejected.",
}

Secret = Annotated[SecretStr, WithJsonSchema(SECRET_JSON_SCHEMA)]
"""A secret string (a password) that may appear in a stack file only encrypted (``{secure: ...}``,
:func:`stack_config.loader.plaintext_secrets`); never printed (``SecretStr``), wrapped in
``pulumi.Output.secret`` by components."""

#: JSON schema of a multi-line secret set from a file (an SSH private key): only Pulumi's encrypted
#: form. Told apart from :data:`SECRET_JSON_SCHEMA` by the loader, whose hint pipes the value from a file.
ENCRYPTED_SECRET_JSON_SCHEMA: dict[str, Any] = {
    **PULUMI_SECURE_JSON_SCHEMA,
    "description": "Secret that must be stored encrypted: set it with `pulumi config set --secret --path "
    "...`; a plain-text value in the stack file is rejected.",
}

EncryptedSecret = Annotated[SecretStr, WithJsonSchema(ENCRYPTED_SECRET_JSON_SCHEMA)]
"""A multi-line secret (an SSH private key) that may appear in a stack file only encrypted
(``{secure: ...}``, :func:`stack_config.loader.plaintext_secrets`), set from a file
(``pulumi config set --secret --path ... < key``). Wrapped in ``pulumi.Output.secret`` by components."""


# --------------------------------------------------------------------------- composer reclaim guards


def _domain_rule(kind: str, rule: Callable[[str], object]) -> Callable[[str], str]:
    """A validator running one rule of :mod:`domain.reclaim`: its ``ValueError`` becomes a
    ``PydanticCustomError(kind)`` with the rule's own message (which quotes the value)."""

    def check(value: str) -> str:
        try:
            rule(value)
        except ValueError as exc:
            raise PydanticCustomError(kind, "{reason}", {"reason": str(exc)}) from None
        return value

    return check


ReclaimBudget = Annotated[
    str,
    BeforeValidator(reclaim.budget_as_text),
    AfterValidator(_domain_rule("reclaim_budget", reclaim.parse_budget)),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": reclaim.BUDGET_PATTERN},
                {"type": "integer", "minimum": 0, "maximum": 999_999},
            ],
            "examples": ["2", "20%"],
        }
    ),
]
"""A reclaim budget (:func:`domain.reclaim.parse_budget`): a node count ``"2"`` (a bare YAML number
is accepted) or a percentage of the pool's nodes ``"20%"`` (at most ``100%``)."""

ReclaimWindow = Annotated[
    str,
    AfterValidator(_domain_rule("reclaim_window", reclaim.parse_window)),
    Field(json_schema_extra={"pattern": reclaim.WINDOW_PATTERN, "examples": ["22:00-06:00"]}),
]
"""A daily UTC reclaim window ``HH:MM-HH:MM`` (:func:`domain.reclaim.parse_window`): an end before the
start spans midnight, ``24:00`` is allowed as an end, start and end differ."""

OwnerTag = Annotated[
    str,
    AfterValidator(_domain_rule("owner_tag", reclaim.check_owner_tag)),
    Field(
        json_schema_extra={
            "pattern": reclaim.OWNER_TAG_PATTERN,
            "minLength": 1,
            "maxLength": reclaim.OWNER_TAG_MAX_LENGTH,
            "not": {"const": "n/a"},
        }
    ),
]
"""An owner tag for the Director's device user description (:func:`domain.reclaim.check_owner_tag`):
letters, digits and ``._:/+-``, at most 64 characters, never ``n/a`` (the Director's "none")."""
