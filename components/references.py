"""What a stack of a split estate reads from another stack's outputs, that stack not deployed yet included.

A tenant's stack reaches a hypervisor cluster that a host group's stack holds through the
cluster's ClusterDeployment, whose ID it reads from that stack's output ``cluster_deployments``
(``__main__.py`` exports it). The output is absent until the host group's stack is deployed with
that cluster: an estate's first pull request, or one adding a cluster and a tenant on it, previews
both stacks before either is up. A preview then treats the ID as what it is, a value to be known
once the other stack is deployed: unknown, so the preview shows what depends on it as computed
(the engine skips a read whose ID is unknown, pulumi v3.260.0 ``pkg/resource/deploy/step.go``
``ReadStep.Apply``), with a warning naming the stack. An update cannot proceed on an unknown: it
fails with an error naming the stack to deploy first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pulumi

#: The output of a host group's stack: hypervisor cluster -> its ClusterDeployment's ID
#: (``<namespace>/<name>``).
DEPLOYMENTS_OUTPUT = "cluster_deployments"


def missing_deployment_message(stack: str, cluster: str, *, preview: bool) -> str:
    """What a stack says when ``stack``'s outputs hold no ClusterDeployment ID for ``cluster``."""
    what = (f"stack {stack} has no output {DEPLOYMENTS_OUTPUT}[{cluster!r}]: it is not deployed "
            f"(or not since cluster {cluster} was added to it)")
    if preview:
        return (f"{what}; this preview shows what reaches cluster {cluster} as unknown, "
                f"and an up of this stack needs {stack} deployed first")
    return f"{what}; deploy {stack} first (python -m ops.estate up runs it before the stacks reading it)"


def deployment_id(reference: pulumi.StackReference, *, stack: str, cluster: str) -> pulumi.Output[str]:
    """The ID of ``cluster``'s ClusterDeployment from the output :data:`DEPLOYMENTS_OUTPUT` of the
    stack ``stack`` that ``reference`` reads (see the module doc).

    Returns:
        The ID as a string; during a preview, unknown when the output lacks it (a warning says so).

    Raises:
        pulumi.RunError: in an update, through the returned output, when the output lacks it (the
            message names ``stack`` to deploy first).
    """

    def pick(ids: Mapping[str, Any] | None) -> Any:
        if ids and cluster in ids:
            return str(ids[cluster])
        preview = pulumi.runtime.is_dry_run()
        message = missing_deployment_message(stack, cluster, preview=preview)
        if not preview:
            raise pulumi.RunError(message)
        pulumi.log.warn(message)
        return pulumi.UNKNOWN  # an output holding it is unknown (pulumi.output._OutputData)

    return cast(pulumi.Output[str], reference.get_output(DEPLOYMENTS_OUTPUT).apply(pick))
