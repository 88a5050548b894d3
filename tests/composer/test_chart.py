"""The composer Helm chart: ``helm lint`` and ``helm template`` clean, least privilege, no
plaintext password, hardened pod, schema-validated values, settings the controller accepts."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from pydantic import ValidationError

from composer.shell.config import Settings

CHART = Path(__file__).resolve().parents[2] / "charts" / "composer"

pytestmark = pytest.mark.skipif(shutil.which("helm") is None, reason="helm not built: run `make setup`")


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["helm", *args], capture_output=True, text=True, timeout=60, check=check)


def render(*sets: str) -> list[dict[str, Any]]:
    argv = ["template", "gpu", str(CHART), "--namespace", "gpu-composer"]
    for s in sets:
        argv += ["--set", s]
    return [d for d in yaml.safe_load_all(helm(*argv).stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_helm_lint_is_clean():
    for extra in (["--set", "director.password=x"], ["--set", "director.existingSecret=s", "--strict"]):
        out = helm("lint", str(CHART), *extra, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "0 chart(s) failed" in out.stdout
        assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout


def test_dra_rbac_grants_exactly_the_dra_calls():
    (cr,) = by_kind(render("director.existingSecret=s", "dra.rbac=true"), "ClusterRole")
    dra = [r for r in cr["rules"] if r["apiGroups"] == ["resource.k8s.io"]]
    got = {(tuple(r["resources"]), tuple(r.get("resourceNames", ()))): sorted(r["verbs"]) for r in dra}
    assert got == {
        (("resourceclaims",), ()): ["list", "watch"],
        (("resourceclaims/status",), ()): ["patch"],
        # status.devices written from no particular node (DRAResourceClaimGranularStatusAuthorization)
        (("resourceclaims/driver",), ("gpu.composer.liqid.io",)): ["arbitrary-node:patch"],
        # server-side apply of a missing object is authorised as create too
        (("resourceslices",), ()): ["create", "delete", "list", "patch", "watch"],
        (("deviceclasses",), ()): ["create", "get", "patch"],
    }
    sets = ("--set", "director.existingSecret=s", "--set", "dra.rbac=yes")
    bad = helm("template", "gpu", str(CHART), *sets, check=False)
    assert bad.returncode != 0 and "/dra/rbac': got string, want boolean" in bad.stderr


def test_rbac_is_least_privilege():
    docs = render("director.existingSecret=composer-director")
    (cr,) = by_kind(docs, "ClusterRole")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): sorted(r["verbs"]) for r in cr["rules"]}
    assert rules == {
        (("",), ("pods",)): ["list", "patch", "watch"],
        (("",), ("pods/status",)): ["patch"],  # nominatedNodeName (composer.nominateNode auto)
        (("",), ("nodes",)): ["get", "list", "patch", "watch"],
        (("",), ("namespaces",)): ["list", "watch"],
        (("",), ("events",)): ["create", "get", "patch"],  # a repeated cause counts on one Event
    }
    assert not any("resource.k8s.io" in r["apiGroups"] for r in cr["rules"])  # DRA off by default
    (off,) = by_kind(render("director.existingSecret=s", "composer.nominateNode=off"), "ClusterRole")
    assert [r for r in off["rules"] if "pods/status" in r["resources"]] == []
    text = yaml.safe_dump_all(docs)
    assert "cluster-admin" not in text and "'*'" not in text and '"*"' not in text
    (crb,) = by_kind(docs, "ClusterRoleBinding")
    assert crb["roleRef"]["name"] == cr["metadata"]["name"]
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "Role")}
    lease = roles["gpu-composer-lease"]
    assert lease["metadata"]["namespace"] == "gpu-composer"
    assert {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["gpu-composer"],
        "verbs": ["get", "update"],
    } in lease["rules"]
    timers = roles["gpu-composer-timers"]  # the orphan timers the next leader reads
    assert timers["metadata"]["namespace"] == "gpu-composer"
    assert timers["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["gpu-composer-orphans"],
         "verbs": ["get", "patch"]},
    ]
    plugin = roles["gpu-composer-device-plugin"]
    assert plugin["metadata"]["namespace"] == "gpu-operator"
    assert plugin["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]
    # switched off: no Role in the device-plugin namespace, no Lease Role (the timers' stays: a
    # restarted single replica reads them too)
    docs = render(
        "director.existingSecret=s",
        "devicePlugin.restart=false",
        "leaderElection.enabled=false",
        "replicaCount=1",
    )
    assert [r["metadata"]["name"] for r in by_kind(docs, "Role")] == ["gpu-composer-timers"]


def test_password_never_rendered_in_plaintext():
    docs = render("director.existingSecret=composer-director")
    assert [d["metadata"]["name"] for d in by_kind(docs, "Secret")] == ["gpu-composer-webhook-tls"]
    (dep,) = by_kind(docs, "Deployment")
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["COMPOSER_DIRECTOR_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "composer-director",
        "key": "password",
    }
    docs = render("director.password=Sup3r-S3cret", "webhook.enabled=false")
    (secret,) = by_kind(docs, "Secret")
    assert base64.b64decode(secret["data"]["password"]).decode() == "Sup3r-S3cret"
    assert "Sup3r-S3cret" not in yaml.safe_dump_all(docs)


def test_director_credentials_are_exactly_one_of_existing_secret_or_password():
    """Neither set would point the Pods at a Secret "<fullname>-director" nobody made (the Pods fail
    only at runtime); both set would silently ignore the password. Both are refused at render time
    (helm template/install/upgrade), naming the values to set."""
    neither = helm("template", "gpu", str(CHART), "--namespace", "gpu-composer", check=False)
    assert neither.returncode != 0
    assert "director.existingSecret" in neither.stderr and "director.password" in neither.stderr
    assert "neither is set" in neither.stderr
    # empty strings are "not set", as in values.yaml
    empty = helm("template", "gpu", str(CHART), "--set", "director.existingSecret=", "--set",
                 "director.password=", check=False)
    assert empty.returncode != 0 and "neither is set" in empty.stderr
    both = helm("template", "gpu", str(CHART), "--set", "director.existingSecret=s", "--set",
                "director.password=Sup3r-S3cret", check=False)
    assert both.returncode != 0
    assert "director.existingSecret and director.password are both set" in both.stderr
    assert "Sup3r-S3cret" not in both.stderr, "the password is never echoed"
    assert "kubectl -n gpu-composer create secret generic liqid-director --from-literal=password=" in (
        neither.stderr
    )
    # helm lint only logs a template's fail ([INFO], Helm's lint mode), so it shows but passes
    lint = helm("lint", str(CHART), check=False)
    assert "[INFO] Fail: director.existingSecret or director.password is required" in lint.stderr
    # exactly one: the Pods read the Secret named by existingSecret, or the chart's own
    own = "gpu-composer-director"
    for value, secret in (("director.existingSecret=s", "s"), ("director.password=x", own)):
        (dep,) = by_kind(render(value), "Deployment")
        env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["COMPOSER_DIRECTOR_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == secret


def test_pod_is_hardened_and_probed():
    (dep,) = by_kind(render("director.existingSecret=s"), "Deployment")
    spec = dep["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert spec["securityContext"]["runAsNonRoot"] is True
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert spec["serviceAccountName"] == "gpu-composer"
    services = {d["metadata"]["name"]: d for d in by_kind(render("director.existingSecret=s"), "Service")}
    assert services["gpu-composer-metrics"]["spec"]["ports"][0]["targetPort"] == "metrics"
    assert services["gpu-composer-webhook"]["spec"]["ports"][0]["targetPort"] == "webhook"


def test_schema_rejects_bad_values():
    for bad in (
        "composer.idleTimeoutSeconds=-5",
        "director.url=not-a-url",
        "securityContext.runAsNonRoot=false",
        "composer.unknownKey=1",
        "metrics.port=80",
        "webhook.url=http://127.0.0.1:9443",
        "webhook.timeoutSeconds=60",
    ):
        out = helm(
            "template", "gpu", str(CHART), "--set", "director.existingSecret=s", "--set", bad, check=False
        )
        assert out.returncode != 0, bad
    out = helm(
        "template",
        "gpu",
        str(CHART),
        "--set",
        "director.existingSecret=s",
        "--set",
        "replicaCount=2",
        "--set",
        "leaderElection.enabled=false",
        check=False,
    )
    assert out.returncode != 0 and "leaderElection" in out.stderr


def test_rendered_environment_is_accepted_by_the_controller(monkeypatch):
    docs = render(
        "director.existingSecret=s",
        "composer.pools[0].name=team-a",
        "composer.pools[0].quotaGpus=4",
        "composer.excludedDevices[0]=gpu7",
        "composer.idleTimeoutSeconds=90",
        "composer.unitsPerGpu.nvidia\\.com/gpu\\.shared=4",
        "composer.maxGpusPerNode=8",
        "composer.batchIdleSeconds=1",
        "composer.batchMaxSeconds=3",
        "composer.reservationTimeoutSeconds=120",
        "composer.nominateNode=on",
    )
    (dep,) = by_kind(docs, "Deployment")
    for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "value" in e:
            monkeypatch.setenv(e["name"], e["value"])
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "from-secret")
    s = Settings()
    assert s.idle_timeout_seconds == 90 and s.max_gpus_per_node == 8
    assert s.policy().quotas == {"team-a": 4} and s.policy().excluded == {"gpu7"}
    assert s.units_per_gpu == {"nvidia.com/gpu.shared": 4}
    assert s.director_url == "http://liqid-director:8080" and s.probe_port == 8080
    assert (
        s.batch_idle_seconds == 1
        and s.batch_max_seconds == 3
        and s.policy().reservation_timeout_seconds == 120
    )
    assert s.webhook_port == 9443 and str(s.webhook_cert_file) == "/etc/composer/webhook/tls.crt"
    assert s.nominate_node == "on"


def test_webhook_configuration_tls_and_opt_outs():
    docs = render("director.existingSecret=s", "composer.namespaces[0]=ml")
    (hook_cfg,) = by_kind(docs, "MutatingWebhookConfiguration")
    (hook,) = hook_cfg["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert hook["clientConfig"]["service"] == {
        "name": "gpu-composer-webhook",
        "namespace": "gpu-composer",
        "path": "/mutate-pods",
        "port": 443,
    }
    opt_out = {"key": "composer.liqid.io/gating", "operator": "NotIn", "values": ["disabled"]}
    assert opt_out in hook["namespaceSelector"]["matchExpressions"]
    assert {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml"]} in (
        hook["namespaceSelector"]["matchExpressions"]
    )
    assert hook["objectSelector"]["matchExpressions"] == [opt_out]
    assert "nvidia.com/gpu" in hook["matchConditions"][0]["expression"]
    # the CA bundle is the CA that signed the mounted serving certificate
    secret = next(d for d in by_kind(docs, "Secret") if d["metadata"]["name"] == "gpu-composer-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    crt = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    crt.verify_directly_issued_by(ca)
    names = crt.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "gpu-composer-webhook.gpu-composer.svc" in names.get_values_for_type(x509.DNSName)
    assert int(secret["metadata"]["annotations"]["composer.liqid.io/not-after"]) > 0
    (dep,) = by_kind(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert {"name": "webhook-tls", "secret": {"secretName": "gpu-composer-webhook-tls"}} in pod["volumes"]
    # the lab's local process: a URL and an IP SAN
    docs = render(
        "director.existingSecret=s", "webhook.url=https://127.0.0.1:9443", "webhook.ipSANs[0]=127.0.0.1"
    )
    (hook_cfg,) = by_kind(docs, "MutatingWebhookConfiguration")
    assert hook_cfg["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate-pods"
    # switched off: no webhook objects, no webhook port
    docs = render("director.existingSecret=s", "webhook.enabled=false")
    assert by_kind(docs, "MutatingWebhookConfiguration") == [] and by_kind(docs, "Secret") == []
    (dep,) = by_kind(docs, "Deployment")
    env = {e["name"] for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "COMPOSER_WEBHOOK_PORT" not in env


def test_a_target_cluster_kubeconfig_is_mounted_and_drops_rbac_and_needs_the_webhook_off(monkeypatch):
    docs = render("director.existingSecret=s", "targetCluster.kubeconfigSecret=child-kubeconfig",
                  "webhook.enabled=false")
    assert by_kind(docs, "ClusterRole") == [] and by_kind(docs, "Role") == []
    assert by_kind(docs, "MutatingWebhookConfiguration") == []
    (dep,) = by_kind(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["COMPOSER_KUBECONFIG"] == "/etc/composer/target/kubeconfig"
    assert "KUBERNETES_SERVICE_HOST" not in env
    mount = next(m for m in container["volumeMounts"] if m["name"] == "target-kubeconfig")
    assert mount == {"name": "target-kubeconfig", "mountPath": "/etc/composer/target", "readOnly": True}
    volume = next(v for v in pod["volumes"] if v["name"] == "target-kubeconfig")
    assert volume["secret"] == {"secretName": "child-kubeconfig",
                                "items": [{"key": "value", "path": "kubeconfig"}]}
    for name, value in env.items():
        if value is not None:
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "from-secret")
    assert Settings().kubeconfig == "/etc/composer/target/kubeconfig"  # the composer reads it
    out = helm("template", "gpu", str(CHART), "--set", "director.existingSecret=s", "--set",
               "targetCluster.kubeconfigSecret=child-kubeconfig", check=False)
    assert out.returncode != 0 and "targetCluster.kubeconfigSecret needs webhook.enabled=false" in out.stderr


SHARED_T4 = {
    "name": "blue-gpu-sharing",
    "strategy": "time-slicing",
    "hosts": ["bm-1"],
    "offers": {"Tesla-T4": [{"resource": "nvidia.com/gpu.shared", "units": 4, "product": "Tesla-T4"}]},
}


@pytest.mark.parametrize(
    "by_hand",
    [
        {"unitsPerGpu": {"nvidia.com/gpu.shared": 4}},
        {"resourceModels": {"nvidia.com/gpu.shared": ["Tesla-T4"]}},
    ],
    ids=["unitsPerGpu", "resourceModels"],
)
def test_a_shared_resource_set_by_hand_too_is_refused_by_chart_and_composer(tmp_path, monkeypatch, by_hand):
    """composer.sharing is the one source of a shared resource's units and models: the chart fails
    to render when unitsPerGpu or resourceModels names a resource a sharing entry offers, and the
    composer refuses the same environment (it also runs without the chart)."""
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump({"director": {"password": "x"}, "composer": {"sharing": [SHARED_T4], **by_hand}})
    )
    bad = helm("template", "gpu", str(CHART), "--namespace", "gpu-composer", "-f", str(values), check=False)
    assert bad.returncode != 0
    assert "nvidia.com/gpu.shared, which composer.sharing (blue-gpu-sharing) offers" in bad.stderr
    monkeypatch.setenv("COMPOSER_DIRECTOR_URL", "http://d:8080")
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "x")
    monkeypatch.setenv("COMPOSER_SHARING", json.dumps([SHARED_T4]))
    for key, value in by_hand.items():
        monkeypatch.setenv("COMPOSER_" + {"unitsPerGpu": "UNITS_PER_GPU"}.get(key, "RESOURCE_MODELS"),
                           json.dumps(value))
    with pytest.raises(ValidationError, match=r"nvidia.com/gpu.shared \(offered by blue-gpu-sharing\)"):
        Settings()


def test_by_hand_units_for_a_resource_no_sharing_offers_still_render(tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "director": {"password": "x"},
        "composer": {"sharing": [SHARED_T4], "unitsPerGpu": {"nvidia.com/mig-1g.5gb": 7}},
    }))
    docs = [d for d in yaml.safe_load_all(
        helm("template", "gpu", str(CHART), "--namespace", "gpu-composer", "-f", str(values)).stdout) if d]
    env = {e["name"]: e.get("value") for e in by_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    assert json.loads(env["COMPOSER_UNITS_PER_GPU"]) == {"nvidia.com/mig-1g.5gb": 7}
    assert json.loads(env["COMPOSER_SHARING"]) == [SHARED_T4]
