"""A composer that runs on the mothership and serves a child cluster (``composer.runs_on:
mothership``): under the Pulumi mocks, its chart, namespace and Secrets go through the mothership's
provider, its Lease namespace through the child's, the child's kubeconfig (read from its Cluster API
Secret) reaches the chart only as a Secret name and stays a Pulumi secret, with the server the Pods
dial; plus the pure kubeconfig rewrite and the config rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components import Estate, EstateArgs
from components.cluster_access import with_server
from stack_config import EstateConfigError, load_estate
from tests.components.conftest import (
    KUBECONFIG_MARKER,
    install_mocks,
    is_secret,
    plain_occurrences,
    run,
    unwrap,
)
from tests.config.factories import valid_estate
from tests.kubeconfigs import write_kubeconfig

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- {name: one, cluster: {server: https://127.0.0.1:16543, certificate-authority-data: Q0E=}}
- {name: two, cluster: {server: https://10.0.0.2:6443}}
users:
- {name: admin, user: {token: secret-token}}
- {name: other, user: {token: other-token}}
contexts:
- {name: admin@one, context: {cluster: one, user: admin}}
- {name: other@two, context: {cluster: two, user: other}}
current-context: admin@one
"""


def test_with_server_keeps_one_context_and_replaces_its_server() -> None:
    doc = yaml.safe_load(with_server(KUBECONFIG, server="10.89.0.1:16543"))
    assert doc["current-context"] == "admin@one"
    assert doc["clusters"] == [
        {
            "name": "one",
            "cluster": {"server": "https://10.89.0.1:16543", "certificate-authority-data": "Q0E="},
        }
    ]
    assert doc["users"] == [{"name": "admin", "user": {"token": "secret-token"}}]
    other = yaml.safe_load(with_server(KUBECONFIG, context="other@two"))
    assert other["clusters"][0]["cluster"]["server"] == "https://10.0.0.2:6443"  # no server: kept
    assert other["users"][0]["user"]["token"] == "other-token"


def test_with_server_names_a_missing_context_not_the_credentials() -> None:
    with pytest.raises(ValueError, match="no context 'nope'") as err:
        with_server(KUBECONFIG, context="nope")
    assert "token" not in str(err.value)
    with pytest.raises(ValueError, match="not a mapping"):
        with_server("just text")


def _hosted() -> dict[str, Any]:
    raw = valid_estate()
    raw["composer"].update({"runs_on": "mothership", "api_server": "10.89.0.1:16543"})
    return raw


def test_a_composer_on_the_mothership_reaches_its_child_through_a_secret(tmp_path: Path) -> None:
    recorder = install_mocks()
    cfg = load_estate(_hosted())
    run(lambda: Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path)))

    def provider(r: Any) -> str:
        return str(r.provider).split("::")[-2]

    chart = recorder.named("composer", "kubernetes:helm.sh/v4:Chart")
    assert provider(chart) == "estate-mothership"
    values = unwrap(chart.inputs["values"])
    assert values["targetCluster"] == {
        "kubeconfigSecret": "composer-target-kubeconfig",
        "kubeconfigKey": "value",
    }
    assert values["webhook"] == {"enabled": False}
    assert "kubernetesService" not in values  # api_server is in the kubeconfig instead
    for name in ("composer-namespace", "composer-director-credentials"):
        assert provider(recorder.named(name)) == "estate-mothership", name
    lease_ns = recorder.named("composer-lease-namespace", "kubernetes:core/v1:Namespace")
    assert provider(lease_ns) == "estate-cluster-workers"
    assert lease_ns.inputs["metadata"]["name"] == "composer-system"

    secret = recorder.named("composer-target-kubeconfig", "kubernetes:core/v1:Secret")
    assert provider(secret) == "estate-mothership"
    assert secret.inputs["metadata"]["namespace"] == "composer-system"
    assert is_secret(secret.inputs["stringData"])
    kubeconfig = yaml.safe_load(unwrap(secret.inputs["stringData"])["value"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://10.89.0.1:16543"
    assert kubeconfig["users"][0]["user"]["token"].startswith(KUBECONFIG_MARKER)  # workers' own
    assert "infra/workers-kubeconfig" in kubeconfig["users"][0]["user"]["token"]
    assert plain_occurrences([r.inputs for r in recorder.registrations], KUBECONFIG_MARKER) == []


def test_runs_on_mothership_for_a_composer_of_the_mothership_is_refused() -> None:
    raw = _hosted()
    raw["composer"]["target_cluster"] = "mothership"
    raw["composer"].pop("pools")
    with pytest.raises(EstateConfigError, match=r"composer\.runs_on: the composer targets the mothership"):
        load_estate(raw)


def test_an_adopted_kubeconfig_gets_the_files_it_names_inline(tmp_path: Path) -> None:
    from components.cluster_access import inline_files

    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_bytes(b"CA PEM")
    (tmp_path / "admin.key").write_bytes(b"KEY PEM")
    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        "https://127.0.0.1:16543",
        cluster={"certificate-authority": str(tmp_path / "pki" / "ca.crt")},
        user={"client-key": "admin.key", "token": "t"},  # relative
    )
    doc = yaml.safe_load(inline_files(path))
    assert doc["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:16543",
        "certificate-authority-data": "Q0EgUEVN",
    }  # b64 "CA PEM"
    assert doc["users"][0]["user"] == {"client-key-data": "S0VZIFBFTQ==", "token": "t"}
    (tmp_path / "admin.key").unlink()
    with pytest.raises(OSError):
        inline_files(path)
