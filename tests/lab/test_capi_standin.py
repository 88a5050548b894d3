"""The capi stand-in's Secret, offline: Cluster API's name, key, type, label and an owner, and a
kubeconfig that carries its certificates inline (so it works away from the lab's files)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from kubernetes import config

from lab import capi_standin, kube
from lab.settings import LabConfig

DEPLOYMENT = {"apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ClusterDeployment",
              "metadata": {"name": "lab-workers", "namespace": "composable-infra", "uid": "uid-1"},
              "spec": {"template": "capm3-hosted-cp-0-1-0"}}


def test_secret_is_the_one_cluster_api_writes() -> None:
    secret = capi_standin.kubeconfig_secret(DEPLOYMENT, "apiVersion: v1\nkind: Config\n")
    assert secret["metadata"]["name"] == "lab-workers-kubeconfig"
    assert secret["metadata"]["namespace"] == "composable-infra"
    assert secret["type"] == "cluster.x-k8s.io/secret"
    assert secret["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "lab-workers"}
    assert list(secret["data"]) == ["value"]
    assert base64.b64decode(secret["data"]["value"]).decode() == "apiVersion: v1\nkind: Config\n"
    assert secret["metadata"]["ownerReferences"] == [{
        "apiVersion": "k0rdent.mirantis.com/v1beta1", "kind": "ClusterDeployment",
        "name": "lab-workers", "uid": "uid-1"}]


def test_embedded_kubeconfig_inlines_every_file(tmp_path: Path) -> None:
    cfg = LabConfig(lab_dir=tmp_path / "lab")
    for name, text in (("ca.crt", "CA"), ("admin.crt", "CERT"), ("admin.key", "KEY")):
        cfg.pki_dir.mkdir(parents=True, exist_ok=True)
        (cfg.pki_dir / name).write_text(text)
    path = kube.write_kubeconfig(cfg)
    doc = yaml.safe_load(capi_standin.embedded_kubeconfig(path))
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    assert cluster == {"server": cfg.apiserver_url,
                       "certificate-authority-data": base64.b64encode(b"CA").decode()}
    assert user == {"client-certificate-data": base64.b64encode(b"CERT").decode(),
                    "client-key-data": base64.b64encode(b"KEY").decode()}
    assert "pki" not in yaml.safe_dump(doc)  # no path into the lab's folder is left
    loader = config.kube_config.KubeConfigLoader(doc)
    assert loader.current_context["name"] == "lab"


def _deployment(generation: int, conditions: list[dict] | None = None) -> dict:
    meta = {**DEPLOYMENT["metadata"], "generation": generation}
    return {**DEPLOYMENT, "metadata": meta, "status": {"conditions": conditions or []}}


OTHER = {"type": "ServicesInReadyState", "status": "False", "reason": "Pending", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}


def test_ready_is_set_at_the_generation_keeping_other_conditions() -> None:
    conditions = capi_standin.ready_conditions(_deployment(3, [OTHER]), "2026-01-02T00:00:00Z")
    assert conditions is not None
    assert conditions[0] == OTHER
    ready = conditions[1]
    assert (ready["type"], ready["status"], ready["observedGeneration"]) == ("Ready", "True", 3)
    assert ready["lastTransitionTime"] == "2026-01-02T00:00:00Z"
    assert ready["reason"] == "KubeconfigPublished"  # a metav1.Condition reason: CamelCase


def test_ready_is_written_again_only_for_a_new_generation() -> None:
    first = capi_standin.ready_conditions(_deployment(1), "2026-01-02T00:00:00Z")
    assert first is not None
    assert capi_standin.ready_conditions(_deployment(1, first), "2026-01-03T00:00:00Z") is None
    again = capi_standin.ready_conditions(_deployment(2, first), "2026-01-03T00:00:00Z")
    assert again is not None and len(again) == 1
    # the status did not change: the transition time stays
    assert (again[0]["observedGeneration"], again[0]["lastTransitionTime"]) == (2, "2026-01-02T00:00:00Z")


class _FakeApi:
    """The two API groups the reconciler calls, recording the order of writes."""

    def __init__(self, deployment: dict) -> None:
        self.deployment = deployment
        self.calls: list[str] = []

    def list_cluster_custom_object(self, *_args: Any) -> dict:
        return {"items": [self.deployment]}

    def read_namespaced_secret(self, name: str, namespace: str) -> Any:
        from kubernetes.client.exceptions import ApiException

        raise ApiException(status=404)

    def create_namespaced_secret(self, namespace: str, body: dict) -> None:
        self.calls.append(f"secret {namespace}/{body['metadata']['name']}")

    def replace_namespaced_custom_object_status(self, group: str, version: str, namespace: str,
                                                plural: str, name: str, body: dict) -> None:
        ready = body["status"]["conditions"][-1]
        self.calls.append(f"status {plural} {namespace}/{name} {ready['type']}={ready['status']}")


def test_reconciler_sets_ready_after_writing_the_secret() -> None:
    fake = _FakeApi(_deployment(1))
    reconciler = object.__new__(capi_standin.Reconciler)
    reconciler._core = reconciler._custom = fake
    reconciler._clusters = {"lab-workers": "apiVersion: v1\nkind: Config\n"}
    written = reconciler.run_once()
    assert fake.calls == ["secret composable-infra/lab-workers-kubeconfig",
                          "status clusterdeployments composable-infra/lab-workers Ready=True"]
    assert written == ["composable-infra/lab-workers-kubeconfig", "composable-infra/lab-workers Ready"]


def test_other_clusters_get_neither_secret_nor_ready() -> None:
    fake = _FakeApi({**_deployment(1), "metadata": {**_deployment(1)["metadata"], "name": "tenant-k8s"}})
    reconciler = object.__new__(capi_standin.Reconciler)
    reconciler._core = reconciler._custom = fake
    reconciler._clusters = {"lab-workers": "apiVersion: v1\nkind: Config\n"}
    assert reconciler.run_once() == [] and fake.calls == []
