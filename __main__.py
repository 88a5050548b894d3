"""The Pulumi program: read and validate the estate config, build the components, export the report.

Config: the structured key ``composable-gpu:estate`` of ``Pulumi.<stack>.yaml`` (schema:
``stack_config/stack-config.schema.json``). An invalid config stops the run before any resource
is registered, with one line per problem naming its key path.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from components import Estate, EstateArgs
from stack_config import CONFIG_KEY, EstateConfigError, load_estate
from stack_config.loader import plaintext_secrets_in_stack_file

PROJECT_ROOT = Path(__file__).resolve().parent

try:
    # Plain-text SSH keys can only be told from encrypted ones in the stack file itself.
    plaintext = plaintext_secrets_in_stack_file(PROJECT_ROOT / f"Pulumi.{pulumi.get_stack()}.yaml")
    if plaintext:
        raise EstateConfigError(plaintext)
    estate_config = load_estate(pulumi.Config().require_object(CONFIG_KEY))
except EstateConfigError as exc:
    raise pulumi.RunError(str(exc)) from None

estate = Estate(
    "estate", EstateArgs(config=estate_config, stack=pulumi.get_stack(), project_root=PROJECT_ROOT)
)
pulumi.export("estate", estate.report)
