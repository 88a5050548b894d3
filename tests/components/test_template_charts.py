"""The platform's ClusterTemplate charts (``charts/templates/``) render, with the real Helm, objects
the upstream CRDs accept, for every cluster of every stack, from exactly the ``spec.config`` the
program gives each ClusterDeployment; and a value the chart's ``values.schema.json`` forbids stops
the render in one line."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components import Estate, EstateArgs
from stack_config.stack_file import load_stack_file
from tests.components.conftest import Recorder
from tests.components.crd_schemas import validation_errors

ROOT = Path(__file__).resolve().parents[2]
CHARTS = ROOT / "charts" / "templates"
CD = "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment"
STACKS = ["Pulumi.dev.yaml", "Pulumi.staging.yaml", "Pulumi.production.yaml"]

pytestmark = pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")


def helm_template(
    chart: str, release: str, values: dict[str, Any], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``helm template <release> charts/templates/<chart> -f <values>`` in namespace ``infra``."""
    values_file = tmp_path / f"{release}-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    return subprocess.run(
        ["helm", "template", release, str(CHARTS / chart), "--namespace", "infra", "-f", str(values_file)],
        capture_output=True, text=True, timeout=60, check=False,
    )


def _deployments(mocks: Recorder, stack_file: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(name, spec)`` of every ClusterDeployment the program makes for ``stack_file``."""
    cfg = load_stack_file(ROOT / stack_file, require_secrets=False)

    @pulumi.runtime.test
    def build() -> None:
        Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path))

    build()
    for r in mocks.of_type(CD):
        yield r.inputs["metadata"]["name"], r.inputs["spec"]


@pytest.mark.parametrize("stack_file", STACKS)
def test_platform_charts_render_crd_valid_objects_for_every_cluster(
    mocks: Recorder, stack_file: str, tmp_path: Path
) -> None:
    rendered: dict[str, set[str]] = {}
    for name, spec in _deployments(mocks, stack_file, tmp_path):
        if not (CHARTS / spec["template"]).is_dir():
            continue  # an upstream k0rdent template (kubevirt-hosted-cp)
        out = helm_template(spec["template"], name, spec["config"], tmp_path)
        assert out.returncode == 0, out.stderr
        docs = [d for d in yaml.safe_load_all(out.stdout) if d]
        problems = {f"{d['kind']}/{d['metadata']['name']}": validation_errors(d) for d in docs}
        assert {k: v for k, v in problems.items() if v} == {}, (name, spec["template"])
        rendered[spec["template"]] = {d["kind"] for d in docs}
    assert rendered.get("capm3-hosted-cp") == {
        "Cluster", "Metal3Cluster", "K0smotronControlPlane", "K0sWorkerConfigTemplate",
        "Metal3MachineTemplate", "MachineDeployment",
    }
    assert rendered.get("dpu-hosted-cp") == {"Cluster", "K0smotronControlPlane"}


def test_kernel_args_reach_the_bootstrap_data_and_the_hosts_are_claimed_by_label(
    mocks: Recorder, tmp_path: Path
) -> None:
    """The hosts' kernel arguments and blacklist are files and commands of the workers' k0s
    bootstrap config (kept by CAPM3, unlike BareMetalHost userData)."""
    name, spec = next((n, s) for n, s in _deployments(mocks, "Pulumi.dev.yaml", tmp_path)
                      if s["template"] == "capm3-hosted-cp")
    out = helm_template("capm3-hosted-cp", name, spec["config"], tmp_path)
    docs = {d["kind"]: d for d in yaml.safe_load_all(out.stdout) if d}
    worker = docs["K0sWorkerConfigTemplate"]["spec"]["template"]["spec"]
    files = {f["path"]: f["content"] for f in worker["files"]}
    assert files["/etc/default/grub.d/90-composable-gpu.cfg"] == (
        'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} intel_iommu=on iommu=pt pci=realloc"\n')
    assert files["/etc/modprobe.d/blacklist-nouveau.conf"] == "blacklist nouveau\noptions nouveau modeset=0\n"
    assert worker["preK0sCommands"] == ["update-initramfs -u", "update-grub"]
    assert worker["postK0sCommands"][0].startswith("shutdown -r +1")
    assert worker["args"] == ["--labels=nvidia.com/gpu.workload.config=container"]
    selector = docs["Metal3MachineTemplate"]["spec"]["template"]["spec"]["hostSelector"]
    assert selector == {"matchLabels": {"composable-gpu.io/cluster": name}}
    assert docs["Metal3Cluster"]["metadata"]["annotations"] == {
        "cluster.x-k8s.io/managed-by": "k0smotron",
        "metal3.io/metal3-label-sync-prefixes": "nvidia.com",
    }
    md = docs["MachineDeployment"]["spec"]
    assert md["replicas"] == spec["config"]["workersNumber"]
    assert md["template"]["spec"]["bootstrap"]["configRef"]["name"] == f"{name}-machine-config"
    # without kernel args there is nothing to write and no reboot
    worker_values = {**spec["config"]["worker"], "kernelArgs": [], "blacklistedModules": []}
    out = helm_template("capm3-hosted-cp", name, {**spec["config"], "worker": worker_values}, tmp_path)
    plain = {d["kind"]: d for d in yaml.safe_load_all(out.stdout) if d}
    assert set(plain["K0sWorkerConfigTemplate"]["spec"]["template"]["spec"]) == {"version", "args"}


@pytest.mark.parametrize("chart", ["capm3-hosted-cp", "dpu-hosted-cp"])
def test_a_value_the_schema_forbids_stops_the_render_in_one_line(chart: str, tmp_path: Path) -> None:
    values = yaml.safe_load((CHARTS / chart / "values.yaml").read_text())
    if chart == "capm3-hosted-cp":
        values["worker"]["hostSelector"]["matchLabels"] = {"composable-gpu.io/cluster": "c"}
    assert helm_template(chart, "c", values, tmp_path).returncode == 0
    values["controlPlaneNumber"] = 2  # an even etcd member count has no majority to spare
    out = helm_template(chart, "c", values, tmp_path)
    assert out.returncode != 0 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("- at ")] == [
        "- at '/controlPlaneNumber': value must be one of 1, 3, 5, 7"
    ], out.stderr
