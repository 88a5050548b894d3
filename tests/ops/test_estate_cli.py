"""``python -m ops.estate`` through the real pulumi CLI on a file backend: a small split estate (the
dev estate without its composer, plus a rack ``rack-c`` of one host outside any cluster), its
mothership an unreachable API server (a first preview needs none: every resource is to create)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ops.estate import main
from tests.pulumi_project import file_backend, local_project

ROOT = Path(__file__).resolve().parents[2]
DEV_PASSPHRASE = "dev-lab-only-passphrase"
_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""
_RACK_C = {"hosts": [{"name": "blade-slot-3", "role": "baremetal-worker", "boot_mac": "52:54:00:00:01:03",
                      "bmc": {"endpoint": "https://127.0.0.1:18453", "credential": "bmc"}}]}

pytestmark = pytest.mark.skipif(shutil.which("pulumi") is None, reason="pulumi CLI not on PATH (make setup)")


def _edit(path: Path, change: object) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = local_project(tmp_path)
    inv = Path(shutil.copytree(ROOT / "environments" / "dev", work / "inv"))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(_KUBECONFIG)

    def estate(d: dict) -> None:
        d["mothership"]["kubeconfig"] = str(kubeconfig)
        del d["composer"]  # its Helm chart needs a reachable API server even in a first preview

    _edit(inv / "estate.yaml", estate)
    _edit(inv / "clusters.yaml", lambda d: d["hypervisor_clusters"][0].update(kubeconfig=str(kubeconfig)))
    (inv / "hosts" / "rack-c.yaml").write_text(yaml.safe_dump(_RACK_C, sort_keys=False))
    dev = (ROOT / "Pulumi.dev.yaml").read_text()
    (work / "Pulumi.fleet.yaml").write_text(dev.replace("inventory: environments/dev", "inventory: inv"))
    commit = ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the fleet"]
    for args in (["init", "-q"], ["add", "-A"], commit):
        subprocess.run(["git", *args], cwd=work, check=True)
    (work / ".gitignore").write_text("state/\nPulumi.fleet-*.yaml\n")
    env = {"PULUMI_BACKEND_URL": file_backend(work), "PULUMI_CONFIG_PASSPHRASE": DEV_PASSPHRASE,
           "COMPOSABLE_GPU_PREFLIGHT": "off", "PULUMI_SKIP_UPDATE_CHECK": "1",
           "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    return work


def _lines(out: str) -> dict[str, str]:
    """Stack name -> its status word, from the summary."""
    return {parts[1]: parts[0] for parts in (ln.split() for ln in out.splitlines()[1:])}


def test_a_tenant_file_change_previews_only_that_tenants_stack(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(project / "inv" / "tenants" / "beta.yaml", lambda d: d["tenants"][0].update(gpu_quota=1))
    logs = project / "logs"
    status = main(["preview", "--project", str(project), "--fleet", "fleet", "--changed-since", "HEAD",
                   "--log-dir", str(logs)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[0] == "preview of 1 stack: 1 ok, 0 failed, 0 skipped"
    assert _lines(out) == {"fleet-tenant-beta": "ok"}
    assert "create " in out
    assert sorted(p.name for p in logs.iterdir()) == ["fleet-tenant-beta.log"]
    # the stacks it reads exist (its references resolve), each file carries its role; the others wait
    for role in ("platform", "hosts-lab-workers", "tenant-beta"):
        assert (project / f"Pulumi.fleet-{role}.yaml").exists()
    assert not (project / "Pulumi.fleet-hosts-rack-c.yaml").exists()
    assert not (project / "Pulumi.fleet-tenant-alpha.yaml").exists()
    assert "composable-gpu:role: tenant:beta" in (project / "Pulumi.fleet-tenant-beta.yaml").read_text()


def test_one_broken_host_stack_fails_alone(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "--project", str(project), "--fleet", "fleet", "--stack", "hosts:rack-c"]) == 0
    capsys.readouterr()
    # rack-c's own stack file gets a key the program refuses: only that stack's run fails
    broken = {"composable-gpu:idle": "1"}
    _edit(project / "Pulumi.fleet-hosts-rack-c.yaml", lambda d: d["config"].update(broken))
    status = main(["preview", "--project", str(project), "--fleet", "fleet", "--parallel", "2"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert out.splitlines()[0] == "preview of 5 stacks: 4 ok, 1 failed, 0 skipped", out
    assert _lines(out) == {
        "fleet-platform": "ok", "fleet-hosts-lab-workers": "ok", "fleet-hosts-rack-c": "failed",
        "fleet-tenant-alpha": "ok", "fleet-tenant-beta": "ok",
    }
    failed = next(ln for ln in out.splitlines() if "fleet-hosts-rack-c" in ln)
    assert "composable-gpu:idle: unknown config key" in failed
    assert os.environ["PULUMI_BACKEND_URL"].startswith("file://")


def test_the_review_holds_each_stacks_summary_and_the_policy_packs_verdict_on_each_slice(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = project / "review"
    status = main(["preview", "--project", str(project), "--fleet", "fleet", "--stack", "hosts:lab-workers",
                   "--report-dir", str(report), "--policy-pack", str(ROOT / "policies"),
                   "--policy-pack-config", str(ROOT / "policies" / "config" / "lab.json")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert _lines(out) == {"fleet-hosts-lab-workers": "ok", "fleet-tenant-alpha": "ok",
                           "fleet-tenant-beta": "ok"}, out
    assert sorted(p.name for p in report.iterdir()) == [
        "estate-review.md", "fleet-hosts-lab-workers.md", "fleet-tenant-alpha.md", "fleet-tenant-beta.md"]
    hosts = (report / "fleet-hosts-lab-workers.md").read_text()
    assert hosts.startswith("## Pulumi preview: `fleet-hosts-lab-workers` (hosts:lab-workers)\n")
    assert "✅ **Preview succeeded** · ✅ all 15 policies passed" in hosts
    assert "`blade-slot-1`" in hosts and "`alpha`" not in hosts
    # a tenant's slice holds its TenantCluster but not the HypervisorCluster its workers run on: the
    # pack leaves that cluster's hosts to the host group's stack, whose HypervisorCluster names the
    # estate's tenant clusters on it (policies/rules/hosts.py, tests/policies/test_rules.py)
    beta = (report / "fleet-tenant-beta.md").read_text()
    assert "✅ **Preview succeeded** · ✅ all 15 policies passed" in beta
    review = (report / "estate-review.md").read_text()
    assert review.startswith("# Estate preview: 3 ok, 0 failed, 0 skipped\n")
    assert out.strip() in review  # the one-screen summary, then each stack's own, in its order
    sections = [hosts, (report / "fleet-tenant-alpha.md").read_text(), beta]
    where = [review.index(s.rstrip("\n")) for s in sections]
    assert where == sorted(where)


def test_a_tenant_on_a_cluster_of_a_host_group_never_deployed_previews_and_its_up_names_that_stack(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # lab-workers reached through its kubeconfig Secret: beta reads its ClusterDeployment's ID from
    # fleet-hosts-lab-workers, which exists (the command creates it) but was never deployed
    _edit(project / "inv" / "clusters.yaml", lambda d: d["hypervisor_clusters"][0].pop("kubeconfig"))
    logs = project / "logs"
    status = main(["preview", "--project", str(project), "--fleet", "fleet", "--stack", "tenant:beta",
                   "--log-dir", str(logs)])
    out = capsys.readouterr().out
    assert status == 0, out + (logs / "fleet-tenant-beta.log").read_text()
    assert _lines(out) == {"fleet-tenant-beta": "ok"}
    log = (logs / "fleet-tenant-beta.log").read_text()
    assert "stack fleet-hosts-lab-workers has no output cluster_deployments['lab-workers']" in log
    assert "KeyError" not in log
    status = main(["up", "--project", str(project), "--fleet", "fleet", "--stack", "tenant:beta",
                   "--log-dir", str(logs)])
    out = capsys.readouterr().out
    assert status == 1 and _lines(out) == {"fleet-tenant-beta": "failed"}, out
    assert "deploy fleet-hosts-lab-workers first" in (logs / "fleet-tenant-beta.log").read_text()
