"""Typed stack configuration of the estate (pydantic), its loader, rules and JSON schema.

Public names:

- :func:`load_estate` / :func:`load_stack_file`: validate raw config -> :class:`EstateConfig`;
- :mod:`stack_config.inventory`: the estate as a folder of YAML files with credential sets
  (``composable-gpu:inventory``, ``composable-gpu:credentials``); :mod:`stack_config.migrate`:
  the one-time move of an inline estate into such a folder;
- :class:`EstateConfigError` / :class:`ConfigProblem`: every problem, with its key path;
- :data:`FULL_CONFIG_KEY`: ``composable-gpu:estate``;
- :func:`render_summary` (in :mod:`stack_config.summary`): stack outputs -> readable report.
"""

from stack_config.errors import ConfigProblem, EstateConfigError
from stack_config.hints import CONFIG_KEY, CONFIG_NAMESPACE, FULL_CONFIG_KEY
from stack_config.loader import load_estate
from stack_config.models import EstateConfig
from stack_config.stack_file import load_stack_file

__all__ = [
    "CONFIG_KEY",
    "CONFIG_NAMESPACE",
    "FULL_CONFIG_KEY",
    "ConfigProblem",
    "EstateConfig",
    "EstateConfigError",
    "load_estate",
    "load_stack_file",
]
