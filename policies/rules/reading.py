"""The helpers a rule reads records with.

:func:`read`, :func:`read_int`, :func:`read_str_list`, :func:`read_cidr` and :func:`domain_name`
return a property's value, or record in the rule's :class:`~.model.Findings` why it cannot be used
(absent though required, unknown during preview, of the wrong type) and return :data:`INVALID`, so a
rule only tests ``value is INVALID`` and moves on; :func:`of_type` and :func:`index_by_name` select
records, :func:`normalise` compares enum-like strings. See :mod:`.model` for the record shapes and the
handling of preview unknowns.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any, Final

from .model import UNKNOWN, Findings, ResourceRecord


class _Invalid:
    """Marker returned by the ``read_*`` helpers after they recorded a violation."""

    def __repr__(self) -> str:
        return "<invalid>"


INVALID: Final = _Invalid()


def of_type(resources: Iterable[ResourceRecord], token: str) -> list[ResourceRecord]:
    """The records whose type token is ``token``, in stack order."""
    return [r for r in resources if r.type == token]


def read(
    rec: ResourceRecord,
    key: str,
    found: Findings,
    *,
    kind: type | tuple[type, ...] = object,
    required: bool = True,
    default: Any = None,
    what: str = "",
) -> Any:
    """Read a top-level property, recording a violation when it cannot be used.

    Args:
        rec: the record.
        key: property name.
        found: where violations go.
        kind: accepted Python type(s); ``bool`` is never accepted for ``int``.
        required: when ``False`` an absent value yields ``default`` without a violation.
        default: value for an absent optional property.
        what: how to describe ``kind`` in the message (e.g. ``"a list of host names"``).

    Returns:
        The value, ``default``, or :data:`INVALID` after recording a violation (absent
        required, unknown, or of the wrong type).
    """
    if key not in rec.props or rec.props[key] is None:
        if required:
            found.missing(rec, key)
            return INVALID
        return default
    value = rec.props[key]
    if value is UNKNOWN:
        found.unprovable(rec, key)
        return INVALID
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds and int in kinds):
        desc = what or " or ".join(k.__name__ for k in kinds)
        found.add(rec, f"{key} must be {desc}, not {value!r}", f"set {rec.kind}.{key} to {desc}")
        return INVALID
    return value


def read_int(
    rec: ResourceRecord,
    key: str,
    found: Findings,
    *,
    lo: int | None = None,
    hi: int | None = None,
    required: bool = True,
) -> Any:
    """Read an integer property within ``lo..hi`` (inclusive); see :func:`read` for results."""
    value = read(rec, key, found, kind=(int, float), required=required, what="an integer")
    if value is INVALID or value is None:
        return value
    if isinstance(value, float):
        if not value.is_integer():
            found.add(rec, f"{key} must be an integer, not {value!r}", f"set {rec.kind}.{key} to an integer")
            return INVALID
        value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        found.add(rec, f"{key} {value} is outside {lo}..{hi}", f"choose {rec.kind}.{key} within {lo}..{hi}")
        return INVALID
    return value


def read_str_list(
    rec: ResourceRecord, key: str, found: Findings, *, required: bool = True, what: str = "a list of names"
) -> Any:
    """Read a list of strings; an unknown list or element makes the result :data:`INVALID`."""
    value = read(rec, key, found, kind=list, required=required, default=[], what=what)
    if value is INVALID:
        return value
    if any(e is UNKNOWN for e in value):
        found.unprovable(rec, key, "an element is unknown")
        return INVALID
    if not all(isinstance(e, str) for e in value):
        found.add(rec, f"{key} must be {what}, not {value!r}", f"set {rec.kind}.{key} to {what}")
        return INVALID
    return list(value)


def read_cidr(rec: ResourceRecord, key: str, found: Findings) -> Any:
    """Read a CIDR as an ``ipaddress`` network (host bits must be zero); see :func:`read`."""
    value = read(rec, key, found, kind=str, what="a CIDR such as 10.0.0.0/24")
    if value is INVALID:
        return value
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        found.add(rec, f"{key} {value!r} is not a valid CIDR ({exc})", f"set {rec.kind}.{key} to a network "
                  "address with its prefix length, e.g. 10.10.0.0/24")
        return INVALID


def domain_name(rec: ResourceRecord, found: Findings, key: str = "name") -> Any:
    """The domain name of a record (its ``name`` property, else its Pulumi resource name).

    Returns :data:`INVALID` (after recording it) when the property is unknown during preview.
    """
    value = rec.props.get(key)
    if value is None:
        return rec.name
    if value is UNKNOWN:
        found.unprovable(rec, key)
        return INVALID
    return str(value)


def normalise(value: str) -> str:
    """Compare enum-like strings loosely: ``DpuMode``, ``dpu-mode`` and ``DPU_MODE`` agree."""
    return "".join(ch for ch in value.lower() if ch.isalnum())


def index_by_name(records: Sequence[ResourceRecord], found: Findings) -> dict[str, ResourceRecord]:
    """Map domain name -> record; records whose name is unknown are reported and left out."""
    out: dict[str, ResourceRecord] = {}
    for rec in records:
        name = domain_name(rec, found)
        if name is not INVALID:
            out.setdefault(name, rec)
    return out
