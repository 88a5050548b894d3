"""The program through the real pulumi CLI (Automation API) on the lab.

- dev: ``pulumi up`` of the dev stack (its own ``Pulumi.dev.yaml`` with its encrypted credential
  sets, and a copy of its inventory folder ``environments/dev``) on the lab's API server with the
  upstream CRDs and the Redfish/Director simulators; the custom resources are read back from the
  API server; a second preview changes nothing; no password is in the exported state; ``destroy``
  removes everything. An invalid inventory file, and a password written in one, fail the preview
  naming the file and the key in it. ``up`` runs with the policy pack (lab config).
- migration: the dev stack as it was (estate inline) is deployed, migrated with ``python -m
  stack_config migrate`` and previewed again: no change.
- production: the example production stack previews cleanly (policy pack included) with its
  Director pointed at a simulator loaded with ``lab/inventories/production.yaml`` and its clusters
  at the lab.

Each run uses a temporary backend and project (``main:`` is the checkout) and renames the
namespaces it creates, so it can share the lab with a deployed dev stack. Skipped only when the
lab's binaries are missing (``make setup`` builds them).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pulumi import automation as auto

from dynamic_providers.director.client import DirectorClient
from stack_config import load_stack_file
from stack_config.summary import render_summary
from tests.pulumi_project import file_backend, local_project

ROOT = Path(__file__).resolve().parents[2]
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "pulumi",
    "pulumi-language-python",
)
MISSING = [b for b in BINARIES if not (ROOT / ".toolchain" / "bin" / b).exists()]
DEV_PASSPHRASE = "dev-lab-only-passphrase"  # the dev stack's lab-only passphrase (Makefile)
#: The dev stack file as it was before its estate moved into environments/dev (inline estate).
LEGACY_DEV = ROOT / "tests" / "fixtures" / "legacy" / "Pulumi.dev.yaml"

pytestmark = [
    pytest.mark.lab,
    pytest.mark.cli,
    pytest.mark.slow,
    pytest.mark.skipif(bool(MISSING), reason=f"lab binaries missing ({', '.join(MISSING)}): run make setup"),
]


def _project(tmp_path: Path, stack_file: str) -> tuple[Path, dict[str, str]]:
    work = local_project(tmp_path)
    shutil.copy(ROOT / stack_file, work / stack_file)
    return work, {"PULUMI_BACKEND_URL": file_backend(work)}


def _set(stack: auto.Stack, path: str, value: Any, *, secret: bool = False) -> None:
    stack.set_config(
        f"estate.{path}",
        auto.ConfigValue(json.dumps(value) if not isinstance(value, str) else value, secret=secret),
        path=True,
    )


def _edit(work: Path, name: str, change: Any) -> None:
    """Apply ``change`` (a function of the decoded file) to ``environments/dev/<name>`` in ``work``."""
    path = work / "environments" / "dev" / name
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _run_names(run: str, ca: str) -> dict[str, Any]:
    """This run's namespaces and owner tag, and the BMC CA of the lab, by estate file."""

    def estate(doc: dict[str, Any]) -> None:
        doc["mothership"]["namespace"] = f"{run}-infra"
        doc["composer"].update(namespace=f"{run}-composer", release_name=f"{run}-composer", owner_tag=run)
        # This test is about the program, not the composer's runtime: its chart goes to lab-workers
        # and its Pods to the kwok Nodes there (which "run" any image) instead of the real node
        # mgmt-1 (tests/composer/test_deployed.py, test_two_clusters_lab.py).
        for key in ("node_selector", "tolerations", "runs_on"):
            doc["composer"].pop(key, None)

    def hosts(doc: dict[str, Any]) -> None:
        for host in doc["hosts"]:
            host["dpu"]["bmc"]["ca_bundle"] = ca

    return {
        "estate.yaml": estate,
        "hosts/lab-workers.yaml": hosts,
        "tenants/alpha.yaml": lambda doc: doc["tenants"][0].update(namespace=f"{run}-alpha"),
        "tenants/beta.yaml": lambda doc: doc["tenants"][0].update(namespace=f"{run}-beta"),
    }


@pytest.fixture
def dev_stack(lab: Any, tmp_path: Path) -> Iterator[tuple[auto.Stack, str]]:
    """The dev stack in a temporary backend, its inventory folder copied beside it with the
    namespaces renamed ``e2e-<id>-...``; destroyed after. lab-workers is reached as a real child:
    not adopted, through the kubeconfig Secret the lab's Cluster API stand-in writes once the
    ClusterDeployment exists (the stack waits for its Ready condition), the hosts' Nodes there."""
    work, env = _project(tmp_path, "Pulumi.dev.yaml")
    shutil.copytree(ROOT / "environments" / "dev", work / "environments" / "dev")
    env["PULUMI_CONFIG_PASSPHRASE"] = DEV_PASSPHRASE
    stack = auto.create_stack("dev", work_dir=str(work), opts=auto.LocalWorkspaceOptions(env_vars=env))
    run = f"e2e-{secrets.token_hex(3)}"
    ca = str(lab.lab_dir / "sim-state" / "redfish" / "tls" / "ca.pem")
    _edit(work, "estate.yaml", lambda doc: doc["mothership"].update(kubeconfig=str(lab.kubeconfig)))
    _edit(work, "clusters.yaml", lambda doc: doc["hypervisor_clusters"][0].pop("kubeconfig", None))
    for name, change in _run_names(run, ca).items():
        _edit(work, name, change)
    try:
        yield stack, run
    finally:
        stack.destroy(on_output=lambda _line: None)


def _policy_args(environment: str) -> dict[str, list[str]]:
    """``--policy-pack policies`` with the environment's config, when the pack is in the checkout."""
    pack = ROOT / "policies"
    if not (pack / "PulumiPolicy.yaml").exists():
        return {}
    return {
        "policy_packs": [str(pack)],
        "policy_pack_configs": [str(pack / "config" / f"{environment}.json")],
    }


def _custom(api: client.ApiClient, group: str, version: str, plural: str, ns: str, name: str) -> dict:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(group, version, ns, plural, name)


def _label_owners(core: client.CoreV1Api, node: str, label: str) -> set[str]:
    """Field managers that own ``metadata.labels[label]`` of ``node`` (server-side apply)."""
    body = core.read_node(node, _preload_content=False)
    managed = json.loads(body.data)["metadata"].get("managedFields") or []
    key = f"f:{label}"
    return {
        m["manager"]
        for m in managed
        if key in ((m.get("fieldsV1") or {}).get("f:metadata", {}).get("f:labels") or {})
    }


def test_dev_stack_up_read_back_destroy(lab: Any, dev_stack: tuple[auto.Stack, str]) -> None:
    from lab import kube

    stack, run = dev_stack
    infra = f"{run}-infra"
    api = kube.admin_client(lab)
    core = client.CoreV1Api(api)
    # lab-workers' own API server: the hypervisor objects live there (docs/architecture.md table)
    workers_api = kube.admin_client(lab.hypervisor)
    workers_core = client.CoreV1Api(workers_api)

    # an invalid inventory file stops the preview naming the file, the key in it and the rule,
    # before anything is registered
    work = Path(stack.workspace.work_dir)

    def vxlan(value: int) -> Any:
        return lambda doc: doc["tenants"][0]["networks"][0].update(vxlan_id=value)

    _edit(work, "tenants/beta.yaml", vxlan(16777216))
    with pytest.raises(auto.CommandError) as bad:
        stack.preview()
    assert (
        "environments/dev/tenants/beta.yaml: tenants[0].networks[0].vxlan_id: 16777216 is outside 1..16777215"
    ) in str(bad.value)
    _edit(work, "tenants/beta.yaml", vxlan(10020))
    # a GPU named with blanks gets GFD's name in the error
    def model(name: str) -> Any:
        return lambda doc: doc["fabric"]["pools"][0].update(models=[name])

    _edit(work, "fabric.yaml", model("NVIDIA H100 NVL"))
    with pytest.raises(auto.CommandError) as bad:
        stack.preview()
    assert (
        "environments/dev/fabric.yaml: fabric.pools[0].models[0]: 'NVIDIA H100 NVL' is not a GFD product "
        "name; write it as GFD labels nodes: 'NVIDIA-H100-NVL'"
    ) in str(bad.value)
    _edit(work, "fabric.yaml", model("Tesla-T4"))
    # a password written into an inventory file is refused naming file and key, never the value
    def plain_password(doc: dict[str, Any]) -> None:
        doc["hosts"][1]["bmc"]["password"] = "lab-bmc-password"

    _edit(work, "hosts/lab-workers.yaml", plain_password)
    with pytest.raises(auto.CommandError) as bad:
        stack.preview()
    assert (
        "environments/dev/hosts/lab-workers.yaml: hosts[1].bmc.password: a secret in plain text in an "
        "inventory file is refused"
    ) in str(bad.value)
    assert "lab-bmc-password" not in str(bad.value)
    _edit(work, "hosts/lab-workers.yaml", lambda doc: doc["hosts"][1]["bmc"].pop("password"))

    label = "nvidia.com/gpu.workload.config"
    owners_before = _label_owners(workers_core, "blade-slot-1", label)  # e.g. a dev stack on the same lab
    up = stack.up(**_policy_args("lab"))  # the CI gate: the policy pack passes
    assert up.summary.result == "succeeded"
    report = up.outputs["estate"].value

    # custom resources, read back from the API server (validated there against the upstream CRDs)
    bmh = _custom(api, "metal3.io", "v1alpha1", "baremetalhosts", infra, "blade-slot-1")
    assert bmh["spec"]["bmc"]["address"] == "redfish-virtualmedia://127.0.0.1:18451/redfish/v1/Systems/1"
    assert bmh["spec"]["bmc"]["credentialsName"] == "blade-slot-1-bmc-credentials"
    assert bmh["spec"]["bootMACAddress"] == "52:54:00:00:01:01" and bmh["spec"]["online"] is True
    creds = core.read_namespaced_secret("blade-slot-1-bmc-credentials", infra)
    assert base64.b64decode(creds.data["password"]).decode() == "lab-bmc-password"
    # a cluster's host gets no userData (CAPM3 writes the bootstrap data there): its kernel args
    # travel in the ClusterDeployment's worker config, which the template renders into bootstrap data
    assert "userData" not in bmh["spec"]
    flavor = _custom(
        api, "provisioning.dpu.nvidia.com", "v1alpha1", "dpuflavors", infra, "dpu-blade-slot-1-flavor"
    )
    assert "VIRTIO_NET_EMULATION_ENABLE=1" in flavor["spec"]["nvconfig"][0]["parameters"]
    dpu_cluster = _custom(api, "provisioning.dpu.nvidia.com", "v1alpha1", "dpuclusters", infra, "lab-dpu")
    assert dpu_cluster["spec"]["type"] == "static" and dpu_cluster["spec"]["maxNodes"] == 2
    workers = _custom(api, "k0rdent.mirantis.com", "v1beta1", "clusterdeployments", infra, "lab-workers")
    assert [s["name"] for s in workers["spec"]["serviceSpec"]["services"]] == ["gpu-operator", "kubevirt"]
    assert workers["spec"]["config"]["worker"]["kernelArgs"] == ["intel_iommu=on", "iommu=pt", "pci=realloc"]
    assert workers["spec"]["config"]["worker"]["blacklistedModules"] == ["nouveau"]
    tenant_cluster = _custom(
        api, "k0rdent.mirantis.com", "v1beta1", "clusterdeployments", f"{run}-beta", "beta-k8s"
    )
    assert tenant_cluster["spec"]["template"] == "kubevirt-hosted-cp"
    # the stack waited for the ClusterDeployment's Ready, set once the kubeconfig Secret was written
    ready = [c for c in workers["status"]["conditions"] if c["type"] == "Ready"]
    assert [c["status"] for c in ready] == ["True"]
    assert workers["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Ready"
    assert core.read_namespaced_secret("lab-workers-kubeconfig", infra).data["value"]
    # the tenant network is a NetworkAttachmentDefinition (multus CRD) that the VMs reference, in
    # the hypervisor cluster where they run, not on the mothership ...
    nad = _custom(
        workers_api, "k8s.cni.cncf.io", "v1", "network-attachment-definitions", f"{run}-beta", "beta-net"
    )
    with pytest.raises(ApiException) as on_mothership:
        _custom(api, "k8s.cni.cncf.io", "v1", "network-attachment-definitions", f"{run}-beta", "beta-net")
    assert on_mothership.value.status == 404
    cni = json.loads(nad["spec"]["config"])
    assert (cni["type"], cni["vlan"]) == ("bridge", 120)
    assert cni["ipam"] == {"type": "whereabouts", "range": "10.20.0.0/24", "gateway": "10.20.0.1"}
    vm_networks = tenant_cluster["spec"]["config"]["worker"]["networks"]
    assert {"name": "beta-net", "multus": {"networkName": f"{run}-beta/beta-net"}} in vm_networks
    # ... and its VXLAN segment is a record beside the DPF objects
    segment = core.read_namespaced_config_map("vxlan-beta-beta-net", infra)
    assert segment.data["vxlanId"] == "10020" and segment.data["vlanId"] == "120"
    # the ClusterTemplates are declared (pinned) where the ClusterDeployments use them
    tpl = _custom(
        api, "k0rdent.mirantis.com", "v1beta1", "clustertemplates", f"{run}-beta", "kubevirt-hosted-cp"
    )
    assert tpl["spec"]["helm"]["chartSpec"]["version"] == "1.0.11"
    assert "control-plane-k0sproject-k0smotron" in tpl["spec"]["providers"]
    assert tpl["metadata"]["labels"]["composable-gpu.io/control-plane"] == "K0smotronControlPlane"
    infra_tpl = _custom(api, "k0rdent.mirantis.com", "v1beta1", "clustertemplates", infra, "capm3-hosted-cp")
    assert "infrastructure-metal3" in infra_tpl["spec"]["providers"]
    # ... beside the HelmRepository their chart comes from (the Flux CRD validated it)
    source = infra_tpl["spec"]["helm"]["chartSpec"]["sourceRef"]["name"]
    repo = _custom(api, "source.toolkit.fluxcd.io", "v1", "helmrepositories", infra, source)
    assert repo["spec"]["url"].startswith(("http://", "https://", "oci://"))
    # the GPU Operator settings the hypervisor cluster carries are ClusterPolicy fields
    gpu_operator = yaml.safe_load(workers["spec"]["serviceSpec"]["services"][0]["values"])
    assert gpu_operator["sandboxWorkloads"] == {"enabled": False, "defaultWorkload": "container"}
    node = workers_core.read_node("blade-slot-1")
    assert node.metadata.labels[label] == "container"
    ours = _label_owners(workers_core, "blade-slot-1", label) - owners_before
    assert ours, "the NodePatch owns the label"
    assert client.AppsV1Api(workers_api).read_namespaced_deployment(f"{run}-composer", f"{run}-composer")
    # a pod beyond the tenant's gpu_quota (2) is refused by lab-workers' API server
    over = client.V1Pod(
        metadata=client.V1ObjectMeta(name="over-quota"),
        spec=client.V1PodSpec(containers=[client.V1Container(
            name="c", image="busybox",
            resources=client.V1ResourceRequirements(requests={"nvidia.com/gpu": "3"},
                                                    limits={"nvidia.com/gpu": "3"}))]),
    )
    with pytest.raises(ApiException) as refused:
        workers_core.create_namespaced_pod(f"{run}-beta", over)
    assert refused.value.status == 403 and "exceeded quota: gpu-quota" in str(refused.value.body)

    # the DPU posture came from the Redfish simulator, and the report reads well
    dpus = {d["name"]: d for d in report["dpus"]}
    assert dpus["dpu-blade-slot-1"]["mode"] == "DpuMode"
    assert dpus["dpu-blade-slot-1"]["host_privilege_level"] == "Restricted"  # reset applied it
    assert dpus["dpu-blade-slot-1"]["host_rshim"] == "Disabled"
    assert dpus["dpu-blade-slot-1"]["reset_pending"] is False
    text = render_summary(report)
    assert "dpu-blade-slot-2" in text and "beta-k8s" in text and "10.10.0.0/24" in text

    # secrets stay secret in state; a second run changes nothing
    exported = subprocess.run(  # the CLI's own export (Automation's export_stack shows secrets)
        ["pulumi", "stack", "export", "--stack", "dev"],
        cwd=stack.workspace.work_dir,
        env={**os.environ, **stack.workspace.env_vars},
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert '"ciphertext"' in exported
    assert "lab-bmc-password" not in exported and "lab-director-password" not in exported
    again = stack.preview()
    # the kubeconfig Secret of lab-workers is read again in every preview (a read step), nothing changes
    assert set(again.change_summary) == {"same", "read"} and again.change_summary["read"] == 1

    # drift, as `make drift` and `make up` see it: in sync, a refreshing preview proposes nothing
    # (the Kubernetes objects' status read back is no change); a DPU's rshim re-enabled behind the
    # stack's back fails it, and an update that refreshes first puts the declared posture back
    stack.preview(refresh=True, expect_no_changes=True)
    ca = str(lab.lab_dir / "sim-state" / "redfish" / "tls" / "ca.pem")
    dev = load_stack_file(ROOT / "Pulumi.dev.yaml")
    assert dev.hosts[0].dpu is not None
    dpu_bmc = dev.hosts[0].dpu.bmc.endpoint + "/_sim/state"
    requests.post(dpu_bmc, json={"host_rshim": "Enabled"}, verify=ca, timeout=10).raise_for_status()
    with pytest.raises(auto.CommandError, match="no changes were expected"):
        stack.preview(refresh=True, expect_no_changes=True, diff=True)
    stack.up(refresh=True)
    assert requests.get(dpu_bmc, verify=ca, timeout=10).json()["host_rshim"] == "Disabled"
    stack.preview(refresh=True, expect_no_changes=True)

    # a destroy stops while the composer holds GPUs (attached, tagged with its owner tag), before
    # the composer is deleted, and goes on once they are back in the pool
    pool = dev.fabric.pools[0].name
    with DirectorClient(dev.fabric.director.endpoint, username=dev.fabric.director.username,
                        password="lab-director-password") as director:
        gpu = director.free_gpus(pool)[0].name
        director.compose("blade-slot-1", [gpu], owner_tag=run)
        with pytest.raises(auto.CommandError, match=f"still holds 1 GPU.*{gpu} on blade-slot-1"):
            stack.destroy()
        assert client.AppsV1Api(workers_api).read_namespaced_deployment(f"{run}-composer", f"{run}-composer")
        director.decompose("blade-slot-1", [gpu])
        director.clear_owner_tag([gpu])

    down = stack.destroy()
    assert down.summary.result == "succeeded"
    with pytest.raises(ApiException) as gone:
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            "metal3.io", "v1alpha1", infra, "baremetalhosts", "blade-slot-1"
        )
    assert gone.value.status == 404
    assert not ours & _label_owners(workers_core, "blade-slot-1", label)  # our claim on the label is gone
    if not owners_before:
        assert label not in (workers_core.read_node("blade-slot-1").metadata.labels or {})


def test_migrating_the_inline_dev_stack_changes_nothing(lab_hosts_on_mothership: Any, tmp_path: Path) -> None:
    """The dev stack as it was (its whole estate inline in Pulumi.dev.yaml) is deployed, migrated
    with ``python -m stack_config migrate``, and previewed again: no change, its secrets encrypted in
    two credential sets, no password in any file. It labels the hosts' Nodes on the mothership."""
    lab = lab_hosts_on_mothership
    work = local_project(tmp_path)
    shutil.copy(LEGACY_DEV, work / "Pulumi.dev.yaml")
    env = {"PULUMI_BACKEND_URL": file_backend(work), "PULUMI_CONFIG_PASSPHRASE": DEV_PASSPHRASE}
    stack = auto.create_stack("dev", work_dir=str(work), opts=auto.LocalWorkspaceOptions(env_vars=env))
    run = f"e2e-{secrets.token_hex(3)}"
    ca = str(lab.lab_dir / "sim-state" / "redfish" / "tls" / "ca.pem")
    overrides = {
        "mothership.kubeconfig": str(lab.kubeconfig), "mothership.namespace": f"{run}-infra",
        "tenants[0].namespace": f"{run}-alpha", "tenants[1].namespace": f"{run}-beta",
        "composer.namespace": f"{run}-composer", "composer.release_name": f"{run}-composer",
        "composer.owner_tag": run, "hosts[0].dpu.bmc.ca_bundle": ca, "hosts[1].dpu.bmc.ca_bundle": ca,
        # lab-workers adopted with the mothership's kubeconfig (its Nodes are there, as in the dev
        # stack); without it the program reads Secret lab-workers-kubeconfig right after creating
        # the ClusterDeployment, before anything has written it.
        "hypervisor_clusters[0].kubeconfig": str(lab.kubeconfig),
    }
    for path, value in overrides.items():
        _set(stack, path, value)
    for key in ("node_selector", "tolerations"):
        stack.remove_config(f"estate.composer.{key}", path=True)
    try:
        assert stack.up().summary.result == "succeeded"
        migrated = subprocess.run(
            [sys.executable, "-m", "stack_config", "migrate", "--stack", "dev"],
            cwd=work, env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
            timeout=300,
        )
        assert migrated.returncode == 0, migrated.stderr
        assert "wrote environments/dev/hosts/lab-workers.yaml" in migrated.stdout
        config = yaml.safe_load((work / "Pulumi.dev.yaml").read_text())["config"]
        assert list(config) == ["composable-gpu:inventory", "composable-gpu:credentials"]
        assert config["composable-gpu:inventory"] == "environments/dev"
        creds = config["composable-gpu:credentials"]
        assert {name: (c["username"], set(c["password"])) for name, c in creds.items()} == {
            "director": ("admin", {"secure"}), "bmc": ("root", {"secure"})}
        files = [work / "Pulumi.dev.yaml", *(work / "environments" / "dev").rglob("*.yaml")]
        passwords = ("lab-bmc-password", "lab-director-password")
        assert not any(pw in f.read_text() for f in files for pw in passwords)
        # the CLI decrypts the sets to the stack's passwords
        shown = stack.get_all_config()["composable-gpu:credentials"]
        assert json.loads(shown.value)["bmc"]["password"] == "lab-bmc-password" and shown.secret
        again = stack.preview()
        assert set(again.change_summary) == {"same"}, again.change_summary
    finally:
        stack.destroy(on_output=lambda _line: None)


def test_production_stack_previews_against_simulators(lab: Any, tmp_path: Path) -> None:
    from lab.director_sim import Fabric, SimulatorServer, create_app, load_inventory

    inventory = load_inventory(ROOT / "lab" / "inventories" / "production.yaml")
    app = create_app(Fabric(inventory), username="pulumi", password="prod-director-test")
    work, env = _project(tmp_path, "Pulumi.production.yaml")
    folder = work / "environments" / "production"
    shutil.copytree(ROOT / "environments" / "production", folder)
    env["PULUMI_CONFIG_PASSPHRASE"] = "test-only"
    # The example's BMCs (*.mgmt.example.net) do not exist: preview it the way an air-gapped preview
    # runs, without the endpoint probes (dynamic_providers/preflight.py).
    env["COMPOSABLE_GPU_PREFLIGHT"] = "off"
    with SimulatorServer(app, quiet=True) as director:
        stack = auto.create_stack(
            "production", work_dir=str(work), opts=auto.LocalWorkspaceOptions(env_vars=env)
        )
        fabric = folder / "fabric.yaml"
        fabric.write_text(fabric.read_text().replace("https://director.mgmt.example.net:8443", director.url))
        estate = folder / "estate.yaml"
        doc = yaml.safe_load(estate.read_text())
        doc["mothership"]["kubeconfig"] = doc["composer"]["kubeconfig"] = str(lab.kubeconfig)
        estate.write_text(yaml.safe_dump(doc, sort_keys=False))
        # the stack's credential sets, as a deployment sets them (one per kind, not one per host)
        for name, password in (("director", "prod-director-test"), ("bmc", "prod-bmc-test"),
                               ("dpu-bmc", "prod-bmc-test"), ("repository", "prod-registry-test")):
            secret = auto.ConfigValue(password, secret=True)
            stack.set_config(f"credentials.{name}.password", secret, path=True)
        events: list[auto.EngineEvent] = []
        preview = stack.preview(on_event=events.append, **_policy_args("production"))
    assert set(preview.change_summary) == {"create"}
    created: dict[str, int] = {}
    for e in events:
        if e.resource_pre_event is not None and e.resource_pre_event.metadata.op == auto.OpType.CREATE:
            typ = e.resource_pre_event.metadata.type
            created[typ] = created.get(typ, 0) + 1
    assert created["kubernetes:metal3.io/v1alpha1:BareMetalHost"] == 16
    assert created["pulumi-python:dynamic/redfish:DpuPosture"] == 16
    assert created["pulumi-python:dynamic/director:GpuComposition"] == 8
    assert created["composable:infra:Tenant"] == 6
    assert created["composable:infra:TenantCluster"] == 5
    assert created["composable:infra:HypervisorCluster"] == 4
    assert created["kubernetes:provisioning.dpu.nvidia.com/v1alpha1:DPUSet"] == 16
