"""Lab stand-in for k0rdent kcm's template controller, at its boundary with Flux only.

kcm is not served as a Go module, so the lab cannot run it; Flux source-controller it can, and
does (``lab/toolchain/build.sh``). This stand-in plays the one step of kcm between the two: for
each ClusterTemplate and ServiceTemplate it does what kcm's ``TemplateReconciler.ReconcileTemplate``
does for a template with ``spec.helm.chartSpec`` (k0rdent/kcm
``internal/controller/template_controller.go`` at the commit ``lab/crds/kcm`` comes from):

1. when the template is not kcm-managed (no ``k0rdent.mirantis.com/managed: "true"`` label), keep
   kcm's default HelmRepository ``kcm-templates`` in its namespace, pointing at kcm's default
   registry (``internal/helm/repo.go`` ``ReconcileHelmRepository``; here the lab's chart
   repository plays that registry);
2. create or update the Flux HelmChart named like the template in its namespace, its ``spec`` the
   template's ``chartSpec``, labelled kcm-managed and owned by the template (``reconcileHelmChart``);
3. read the HelmChart's ``Ready`` condition as ``internal/helm`` ``ShouldReportStatusOnArtifactReadiness``
   does: not yet observed at the HelmChart's generation, or no artifact yet: wait; not True: the
   template is invalid with ``failed to download helm chart artifact: <the condition's message>``,
   the message source-controller wrote;
4. otherwise download the artifact from ``status.artifact.url``, check its digest, load the chart
   and check its metadata (Helm's ``chart.Validate``: apiVersion, name, version), and write the
   template's status as kcm's ``fillStatusFromChart`` and ``updateStatus`` do: ``chartRef``,
   ``chartVersion``, ``description``, ``config`` (the chart's values), for a ClusterTemplate
   ``providers`` (``spec.providers``, else the chart's ``cluster.x-k8s.io/provider`` annotation),
   ``observedGeneration``, ``valid`` and ``validationError``.

Not played (kcm's, beyond this boundary): the Management object and the check that the providers a
ClusterTemplate needs are deployed (``validateCompatibilityAttrs``), provider contract versions, the
values-schema ConfigMap, the predeclared registry Secrets, templates given by ``chartRef`` or
``chartSource``. Everything source-controller does (resolving the version in the repository index,
fetching, packaging, serving the artifact) is the real source-controller's.

Pure except :func:`download`, :class:`Reconciler` and :func:`main`.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

#: kcm's API group and version of the templates.
KCM_GROUP, KCM_VERSION = "k0rdent.mirantis.com", "v1beta1"
#: Flux source-controller's API group and version.
FLUX_GROUP, FLUX_VERSION = "source.toolkit.fluxcd.io", "v1"
#: The label kcm puts on what it manages (kcm ``api/v1beta1`` ``KCMManagedLabelKey`` / ``Value``).
MANAGED_LABEL = ("k0rdent.mirantis.com/managed", "true")
#: kcm's default HelmRepository (``api/v1beta1/templates_common.go`` ``DefaultRepoName``).
DEFAULT_REPO_NAME = "kcm-templates"
#: Chart annotation holding a ClusterTemplate chart's CAPI providers (kcm ``getProvidersList``).
PROVIDERS_ANNOTATION = "cluster.x-k8s.io/provider"
#: Template kinds and their resource names.
TEMPLATE_PLURALS = {"ClusterTemplate": "clustertemplates", "ServiceTemplate": "servicetemplates"}


class ChartError(Exception):
    """A fetched chart archive is not a valid chart (bad digest, no Chart.yaml, bad metadata)."""


@dataclass(frozen=True)
class Readiness:
    """What a HelmChart's status says about its artifact (kcm ``ShouldReportStatusOnArtifactReadiness``).

    Attributes:
        ready: the artifact can be downloaded.
        error: why not, when not ready (kcm's own wording).
        report: the error goes into the template's status (the fetch failed); otherwise kcm waits.
    """

    ready: bool
    error: str | None = None
    report: bool = False


@dataclass(frozen=True)
class ChartInfo:
    """The parts of a chart kcm reads: ``Chart.yaml`` and ``values.yaml``."""

    metadata: Mapping[str, Any]
    values: Mapping[str, Any]


def managed(obj: Mapping[str, Any]) -> bool:
    """True when ``obj`` carries kcm's managed label."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return labels.get(MANAGED_LABEL[0]) == MANAGED_LABEL[1]


def default_repository(namespace: str, url: str) -> dict[str, Any]:
    """kcm's default HelmRepository ``kcm-templates`` in ``namespace`` for the registry ``url``
    (type ``oci`` for ``oci://``, else ``default``; checked every 10 minutes)."""
    return {
        "apiVersion": f"{FLUX_GROUP}/{FLUX_VERSION}",
        "kind": "HelmRepository",
        "metadata": {"name": DEFAULT_REPO_NAME, "namespace": namespace, "labels": dict([MANAGED_LABEL])},
        "spec": {"type": "oci" if url.startswith("oci://") else "default", "url": url, "interval": "10m"},
    }


def helm_chart(template: Mapping[str, Any]) -> dict[str, Any]:
    """The Flux HelmChart kcm makes for ``template`` (a ClusterTemplate or ServiceTemplate object):
    same name and namespace, ``spec`` = its ``spec.helm.chartSpec``, kcm-managed, owned by it.

    Raises:
        KeyError: the template has no ``spec.helm.chartSpec``.
    """
    meta = template["metadata"]
    return {
        "apiVersion": f"{FLUX_GROUP}/{FLUX_VERSION}",
        "kind": "HelmChart",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": dict([MANAGED_LABEL]),
            "ownerReferences": [
                {"apiVersion": template["apiVersion"], "kind": template["kind"], "name": meta["name"],
                 "uid": meta["uid"]}
            ],
        },
        "spec": dict(template["spec"]["helm"]["chartSpec"]),
    }


def readiness(chart: Mapping[str, Any]) -> Readiness:
    """Whether ``chart``'s (a HelmChart object) artifact is ready, with kcm's messages."""
    status = chart.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            if chart["metadata"].get("generation") != c.get("observedGeneration"):
                return Readiness(False, "HelmChart was not reconciled yet, retrying")
            if c.get("status") != "True":
                message = c.get("message", "")
                return Readiness(False, f"failed to download helm chart artifact: {message}", report=True)
    if not status.get("artifact") or not status.get("url"):
        return Readiness(False, "helm chart artifact is not ready yet")
    return Readiness(True)


def read_chart(archive: bytes, digest: str) -> ChartInfo:
    """The chart in a ``.tgz`` ``archive`` whose ``digest`` (``sha256:<hex>``) it must match.

    Raises:
        ChartError: digest mismatch, no top-level ``Chart.yaml``, or metadata Helm's
            ``chart.Validate`` refuses (no apiVersion, name or version).
    """
    algo, _, want = digest.partition(":")
    if algo != "sha256" or hashlib.sha256(archive).hexdigest() != want:
        raise ChartError(f"verification for digest {digest} failed")
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and len(parts) == 2 and parts[1] in ("Chart.yaml", "values.yaml"):
                extracted = tar.extractfile(member)
                files[parts[1]] = extracted.read() if extracted else b""
    if "Chart.yaml" not in files:
        raise ChartError("Chart.yaml file is missing")
    metadata = yaml.safe_load(files["Chart.yaml"]) or {}
    for key in ("apiVersion", "name", "version"):
        if not metadata.get(key):
            raise ChartError(f"validation: chart.metadata.{key} is required")
    values = yaml.safe_load(files.get("values.yaml", b"")) or {}
    return ChartInfo(metadata=metadata, values=values)


def template_status(
    template: Mapping[str, Any], chart: Mapping[str, Any], *, info: ChartInfo | None, error: str | None
) -> dict[str, Any]:
    """The template's ``status`` after reconciling against HelmChart ``chart``: the chart reference
    and version always; the chart's description, values and (ClusterTemplate) providers when
    ``info`` is given; ``valid`` exactly when ``error`` is None."""
    status: dict[str, Any] = dict(template.get("status") or {})
    status["chartRef"] = {"kind": "HelmChart", "name": chart["metadata"]["name"],
                          "namespace": chart["metadata"]["namespace"]}
    status["chartVersion"] = chart["spec"].get("version", "")
    if info is not None:
        status["description"] = info.metadata.get("description", "")
        status["config"] = json.loads(json.dumps(info.values))
        if template["kind"] == "ClusterTemplate":
            declared = template["spec"].get("providers") or []
            annotated = (info.metadata.get("annotations") or {}).get(PROVIDERS_ANNOTATION, "")
            names = declared or [p.strip() for p in annotated.split(",") if p.strip()]
            status["providers"] = sorted(set(names))
    status["observedGeneration"] = template["metadata"].get("generation")
    status["validationError"] = error or ""
    status["valid"] = error is None
    return status


def _contains(live: Any, want: Any) -> bool:
    """True when ``live`` holds every key and value of ``want`` (the API server adds defaults)."""
    if isinstance(want, Mapping):
        return isinstance(live, Mapping) and all(_contains(live.get(k), v) for k, v in want.items())
    return bool(live == want)


def download(url: str, *, timeout_seconds: float = 10.0) -> bytes:
    """The body of ``url`` (an artifact source-controller serves).

    Raises:
        ChartError: not HTTP 200, or the request failed (the reason in the message).
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout_seconds) as resp:
            return bytes(resp.read())
    except OSError as exc:
        raise ChartError(f"chart download request failed: {exc}") from exc


class Reconciler:
    """Runs the stand-in's steps against an API server, one pass over every template at a time.

    Args:
        api: a ``kubernetes.client.ApiClient`` (admin).
        default_registry_url: the URL kcm's ``kcm-templates`` points at (kcm's
            ``--default-registry-url``; in the lab, the lab's chart repository).
    """

    def __init__(self, api: Any, *, default_registry_url: str) -> None:
        from kubernetes import client

        self._custom = client.CustomObjectsApi(api)
        self._url = default_registry_url

    def _ensure(self, obj: Mapping[str, Any], plural: str) -> dict[str, Any]:
        """Create ``obj`` (a Flux object) or bring its labels and spec to ``obj``'s; returns it live."""
        from kubernetes.client.exceptions import ApiException

        meta = obj["metadata"]
        try:
            live: dict[str, Any] = self._custom.get_namespaced_custom_object(
                FLUX_GROUP, FLUX_VERSION, meta["namespace"], plural, meta["name"])
        except ApiException as exc:
            if exc.status != 404:
                raise
            created: dict[str, Any] = self._custom.create_namespaced_custom_object(
                FLUX_GROUP, FLUX_VERSION, meta["namespace"], plural, dict(obj))
            return created
        labels = live["metadata"].get("labels") or {}
        labelled = all(labels.get(k) == v for k, v in meta["labels"].items())
        if not labelled or not _contains(live.get("spec"), obj["spec"]):
            live["metadata"]["labels"] = {**labels, **meta["labels"]}
            live["spec"] = obj["spec"]
            live = self._custom.replace_namespaced_custom_object(
                FLUX_GROUP, FLUX_VERSION, meta["namespace"], plural, meta["name"], live)
        return live

    def reconcile(self, template: dict[str, Any]) -> dict[str, Any] | None:
        """One template: the steps of the module docstring; returns the status written, or None when
        there is nothing to write yet (no chartSpec, or the HelmChart is not reconciled)."""
        if not (template.get("spec", {}).get("helm") or {}).get("chartSpec"):
            return None
        ns = template["metadata"]["namespace"]
        if not managed(template):
            self._ensure(default_repository(ns, self._url), "helmrepositories")
        chart = self._ensure(helm_chart(template), "helmcharts")
        ready = readiness(chart)
        info: ChartInfo | None = None
        error = ready.error
        if not ready.ready and not ready.report:
            return None
        if ready.ready:
            artifact = chart["status"]["artifact"]
            try:
                info = read_chart(download(artifact["url"]), artifact.get("digest", ""))
                error = None
            except ChartError as exc:
                error = f"failed to download chart: {exc}"
        status = template_status(template, chart, info=info, error=error)
        if status != template.get("status"):
            plural = TEMPLATE_PLURALS[template["kind"]]
            self._custom.replace_namespaced_custom_object_status(
                KCM_GROUP, KCM_VERSION, ns, plural, template["metadata"]["name"],
                {**template, "status": status})
        return status

    def run_once(self) -> int:
        """Reconcile every ClusterTemplate and ServiceTemplate once; returns how many were seen."""
        seen = 0
        for plural in TEMPLATE_PLURALS.values():
            listing = self._custom.list_cluster_custom_object(KCM_GROUP, KCM_VERSION, plural)
            for template in listing.get("items", []):
                seen += 1
                try:
                    self.reconcile(template)
                except Exception as exc:  # one template's failure must not stop the rest
                    meta = template["metadata"]
                    name = f"{template['kind']} {meta['namespace']}/{meta['name']}"
                    print(f"kcm stand-in: {name}: {exc}", file=sys.stderr, flush=True)
        return seen


def main(argv: list[str] | None = None) -> int:
    """``--kubeconfig PATH --default-registry-url URL [--interval SECONDS]``: reconcile forever."""
    ap = argparse.ArgumentParser(prog="python -m lab.kcm_standin", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", type=Path, required=True)
    ap.add_argument("--default-registry-url", required=True)
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between passes")
    args = ap.parse_args(argv)
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(args.kubeconfig))
    reconciler = Reconciler(api, default_registry_url=args.default_registry_url)
    while True:
        try:
            reconciler.run_once()
        except Exception as exc:  # the API server may restart under the lab
            print(f"kcm stand-in: pass failed: {exc}", file=sys.stderr, flush=True)
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
