"""JSON schema of the stack file, for editors (``stack_config/stack-config.schema.json``).

The schema describes a whole ``Pulumi.<stack>.yaml``: ``config`` holds the estate under
``composable-gpu:estate`` (secret leaves only as Pulumi's encrypted ``{secure: ...}``, and they may
be absent: set per deployment); no other ``composable-gpu:*`` key is allowed, keys of other
namespaces (``aws:region``) are left open. Point an editor at it, for example with the YAML language
server modeline ``# yaml-language-server: $schema=stack_config/stack-config.schema.json``.
Regenerate with ``python -m stack_config schema`` (a test fails when the file is stale).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stack_config.hints import (
    CONFIG_NAMESPACE,
    FULL_CONFIG_KEY,
    FULL_CREDENTIALS_KEY,
    FULL_INVENTORY_KEY,
    FULL_ROLE_KEY,
    PROGRAM_CONFIG_KEYS,
)
from stack_config.models import EstateConfig
from stack_config.types import PULUMI_SECURE_JSON_SCHEMA

SCHEMA_PATH = Path(__file__).resolve().parent / "stack-config.schema.json"


def estate_json_schema() -> dict[str, Any]:
    """JSON schema (draft 2020-12) of the ``composable-gpu:estate`` object."""
    return EstateConfig.model_json_schema(mode="validation")


def _is_secret_property(prop: dict[str, Any]) -> bool:
    """True for a property rendered from a secret type: Pulumi's ``{secure: ...}`` plus the field's
    own title and description."""
    return {k: v for k, v in prop.items() if k not in ("title", "description")} == PULUMI_SECURE_JSON_SCHEMA


def _secrets_optional(schema: dict[str, Any]) -> None:
    """Drop secret properties from ``required`` (they are often set per deployment with
    ``pulumi config set --secret`` rather than written in the file; the program still requires them)."""
    props = schema.get("properties", {})
    required = schema.get("required")
    if required:
        kept = [k for k in required if not _is_secret_property(props.get(k, {}))]
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
                "properties": {
                    FULL_CONFIG_KEY: {"$ref": "#/$defs/EstateConfig"},
                    FULL_INVENTORY_KEY: {
                        "type": "string",
                        "minLength": 1,
                        "description": "The estate's inventory folder (YAML files of hosts, tenants, "
                        "fabric...), relative to the folder of Pulumi.yaml.",
                    },
                    FULL_ROLE_KEY: {
                        "type": "string",
                        "pattern": "^(estate|platform|hosts:[A-Za-z0-9._-]+|tenant:[a-z0-9-]+)$",
                        "description": "The stack's role in the estate's split: platform, hosts:<group> "
                        "or tenant:<name> (absent or estate: the whole estate).",
                    },
                    FULL_CREDENTIALS_KEY: {
                        "type": "object",
                        "description": "Credential sets the inventory's files name (credential: <name>).",
                        "additionalProperties": {"$ref": "#/$defs/CredentialSet"},
                    },
                },
                # the estate in the inventory folder, or inline (a stack not migrated yet), not both
                "oneOf": [
                    {"required": [FULL_INVENTORY_KEY], "not": {"required": [FULL_CONFIG_KEY]}},
                    {
                        "required": [FULL_CONFIG_KEY],
                        "not": {
                            "anyOf": [{"required": [k]} for k in (FULL_INVENTORY_KEY, FULL_CREDENTIALS_KEY)]
                        },
                    },
                ],
                "additionalProperties": True,
                # a key of another namespace, or one of ours that the program reads
                "propertyNames": {
                    "anyOf": [
                        {"not": {"pattern": f"^{CONFIG_NAMESPACE}:"}},
                        {"enum": [f"{CONFIG_NAMESPACE}:{name}" for name in PROGRAM_CONFIG_KEYS]},
                    ]
                },
            },
        },
        "required": ["config"],
        "$defs": {**defs, "EstateConfig": estate, "CredentialSet": _credential_set_schema()},
    }


def _credential_set_schema() -> dict[str, Any]:
    """JSON schema of one credential set; its secrets optional (set per deployment)."""
    from stack_config.inventory import CredentialSet

    schema = CredentialSet.model_json_schema(mode="validation")
    _secrets_optional(schema)
    return schema


def render_schema() -> str:
    """The schema file's exact text (sorted keys, 2-space indent, trailing newline)."""
    return json.dumps(stack_file_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    """Write the schema file and return its path."""
    path.write_text(render_schema(), encoding="utf-8")
    return path
