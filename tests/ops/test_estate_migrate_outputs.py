"""The output a migration gives a host group's stack (ops.estate_migrate, pure): the IDs of its moved
ClusterDeployments as ``cluster_deployments``, added to its root stack's outputs, never over one."""

from __future__ import annotations

from typing import Any

from ops.estate_migrate import deployment_outputs, seed_outputs

_STACK = "urn:pulumi:dev-hosts-lab-workers::composable-gpu::"
_ROOT = {"urn": _STACK + "pulumi:pulumi:Stack::composable-gpu-dev-hosts-lab-workers",
         "type": "pulumi:pulumi:Stack", "custom": False}
_CD = "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment"


def _cluster(name: str) -> list[dict[str, Any]]:
    """A moved HypervisorCluster component (re-parented to the root stack) with its ClusterDeployment."""
    component = {"urn": _STACK + f"composable:infra:HypervisorCluster::{name}",
                 "type": "composable:infra:HypervisorCluster", "parent": _ROOT["urn"], "custom": False}
    deployment = {"urn": _STACK + f"composable:infra:HypervisorCluster${_CD}::{name}", "type": _CD,
                  "parent": component["urn"], "custom": True, "id": f"composable-infra/{name}"}
    return [component, deployment]


def test_the_moved_clusters_deployments_are_the_output() -> None:
    resources = [_ROOT, *_cluster("lab-workers"), *_cluster("other")]
    assert deployment_outputs(resources, ["lab-workers"]) == {"lab-workers": "composable-infra/lab-workers"}
    assert deployment_outputs(resources, ["lab-workers", "other"]) == {
        "lab-workers": "composable-infra/lab-workers", "other": "composable-infra/other"}
    # a tenant's read of another stack's ClusterDeployment is not this stack's
    read = {**_cluster("lab-workers")[1], "external": True}
    assert deployment_outputs([_ROOT, _cluster("lab-workers")[0], read], ["lab-workers"]) == {}


def test_the_outputs_are_added_to_the_root_stack_and_never_replace_one() -> None:
    deployment = {"manifest": {"time": "t"}, "resources": [_ROOT, *_cluster("lab-workers")]}
    wanted = {"cluster_deployments": {"lab-workers": "composable-infra/lab-workers"},
              "role": "hosts:lab-workers"}
    seeded = seed_outputs(deployment, wanted)
    assert seeded is not None and seeded["manifest"] == {"time": "t"}
    assert seeded["resources"][0]["outputs"] == wanted
    assert seeded["resources"][1:] == deployment["resources"][1:]
    assert "outputs" not in _ROOT  # the input is left as it was
    # an up has written them since: nothing to add
    assert seed_outputs(seeded, {"cluster_deployments": {"lab-workers": "elsewhere/x"}}) is None
    assert seed_outputs({"resources": _cluster("lab-workers")}, wanted) is None  # no root stack
