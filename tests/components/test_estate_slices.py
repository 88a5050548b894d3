"""The program declares only its stack's slice of the estate (config ``composable-gpu:role``), reads
the other stacks' outputs through StackReferences, and validates the whole estate in every stack."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime import rpc

from tests.components.conftest import Recorder, install_mocks, run
from tests.components.test_estate import DEV_CREDENTIALS
from tests.config.factories import valid_estate
from tests.config.test_inventory import _credentials, _split, _write_folder

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "environments" / "dev"
DEV_ROLES = ("platform", "hosts:lab-workers", "tenant:alpha", "tenant:beta")
#: The dev host stack's output a tenant's stack reads: lab-workers is reached through its
#: kubeconfig Secret, so a tenant's stack reads its ClusterDeployment's ID from that stack.
DEV_OUTPUTS = {
    "dev-hosts-lab-workers": {"cluster_deployments": {"lab-workers": "composable-infra/lab-workers"}}
}
#: What every stack declares for itself: the Estate component, its providers and its reads.
_PLUMBING = ("composable:infra:Estate", "pulumi:providers:", "pulumi:pulumi:StackReference")


def _program(
    folder: Path, credentials: dict[str, Any], *, role: str | None, stack: str,
    stack_outputs: dict[str, dict[str, Any]] | None = None,
) -> Recorder:
    """Run ``__main__.py`` as stack ``stack`` on inventory ``folder`` with ``role`` (None: unset)."""
    recorder = install_mocks(stack=stack, stack_outputs=stack_outputs)
    _run_main(folder, credentials, role)
    return recorder


def _run_main(folder: Path, credentials: dict[str, Any], role: str | None) -> None:
    """Run ``__main__.py`` under the installed mocks on inventory ``folder`` with ``role``."""
    config = {"composable-gpu:inventory": str(folder), "composable-gpu:credentials": json.dumps(credentials)}
    if role is not None:
        config["composable-gpu:role"] = role
    pulumi.runtime.set_all_config(config, ["composable-gpu:credentials"])
    try:
        run(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"))
    finally:
        pulumi.runtime.set_all_config({})


def _declared(recorder: Recorder) -> set[tuple[str, str]]:
    """(type, name) of the resources the stack manages (reads of other stacks' objects left out)."""
    return {(r.typ, r.name) for r in recorder.registrations if not r.typ.startswith(_PLUMBING) and not r.read}


def _references(recorder: Recorder) -> list[str]:
    return sorted(r.inputs["id"] for r in recorder.of_type("pulumi:pulumi:StackReference"))


def test_each_dev_role_declares_its_slice_and_the_slices_make_the_whole_estate() -> None:
    whole = _declared(_program(DEV, DEV_CREDENTIALS, role=None, stack="dev"))
    parts = {role: _program(DEV, DEV_CREDENTIALS, role=role, stack=f"dev-{role.replace(':', '-')}",
                            stack_outputs=DEV_OUTPUTS)
             for role in DEV_ROLES}
    declared = {role: _declared(r) for role, r in parts.items()}
    assert set().union(*declared.values()) == whole
    assert sum(len(d) for d in declared.values()) == len(whole)  # no resource in two stacks
    types = {role: {t for t, _ in d} for role, d in declared.items()}
    assert ("kubernetes:core/v1:Namespace", "estate-namespace") in declared["platform"]
    assert "composable:infra:Host" not in types["platform"]
    assert {"composable:infra:Host", "composable:infra:HypervisorCluster", "composable:infra:DpuCluster",
            "composable:infra:Composer"} <= types["hosts:lab-workers"]
    assert "composable:infra:Tenant" not in types["hosts:lab-workers"]
    assert {n for t, n in declared["tenant:alpha"] if t == "composable:infra:Tenant"} == {"alpha"}
    assert "composable:infra:Host" not in types["tenant:alpha"]
    assert _references(parts["platform"]) == []
    assert _references(parts["hosts:lab-workers"]) == ["organization/composable-gpu/dev-platform"]
    assert _references(parts["tenant:beta"]) == [
        "organization/composable-gpu/dev-hosts-lab-workers", "organization/composable-gpu/dev-platform"]
    # the policy pack's cross-stack facts: the host group's HypervisorCluster names the estate's
    # tenant clusters on it, and a tenant's TenantCluster says its hypervisor cluster is elsewhere
    hv = parts["hosts:lab-workers"].named("lab-workers", "composable:infra:HypervisorCluster")
    on_it = [r.inputs["tenant"] + "/" + r.inputs["name"]
             for r in parts["tenant:alpha"].registrations + parts["tenant:beta"].registrations
             if r.typ == "composable:infra:TenantCluster" and r.inputs["hypervisor_cluster"] == "lab-workers"]
    assert on_it and sorted(hv.inputs["tenant_clusters"]) == sorted(on_it)
    assert {r.inputs["hypervisor_cluster_in_stack"] for role in ("tenant:alpha", "tenant:beta")
            for r in parts[role].of_type("composable:infra:TenantCluster")} == {False}
    monolith = _program(DEV, DEV_CREDENTIALS, role=None, stack="dev")
    assert {r.inputs["hypervisor_cluster_in_stack"]
            for r in monolith.of_type("composable:infra:TenantCluster")} == {True}


def test_a_tenant_reaches_another_stacks_cluster_through_its_output(tmp_path: Path) -> None:
    folder = _split_clusters(tmp_path)
    outputs = {"prod-hosts-rack-a": {"cluster_deployments": {"hv": "infra/hv"}}}
    rec = _program(folder, _credentials(), role="tenant:red", stack="prod-tenant-red", stack_outputs=outputs)
    read = rec.named("estate-deployment-hv", "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment")
    assert read.read and read.inputs["id"] == "infra/hv"
    kubeconfig = rec.named("estate-cluster-hv-kubeconfig", "kubernetes:core/v1:Secret")
    assert kubeconfig.read and kubeconfig.inputs["id"] == "infra/hv-kubeconfig"
    assert {n for t, n in _declared(rec) if t == "composable:infra:Tenant"} == {"red"}
    assert "composable:infra:HypervisorCluster" not in {t for t, _ in _declared(rec)}
    # the host group that holds the cluster exports what the tenant reads
    group = _program(folder, _credentials(), role="hosts:rack-a", stack="prod-hosts-rack-a")
    assert "composable:infra:HypervisorCluster" in {t for t, _ in _declared(group)}


def _split_clusters(tmp_path: Path) -> Path:
    """The factory estate with racks a and b as two host groups, cluster ``hv`` on rack a's host."""
    parts = _split(valid_estate())
    hosts = parts["hosts/rack-a.yaml"]["hosts"] + parts["hosts/rack-b.yaml"]["hosts"]
    parts["hosts/rack-a.yaml"], parts["hosts/rack-b.yaml"] = {"hosts": hosts[:1]}, {"hosts": hosts[1:]}
    parts["estate.yaml"]["dpu_cluster"]["hosts"] = ["dpu-host-1"]
    return _write_folder(tmp_path / "inv", parts)


@pytest.mark.parametrize(
    "outputs", [{}, {"prod-hosts-rack-a": {"cluster_deployments": {"other": "infra/o"}}}],
    ids=["host-group-never-deployed", "cluster-not-yet-in-its-output"],
)
def test_a_tenant_previews_before_its_host_group_is_deployed_with_the_deployment_unknown(
    tmp_path: Path, outputs: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    folder = _split_clusters(tmp_path)
    rec = install_mocks(stack="prod-tenant-red", stack_outputs=outputs, preview=True)
    _run_main(folder, _credentials(), "tenant:red")
    read = rec.named("estate-deployment-hv", "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment")
    assert read.read and read.inputs["id"] == rpc.UNKNOWN  # the engine skips such a read in a preview
    assert {n for t, n in _declared(rec) if t == "composable:infra:Tenant"} == {"red"}
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("stack prod-hosts-rack-a has no output cluster_deployments['hv']" in w
               and "needs prod-hosts-rack-a deployed first" in w for w in warned), warned


def test_a_tenants_update_before_its_host_group_is_deployed_names_the_stack_to_deploy_first(
    tmp_path: Path,
) -> None:
    folder = _split_clusters(tmp_path)
    install_mocks(stack="prod-tenant-red", stack_outputs={})
    missing = r"stack prod-hosts-rack-a has no output cluster_deployments\[.hv.\].*deploy prod-hosts-rack-a"
    with pytest.raises(pulumi.RunError, match=missing):
        _run_main(folder, _credentials(), "tenant:red")


def test_a_clash_between_two_tenants_in_two_stacks_is_refused_in_each_before_any_resource(
    tmp_path: Path,
) -> None:
    folder = Path(shutil.copytree(DEV, tmp_path / "dev"))
    alpha = yaml.safe_load((folder / "tenants" / "alpha.yaml").read_text())
    beta_file = folder / "tenants" / "beta.yaml"
    beta = yaml.safe_load(beta_file.read_text())
    beta["tenants"][0]["networks"][0]["cidr"] = alpha["tenants"][0]["networks"][0]["cidr"]
    beta["tenants"][0]["networks"][0].pop("gateway", None)
    beta_file.write_text(yaml.safe_dump(beta, sort_keys=False))
    for role in ("tenant:alpha", "tenant:beta", "platform"):
        recorder = install_mocks(stack=f"dev-{role.replace(':', '-')}")
        with pytest.raises(pulumi.RunError) as err:
            _run_main(folder, DEV_CREDENTIALS, role)
        assert str(err.value).splitlines()[1:] == [
            f"  - {beta_file}: tenants[0].networks[0].cidr: {alpha['tenants'][0]['networks'][0]['cidr']} "
            f"overlaps the network at tenants[0].networks[0].cidr in {folder}/tenants/alpha.yaml"]
        assert recorder.registrations == []


def test_a_role_is_checked_against_the_fleet_and_the_stack_name() -> None:
    with pytest.raises(pulumi.RunError, match="'tenant:gamma' is not a stack of this estate"):
        _program(DEV, DEV_CREDENTIALS, role="tenant:gamma", stack="dev-tenant-gamma")
    with pytest.raises(pulumi.RunError, match="name it <fleet>-tenant-alpha"):
        _program(DEV, DEV_CREDENTIALS, role="tenant:alpha", stack="alpha")
