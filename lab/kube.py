"""Kubernetes API helpers for the lab: admin client, CRD install, kwok Nodes.

Uses the maintained ``kubernetes`` Python client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from lab.processes import LabProcessError

if TYPE_CHECKING:
    from lab.settings import LabConfig

#: Annotation that tells kwok (started with a matching selector) to play this Node's kubelet.
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: Label of the lab's own blade Nodes (served by the lab Director and the lab gpu-agent);
#: tests that create Nodes of their own leave it off.
LAB_FABRIC_LABEL = ("lab.composable-gpu/fabric", "dev")


def write_kubeconfig(cfg: LabConfig, path: Path | None = None, *, token: str | None = None,
                     user: str = "lab-admin", client_cert: tuple[Path, Path] | None = None) -> Path:
    """Write a kubeconfig for the lab API server of ``cfg`` (default path ``cfg.kubeconfig``).

    With ``token`` the user authenticates with that bearer token (for example a
    ServiceAccount token from the TokenRequest API); with ``client_cert`` (cert, key paths) with
    that certificate; otherwise with the admin client cert. Returns the path (mode 0600).
    """
    path = path or cfg.kubeconfig
    crt, key = client_cert or (cfg.pki_dir / "admin.crt", cfg.pki_dir / "admin.key")
    user_entry: dict[str, str] = (
        {"token": token} if token else {"client-certificate": str(crt), "client-key": str(key)}
    )
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "lab",
                "cluster": {
                    "server": cfg.apiserver_url,
                    "certificate-authority": str(cfg.pki_dir / "ca.crt"),
                },
            }
        ],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": user}}],
        "current-context": "lab",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def admin_client(cfg: LabConfig) -> client.ApiClient:
    """An ApiClient authenticated as the lab admin (system:masters)."""
    return config.new_client_from_config(config_file=str(cfg.kubeconfig))


def _crd_documents(path: Path) -> list[dict]:
    """The CustomResourceDefinition documents of one file.

    Raises:
        LabProcessError: the file cannot be read or parsed, or holds no CRD (one line naming it).
    """
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LabProcessError(f"CRD file {path}: cannot read it: {reason}") from exc
    crds = [d for d in docs if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    if not crds:
        raise LabProcessError(f"CRD file {path}: holds no CustomResourceDefinition")
    return crds


def _api_reason(exc: ApiException) -> str:
    """The API server's one-line message of a refused request (its Status ``message``)."""
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason).replace("\n", " ")
    except ValueError:
        return f"HTTP {exc.status} {exc.reason}"


def install_crds(api: client.ApiClient, dirs: Iterable[Path], *, timeout_seconds: float = 60) -> list[str]:
    """Create or replace every CRD in ``dirs/*.yaml`` and wait until each is Established.

    Returns the CRD names, in file order.

    Raises:
        LabProcessError: a folder is missing or holds no ``*.yaml``, a file cannot be read or
            holds no CRD, the API server refuses a CRD, or one is not Established within
            ``timeout_seconds``; the one-line message names the CRD and the file it came from.
    """
    ext = client.ApiextensionsV1Api(api)
    source: dict[str, Path] = {}
    for d in dirs:
        files = sorted(d.glob("*.yaml")) if d.is_dir() else []
        if not files:
            raise LabProcessError(f"CRD folder {d}: {'holds no *.yaml file' if d.is_dir() else 'missing'}")
        for f in files:
            for doc in _crd_documents(f):
                name = doc["metadata"]["name"]
                try:
                    try:
                        ext.create_custom_resource_definition(doc)
                    except ApiException as exc:
                        if exc.status != 409:
                            raise
                        current = ext.read_custom_resource_definition(name)
                        doc["metadata"]["resourceVersion"] = current.metadata.resource_version
                        ext.replace_custom_resource_definition(name, doc)
                except ApiException as exc:
                    raise LabProcessError(
                        f"CRD {name} from {f}: the API server refused it: {_api_reason(exc)}"
                    ) from exc
                source[name] = f
    deadline = time.monotonic() + timeout_seconds
    pending = dict(source)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            crd = ext.read_custom_resource_definition(name)
            conds = {c.type: c.status for c in (crd.status.conditions or [])} if crd.status else {}
            if conds.get("Established") == "True":
                del pending[name]
        if pending:
            time.sleep(0.2)
    if pending:
        name, f = sorted(pending.items())[0]
        raise LabProcessError(f"CRD {name} from {f}: not Established after {timeout_seconds:.0f} s"
                              + (f" (and {len(pending) - 1} more)" if len(pending) > 1 else ""))
    return list(source)


def node_manifest(name: str, *, cpu: int, memory_mib: int, pods: int = 110) -> dict:
    """A kwok-managed Node named like the lab's blades (``blade-slot-1``)."""
    resources = {"cpu": str(cpu), "memory": f"{memory_mib}Mi", "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1], "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/worker": "",
                "type": "kwok",
                LAB_FABRIC_LABEL[0]: LAB_FABRIC_LABEL[1],
            },
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "nodeInfo": {"kubeletVersion": "fake", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def ensure_nodes(api: client.ApiClient, names: Sequence[str], *, cpu: int, memory_mib: int) -> None:
    """Create the kwok Nodes that do not exist yet; existing ones keep their status and get
    the lab's labels and kwok annotation back if they lost them.

    One list call finds the existing Nodes, so a new fleet costs one create per Node (not a
    read and a create: at 5,000 Nodes those reads alone took minutes beside kwok's patches)."""
    core = client.CoreV1Api(api)
    existing = {n["metadata"]["name"]: n for n in _node_items(api)}
    for name in names:
        manifest = node_manifest(name, cpu=cpu, memory_mib=memory_mib)
        node = existing.get(name)
        if node is None:
            try:
                core.create_node(manifest)
            except ApiException as exc:
                if exc.status != 409:  # created meanwhile: patched below like an existing one
                    raise
            else:
                continue
        elif _has_lab_metadata(node["metadata"], manifest["metadata"]):
            continue
        core.patch_node(name, {"metadata": {"labels": manifest["metadata"]["labels"],
                                            "annotations": manifest["metadata"]["annotations"]}})


def _node_items(api: client.ApiClient) -> list[dict]:
    """Every Node as the API's JSON (one list call, read as plain JSON: the client's models cost
    seconds of CPU at 5,000 Nodes)."""
    items: list[dict] = json.loads(client.CoreV1Api(api).list_node(_preload_content=False).data)["items"]
    return items


def _has_lab_metadata(meta: dict, wanted: dict) -> bool:
    """True when the Node metadata ``meta`` carries every label and annotation of ``wanted``
    with its value."""
    for key in ("labels", "annotations"):
        have = meta.get(key) or {}
        if any(have.get(k) != v for k, v in wanted[key].items()):
            return False
    return True


def remove_lab_nodes(api: client.ApiClient, keep: Sequence[str]) -> list[str]:
    """Delete the lab's own host Nodes (those labelled :data:`LAB_FABRIC_LABEL`) not named in
    ``keep``, e.g. the hosts' Nodes left on the mothership by a lab that registered them there.
    Nodes of tests (without the label) are left alone. Returns the names deleted."""
    core = client.CoreV1Api(api)
    listed = core.list_node(label_selector="=".join(LAB_FABRIC_LABEL)).items
    gone = sorted(n.metadata.name for n in listed if n.metadata.name not in keep)
    for name in gone:
        try:
            core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
    return gone


#: Taints the node lifecycle controller keeps on a Node until it reports Ready (the admission
#: plugin ``TaintNodesByCondition`` puts ``not-ready`` on every new Node: ``k8s.io/kubernetes``
#: v1.36.3 ``plugin/pkg/admission/nodetaint/admission.go``): kube-scheduler skips a Node carrying
#: them, so a Node is not usable before they are gone, Ready or not.
NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def nodes_ready(api: client.ApiClient, names: Sequence[str]) -> bool:
    """True when every named Node reports condition Ready=True and carries none of
    :data:`NOT_READY_TAINTS` (one list call, :func:`_node_items`; at 1,000 kwok Nodes the
    controller-manager removes those taints some time after Ready, and a pod scheduled meanwhile
    finds those Nodes tainted)."""
    wanted = set(names)
    seen = set()
    for node in _node_items(api):
        name = node["metadata"]["name"]
        if name not in wanted:
            continue
        conds = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions") or []}
        if conds.get("Ready") != "True":
            return False
        if any(t["key"] in NOT_READY_TAINTS for t in node.get("spec", {}).get("taints") or []):
            return False
        seen.add(name)
    return seen == wanted


def pod_ready(pod: client.V1Pod, *, container: str | None = None) -> bool:
    """True when ``pod`` is not terminating, is in phase Running and reports its containers
    ready (probes green): every container, or only the one named ``container`` (which must be
    listed). Reads the object only, no API call."""
    if pod.metadata.deletion_timestamp is not None or pod.status.phase != "Running":
        return False
    statuses = [c for c in (pod.status.container_statuses or []) if container is None or c.name == container]
    return bool(statuses) and all(c.ready for c in statuses)


def default_serviceaccount_ready(api: client.ApiClient, namespace: str = "default") -> bool:
    """True once kube-controller-manager has created the namespace's default ServiceAccount."""
    try:
        client.CoreV1Api(api).read_namespaced_service_account("default", namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
