"""The Pulumi program: read and validate the estate, build the components, export the report.

Config (``Pulumi.<stack>.yaml``, schema ``stack_config/stack-config.schema.json``), the project's
namespace only:

- ``composable-gpu:inventory``: the estate's folder in the repository (relative to the folder of
  ``Pulumi.yaml``), read by the program itself (:mod:`stack_config.inventory`), so nothing that
  grows with the estate is handed over in the environment;
- ``composable-gpu:credentials``: the credential sets the folder's files name, secrets encrypted;
- or ``composable-gpu:estate``: the whole estate inline, for a stack not migrated yet
  (``python -m stack_config migrate``);
- ``composable-gpu:role`` (optional, with an inventory folder): the stack's slice of the estate's
  split (:mod:`stack_config.fleet`): ``platform``, ``hosts:<group>`` or ``tenant:<name>``; absent
  (the dev stack) or ``estate``: the whole estate. A slice's stack is named
  ``<fleet>-<role with ':' as '-'>`` (``dev-tenant-alpha``) and reads the stacks its slice depends
  on through a ``pulumi.StackReference`` to ``<organization>/<project>/<fleet>-<their role>``.

The whole estate is validated in every stack, whatever its role, so a clash between two tenants
(overlapping CIDRs, a VXLAN or VLAN ID twice, a host in two tenants) is refused in each of their
stacks before any resource is registered.

An invalid config stops the run before any resource is registered, with one line per problem
naming its file and key path: another ``composable-gpu:*`` key, a secret in plain text in the stack
file or in an inventory file, or a problem in the estate.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from components import Estate, EstateArgs
from components.references import DEPLOYMENTS_OUTPUT, deployment_id
from stack_config import ConfigProblem, EstateConfigError
from stack_config.fleet import MONOLITH, StackSlice, fleet_base, parse_role, split_estate, stack_name
from stack_config.hints import CONFIG_KEY, CREDENTIALS_KEY, FULL_ROLE_KEY, INVENTORY_KEY, ROLE_KEY
from stack_config.inventory import estate_from_config, read_inventory
from stack_config.loader import unknown_config_keys
from stack_config.stack_file import plaintext_secrets_in_stack_file

PROJECT_ROOT = Path(__file__).resolve().parent
#: The folder of the ``Pulumi.yaml`` the CLI runs (its project root, which is not this folder when a
#: project names this repository as its ``main``); mocks have no project root.
STACK_ROOT = Path(pulumi.get_root_directory() or PROJECT_ROOT)
#: The stack's file, beside that ``Pulumi.yaml``.
STACK_FILE = STACK_ROOT / f"Pulumi.{pulumi.get_stack()}.yaml"

try:
    # Every config key of the stack: the language host hands the program the engine's config
    # (PULUMI_CONFIG) through pulumi.runtime.set_all_config (pulumi-language-python-exec).
    problems = unknown_config_keys(pulumi.runtime.config.CONFIG.get())
    # Plain-text secrets can only be told from encrypted ones in the stack file itself.
    problems += plaintext_secrets_in_stack_file(STACK_FILE)
    if problems:
        raise EstateConfigError(problems)
    config = pulumi.Config()
    values = {
        INVENTORY_KEY: config.get(INVENTORY_KEY),
        CREDENTIALS_KEY: config.get_object(CREDENTIALS_KEY),
        CONFIG_KEY: config.get_object(CONFIG_KEY),
    }
    estate_config = estate_from_config(values, root=STACK_ROOT)
    role = parse_role(config.get(ROLE_KEY))
    part: StackSlice | None = None
    if role != MONOLITH:
        folder = values[INVENTORY_KEY]
        if folder is None:
            raise EstateConfigError([ConfigProblem(FULL_ROLE_KEY, "is read only with an inventory folder")])
        path = Path(folder).expanduser()
        fleet = split_estate(
            read_inventory(path if path.is_absolute() else STACK_ROOT / path, shown_as=folder),
            estate_config,
            folder=folder,
        )
        part = fleet.slices[parse_role(role, fleet)]
        base = fleet_base(pulumi.get_stack(), role)
except EstateConfigError as exc:
    raise pulumi.RunError(str(exc)) from None

deployment_ids: dict[str, pulumi.Output[str]] = {}
if part is not None:
    # The stacks this slice reads, and the ClusterDeployments of the clusters its tenants' work runs on.
    references = {
        r: pulumi.StackReference(f"{pulumi.get_organization()}/{pulumi.get_project()}/{stack_name(base, r)}")
        for r in part.reads
    }
    for r, ref in references.items():
        for cluster in fleet.slices[r].hypervisor_clusters:
            if cluster in part.deployment_reads:
                # unknown in a preview before that stack is deployed; an up then names it to deploy first
                deployment_ids[cluster] = deployment_id(ref, stack=stack_name(base, r), cluster=cluster)
estate = Estate(
    "estate",
    EstateArgs(
        config=estate_config,
        stack=pulumi.get_stack(),
        project_root=PROJECT_ROOT,
        part=part,
        deployment_ids=deployment_ids,
    ),
)
pulumi.export("estate", estate.report)
if part is not None:
    pulumi.export("role", part.role)
    pulumi.export(DEPLOYMENTS_OUTPUT, {n: c.deployment.id for n, c in estate.hypervisor_clusters.items()})
