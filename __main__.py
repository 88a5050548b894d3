"""The Pulumi program: read and validate the estate config, build the components, export the report.

Config: the structured key ``composable-gpu:estate`` of ``Pulumi.<stack>.yaml`` (schema:
``stack_config/stack-config.schema.json``), the only key of the project's namespace it reads. An
invalid config stops the run before any resource is registered, with one line per problem naming
its key path: another ``composable-gpu:*`` key, a secret in plain text in the stack file, or a
problem in the estate.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from components import Estate, EstateArgs
from stack_config import CONFIG_KEY, EstateConfigError, load_estate
from stack_config.loader import plaintext_secrets_in_stack_file, unknown_config_keys

PROJECT_ROOT = Path(__file__).resolve().parent
#: The stack's file, beside the ``Pulumi.yaml`` the CLI runs (its project root, which is not this
#: folder when a project names this repository as its ``main``); mocks have no project root.
STACK_FILE = Path(pulumi.get_root_directory() or PROJECT_ROOT) / f"Pulumi.{pulumi.get_stack()}.yaml"

try:
    # Every config key of the stack: the language host hands the program the engine's config
    # (PULUMI_CONFIG) through pulumi.runtime.set_all_config (pulumi-language-python-exec).
    problems = unknown_config_keys(pulumi.runtime.config.CONFIG.get())
    # Plain-text secrets can only be told from encrypted ones in the stack file itself.
    problems += plaintext_secrets_in_stack_file(STACK_FILE)
    if problems:
        raise EstateConfigError(problems)
    estate_config = load_estate(pulumi.Config().require_object(CONFIG_KEY))
except EstateConfigError as exc:
    raise pulumi.RunError(str(exc)) from None

estate = Estate(
    "estate", EstateArgs(config=estate_config, stack=pulumi.get_stack(), project_root=PROJECT_ROOT)
)
pulumi.export("estate", estate.report)
