"""The capi stand-in's Secret, offline: Cluster API's name, key, type, label and an owner, and a
kubeconfig that carries its certificates inline (so it works away from the lab's files)."""

from __future__ import annotations

import base64
from pathlib import Path

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
