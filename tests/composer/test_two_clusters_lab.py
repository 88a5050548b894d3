"""Two composers for two clusters sharing one Director simulator, each deployed by ``pulumi up``
of its own stack, playing the handover scenario (two hosts hand over two pooled GPUs) at the same
time.

- Cluster A is the mothership: hosts ``<id>-a1``/``-a2`` are kwok Nodes there; composer A (owner
  tag ``composer-a``, Director group ``pool-a``) runs in its target cluster, its Pods on ``mgmt-1``
  behind its gating webhook.
- Cluster B is ``lab-workers``, the lab's second control plane: hosts ``<id>-b1``/``-b2`` are kwok
  Nodes there; composer B (``composer-b``, group ``pool-b``) has ``runs_on: mothership``: the chart
  is installed on the mothership, its Pods run on ``mgmt-1`` and watch ``lab-workers`` through the
  kubeconfig the program copied into a Secret beside them (docs/composer-pools.md "Where a composer
  for a child cluster runs").

Both use the image built from ``Containerfile``. The Director simulator listens on the lab node's
address; its call log records each call's client address, so a call is attributed to the composer
whose Pod IP sent it. Checked: each composer composes onto its own cluster's hosts only, no changing
call of one names the other's group or machines, the GPUs on each cluster's hosts carry that
composer's owner tag and each composer's metrics count its own GPUs only; then ``pulumi
destroy`` of stack B succeeds while A's GPUs are attached (B's destroy guard counts only B's tag),
and A's GPUs stay attached.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pulumi import automation as auto

from lab import node as lab_node
from lab.kube import pod_ready
from tests.composer.harness import (
    E2E_LABEL,
    SIM_PASSWORD,
    SIM_USER,
    add_kwok_nodes,
    admin_api,
    attached_gpus,
    free_port,
    start_proc,
    wait_for,
    wait_sim_ready,
)
from tests.composer.stack_lab import BMC_PASSWORD, CONFIG_KEY, PULUMI_LAB_MARKS
from tests.pulumi_project import file_backend, local_project

pytestmark = PULUMI_LAB_MARKS

PASSPHRASE = "two-clusters-lab-only"
#: Seconds a host stays idle before its composer gives the GPUs back (short, for the test).
IDLE_SECONDS = 5


def _inventory(sid: str) -> dict[str, Any]:
    """Two Director groups on one fabric: ``pool-a`` (machines ``<sid>-a1/-a2``, GPUs gpu0, gpu1 in
    its pool) and ``pool-b`` (``<sid>-b1/-b2``, gpu2, gpu3); nothing in the system free pool, so a
    composer can only compose its own group's GPUs."""
    return {
        "fabric_id": 0,
        "switches": [{"name": "sw0"}],
        "groups": [{"name": "pool-a"}, {"name": "pool-b"}],
        "machines": [
            {"name": f"{sid}-{x}{i}", "group": f"pool-{x}", "switch": "sw0"} for x in "ab" for i in (1, 2)
        ],
        "gpus": [
            {"name": f"gpu{n}", "model": "Tesla T4", "switch": "sw0", "pool": f"pool-{x}"}
            for n, x in enumerate("aabb")
        ],
    }


def _estate(
    *,
    x: str,
    sid: str,
    director_url: str,
    mothership_kubeconfig: Path,
    cluster_kubeconfig: Path,
    image: str,
    hosted: bool,
    api_server: str,
) -> dict[str, Any]:
    """The stack of composer ``x`` (``a`` or ``b``): its two hosts in cluster ``workers-<x>``
    (adopted through ``cluster_kubeconfig``), fabric pool ``pool-<x>``, and its composer (owner tag
    and release ``composer-<x>``-ish names, namespace ``<sid><x>``) serving namespace ``<sid>-work``."""
    hosts = [f"{sid}-{x}{i}" for i in (1, 2)]
    return {
        "environment": "lab",
        "mothership": {"kubeconfig": str(mothership_kubeconfig), "namespace": f"{sid}{x}-infra"},
        "fabric": {
            "director": {"endpoint": director_url, "username": SIM_USER},
            "pools": [{"name": f"pool-{x}", "models": ["Tesla-T4"], "size": 2}],
        },
        "hosts": [
            {
                "name": h,
                "role": "baremetal-worker",
                "boot_mac": f"52:54:00:00:0{'ab'.index(x)}:0{i}",
                "bmc": {"endpoint": f"https://127.0.0.1:1845{i}", "username": "root", "verify_tls": False},
            }
            for i, h in enumerate(hosts, 1)
        ],
        "hypervisor_clusters": [
            {
                "name": f"workers-{x}",
                "kubeconfig": str(cluster_kubeconfig),
                "hosts": hosts,
                "gpu_workload_mode": "container",
                "kubevirt": False,
                "control_plane_replicas": 1,
            }
        ],
        "tenants": [],
        "gpu_compositions": [],
        "composer": {
            "pool": f"pool-{x}",
            "target_cluster": f"workers-{x}",
            "namespace": f"{sid}{x}",
            "release_name": f"{sid}{x}",
            "owner_tag": f"composer-{x}",
            "restart_device_plugin": False,
            "idle_timeout_seconds": IDLE_SECONDS,
            "image": image,
            "api_server": api_server,
            "director_endpoint": director_url,
            "node_selector": {"kubernetes.io/hostname": lab_node.NODE_NAME},
            "tolerations": [{"key": lab_node.TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "namespaces": [f"{sid}-work"],
            **({"runs_on": "mothership"} if hosted else {}),
        },
    }


def _stack(tmp: Path, estate: dict[str, Any]) -> auto.Stack:
    """A new stack ``lab`` of a throw-away project in ``tmp`` configured with ``estate`` and its
    secrets (the Director's and the BMCs' passwords)."""
    work = local_project(tmp)
    env = {"PULUMI_BACKEND_URL": file_backend(work), "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE}
    stack = auto.create_stack("lab", work_dir=str(work), opts=auto.LocalWorkspaceOptions(env_vars=env))
    path = work / "Pulumi.lab.yaml"
    doc = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    doc["config"] = {CONFIG_KEY: estate}
    path.write_text(yaml.safe_dump(doc))
    secrets = {
        "fabric.director.password": SIM_PASSWORD,
        **{f"hosts[{i}].bmc.password": BMC_PASSWORD for i in range(len(estate["hosts"]))},
    }
    stack.set_all_config(
        {f"estate.{k}": auto.ConfigValue(v, secret=True) for k, v in secrets.items()}, path=True
    )
    return stack


class Cluster:
    """One cluster of the test: its API, its two kwok hosts, the work namespace and GPU pods."""

    def __init__(self, name: str, kubeconfig: Path, sid: str, hosts: list[str]) -> None:
        self.name, self.kubeconfig, self.sid, self.hosts = name, kubeconfig, sid, hosts
        self.api = admin_api(kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.ns = f"{sid}-work"

    def gpu_pod(self, name: str, host: str, count: int = 2) -> None:
        self.core.create_namespaced_pod(
            self.ns,
            {
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {
                    "nodeSelector": {E2E_LABEL: self.sid, "kubernetes.io/hostname": host},
                    "containers": [
                        {
                            "name": "cuda",
                            "image": "nvcr.io/nvidia/cuda:stand-in",
                            "resources": {
                                "limits": {"nvidia.com/gpu": str(count), "cpu": "500m", "memory": "256Mi"}
                            },
                        }
                    ],
                },
            },
        )

    def running_on(self, name: str) -> str | None:
        try:
            p = self.core.read_namespaced_pod(name, self.ns)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return p.spec.node_name if p.status.phase == "Running" else None

    def delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.ns, grace_period_seconds=0)

    def cleanup(self) -> None:
        for delete in (
            lambda: self.core.delete_namespace(self.ns),
            *(lambda h=h: self.core.delete_node(h) for h in self.hosts),
        ):
            try:
                delete()
            except ApiException:
                pass


class Director:
    """The shared Director simulator's test API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _get(self, path: str) -> Any:
        import requests

        r = requests.get(f"{self.url}/_sim/{path}", timeout=10)
        r.raise_for_status()
        return r.json()

    def attached(self) -> dict[str, list[str]]:
        """Machine name -> GPUs attached to it."""
        return attached_gpus(self._get("state"))

    def owner_tags(self) -> dict[str, str]:
        """GPU name -> owner tag (user description) as the Director's REST API shows it."""
        import requests

        r = requests.get(
            f"{self.url}/liqid/api/v2/device/info/gpu", auth=(SIM_USER, SIM_PASSWORD), timeout=10
        )
        r.raise_for_status()
        return {g["name"]: g["udesc"] for g in r.json()["response"]["data"]}

    def state(self) -> dict[str, Any]:
        return dict(self._get("state"))

    def calls(self) -> list[dict[str, Any]]:
        return list(self._get("calls"))


def _pod_ips(api: client.ApiClient, namespace: str) -> set[str]:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return {p.status.pod_ip for p in pods if p.status.pod_ip}


def _ready_pods(api: client.ApiClient, namespace: str) -> list[client.V1Pod]:
    return [p for p in client.CoreV1Api(api).list_namespaced_pod(namespace).items if pod_ready(p)]


def _names(value: Any) -> Iterator[tuple[str, str]]:
    """Every (key, value) pair of ``value`` (nested dicts and lists), values as strings."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list):
                yield from _names(v)
            else:
                yield str(k), str(v)
    elif isinstance(value, list):
        for v in value:
            yield from _names(v)


def foreign_references(
    calls: list[dict[str, Any]], clients: set[str], other: dict[str, set[str]]
) -> list[str]:
    """The changing calls (not ``GET``) sent from ``clients`` (IP addresses) whose query or body
    names something of ``other``: key -> values of the other composer (``grp_id``, ``mach_id``,
    machine names); each as ``METHOD path key=value``. Reads are left out: a compose reads where
    every GPU is (``status/gpu``, each group's ``predevice``), the other group's pool included. Pure."""
    out = []
    for c in calls:
        if c.get("client") not in clients or c.get("method") == "GET":
            continue
        for k, v in _names({"query": c.get("query"), "body": c.get("body")}):
            if v in other.get(k, set()) or (k not in ("grp_id", "mach_id") and v in other.get("name", set())):
                out.append(f"{c['method']} {c['path']} {k}={v}")
    return out


def test_foreign_references_finds_a_call_naming_the_other_composers_machine() -> None:
    calls = [
        {
            "method": "POST",
            "path": "fabric/edit",
            "client": "10.89.0.5",
            "query": {},
            "body": {"machine": {"mach_id": "3", "mach_name": "x-b1"}},
        },
        {"method": "GET", "path": "predevice", "client": "10.89.0.5", "query": {"grp_id": "2"}, "body": None},
        {"method": "POST", "path": "pool/edit", "client": "10.89.0.9", "query": {}, "body": {"grp_id": "2"}},
    ]
    other = {"grp_id": {"2"}, "mach_id": {"3"}, "name": {"x-b1"}}
    assert foreign_references(calls, {"10.89.0.5"}, other) == [
        "POST fabric/edit mach_id=3",
        "POST fabric/edit mach_name=x-b1",
    ]
    mine = {"grp_id": {"1"}, "mach_id": {"1"}, "name": {"x-a1"}}
    assert foreign_references(calls, {"10.89.0.9"}, mine) == []  # the other client names only its own
    assert foreign_references(calls, {"10.89.0.9"}, other) == ["POST pool/edit grp_id=2"]


def _both(fa: Callable[[], Any], fb: Callable[[], Any]) -> tuple[Any, Any]:
    """Run ``fa`` and ``fb`` at the same time; their results (re-raising the first failure)."""
    out: list[Any] = [None, None]
    errors: list[BaseException] = []

    def run(i: int, f: Callable[[], Any]) -> None:
        try:
            out[i] = f()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate((fa, fb))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out[0], out[1]


def test_two_composers_for_two_clusters_on_one_director(
    real_node: Any, composer_image: Any, tmp_path: Path
) -> None:
    lab = real_node
    sid = f"t{uuid.uuid4().hex[:5]}"
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(_inventory(sid)))
    port = free_port()
    url = f"http://{lab_node.NODE_IP}:{port}"
    sim = start_proc(
        "director-sim",
        [
            sys.executable,
            "-m",
            "lab.director_sim",
            "--host",
            lab_node.NODE_IP,
            "--port",
            str(port),
            "--inventory",
            str(inv),
            "--state-file",
            str(tmp_path / "director.json"),
            "--hotplug-latency",
            "0.05",
        ],
        tmp_path,
        env={"DIRECTOR_SIM_USERNAME": SIM_USER, "DIRECTOR_SIM_PASSWORD": SIM_PASSWORD},
    )
    procs = [sim]
    director = Director(url)
    workers = lab.hypervisor.kubeconfig
    ca = Cluster("mothership", lab.kubeconfig, sid, [f"{sid}-a1", f"{sid}-a2"])
    cb = Cluster("lab-workers", workers, sid, [f"{sid}-b1", f"{sid}-b2"])
    stacks: dict[str, auto.Stack] = {}
    try:
        wait_sim_ready(sim, url)
        for c in (ca, cb):
            c.core.create_namespace({"metadata": {"name": c.ns, "labels": {E2E_LABEL: sid}}})
            add_kwok_nodes(c.core, c.hosts, sid, where=c.name)
            procs.append(
                start_proc(
                    f"gpu-agent-{c.name}",
                    [
                        sys.executable,
                        "-m",
                        "lab.gpu_agent",
                        "--kubeconfig",
                        str(c.kubeconfig),
                        "--director-url",
                        url,
                        "--node-selector",
                        f"{E2E_LABEL}={sid}",
                        "--plugin-namespace",
                        c.ns,
                        "--interval",
                        "0.2",
                        "--advertise-delay",
                        "0.3",
                    ],
                    tmp_path,
                    env={"GPU_AGENT_DIRECTOR_PASSWORD": SIM_PASSWORD},
                )
            )

        image = composer_image.ref
        common = {"sid": sid, "director_url": url, "mothership_kubeconfig": lab.kubeconfig, "image": image}
        stacks["a"] = _stack(
            tmp_path / "a",
            _estate(
                x="a",
                cluster_kubeconfig=lab.kubeconfig,
                hosted=False,
                api_server=f"{lab_node.NODE_IP}:{lab.ports.apiserver}",
                **common,
            ),
        )
        stacks["b"] = _stack(
            tmp_path / "b",
            _estate(
                x="b",
                cluster_kubeconfig=workers,
                hosted=True,
                api_server=f"{lab_node.NODE_IP}:{lab.hypervisor.ports.apiserver}",
                **common,
            ),
        )
        for s in stacks.values():
            assert s.up(on_output=lambda _line: None).summary.result == "succeeded"

        # Both composers' Pods run on mgmt-1, on the mothership.
        mapi = ca.api
        for x in "ab":
            pods = wait_for(
                lambda x=x: _ready_pods(mapi, f"{sid}{x}") or None,
                timeout=180,
                what=f"composer {x} Pods Ready",
            )
            assert {p.spec.node_name for p in pods} == {lab_node.NODE_NAME}
            assert pods[0].status.container_statuses[0].image_id.endswith(composer_image.image_id)
        # B's Deployment reads lab-workers' kubeconfig from a Secret; none of it in its env.
        dep_b = client.AppsV1Api(mapi).read_namespaced_deployment(f"{sid}b-composer", f"{sid}b")
        env_b = {e.name: e.value for e in dep_b.spec.template.spec.containers[0].env}
        assert env_b["COMPOSER_KUBECONFIG"] == "/etc/composer/target/kubeconfig"
        assert [v.secret.secret_name for v in dep_b.spec.template.spec.volumes if v.secret] == [
            f"{sid}b-target-kubeconfig"
        ]
        # B's Lease is in lab-workers, held by one of B's Pods on the mothership; none on the mothership.
        b_pods = {p.metadata.name for p in client.CoreV1Api(mapi).list_namespaced_pod(f"{sid}b").items}
        coord_b = client.CoordinationV1Api(cb.api)
        holder = wait_for(
            lambda: _holder(coord_b, f"{sid}b", f"{sid}b"), timeout=60, what="B's Lease in lab-workers"
        )
        assert holder in b_pods
        assert _holder(client.CoordinationV1Api(mapi), f"{sid}b", f"{sid}b") is None
        # A gating webhook for A on the mothership, none for B anywhere.
        hooks_m = [
            w.metadata.name
            for w in client.AdmissionregistrationV1Api(mapi).list_mutating_webhook_configuration().items
        ]
        hooks_w = [
            w.metadata.name
            for w in client.AdmissionregistrationV1Api(cb.api).list_mutating_webhook_configuration().items
        ]
        assert f"{sid}a-composer" in hooks_m and f"{sid}b-composer" not in hooks_m + hooks_w

        # The handover scenario in both clusters at the same time.
        a1, a2, b1, b2 = *ca.hosts, *cb.hosts
        _both(lambda: ca.gpu_pod("train-1", a1), lambda: cb.gpu_pod("train-1", b1))
        assert _both(
            lambda: wait_for(lambda: ca.running_on("train-1"), timeout=120, what="A's first pod"),
            lambda: wait_for(lambda: cb.running_on("train-1"), timeout=120, what="B's first pod"),
        ) == (a1, b1)
        assert director.attached() == {a1: ["gpu0", "gpu1"], b1: ["gpu2", "gpu3"]}
        _both(lambda: ca.delete_pod("train-1"), lambda: cb.delete_pod("train-1"))
        wait_for(lambda: director.attached() == {}, timeout=120, what="both hosts' GPUs back in their pools")
        _both(lambda: ca.gpu_pod("train-2", a2), lambda: cb.gpu_pod("train-2", b2))
        assert _both(
            lambda: wait_for(lambda: ca.running_on("train-2"), timeout=120, what="A's second pod"),
            lambda: wait_for(lambda: cb.running_on("train-2"), timeout=120, what="B's second pod"),
        ) == (a2, b2)
        # Decomposed GPUs went back to the system free pool (composer.releaseToSystemPool), so
        # each composer took two of the four free ones into its own group; never one the other holds.
        second = director.attached()
        assert sorted(second) == [a2, b2] and len(second[a2]) == len(second[b2]) == 2
        assert sorted(second[a2] + second[b2]) == ["gpu0", "gpu1", "gpu2", "gpu3"]
        tags = director.owner_tags()
        assert {tags[g] for g in second[a2]} == {"composer-a"}
        assert {tags[g] for g in second[b2]} == {"composer-b"}
        # Each reports its own compositions only: 2 GPUs per round, one round given back.
        for x in "ab":
            texts = [_metrics(p) for p in _ready_pods(mapi, f"{sid}{x}")]
            assert sum(_metric(t, "composer_composed_gpus_total") for t in texts) == 4, x
            assert sum(_metric(t, "composer_decomposed_gpus_total") for t in texts) == 2, x
        # B's Events about its pod are in lab-workers, posted by a B Pod.
        evs = cb.core.list_namespaced_event(cb.ns, field_selector="involvedObject.name=train-2").items
        assert any(e.reason == "Composed" and (e.reporting_instance or "") in b_pods for e in evs), [
            (e.reason, e.reporting_instance) for e in evs
        ]

        # The call log: each composer's calls name only its own group and machines (GPUs pass
        # from one group to the other through the system free pool, so their names are not owned).
        st = director.state()
        mids = {m["name"]: str(m["mach_id"]) for m in st["machines"]}
        gids = {g["name"]: str(g["grp_id"]) for g in st["groups"]}

        def own(x: str) -> dict[str, set[str]]:
            machines = [m for m in mids if m.startswith(f"{sid}-{x}")]
            return {
                "grp_id": {gids[f"pool-{x}"]},
                "mach_id": {mids[m] for m in machines},
                "name": set(machines),
            }

        calls = director.calls()
        ips = {x: _pod_ips(mapi, f"{sid}{x}") for x in "ab"}
        for x, y in (("a", "b"), ("b", "a")):
            sent = [c for c in calls if c.get("client") in ips[x]]
            assert any(c["path"] == "relate/gpu" and c["method"] == "POST" for c in sent), x
            assert foreign_references(calls, ips[x], own(y)) == [], x
            assert any(foreign_references(calls, ips[x], own(x))), x  # the check sees its own names

        # Destroy of stack B (after its GPUs went back) while A holds its GPUs: it succeeds, and
        # A's GPUs stay attached.
        cb.delete_pod("train-2")
        wait_for(lambda: b2 not in director.attached(), timeout=120, what="B's GPUs back in the free pool")
        assert stacks["b"].destroy(on_output=lambda _line: None).summary.result == "succeeded"
        assert director.attached() == {a2: second[a2]}
        assert ca.running_on("train-2") == a2
        assert _ready_pods(mapi, f"{sid}b") == []
    except AssertionError:
        for p in procs:
            print(f"--- {p.name}\n{p.tail()}")
        raise
    finally:
        for c in (ca, cb):
            try:
                for p in c.core.list_namespaced_pod(c.ns).items:
                    c.core.delete_namespaced_pod(p.metadata.name, c.ns, grace_period_seconds=0)
            except ApiException:
                pass
        for x, s in stacks.items():
            _release(url, f"composer-{x}")
            try:
                s.destroy(on_output=lambda _line: None)
                s.workspace.remove_stack("lab")
            except auto.CommandError as exc:
                print(f"destroy of stack {x} failed: {exc}")
        for p in reversed(procs):
            p.stop()
        ca.cleanup()
        cb.cleanup()


def _metrics(pod: client.V1Pod) -> str:
    """``/metrics`` of a composer Pod at its pod IP (the bridge is on this host)."""
    import requests

    return requests.get(f"http://{pod.status.pod_ip}:8080/metrics", timeout=5).text


def _metric(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + " ", name + "{"))
    )


def _holder(coord: client.CoordinationV1Api, name: str, namespace: str) -> str | None:
    try:
        return coord.read_namespaced_lease(name, namespace).spec.holder_identity
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _release(url: str, tag: str) -> None:
    """Decompose every GPU carrying ``tag`` (what an operator does before destroying a stack whose
    composer holds GPUs)."""
    from dynamic_providers.director.client import DirectorClient

    with DirectorClient(url, username=SIM_USER, password=SIM_PASSWORD) as d:
        held = [g for g in d.gpus() if g.machine is not None and g.owner_tag == tag]
        for machine in sorted({g.machine for g in held if g.machine is not None}):
            d.decompose(machine, [g.name for g in held if g.machine == machine])
