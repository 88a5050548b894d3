"""One module per Director API resource, following the API tree under ``/liqid/api/v2/``.

``status`` (``status``, ``status/gpu``), ``device`` (``device/info/gpu``, ``device/udesc``),
``group``, ``machine``, ``predevice`` (group pools), ``pool`` (``coordinates``, ``fabric/id``,
``pool/edit|done|cancel``), ``relate`` (machine attachments) and ``fabric`` (``fabric/edit``,
``fabric/edit/cancel``, ``fabric/reprogram``). Each function sends one call through a
:class:`~dynamic_providers.director._transport.Transport` and returns typed models. Paths and
bodies: ``liqidinc/liqidsdk-java`` ``liqidsdk/generated/com/liqid/sdk/LiqidClient.java``.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..errors import DirectorProtocolError

M = TypeVar("M", bound=BaseModel)


@cache
def _list_of(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    """One validator for a list of ``model`` records or nulls (one call into pydantic-core for the whole list:
    about half the time of validating record by record, which matters for ``status/gpu`` on a
    fabric of 1,000 GPUs)."""
    return TypeAdapter(list[model | None])  # type: ignore[valid-type]


def parse_records(model: type[M], data: list[Any], *, method: str, path: str) -> list[M]:
    """Validate every ``data`` record as ``model``.

    Raises:
        DirectorProtocolError: a record does not have the documented shape (the message names
            the record's index and field).
    """
    try:
        return [r for r in _list_of(model).validate_python(data) if r is not None]
    except ValidationError as exc:
        first = exc.errors()[0]
        index, *field = first["loc"]
        where = ".".join(str(p) for p in field)
        raise DirectorProtocolError(
            f"malformed {model.__name__} record ({exc.error_count()} problem(s); "
            f"first: record {index}, {where}: {first['msg']})",
            method=method,
            path=path,
        ) from exc


def parse_one(model: type[M], data: list[Any], *, method: str, path: str) -> M:
    """Validate a one-record ``data`` list.

    Raises:
        DirectorProtocolError: not exactly one record, or a malformed one.
    """
    records = parse_records(model, data, method=method, path=path)
    if len(records) != 1:
        raise DirectorProtocolError(
            f"expected one {model.__name__} record, got {len(records)}", method=method, path=path
        )
    return records[0]
