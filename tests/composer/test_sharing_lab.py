"""GPU sharing end to end on the lab, configured through ``pulumi up``: per mode (time-slicing, MPS
renamed, MIG single, MIG mixed, KubeVirt passthrough) and tenant isolation on a time-sliced host.

Each test writes one stack (:func:`tests.composer.stack_lab.lab_estate`): the scenario's hosts in
cluster ``workers``, a tenant whose ``gpu_sharing`` names one of them, ``mothership.label_nodes``
so the program itself labels the Nodes, and a composer serving the tenant's namespace. The real
pulumi CLI applies it (:func:`tests.composer.stack_lab.lab_stack`), and nothing about sharing is
written by hand afterwards:

- the GPU-Operator stand-in (:mod:`lab.gpu_agent`) is given what the program gave the GPU
  Operator: the ``gpu-operator`` (and ``kubevirt``) service values of the ClusterDeployment
  ``workers`` read back from the API server (:func:`_gpu_operator_args`: ``devicePlugin.config``,
  ``mig.strategy``, ``permittedHostDevices``), plus the GPU Operator's own ``default-mig-parted-config``
  (which the operator ships and the stack does not write; the catalogue's ``mig_layouts`` are
  read from it), and reads the Node labels ``pulumi up`` patched on;
- the composer is started with the Deployment's ``COMPOSER_*`` values, ``COMPOSER_SHARING``
  among them (:func:`tests.composer.stack_lab.deployed_flags`), as its Pods would run it; in one
  test (time-slicing) the composer is the chart's Deployment itself, its Pods on the lab's real
  node ``mgmt-1`` running the image built from ``Containerfile`` and gating the tenant's pods.

The stand-in turns config and labels into resources and GFD labels by NVIDIA's rules
(:mod:`lab.gpu_agent.nvidia`), on its own: were it to advertise whole GPUs, as without a config, the
pods asking for shared units would not all run, and these tests fail. About 40 to 70 s a test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from domain.reclaim import DEFAULT_OWNER_TAG
from lab import node as lab_node
from lab.scenario import local_gating_webhook, webhook_flags
from stack_config.gpus import merge_catalogue
from tests.composer.deployed import SYSTEM_TOLERATIONS
from tests.composer.harness import Scenario, wait_for
from tests.composer.stack_lab import (
    PULUMI_LAB_MARKS,
    LabStack,
    composer_pods,
    deployed_flags,
    lab_estate,
    lab_stack,
)

pytestmark = PULUMI_LAB_MARKS

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
CATALOGUE = merge_catalogue([])


def _services(api: client.ApiClient, run: str) -> dict[str, dict[str, Any]]:
    """Service name -> values of the ClusterDeployment ``workers`` that ``pulumi up`` wrote."""
    cd = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "k0rdent.mirantis.com", "v1beta1", f"{run}-infra", "clusterdeployments", "workers"
    )
    services = cd["spec"]["serviceSpec"]["services"]
    return {s["name"]: yaml.safe_load(s.get("values") or "{}") or {} for s in services}


def _gpu_operator_args(sc: Scenario, api: client.ApiClient, run: str) -> list[str]:
    """The stand-in's flags from what the program gave the GPU Operator and KubeVirt of cluster
    ``workers``: the named device-plugin configs (``devicePlugin.config.data``, name -> YAML) and
    their default, the MIG strategy, and for ``vm-passthrough`` the sandbox device plugin's resource
    per GPU product (KubeVirt's ``permittedHostDevices.pciHostDevices``: the resource of the
    product whose PCI ID the selector names, as the sandbox plugin finds GPUs by PCI ID)."""
    services = _services(api, run)
    op = services["gpu-operator"]
    config = op.get("devicePlugin", {}).get("config", {})
    plugin_configs = {n: yaml.safe_load(text) for n, text in config.get("data", {}).items()}
    (sc.tmp / "plugin-configs.yaml").write_text(yaml.safe_dump(plugin_configs))
    # the GPU Operator's default-mig-parted-config: every layout the catalogue knows, per product
    layouts: dict[str, dict[str, Any]] = {}
    for p in CATALOGUE.values():
        for cfg, layout in p.mig_layouts.items():
            layouts.setdefault(cfg, {})[p.product] = dict(layout)
    (sc.tmp / "mig-layouts.yaml").write_text(yaml.safe_dump(layouts))
    args = ["--plugin-configs", str(sc.tmp / "plugin-configs.yaml"),
            "--mig-layouts", str(sc.tmp / "mig-layouts.yaml")]
    if config.get("default"):
        args += ["--default-config", config["default"]]
    if op.get("mig", {}).get("strategy"):
        args += ["--mig-strategy", op["mig"]["strategy"]]
    devices = (services.get("kubevirt", {}).get("kubevirt", {}).get("configuration", {})
               .get("permittedHostDevices", {}).get("pciHostDevices", []))
    if devices:
        by_pci = {p.pci_id.upper(): p.product for p in CATALOGUE.values()}
        passthrough = {by_pci[d["pciVendorSelector"]]: d["resourceName"] for d in devices}
        (sc.tmp / "passthrough.yaml").write_text(yaml.safe_dump(passthrough))
        args += ["--passthrough-resources", str(sc.tmp / "passthrough.yaml")]
    return args


@contextmanager
def _shared_stack(
    sc: Scenario,
    tmp_path: Path,
    api: client.ApiClient,
    kubeconfig: Path,
    tenants: list[dict[str, Any]],
    *,
    machines: Sequence[str] = ("blade-slot-1", "blade-slot-2"),
    models: Sequence[str] = (T4,),
    cluster: dict[str, Any] | None = None,
    host_role: str | None = None,
    composer: dict[str, Any] | None = None,
    chart_serves: bool = False,
) -> Iterator[LabStack]:
    """``pulumi up`` of the lab estate with ``tenants`` (each a name, its ``gpu_sharing`` if any;
    namespace ``<run>-<name>``, quota 8 GPUs), the program labelling the Nodes, a composer serving
    every tenant's namespace (idle timeout 30 s); ``cluster`` overrides keys of cluster
    ``workers``, ``host_role`` the hosts' role, ``composer`` keys of the composer section;
    ``chart_serves``: the composer runs from the chart (:func:`tests.composer.stack_lab.lab_stack`).
    Yields the applied stack; its ``run`` prefix is ``sh<sid>``."""
    run = f"sh{sc.sid}"
    ts = [{"namespace": f"{run}-{t['name']}", "gpu_quota": 8, **t} for t in tenants]
    estate = lab_estate(
        sc, run, kubeconfig, machines=machines, models=models, tenants=ts, label_nodes=True,
        composer={"namespaces": [t["namespace"] for t in ts], "idle_timeout_seconds": 30, **(composer or {})},
    )
    estate["hypervisor_clusters"][0].update(cluster or {})
    for h in estate["hosts"] if host_role else ():
        h["role"] = host_role
    with lab_stack(sc, tmp_path, estate, api, chart_serves=chart_serves) as lab:
        yield lab


def _start(sc: Scenario, lab: LabStack, api: client.ApiClient, *agent_args: str,
           composer_args: Sequence[str] = ()) -> None:
    """Start the stand-in with the GPU Operator's inputs of the stack, then the composer with its
    Deployment's values."""
    sc.start_agent(*_gpu_operator_args(sc, api, f"sh{sc.sid}"), *agent_args)
    sc.start_composer(*deployed_flags(lab.env), *composer_args)


def _sharing(lab: LabStack) -> list[dict[str, Any]]:
    return json.loads(lab.env["COMPOSER_SHARING"])


def _alloc(sc: Scenario, node: str) -> dict[str, str]:
    return dict(sc.node_obj(node).status.allocatable or {})


def _labels(sc: Scenario, node: str) -> dict[str, str]:
    return dict(sc.node_obj(node).metadata.labels or {})


def _running(sc: Scenario, names: Sequence[str], ns: str, timeout: float = 60) -> list[str]:
    """The nodes the pods ``names`` of ``ns`` run on, once all run."""
    return [wait_for(lambda n=n: sc.running_on(n, ns), timeout=timeout, what=f"{n} running") for n in names]


def test_time_slicing_four_pods_share_one_gpu_and_the_fifth_gets_a_second(
    make_scenario, composer_lab, lab_api, tmp_path
):
    """Replicas 4: four pods selecting the ``-SHARED`` product label run on one composed T4; a
    fifth gets a second T4 composed onto the same host (its 4 units are taken)."""
    with make_scenario(inventory="dev.yaml") as sc:
        host = sc.node("blade-slot-1")
        share = {"strategy": "time-slicing", "hosts": [host], "replicas": 4}
        with _shared_stack(sc, tmp_path, lab_api, composer_lab.kubeconfig,
                           [{"name": "blue", "gpu_sharing": share}]) as lab:
            ns = f"sh{sc.sid}-blue"
            [entry] = _sharing(lab)
            assert (entry["strategy"], entry["hosts"], entry["namespaces"]) == ("time-slicing", [host], [ns])
            assert entry["offers"][T4] == [
                {"resource": "nvidia.com/gpu", "units": 4, "product": f"{T4}-SHARED"}
            ]
            assert _labels(sc, host)["nvidia.com/device-plugin.config"] == "blue-gpu-sharing"
            _start(sc, lab, lab_api)
            for i in range(4):
                sc.gpu_pod(f"ts-{i}", 1, product=f"{T4}-SHARED", namespace=ns)
            assert _running(sc, [f"ts-{i}" for i in range(4)], ns) == [host] * 4
            assert [len(g) for g in sc.attached().values()] == [1]  # one T4 for the four pods
            assert _alloc(sc, host)["nvidia.com/gpu"] == "4"
            lbl = _labels(sc, host)
            assert lbl["nvidia.com/gpu.product"] == f"{T4}-SHARED"
            assert lbl["nvidia.com/gpu.replicas"] == "4"
            assert lbl["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
            assert lbl["nvidia.com/gpu.count"] == "1"

            sc.gpu_pod("ts-4", 1, product=f"{T4}-SHARED", namespace=ns)
            assert _running(sc, ["ts-4"], ns) == [host]
            assert {n: len(g) for n, g in sc.attached().items()} == {host: 2}
            assert _alloc(sc, host)["nvidia.com/gpu"] == "8"


def test_the_composer_pulumi_up_deploys_serves_time_sliced_pods_from_its_chart(
    make_scenario, real_node, composer_image, lab_api, tmp_path
):
    """The time-slicing case with the composer ``pulumi up`` deployed, not a process: the chart's
    Deployment runs the image built from ``Containerfile`` on the lab's real node ``mgmt-1``, reads
    ``COMPOSER_SHARING`` from its own environment, reaches the Director simulator at the node's
    address, and gates the tenant's pods through the chart's webhook. Four pods selecting
    ``Tesla-T4-SHARED`` share one T4 it composes (tagged with the stack's owner tag), and a fifth
    gets a second T4 on the same host."""
    with make_scenario(inventory="dev.yaml", director_host=lab_node.NODE_IP) as sc:
        host = sc.node("blade-slot-1")
        share = {"strategy": "time-slicing", "hosts": [host], "replicas": 4}
        composer = {
            "image": composer_image.ref,
            "api_server": f"{lab_node.NODE_IP}:{real_node.ports.apiserver}",
            "director_endpoint": sc.director_url,
            "node_selector": {"kubernetes.io/hostname": lab_node.NODE_NAME},
            "tolerations": SYSTEM_TOLERATIONS,
        }
        blue = [{"name": "blue", "gpu_sharing": share}]
        with _shared_stack(sc, tmp_path, lab_api, real_node.kubeconfig, blue, composer=composer,
                           chart_serves=True) as lab:
            ns = f"sh{sc.sid}-blue"
            mine = {"composer": {"namespace": f"sh{sc.sid}-composer", "release_name": f"sh{sc.sid}-composer"}}
            pods = wait_for(lambda: composer_pods(lab_api, mine, ready=True) or None,
                            timeout=180, what="the chart's composer Pods Ready")
            assert {p.spec.node_name for p in pods} == {lab_node.NODE_NAME}
            assert json.loads(lab.env["COMPOSER_SHARING"])[0]["offers"][T4][0]["units"] == 4
            assert not any(n.startswith("composer") for n in sc.procs)  # no local composer
            sc.start_agent(*_gpu_operator_args(sc, lab_api, f"sh{sc.sid}"))
            for i in range(4):
                sc.gpu_pod(f"ts-{i}", 1, product=f"{T4}-SHARED", namespace=ns)
            assert _running(sc, [f"ts-{i}" for i in range(4)], ns, timeout=90) == [host] * 4
            [gpu] = sc.attached()[host]
            assert sc.director_udesc()[gpu] == DEFAULT_OWNER_TAG  # composed by the chart's composer
            sc.gpu_pod("ts-4", 1, product=f"{T4}-SHARED", namespace=ns)
            assert _running(sc, ["ts-4"], ns) == [host]
            assert {n: len(g) for n, g in sc.attached().items()} == {host: 2}
            assert _alloc(sc, host)["nvidia.com/gpu"] == "8"


def test_mps_four_pods_share_one_gpu_and_the_fifth_gets_a_second(
    make_scenario, composer_lab, lab_api, tmp_path
):
    """MPS, replicas 4, renamed: the units are ``nvidia.com/gpu.shared`` and the product label stays
    plain; four pods on one T4, the fifth on a second."""
    with make_scenario(inventory="dev.yaml") as sc:
        host = sc.node("blade-slot-2")
        share = {"strategy": "mps", "hosts": [host], "replicas": 4, "rename_by_default": True}
        with _shared_stack(sc, tmp_path, lab_api, composer_lab.kubeconfig,
                           [{"name": "blue", "gpu_sharing": share}]) as lab:
            ns = f"sh{sc.sid}-blue"
            [entry] = _sharing(lab)
            assert entry["offers"][T4] == [{"resource": "nvidia.com/gpu.shared", "units": 4, "product": T4}]
            _start(sc, lab, lab_api)
            for i in range(4):
                sc.gpu_pod(f"mps-{i}", 1, resource="nvidia.com/gpu.shared", namespace=ns)
            assert _running(sc, [f"mps-{i}" for i in range(4)], ns) == [host] * 4
            assert [len(g) for g in sc.attached().values()] == [1]
            alloc, lbl = _alloc(sc, host), _labels(sc, host)
            assert alloc["nvidia.com/gpu.shared"] == "4" and "nvidia.com/gpu" not in alloc
            assert lbl["nvidia.com/gpu.product"] == T4  # renamed: no -SHARED
            assert (lbl["nvidia.com/gpu.sharing-strategy"], lbl["nvidia.com/mps.capable"]) == ("mps", "true")

            sc.gpu_pod("mps-4", 1, resource="nvidia.com/gpu.shared", namespace=ns)
            assert _running(sc, ["mps-4"], ns) == [host]
            assert {n: len(g) for n, g in sc.attached().items()} == {host: 2}
            assert _alloc(sc, host)["nvidia.com/gpu.shared"] == "8"


def _mig_states(sc: Scenario, host: str, until: Any, timeout: float) -> list[str]:
    """``nvidia.com/mig.config.state`` values seen on ``host`` (in order, repeats dropped) until
    ``until()`` is true."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = _labels(sc, host).get("nvidia.com/mig.config.state")
        if st and (not seen or seen[-1] != st):
            seen.append(st)
        if until():
            return seen
        time.sleep(0.1)
    raise AssertionError(f"timed out; mig.config.state seen: {seen}\n{sc.diagnostics()}")


#: A mig-parted run takes 1 s. The stand-in, like NVIDIA's mig-manager, runs it only when the node's
#: mig-manager pod starts or ``nvidia.com/mig.config`` changes: the composer restarts that pod once
#: it has composed a GPU onto the node (docs/gpu-sharing.md).
MIG_AGENT = ("--mig-apply-delay", "1")


@contextmanager
def _mig_stack(sc: Scenario, tmp_path: Path, api: client.ApiClient, kubeconfig: Path, host: str,
               mig_config: str, strategy: str) -> Iterator[LabStack]:
    share = {"strategy": "mig", "hosts": [host], "mig_config": mig_config, "mig_strategy": strategy}
    green = {"name": "green", "gpu_sharing": share, "allowed_models": [A100]}
    with _shared_stack(sc, tmp_path, api, kubeconfig, [green],
                       machines=("blade-slot-3",), models=(A100,)) as lab:
        assert _labels(sc, host)["nvidia.com/mig.config"] == mig_config
        _start(sc, lab, api, *MIG_AGENT)
        yield lab


def test_mig_single_one_a100_serves_seven_1g_5gb_pods(make_scenario, composer_lab, lab_api, tmp_path):
    with make_scenario(inventory="rich.yaml") as sc:
        host = sc.node("blade-slot-3")
        with _mig_stack(sc, tmp_path, lab_api, composer_lab.kubeconfig, host, "all-1g.5gb", "single") as lab:
            ns = f"sh{sc.sid}-green"
            [entry] = _sharing(lab)
            assert entry["offers"] == {A100: [{"resource": "nvidia.com/gpu", "units": 7,
                                               "product": f"{A100}-MIG-1g.5gb"}]}
            wait_for(lambda: _labels(sc, host).get("nvidia.com/mig.config.state") == "success",
                     timeout=20, what="first mig-parted run (no GPUs)")
            for i in range(7):
                sc.gpu_pod(f"mig-{i}", 1, product=f"{A100}-MIG-1g.5gb", namespace=ns)
            states = _mig_states(
                sc, host, lambda: all(sc.running_on(f"mig-{i}", ns) == host for i in range(7)), 90
            )
            assert states[-2:] == ["pending", "success"]  # the hot-plugged A100 partitioned
            restarts = [r for i in range(7) for _, r, _ in sc.events(f"mig-{i}", ns) if r == "MigReconfigure"]
            assert restarts, "the composer restarted the node's mig-manager"
            assert len(sc.attached()[host]) == 1  # (blade-slot-4 keeps its static gpu7)
            assert _alloc(sc, host)["nvidia.com/gpu"] == "7"
            lbl = _labels(sc, host)
            assert lbl["nvidia.com/gpu.product"] == f"{A100}-MIG-1g.5gb"
            assert lbl["nvidia.com/gpu.count"] == "7"
            assert lbl["nvidia.com/mig.strategy"] == "single"


def test_mig_mixed_one_a100_serves_each_profile_of_its_layout(make_scenario, composer_lab, lab_api, tmp_path):
    """all-balanced on an A100 40GB: 2 x 1g.5gb, 1 x 2g.10gb, 1 x 3g.20gb; three pods asking all
    of them take one A100."""
    with make_scenario(inventory="rich.yaml") as sc:
        host = sc.node("blade-slot-3")
        with _mig_stack(sc, tmp_path, lab_api, composer_lab.kubeconfig, host, "all-balanced", "mixed"):
            ns = f"sh{sc.sid}-green"
            # created together: the A100 composed for one also serves the other (its layout's other
            # profile), not a second A100
            sc.gpu_pod("small", 2, resource="nvidia.com/mig-1g.5gb", namespace=ns)
            sc.gpu_pod("large", 1, resource="nvidia.com/mig-3g.20gb", namespace=ns)
            assert _running(sc, ["small", "large"], ns, timeout=90) == [host, host]
            # later: the same A100's 2g.10gb
            sc.gpu_pod("medium", 1, resource="nvidia.com/mig-2g.10gb", namespace=ns)
            assert _running(sc, ["medium"], ns) == [host]
            assert len(sc.attached()[host]) == 1  # (blade-slot-4 keeps its static gpu7)
            alloc, lbl = _alloc(sc, host), _labels(sc, host)
            assert (alloc["nvidia.com/mig-1g.5gb"], alloc["nvidia.com/mig-2g.10gb"],
                    alloc["nvidia.com/mig-3g.20gb"]) == ("2", "1", "1")
            assert lbl["nvidia.com/gpu.product"] == A100
            assert lbl["nvidia.com/mig-1g.5gb.product"] == f"{A100}-MIG-1g.5gb"
            assert lbl["nvidia.com/mig.config.state"] == "success"


def test_a_time_sliced_gpu_never_serves_two_tenants(make_scenario, composer_lab, lab_api, tmp_path):
    """Tenant red time-slices blade-slot-1, tenant blue blade-slot-2 (replicas 4 each): both hosts
    are labelled ``Tesla-T4-SHARED``. Red's two pods share one T4 on blade-slot-1, which leaves two
    free units there; blue's shared-GPU pod pinned to blade-slot-1 is refused with the reason, and
    blue's unpinned shared-GPU pod gets a T4 composed onto blade-slot-2, never red's free units.
    Blue's pods are gated (the chart's webhook, pointed at the local composer): a pod not gated
    would be the scheduler's to bind to red's free units (docs/gpu-sharing.md "What the composer
    does not do")."""
    with make_scenario(inventory="dev.yaml") as sc:
        host, other = sc.node("blade-slot-1"), sc.node("blade-slot-2")
        tenants = [
            {"name": t, "gpu_sharing": {"strategy": "time-slicing", "hosts": [h], "replicas": 4}}
            for t, h in (("red", host), ("blue", other))
        ]
        with _shared_stack(sc, tmp_path, lab_api, composer_lab.kubeconfig, tenants) as lab:
            red, blue = f"sh{sc.sid}-red", f"sh{sc.sid}-blue"
            assert [(e["tenant"], e["hosts"], e["namespaces"]) for e in _sharing(lab)] == [
                ("red", [host], [red]), ("blue", [other], [blue])
            ]
            port, cert, key, hook = local_gating_webhook(
                lab_api, namespace=blue, release=f"g{sc.sid}", out_dir=sc.tmp
            )
            sc.webhooks.append(hook)
            _start(sc, lab, lab_api, composer_args=webhook_flags(port, cert, key))
            for i in range(2):
                sc.gpu_pod(f"red-{i}", 1, product=f"{T4}-SHARED", namespace=red)
            assert _running(sc, ["red-0", "red-1"], red) == [host, host]
            sc.gpu_pod("blue-pinned", 1, product=f"{T4}-SHARED", host=host, namespace=blue)
            wait_for(
                lambda: any(r == "NoHostFits" and "'red'" in m for _, r, m in sc.events("blue-pinned", blue)),
                timeout=30,
                what="blue's pinned pod refused naming red's sharing",
            )
            sc.gpu_pod("blue", 1, product=f"{T4}-SHARED", namespace=blue)
            assert _running(sc, ["blue"], blue) == [other]
            assert sc.running_on("blue-pinned", blue) is None
            assert _alloc(sc, host)["nvidia.com/gpu"] == "4" and _alloc(sc, other)["nvidia.com/gpu"] == "4"
            assert {n: len(g) for n, g in sc.attached().items()} == {host: 1, other: 1}


def test_vm_passthrough_a_vm_pod_gets_an_a100_advertised_as_its_passthrough_resource(
    make_scenario, composer_lab, lab_api, tmp_path
):
    """Cluster ``workers`` in ``vm-passthrough`` mode with KubeVirt (docs/gpu-sharing.md "KubeVirt
    passthrough"): a pod asking the A100's passthrough resource, as KubeVirt's virt-launcher does,
    gets an A100 composed onto that host and runs; the stand-in advertises it as the sandbox device
    plugin would, under the resource KubeVirt's values permit for the A100's PCI ID, not
    ``nvidia.com/gpu``. Without the stand-in's passthrough rule the node advertises
    ``nvidia.com/gpu`` and the pod never runs. Once the VM's pod is gone, the composer reclaims the
    A100 from the idle node (idle timeout 5 s), though a passthrough node carries neither
    ``nvidia.com/gpu`` nor GFD's count label."""
    resource = CATALOGUE[A100].passthrough_resource
    with make_scenario(inventory="rich.yaml") as sc:
        host = sc.node("blade-slot-3")
        with _shared_stack(sc, tmp_path, lab_api, composer_lab.kubeconfig, [{"name": "vms"}],
                           machines=("blade-slot-3",), models=(T4, A100),
                           cluster={"gpu_workload_mode": "vm-passthrough", "kubevirt": True},
                           host_role="hypervisor",
                           composer={"target_cluster": "mothership", "idle_timeout_seconds": 5}) as lab:
            ns = f"sh{sc.sid}-vms"
            [entry] = _sharing(lab)
            assert (entry["strategy"], entry["hosts"]) == ("vm-passthrough", [host])
            assert entry["offers"][A100] == [{"resource": resource, "units": 1, "product": A100}]
            assert _labels(sc, host)["nvidia.com/gpu.workload.config"] == "vm-passthrough"
            _start(sc, lab, lab_api)
            sc.gpu_pod("vm-a100", 1, resource=resource, namespace=ns)
            assert _running(sc, ["vm-a100"], ns) == [host]
            assert len(sc.attached()[host]) == 1  # one A100: a T4 would be advertised as its own resource
            alloc = _alloc(sc, host)
            assert alloc[resource] == "1" and alloc.get("nvidia.com/gpu", "0") == "0"
            assert "nvidia.com/gpu.product" not in _labels(sc, host)  # no GFD on a passthrough node

            # the VM is gone: its node idles, and the A100 goes back to the pool after the idle timeout
            sc.core.delete_namespaced_pod("vm-a100", ns, grace_period_seconds=0)
            wait_for(lambda: not sc.attached().get(host), timeout=60, what="the idle A100 reclaimed")
