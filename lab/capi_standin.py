"""Lab stand-in for the last steps Cluster API and kcm take for a ClusterDeployment of a lab
cluster: publishing the workload cluster's kubeconfig on the management cluster, then reporting
the ClusterDeployment Ready.

It is a stand-in: it creates no cluster. In a real estate kcm renders the ClusterDeployment's
ClusterTemplate into a Cluster API ``Cluster`` of the same name, the providers build the cluster,
and Cluster API writes its admin kubeconfig into the management cluster as Secret
``<cluster-name>-kubeconfig`` in the cluster's namespace, the kubeconfig under data key ``value``,
type ``cluster.x-k8s.io/secret``, labelled ``cluster.x-k8s.io/cluster-name: <cluster-name>``
(kubernetes-sigs/cluster-api: ``util/secret/consts.go`` ``Kubeconfig`` = ``"kubeconfig"`` and
``KubeconfigDataName`` = ``"value"``, ``util/secret`` ``Name`` = ``"<cluster>-<purpose>"``,
``util/kubeconfig/kubeconfig.go`` ``GenerateSecretWithOwner``; the client certificate there is
``O=system:masters``, as the lab admin's is). Programs that deploy into the child read it from there.

In the lab the cluster already runs: it is a lab control plane (``lab.settings.LabConfig.hypervisor``,
started by ``lab.controlplane`` whether or not a ClusterDeployment exists). For every
ClusterDeployment named like a lab cluster this writes that Secret in the ClusterDeployment's
namespace on the mothership, its ``value`` the cluster's admin kubeconfig with the certificates
embedded (``*-data`` fields, as Cluster API writes them), owned by the ClusterDeployment so that
it is garbage-collected with it (upstream its owner is the ``Cluster``). A Secret whose content
differs is replaced. Then, and only then, it sets the ClusterDeployment's status condition
``Ready`` = ``True`` (reason ``KubeconfigPublished``, ``observedGeneration`` its generation, other
conditions kept), as kcm reports a provisioned cluster: a program that waits for that condition
(the annotation ``pulumi.com/waitFor: condition=Ready``, :mod:`components.hypervisor_cluster`) reads
the Secret after it exists. ClusterDeployments of other names are left alone: no kubeconfig and no
Ready condition appear for them, as for a cluster that is not ready.

Pure except :class:`Reconciler` and :func:`main`.
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from domain.cluster_api import KUBECONFIG_DATA_KEY, READY_CONDITION, kubeconfig_secret_name

#: The ClusterDeployment's API group, version and resource (k0rdent kcm).
KCM_GROUP, KCM_VERSION, CLUSTER_DEPLOYMENTS = "k0rdent.mirantis.com", "v1beta1", "clusterdeployments"
#: Cluster API's Secret type and cluster-name label (``api`` ``ClusterSecretType``,
#: ``ClusterNameLabel``).
SECRET_TYPE = "cluster.x-k8s.io/secret"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"

#: kubeconfig fields that name a file, and the field that carries the same content inline.
_FILE_FIELDS = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


def _inline(entry: Mapping[str, Any], base: Path) -> dict[str, Any]:
    out = dict(entry)
    for field, data_field in _FILE_FIELDS.items():
        if field in out:
            path = Path(out.pop(field))
            out[data_field] = base64.b64encode((base / path).read_bytes()).decode()
    return out


def embedded_kubeconfig(path: Path) -> str:
    """The kubeconfig at ``path`` with every file it names (CA, client certificate and key)
    inlined as the matching ``*-data`` field, so it works on any machine that reaches its server.

    Raises:
        OSError: the kubeconfig or a file it names cannot be read.
    """
    doc = yaml.safe_load(path.read_text())
    base = path.parent
    for c in doc.get("clusters") or []:
        c["cluster"] = _inline(c["cluster"], base)
    for u in doc.get("users") or []:
        u["user"] = _inline(u["user"], base)
    return str(yaml.safe_dump(doc, sort_keys=False))


def kubeconfig_secret(deployment: Mapping[str, Any], kubeconfig: str) -> dict[str, Any]:
    """The Secret Cluster API would write for ClusterDeployment ``deployment`` (an object with
    ``metadata.name``, ``namespace`` and ``uid``): ``<name>-kubeconfig`` in its namespace, data
    ``value`` = ``kubeconfig`` (base64, as the API carries Secret data), owned by it."""
    meta = deployment["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": SECRET_TYPE,
        "metadata": {
            "name": kubeconfig_secret_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": {CLUSTER_NAME_LABEL: meta["name"]},
            "ownerReferences": [{
                "apiVersion": f"{KCM_GROUP}/{KCM_VERSION}", "kind": "ClusterDeployment",
                "name": meta["name"], "uid": meta["uid"],
            }],
        },
        "data": {KUBECONFIG_DATA_KEY: base64.b64encode(kubeconfig.encode()).decode()},
    }


#: Reason of the Ready condition the stand-in sets (a metav1.Condition reason: CamelCase).
READY_REASON = "KubeconfigPublished"


def ready_conditions(deployment: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
    """The ClusterDeployment's ``status.conditions`` with ``Ready`` = ``True`` at ``observedGeneration``
    = its ``metadata.generation``, or None when it already has that condition there (nothing to
    write). Other conditions are kept in order; ``lastTransitionTime`` (``now``, RFC 3339) changes
    only when the status changes. Pure."""
    generation = deployment["metadata"].get("generation", 0)
    conditions = list((deployment.get("status") or {}).get("conditions") or [])
    old = next((c for c in conditions if c.get("type") == READY_CONDITION), None)
    if old is not None and old.get("status") == "True" and old.get("observedGeneration") == generation:
        return None
    since = old["lastTransitionTime"] if old is not None and old.get("status") == "True" else now
    ready = {
        "type": READY_CONDITION, "status": "True", "reason": READY_REASON,
        "message": f"lab stand-in: Secret {kubeconfig_secret_name(deployment['metadata']['name'])} written",
        "lastTransitionTime": since, "observedGeneration": generation,
    }
    return [ready if c is old else c for c in conditions] if old is not None else [*conditions, ready]


class Reconciler:
    """Writes the kubeconfig Secrets on the mothership, one pass at a time.

    Args:
        api: a ``kubernetes.client.ApiClient`` of the mothership (admin).
        clusters: lab cluster name -> the kubeconfig text to publish for it.
    """

    def __init__(self, api: Any, clusters: Mapping[str, str]) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._clusters = dict(clusters)

    def _ensure(self, want: dict[str, Any]) -> bool:
        """Create ``want`` or replace the live Secret when its type, labels, owner or data differ;
        True when something was written."""
        from kubernetes.client.exceptions import ApiException

        meta = want["metadata"]
        try:
            live = self._core.read_namespaced_secret(meta["name"], meta["namespace"])
        except ApiException as exc:
            if exc.status != 404:
                raise
            self._core.create_namespaced_secret(meta["namespace"], want)
            return True
        owners = [(o.kind, o.name, o.uid) for o in live.metadata.owner_references or []]
        wanted_owners = [(o["kind"], o["name"], o["uid"]) for o in meta["ownerReferences"]]
        if (live.type == want["type"] and (live.data or {}) == want["data"] and owners == wanted_owners
                and (live.metadata.labels or {}) == meta["labels"]):
            return False
        self._core.replace_namespaced_secret(meta["name"], meta["namespace"],
                                             {**want, "metadata": {**meta, "resourceVersion":
                                                                   live.metadata.resource_version}})
        return True

    def _mark_ready(self, deployment: dict[str, Any]) -> bool:
        """Set the Ready condition through the status subresource (:func:`ready_conditions`); True
        when it was written. A conflict (the object changed since the list) is left to the next
        pass."""
        from kubernetes.client.exceptions import ApiException

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = ready_conditions(deployment, now)
        if conditions is None:
            return False
        meta = deployment["metadata"]
        body = {**deployment, "status": {**(deployment.get("status") or {}), "conditions": conditions}}
        try:
            self._custom.replace_namespaced_custom_object_status(
                KCM_GROUP, KCM_VERSION, meta["namespace"], CLUSTER_DEPLOYMENTS, meta["name"], body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False
        return True

    def run_once(self) -> list[str]:
        """One pass over every ClusterDeployment of a lab cluster: its kubeconfig Secret, then its
        Ready condition. Returns ``<namespace>/<secret>`` of each Secret written and
        ``<namespace>/<deployment> Ready`` of each condition set in it."""
        listing = self._custom.list_cluster_custom_object(KCM_GROUP, KCM_VERSION, CLUSTER_DEPLOYMENTS)
        written = []
        for deployment in listing.get("items", []):
            meta = deployment["metadata"]
            kubeconfig = self._clusters.get(meta["name"])
            if kubeconfig is None or meta.get("deletionTimestamp"):
                continue
            want = kubeconfig_secret(deployment, kubeconfig)
            if self._ensure(want):
                written.append(f"{meta['namespace']}/{want['metadata']['name']}")
            if self._mark_ready(deployment):
                written.append(f"{meta['namespace']}/{meta['name']} Ready")
        return written


def main(argv: list[str] | None = None) -> int:
    """``--kubeconfig PATH --cluster NAME=KUBECONFIG [--cluster ...] [--interval SECONDS]``:
    publish each lab cluster's kubeconfig for its ClusterDeployments, forever."""
    ap = argparse.ArgumentParser(prog="python -m lab.capi_standin", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", type=Path, required=True, help="the mothership's kubeconfig")
    ap.add_argument("--cluster", action="append", default=[], metavar="NAME=KUBECONFIG",
                    help="a lab cluster and its admin kubeconfig file (repeatable)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between passes")
    args = ap.parse_args(argv)
    from kubernetes import config

    clusters = {}
    for item in args.cluster:
        name, _, path = item.partition("=")
        clusters[name] = embedded_kubeconfig(Path(path))
    api = config.new_client_from_config(config_file=str(args.kubeconfig))
    reconciler = Reconciler(api, clusters)
    while True:
        try:
            for name in reconciler.run_once():
                print(f"capi stand-in: wrote {name}", flush=True)
        except Exception as exc:  # the API server may restart under the lab
            print(f"capi stand-in: pass failed: {exc}", file=sys.stderr, flush=True)
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
