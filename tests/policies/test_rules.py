"""The rules, called directly on plain records: each has a passing and a violating fixture,
and each fails (rather than passing) when a value it needs is unknown during preview."""

from __future__ import annotations

import pytest

from policies.rules import RULES, RULES_BY_NAME, RuleConfigError, evaluate, parse_config, run_rule
from policies.rules.model import UNKNOWN, ResourceRecord

from .layouts import (
    EXTRA_VIOLATIONS,
    UNKNOWNS,
    VIOLATIONS,
    compliant,
    find,
    secret,
    to_records,
    unknown,
    variant,
)

RULE_NAMES = [r.name for r in RULES]


def failing(results: dict[str, list]) -> set[str]:
    return {name for name, violations in results.items() if violations}


def test_every_rule_has_a_violating_and_an_unknown_fixture():
    assert set(VIOLATIONS) == set(RULE_NAMES) == set(UNKNOWNS)


def test_compliant_layout_passes_every_rule():
    results = evaluate(to_records(compliant()))
    assert failing(results) == set(), results


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_violating_fixture_fails_exactly_its_rule(rule):
    results = evaluate(to_records(variant(VIOLATIONS[rule])))
    assert failing(results) == {rule}, results
    for violation in results[rule]:
        assert violation.rule == rule
        assert "Fix: " in violation.message
        assert violation.urn is None or violation.urn.startswith("urn:pulumi:test::policy-fixture::")


@pytest.mark.parametrize("case", sorted(EXTRA_VIOLATIONS))
def test_extra_violating_fixture_fails_exactly_its_rule(case):
    rule, change = EXTRA_VIOLATIONS[case]
    results = evaluate(to_records(variant(change)))
    assert failing(results) == {rule}, results


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_unknown_needed_value_fails_the_rule(rule):
    results = evaluate(to_records(variant(UNKNOWNS[rule])))
    assert rule in failing(results), results
    if rule != "credentials-are-secrets":  # an unknown plaintext credential is simply plaintext
        assert any("cannot be proven" in v.message for v in results[rule]), results[rule]


def _messages(rule: str, layout: list) -> list[str]:
    return [v.message for v in run_rule(RULES_BY_NAME[rule], to_records(layout))]


# --- tenant-network-uniqueness -------------------------------------------------------------


def test_network_messages_name_both_networks_and_tenants():
    [message] = _messages("tenant-network-uniqueness", variant(VIOLATIONS["tenant-network-uniqueness"]))
    assert "VXLAN ID 5001" in message
    assert "TenantNetwork 'tenant-a-net-a'" in message and "TenantNetwork 'tenant-b-net-b'" in message
    assert "cross-tenant" in message


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"vlan_id": 101}, "VLAN ID 101"),
        ({"cidr": "10.10.0.128/25"}, "overlaps CIDR 10.10.0.0/24"),
        ({"cidr": "10.0.0.0/8"}, "overlaps"),
        ({"cidr": "10.20.0.1/24"}, "not a valid CIDR"),
        ({"vxlan_id": 16_777_216}, "outside 1..16777215"),
        ({"vlan_id": 4095}, "outside 1..4094"),
        ({"vxlan_id": 5002.5}, "must be an integer"),
    ],
)
def test_network_collisions_and_bad_values(change, needle):
    messages = _messages(
        "tenant-network-uniqueness", variant(lambda lay: find(lay, "tenant-b-net-b").update(change))
    )
    assert any(needle in m for m in messages), messages


def test_untagged_networks_do_not_collide_on_vlan():
    def untag(layout):
        find(layout, "tenant-a-net-a")["vlan_id"] = None
        find(layout, "tenant-b-net-b")["vlan_id"] = None

    assert _messages("tenant-network-uniqueness", variant(untag)) == []


def test_ipv6_and_ipv4_ranges_never_overlap():
    assert (
        _messages(
            "tenant-network-uniqueness",
            variant(lambda lay: find(lay, "tenant-b-net-b").update(cidr="fd00:20::/64")),
        )
        == []
    )


# --- tenant-cluster-own-networks -----------------------------------------------------------


@pytest.mark.parametrize(
    ("networks", "needle"),
    [
        (["tenant-a/net-a"], "of tenant 'tenant-a'"),
        (["net-b"], "not of the form"),
        (["tenant-b/net-z"], "not a TenantNetwork declared"),
    ],
)
def test_cluster_network_references(networks, needle):
    messages = _messages(
        "tenant-cluster-own-networks", variant(lambda lay: find(lay, "b-cluster").update(networks=networks))
    )
    assert len(messages) == 1 and needle in messages[0], messages


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("vm-uses-nad-of-other-tenant", "references NetworkAttachmentDefinition 'tenant-tenant-a/net-a' of "
         "tenant 'tenant-a'"),
        ("vm-uses-nad-not-created", "'tenant-tenant-b/net-z', which no TenantNetwork of this stack creates"),
    ],
)
def test_vm_network_attachments_must_be_own_tenants_nads(case, needle):
    messages = _messages("tenant-cluster-own-networks", variant(EXTRA_VIOLATIONS[case][1]))
    assert len(messages) == 1 and needle in messages[0], messages


def test_unknown_network_attachment_cannot_be_proven():
    layout = variant(lambda lay: find(lay, "a-cluster").update(network_attachments=[unknown()]))
    messages = _messages("tenant-cluster-own-networks", layout)
    assert any("cannot be proven" in m for m in messages), messages


# --- tenant-cluster-hosted-control-plane ---------------------------------------------------


def test_hosted_kinds_are_configurable():
    def other_kind(lay):
        for name in ("a-cluster", "b-cluster"):
            find(lay, name).update(control_plane="HostedControlPlane")

    layout = variant(other_kind)
    rule = RULES_BY_NAME["tenant-cluster-hosted-control-plane"]
    kinds = {"hosted_control_plane_kinds": ["HostedControlPlane"]}
    assert run_rule(rule, to_records(layout))
    assert run_rule(rule, to_records(layout), kinds) == []
    assert run_rule(rule, to_records(compliant()), kinds)


def test_a_hosted_sounding_name_is_not_evidence():
    change = EXTRA_VIOLATIONS["hosted-name-machine-control-plane"][1]
    [message] = _messages("tenant-cluster-hosted-control-plane", variant(change))
    assert "template 'kubevirt-hosted-cp' declares control plane 'K0sControlPlane'" in message


def test_any_template_name_with_a_hosted_control_plane_passes():
    layout = variant(lambda lay: find(lay, "a-cluster").update(template="tenant-vms-v2"))
    assert _messages("tenant-cluster-hosted-control-plane", layout) == []


# --- tenant-host-dpu-zero-trust ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "change", "needle"),
    [
        ("dpu-1", {"mode": "NicMode"}, "mode is 'NicMode'"),
        ("dpu-1", {"host_privilege": "Privileged"}, "host_privilege is 'Privileged'"),
        ("hv-1", {"dpu": None}, "has no DPU"),
        ("hv-1", {"dpu": "dpu-9"}, "not a declared Dpu"),
        ("dpu-1", {"host": "hv-2"}, "declared for host 'hv-2'"),
    ],
)
def test_dpu_posture(name, change, needle):
    messages = _messages("tenant-host-dpu-zero-trust", variant(lambda lay: find(lay, name).update(change)))
    assert any(needle in m for m in messages), messages


def test_dpu_mode_spelling_is_loose():
    layout = variant(lambda lay: find(lay, "dpu-1").update(mode="dpu-mode", host_rshim="DISABLED"))
    assert _messages("tenant-host-dpu-zero-trust", layout) == []


def test_host_without_tenant_flag_still_serves_tenants_through_its_hypervisor_cluster():
    def change(layout):
        find(layout, "hv-1").update(tenant_workloads=False, dpu=None)

    [message] = _messages("tenant-host-dpu-zero-trust", variant(change))
    assert "Host 'hv-1'" in message and "runs tenant cluster" in message


def test_host_serving_no_tenant_needs_no_dpu():
    def change(layout):
        layout.append(
            {
                "type": "composable:infra:Host",
                "name": "infra-1",
                "props": {
                    "name": "infra-1",
                    "role": "baremetal-worker",
                    "tenant_workloads": False,
                    "gpu_mode": "none",
                    "bmc_verify_tls": True,
                    "kernel_args": [],
                    "cluster": "mgmt",
                },
            }
        )

    assert _messages("tenant-host-dpu-zero-trust", variant(change)) == []


def test_tenant_cluster_on_undeclared_hypervisor_cluster_fails():
    messages = _messages(
        "tenant-host-dpu-zero-trust",
        variant(lambda lay: find(lay, "a-cluster").update(hypervisor_cluster="ghost")),
    )
    assert any("'ghost' is not a HypervisorCluster" in m for m in messages)


def _host_group_stack(layout: list) -> list:
    """The host group's stack of a split estate: hosts, DPUs and the hypervisor cluster, which
    names the tenant clusters of the whole estate running on it; no TenantCluster."""
    kept = [r for r in layout if r["type"] != "composable:infra:TenantCluster"]
    find(kept, "hv-cluster")["tenant_clusters"] = ["tenant-a/a-cluster", "tenant-b/b-cluster"]
    return kept


def _tenant_stack(layout: list) -> list:
    """A tenants' stack of a split estate: their TenantClusters, whose hypervisor cluster (and
    hosts) another stack declares."""
    kept = [r for r in layout if r["type"] != "composable:infra:HypervisorCluster"]
    for r in kept:
        if r["type"] == "composable:infra:TenantCluster":
            r["props"]["hypervisor_cluster_in_stack"] = False
    return kept


def test_a_host_group_stack_judges_hosts_its_cluster_runs_other_stacks_tenants_on():
    assert _messages("tenant-host-dpu-zero-trust", _host_group_stack(compliant())) == []
    messages = _messages(
        "tenant-host-dpu-zero-trust",
        _host_group_stack(variant(lambda lay: find(lay, "dpu-2").update(host_rshim="Enabled"))),
    )
    assert len(messages) == 1 and "hv-2" in messages[0]
    assert "runs tenant cluster(s) tenant-a/a-cluster, tenant-b/b-cluster" in messages[0]


def test_a_tenant_stack_leaves_a_hypervisor_cluster_of_another_stack_to_that_stack():
    assert _messages("tenant-host-dpu-zero-trust", _tenant_stack(compliant())) == []
    # declared neither here nor (by its own word) elsewhere: still refused
    undeclared = _tenant_stack(compliant())
    find(undeclared, "a-cluster")["hypervisor_cluster_in_stack"] = True
    messages = _messages("tenant-host-dpu-zero-trust", undeclared)
    assert any("'hv-cluster' is not a HypervisorCluster declared in this stack" in m for m in messages)


# --- gpu-host-iommu ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({"kernel_args": ["amd_iommu=on", "iommu=pt"]}, True),
        ({"kernel_args": ["intel_iommu=on iommu=pt pci=realloc"]}, True),  # one string, several args
        (
            {
                "kernel_args": ["intel_iommu=on", "iommu=pt", "modprobe.blacklist=nouveau,radeon"],
                "blacklisted_modules": [],
            },
            True,
        ),
        ({"kernel_args": ["intel_iommu=on", "iommu=pt", unknown()]}, True),  # unknown extra: outcome fixed
        ({"kernel_args": ["iommu=pt"]}, False),
        ({"blacklisted_modules": []}, False),
        ({"blacklisted_modules": None}, False),
    ],
)
def test_iommu_arguments(change, ok):
    messages = _messages("gpu-host-iommu", variant(lambda lay: find(lay, "hv-1").update(change)))
    assert (messages == []) is ok, messages


def test_iommu_applies_to_hypervisor_cluster_members_whatever_their_gpu_mode():
    def change(layout):
        find(layout, "hv-1").update(gpu_mode="none", kernel_args=[])

    [message] = _messages("gpu-host-iommu", variant(change))
    assert "HypervisorCluster 'hv-cluster' runs GPUs in vm-passthrough mode" in message


def test_container_gpu_hosts_need_no_iommu():
    assert (
        _messages("gpu-host-iommu", variant(lambda lay: find(lay, "blade-slot-1").update(kernel_args=[])))
        == []
    )


# --- host-single-cluster -------------------------------------------------------------------


def test_host_in_two_hypervisor_clusters():
    def change(layout):
        layout.append(
            {
                "type": "composable:infra:HypervisorCluster",
                "name": "hv-cluster-2",
                "props": {
                    "name": "hv-cluster-2",
                    "hosts": ["hv-2"],
                    "gpu_workload_mode": "container",
                    "kubevirt": False,
                },
            }
        )

    [message] = _messages("host-single-cluster", variant(change))
    assert "'hv-cluster'" in message and "'hv-cluster-2'" in message and "host 'hv-2'" in message


def test_dpu_in_two_dpu_clusters():
    def change(layout):
        layout.append(
            {
                "type": "composable:infra:DpuCluster",
                "name": "dpu-cluster-2",
                "props": {"name": "dpu-cluster-2", "hosts": ["hv-1"], "template": "dpf-hosted-cp"},
            }
        )

    [message] = _messages("host-single-cluster", variant(change))
    assert "DPU clusters" in message and "host 'hv-1'" in message


# --- gpu-single-host / static-gpus-outside-composer-pool -----------------------------------


def test_gpu_composed_to_two_hosts_names_both_compositions():
    [message] = _messages("gpu-single-host", variant(VIOLATIONS["gpu-single-host"]))
    assert "GPU 'gpu0' is composed to 2 hosts" in message
    assert "GpuComposition 'blade-slot-1-gpus'" in message and "GpuComposition 'hv-1-gpus'" in message


def test_compositions_of_any_gpu_do_not_collide():
    def change(layout):
        find(layout, "hv-1-gpus")["device_names"] = []
        find(layout, "blade-slot-1-gpus")["device_names"] = []

    assert _messages("gpu-single-host", variant(change)) == []


def test_any_gpu_composition_from_composer_pool_is_unprovable():
    [message] = _messages(
        "static-gpus-outside-composer-pool",
        variant(lambda lay: find(lay, "hv-1-gpus").update(device_names=[])),
    )
    assert "composes any free GPU from pool 'default'" in message


def test_static_gpus_of_a_tenant_on_a_host_of_another_tenants_pool():
    [message] = _messages("static-gpus-in-tenant-pool", variant(VIOLATIONS["static-gpus-in-tenant-pool"]))
    assert "composes GPUs of tenant 'tenant-a' onto host 'hv-1'" in message
    assert "pool 'tenant-b' of 'tenant-b'" in message


def test_static_gpus_in_a_shared_pool_of_their_tenant_or_without_a_tenant_pass():
    def shared(layout):
        find(layout, "composer").update(host_pools={"blade-slot-1": "shared"},
                                        pool_tenants={"shared": ["tenant-a", "tenant-b"]})

    assert _messages("static-gpus-in-tenant-pool", variant(shared)) == []

    def untenanted(layout):
        VIOLATIONS["static-gpus-in-tenant-pool"](layout)
        find(layout, "hv-1-gpus").pop("tenant")

    assert _messages("static-gpus-in-tenant-pool", variant(untenanted)) == []


def test_composition_from_another_pool_is_outside_the_composer():
    layout = variant(lambda lay: find(lay, "hv-1-gpus").update(pool="static", device_names=[]))
    assert _messages("static-gpus-outside-composer-pool", layout) == []


# --- gpu-sharing-tenant-isolation ----------------------------------------------------------


def test_time_slicing_host_with_another_tenants_composed_gpu_fails():
    def change(layout):
        find(layout, "hv-1-gpus").update(host="blade-slot-1", tenant="tenant-b")

    [message] = _messages("gpu-sharing-tenant-isolation", variant(change))
    assert "tenant 'tenant-a'" in message and "tenant 'tenant-b'" in message


def test_two_tenants_time_slicing_settings_on_one_host_fail_naming_both():
    def change(layout):
        layout.append({"type": "composable:infra:GpuSharing", "name": "b-time-slicing",
                       "props": {"name": "b-time-slicing", "hosts": ["blade-slot-1"], "strategy": "mps",
                                 "replicas": 2, "tenants": ["tenant-b"]}})

    [message] = _messages("gpu-sharing-tenant-isolation", variant(change))
    assert "tenant 'tenant-a' via GpuSharing 'blade-time-slicing' (time-slicing)" in message
    assert "tenant 'tenant-b' via GpuSharing 'b-time-slicing' (mps)" in message


def test_time_slicing_host_in_a_composer_pool_of_another_tenant_fails():
    """The composer places the pods of a host's pool on its GPUs: blade-slot-1 time-slices for
    tenant-a, so a pool serving tenant-b there time-shares tenant-a's GPUs with tenant-b."""

    def change(layout):
        find(layout, "composer").update(host_pools={"blade-slot-1": "shared"},
                                        pool_tenants={"shared": ["tenant-a", "tenant-b"]})

    results = evaluate(to_records(variant(change)))
    assert failing(results) == {"gpu-sharing-tenant-isolation"}, results
    [message] = [v.message for v in results["gpu-sharing-tenant-isolation"]]
    assert "time-slicing/MPS on host 'blade-slot-1' shares its physical GPUs between tenants" in message
    assert "tenant 'tenant-a' via GpuSharing 'blade-time-slicing' (time-slicing)" in message
    assert "tenant 'tenant-b' via Composer 'composer''s pool 'shared'" in message


def test_unknown_composer_pools_with_time_slicing_cannot_be_proven():
    layout = variant(lambda lay: find(lay, "composer").update(pool_tenants={"tenant-a": unknown()}))
    messages = _messages("gpu-sharing-tenant-isolation", layout)
    assert any("host_pools is not known during preview" in m for m in messages), messages


def test_mig_may_be_shared_between_tenants():
    layout = variant(
        lambda lay: find(lay, "blade-time-slicing").update(strategy="mig", tenants=["tenant-a", "tenant-b"])
    )
    assert _messages("gpu-sharing-tenant-isolation", layout) == []


def test_mps_counts_as_time_sharing():
    layout = variant(
        lambda lay: find(lay, "blade-time-slicing").update(strategy="mps", tenants=["tenant-a", "tenant-b"])
    )
    assert _messages("gpu-sharing-tenant-isolation", layout)


def test_vgpu_between_tenants_needs_mig():
    def both_vgpu(layout):
        find(layout, "a-cluster")["gpu_mode"] = "vgpu"
        find(layout, "b-cluster")["gpu_mode"] = "vgpu"

    messages = _messages("gpu-sharing-tenant-isolation", variant(both_vgpu))
    assert [m for m in messages if "host 'hv-1'" in m]  # hv-1 has no MIG sharing
    assert not [m for m in messages if "host 'hv-2'" in m]  # hv-2 is MIG-backed


# --- tenant-gpu-quota ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "change", "needle"),
    [
        ("blade-slot-1-gpus", {"count": 3}, "3 composed GPUs"),
        (
            "blade-slot-1-gpus",
            {"model": "NVIDIA-A100-PCIE-40GB"},
            "not in tenant 'tenant-a''s allowed_models",
        ),
        ("blade-slot-1-gpus", {"model": None}, "any model"),
        ("blade-slot-1-gpus", {"tenant": "tenant-z"}, "not a declared Tenant"),
        ("a-cluster", {"gpu_count": 3}, "3 tenant-cluster GPUs"),
        ("a-cluster", {"gpu_model": "NVIDIA-A100-PCIE-40GB"}, "allowed_models"),
    ],
)
def test_quota_and_models(name, change, needle):
    messages = _messages("tenant-gpu-quota", variant(lambda lay: find(lay, name).update(change)))
    assert any(needle in m for m in messages), messages


def test_count_defaults_to_the_number_of_named_devices():
    def change(layout):
        find(layout, "blade-slot-1-gpus").update(count=None, device_names=["gpu0", "gpu2", "gpu3"])

    assert any("3 composed GPUs" in m for m in _messages("tenant-gpu-quota", variant(change)))


# --- credentials-are-secrets ---------------------------------------------------------------


def _record(props: dict, *, type_: str = "composable:infra:Dpu", secrets=frozenset()) -> ResourceRecord:
    return ResourceRecord(type_, "r", f"urn:pulumi:test::p::{type_}::r", props, secrets)


@pytest.mark.parametrize(
    ("props", "secrets", "ok"),
    [
        ({"bmc_password": "x"}, frozenset(), False),
        ({"bmc_password": "x"}, frozenset({("bmc_password",)}), True),
        ({"auth": {"clientSecret": "x"}}, frozenset({("auth",)}), True),  # secret ancestor
        ({"auth": {"clientSecret": "x"}}, frozenset(), False),  # camelCase key
        ({"values": {"director": {"apiToken": "t"}}}, frozenset(), False),  # nested
        ({"endpoint": "https://admin:pw@10.0.0.1:8443"}, frozenset(), False),  # password in a URL
        ({"endpoint": "https://10.0.0.1:8443"}, frozenset(), True),
        ({"credentialsName": "bmc-secret", "secretName": "x"}, frozenset(), True),  # names, not secrets
        ({"spec": {"imagePullSecret": "regcred", "pullSecret": "p"}}, frozenset(), True),
        ({"spec": {"userPassword": "pw", "bootstrapToken": "t"}}, frozenset(), False),
        ({"secret": "s3cr3t"}, frozenset(), False),
        ({"automountServiceAccountToken": False}, frozenset(), True),  # not a string
        ({"bmc_password": ""}, frozenset(), True),
        ({"bmc_password": UNKNOWN}, frozenset({("bmc_password",)}), True),  # unknown but secret
        ({"__provider": "gASV..."}, frozenset(), True),  # engine-internal
    ],
)
def test_credentials(props, secrets, ok):
    violations = RULES_BY_NAME["credentials-are-secrets"].check([_record(props, secrets=secrets)], None)
    assert (violations == []) is ok, violations


def test_kubernetes_secret_data_must_be_secret():
    secret_type = "kubernetes:core/v1:Secret"
    rule = RULES_BY_NAME["credentials-are-secrets"]
    plain = _record({"data": {"password": "cHc="}, "stringData": {"username": "admin"}}, type_=secret_type)
    [violation] = rule.check([plain], None)
    assert "data.password" in violation.message and "stringData.username" in violation.message
    marked = _record(plain.props, type_=secret_type, secrets=frozenset({("data",), ("stringData",)}))
    assert rule.check([marked], None) == []


def test_unobservable_secretness_fails_closed():
    record = ResourceRecord(
        "composable:infra:Dpu", "r", "urn:x::p::composable:infra:Dpu::r", {"bmc_password": "x"}, None
    )
    [violation] = RULES_BY_NAME["credentials-are-secrets"].check([record], None)
    assert "cannot be proven" in violation.message and "record-resource-inputs" in violation.message


def test_secret_marker_survives_the_layout_conversion():
    records = to_records([{"type": "t:m:K", "name": "n", "props": {"a": {"b": secret("s")}}}])
    assert records[0].is_secret(("a", "b")) and not records[0].is_secret(("a",))


# --- bmc-tls-verification ------------------------------------------------------------------


def test_tls_off_is_fine_in_a_lab_and_flagged_elsewhere():
    rule = RULES_BY_NAME["bmc-tls-verification"]
    assert run_rule(rule, to_records(compliant())) == []
    violations = run_rule(rule, to_records(variant(VIOLATIONS["bmc-tls-verification"])))
    flagged = {v.urn.rsplit("::", 1)[1] for v in violations}
    assert flagged == {"hv-1", "hv-2", "blade-slot-1", "dpu-1", "dpu-2", "dpu-3"}
    assert all("'production'" in v.message for v in violations)


def test_tls_without_estate_is_not_a_lab():
    layout = [e for e in compliant() if e["type"] != "composable:infra:Estate"]
    violations = run_rule(RULES_BY_NAME["bmc-tls-verification"], to_records(layout))
    assert violations and all("no Estate" in v.message for v in violations)


def test_production_config_refuses_a_lab_marked_estate():
    rule = RULES_BY_NAME["bmc-tls-verification"]
    config = {"enforcementLevel": "mandatory", "lab_environments": [], "stack_environment": "production"}
    violations = run_rule(rule, to_records(compliant()), config)
    assert any(
        "environment is 'lab' but this stack's policy config says 'production'" in v.message
        for v in violations
    )
    assert len(violations) == 7  # the Estate, 3 hosts, 3 DPUs


def test_lab_config_with_lab_estate_passes():
    config = {"lab_environments": ["lab"], "stack_environment": "lab"}
    assert run_rule(RULES_BY_NAME["bmc-tls-verification"], to_records(compliant()), config) == []


def test_bad_config_is_rejected_with_the_rule_name():
    with pytest.raises(RuleConfigError, match="bmc-tls-verification"):
        parse_config(RULES_BY_NAME["bmc-tls-verification"], {"lab_environment": ["lab"]})


# --- composer-not-cluster-admin ------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "needle"),
    [
        ([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], "cluster-admin equivalent"),
        ([{"nonResourceURLs": ["*"], "verbs": ["*"]}], "every verb on every URL"),
        (
            [
                {
                    "apiGroups": ["rbac.authorization.k8s.io"],
                    "resources": ["clusterroles"],
                    "verbs": ["escalate"],
                }
            ],
            "grants escalate",
        ),
        ([{"apiGroups": [""], "resources": ["pods"], "verbs": [UNKNOWN]}], "not known during preview"),
    ],
)
def test_composer_rbac_rules(rules, needle):
    messages = _messages(
        "composer-not-cluster-admin", variant(lambda lay: find(lay, "composer").update(rbac_rules=rules))
    )
    assert any(needle in m for m in messages), messages


def test_cluster_admin_binding_under_the_composer_fails():
    def change(layout):
        layout.append(
            {
                "type": "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                "name": "composer-crb",
                "parent": "composer",
                "props": {
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "composer"}],
                },
            }
        )

    [message] = _messages("composer-not-cluster-admin", variant(change))
    assert "ClusterRoleBinding 'composer-crb'" in message and "cluster-admin ClusterRole" in message


def test_cluster_admin_binding_elsewhere_is_not_the_composers():
    def change(layout):
        layout.append(
            {
                "type": "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                "name": "ops",
                "props": {"roleRef": {"name": "cluster-admin"}},
            }
        )

    assert _messages("composer-not-cluster-admin", variant(change)) == []


# --- shared behaviour ----------------------------------------------------------------------


def test_missing_contract_property_fails_and_names_it():
    layout = variant(lambda lay: find(lay, "tenant-b-net-b").pop("vxlan_id"))
    [message] = _messages("tenant-network-uniqueness", layout)
    assert "has no 'vxlan_id' property" in message


def test_unknown_refuses_truthiness():
    with pytest.raises(TypeError):
        bool(UNKNOWN)
