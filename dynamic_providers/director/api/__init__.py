"""One module per Director API resource, following the API tree under ``/liqid/api/v2/``.

``status`` (``status``, ``status/gpu``), ``device`` (``device/info/gpu``, ``device/udesc``),
``group``, ``machine``, ``predevice`` (group pools), ``pool`` (``coordinates``, ``fabric/id``,
``pool/edit|done|cancel``), ``relate`` (machine attachments) and ``fabric`` (``fabric/edit``,
``fabric/edit/cancel``, ``fabric/reprogram``). Each function sends one call through a
:class:`~dynamic_providers.director._transport.Transport` and returns typed models. Paths and
bodies: ``liqidinc/liqidsdk-java`` ``liqidsdk/generated/com/liqid/sdk/LiqidClient.java``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import DirectorProtocolError

M = TypeVar("M", bound=BaseModel)


def parse_records(model: type[M], data: list[Any], *, method: str, path: str) -> list[M]:
    """Validate every ``data`` record as ``model``.

    Raises:
        DirectorProtocolError: a record does not have the documented shape.
    """
    try:
        return [model.model_validate(item) for item in data if item is not None]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise DirectorProtocolError(
            f"malformed {model.__name__} record ({exc.error_count()} problem(s); "
            f"first: {where}: {first['msg']})",
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
