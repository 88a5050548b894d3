"""Offline validation of custom resources against the CRD schemas the lab installs (``lab/crds``).

Stricter than the API server in one way on purpose: a field the schema does not declare is an
error here (the API server would silently prune it, losing the setting). CEL rules
(``x-kubernetes-validations``) are not evaluated; the lab end-to-end test covers them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema
import yaml

from lab.crdsync import CRD_DIR


def _strict(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        out.get("type") == "object"
        and "properties" in out
        and "additionalProperties" not in out
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return out


@cache
def schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """``(apiVersion, kind) -> JSON schema`` for every served version of every CRD."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(CRD_DIR.glob("*/*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
            for version in doc["spec"]["versions"]:
                schema = _strict(version["schema"]["openAPIV3Schema"])
                schema["properties"]["metadata"] = {"type": "object"}
                found[(f"{group}/{version['name']}", kind)] = schema
    return found


def validation_errors(obj: dict[str, Any]) -> list[str]:
    """Schema violations of ``obj`` (``{apiVersion, kind, metadata, spec}``), as ``path: message``.

    Raises:
        KeyError: no CRD for the object's apiVersion/kind.
    """
    schema = schemas()[(obj["apiVersion"], obj["kind"])]
    errors = jsonschema.Draft7Validator(schema).iter_errors(obj)
    return sorted(f"{'.'.join(str(p) for p in e.path)}: {e.message}" for e in errors)
