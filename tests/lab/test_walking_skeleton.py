"""The walking skeleton: preview, up and destroy through the Automation API against
the lab, with a pulumi-kubernetes Namespace and a Python dynamic-provider resource."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pulumi import automation as auto

from lab import kube

pytestmark = [pytest.mark.lab, pytest.mark.cli]

PROGRAM = '''
import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CreateResult, Resource, ResourceProvider


class ConfigMapMarkerProvider(ResourceProvider):
    """Creates a ConfigMap through the kubernetes client (runs in the dynamic-provider process)."""

    def _api(self, kubeconfig):
        from kubernetes import client, config
        return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))

    def create(self, props):
        body = {"metadata": {"name": props["name"]}, "data": {"owner": "walking-skeleton"}}
        self._api(props["kubeconfig"]).create_namespaced_config_map(props["namespace"], body)
        return CreateResult(id_=f"{props['namespace']}/{props['name']}", outs=dict(props))

    def delete(self, id, props):
        from kubernetes.client.exceptions import ApiException
        try:
            self._api(props["kubeconfig"]).delete_namespaced_config_map(props["name"], props["namespace"])
        except ApiException as exc:
            if exc.status != 404:
                raise


class ConfigMapMarker(Resource):
    def __init__(self, name, *, kubeconfig, namespace, opts=None):
        super().__init__(ConfigMapMarkerProvider(), name,
                         {"kubeconfig": kubeconfig, "namespace": namespace, "name": name}, opts)


cfg = pulumi.Config()
kubeconfig = cfg.require("kubeconfig")
provider = k8s.Provider("lab", kubeconfig=open(kubeconfig).read())
ns = k8s.core.v1.Namespace("skeleton", metadata={"name": "skeleton"},
                           opts=pulumi.ResourceOptions(provider=provider))
marker = ConfigMapMarker("skeleton-marker", kubeconfig=kubeconfig, namespace=ns.metadata["name"])
pulumi.export("namespace", ns.metadata["name"])
pulumi.export("marker", marker.id)
'''


def test_preview_up_destroy_through_automation_api(lab, tmp_path: Path) -> None:
    venv = Path(__file__).resolve().parents[2] / ".venv"
    (tmp_path / "Pulumi.yaml").write_text(textwrap.dedent(f"""\
        name: walking-skeleton
        runtime:
          name: python
          options:
            virtualenv: {venv}
        """))
    (tmp_path / "__main__.py").write_text(PROGRAM)
    (tmp_path / "state").mkdir()
    env = {"PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}", "PULUMI_CONFIG_PASSPHRASE": "test-only"}
    stack = auto.create_or_select_stack(
        stack_name="dev", work_dir=str(tmp_path), opts=auto.LocalWorkspaceOptions(env_vars=env)
    )
    stack.set_config("kubeconfig", auto.ConfigValue(str(lab.kubeconfig)))
    core = client.CoreV1Api(kube.admin_client(lab))

    preview = stack.preview()
    assert preview.change_summary.get("create") == 4  # stack, provider, namespace, marker
    with pytest.raises(ApiException):
        core.read_namespace("skeleton")  # preview changed nothing

    up = stack.up()
    assert up.summary.result == "succeeded"
    assert up.outputs["namespace"].value == "skeleton"
    assert up.outputs["marker"].value == "skeleton/skeleton-marker"
    cm = core.read_namespaced_config_map("skeleton-marker", "skeleton")
    assert cm.data == {"owner": "walking-skeleton"}

    again = stack.preview()
    assert set(again.change_summary) == {"same"}  # a second run changes nothing

    down = stack.destroy()
    assert down.summary.result == "succeeded"
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("skeleton-marker", "skeleton")
    assert gone.value.status == 404
