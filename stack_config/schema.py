"""JSON schema of the stack file, for editors (``stack_config/stack-config.schema.json``).

The schema describes a whole ``Pulumi.<stack>.yaml``: ``config`` holds the estate under
``composable-gpu:estate`` (secret leaves may be plain strings or Pulumi's ``{secure: ...}``),
other config keys are left open. Point an editor at it, for example with the YAML language
server modeline ``# yaml-language-server: $schema=stack_config/stack-config.schema.json``.
Regenerate with ``python -m stack_config schema`` (a test fails when the file is stale).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stack_config.hints import FULL_CONFIG_KEY
from stack_config.models import EstateConfig
from stack_config.types import SECRET_JSON_SCHEMA

SCHEMA_PATH = Path(__file__).resolve().parent / "stack-config.schema.json"


def estate_json_schema() -> dict[str, Any]:
    """JSON schema (draft 2020-12) of the ``composable-gpu:estate`` object."""
    return EstateConfig.model_json_schema(mode="validation")


def _secrets_optional(schema: dict[str, Any]) -> None:
    """Drop secret properties from ``required`` (they are often set per deployment with
    ``pulumi config set --secret`` rather than written in the file; the program still requires them)."""
    props = schema.get("properties", {})
    required = schema.get("required")
    if required:
        kept = [k for k in required if props.get(k, {}).get("anyOf") != SECRET_JSON_SCHEMA["anyOf"]]
        if kept:
            schema["required"] = kept
        else:
            del schema["required"]


def stack_file_json_schema() -> dict[str, Any]:
    """JSON schema of a ``Pulumi.<stack>.yaml`` file whose ``config`` carries the estate."""
    estate = estate_json_schema()
    defs = estate.pop("$defs", {})
    for definition in defs.values():
        _secrets_optional(definition)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://composable-gpu.invalid/stack-config.schema.json",
        "title": "Pulumi stack file of the composable-gpu project",
        "type": "object",
        "properties": {
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
            "config": {
                "type": "object",
                "properties": {FULL_CONFIG_KEY: {"$ref": "#/$defs/EstateConfig"}},
                "required": [FULL_CONFIG_KEY],
                "additionalProperties": True,
            },
        },
        "required": ["config"],
        "$defs": {**defs, "EstateConfig": estate},
    }


def render_schema() -> str:
    """The schema file's exact text (sorted keys, 2-space indent, trailing newline)."""
    return json.dumps(stack_file_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    """Write the schema file and return its path."""
    path.write_text(render_schema(), encoding="utf-8")
    return path
