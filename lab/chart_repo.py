"""The lab's Helm chart repository, served on 127.0.0.1: what the lab's Flux source-controller
fetches the k0rdent templates' charts from.

It holds the platform's own ClusterTemplate charts (``charts/templates/<name>``, packaged as they
are) and, for every other chart the built-in catalog names (:class:`stack_config.models.CatalogConfig`:
k0rdent's ``kubevirt-hosted-cp``, the GPU Operator, KubeVirt, Cilium), a **stand-in chart** of that
name and version: a ``Chart.yaml`` that says it is a stand-in (and, for a ClusterTemplate, carries
the providers annotation kcm reads) and no templates. The upstream charts live in registries the
lab cannot reach; the stand-ins let the template path (kcm's HelmChart, source-controller's
fetch, kcm's validation of the chart) run for real without them, and are never installed.

Built with the real Helm (``helm package``, then ``helm repo index --url``), served by a plain
HTTP file server (``python -m lab.chart_repo serve``). A template whose chart or version the
repository lacks fails the same way it would against a real repository.

Pure except :func:`build` (runs helm, writes files) and :func:`serve`.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from stack_config.models import CatalogConfig, ClusterTemplateConfig, ServiceTemplateConfig

#: The checkout's root folder.
ROOT = Path(__file__).resolve().parent.parent
#: The platform's ClusterTemplate charts, one folder per chart.
PLATFORM_CHARTS_DIR = ROOT / "charts" / "templates"
#: Chart annotation kcm reads a ClusterTemplate's CAPI providers from when its ``spec.providers``
#: is empty (k0rdent/kcm ``api/v1beta1/templates_common.go`` ``getProvidersList``).
PROVIDERS_ANNOTATION = "cluster.x-k8s.io/provider"


@dataclass(frozen=True)
class StandIn:
    """A stand-in chart: an upstream chart's name and version, for one template of the catalog.

    Attributes:
        name: chart name.
        version: chart version (exactly the template's).
        repository: the template's repository name (where the real chart is published).
        providers: the CAPI providers of a ClusterTemplate's chart (empty for a service).
    """

    name: str
    version: str
    repository: str
    providers: tuple[str, ...] = ()

    def chart_yaml(self) -> dict[str, Any]:
        """The stand-in's ``Chart.yaml`` (``apiVersion: v2``)."""
        doc: dict[str, Any] = {
            "apiVersion": "v2",
            "name": self.name,
            "version": self.version,
            "type": "application",
            "description": (
                f"Lab stand-in for the upstream chart {self.name} {self.version} (repository "
                f"{self.repository}): its name and version only, no templates. Served by the lab's chart "
                "repository (lab/chart_repo.py) so that the template path can fetch it; never installed."
            ),
        }
        if self.providers:
            doc["annotations"] = {PROVIDERS_ANNOTATION: ", ".join(self.providers)}
        return doc


def platform_charts(charts_dir: Path = PLATFORM_CHARTS_DIR) -> dict[str, str]:
    """``chart name -> version`` of the platform's charts (each folder's ``Chart.yaml``)."""
    out: dict[str, str] = {}
    for chart in sorted(charts_dir.glob("*/Chart.yaml")):
        meta = yaml.safe_load(chart.read_text())
        out[str(meta["name"])] = str(meta["version"])
    return out


def standins(catalog: CatalogConfig, platform: Sequence[str]) -> list[StandIn]:
    """A :class:`StandIn` for each chart ``catalog``'s templates name that is not one of the
    ``platform`` charts, once per name and version, in the catalog's order."""
    templates: list[ServiceTemplateConfig | ClusterTemplateConfig] = [
        catalog.gpu_operator, catalog.kubevirt, catalog.cilium, *catalog.cluster_templates]
    out: dict[tuple[str, str], StandIn] = {}
    for t in templates:
        if t.chart in platform or (t.chart, t.version) in out:
            continue
        providers = tuple(t.providers) if isinstance(t, ClusterTemplateConfig) else ()
        out[(t.chart, t.version)] = StandIn(t.chart, t.version, t.repository, providers)
    return list(out.values())


def build(
    out_dir: Path, *, helm: Path, url: str, catalog: CatalogConfig | None = None,
    charts_dir: Path = PLATFORM_CHARTS_DIR,
) -> list[str]:
    """Write the repository into ``out_dir`` (emptied first): ``helm package`` of every platform
    chart and of every stand-in (:func:`standins` of ``catalog``, default the built-in catalog),
    then ``helm repo index --url url``. Returns the packaged file names, sorted.

    Raises:
        subprocess.CalledProcessError: helm refused a chart (its message on stderr).
    """
    catalog = catalog or CatalogConfig()
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    sources = sorted(p.parent for p in charts_dir.glob("*/Chart.yaml"))
    with tempfile.TemporaryDirectory(prefix="lab-standins-") as tmp:
        for s in standins(catalog, list(platform_charts(charts_dir))):
            folder = Path(tmp) / f"{s.name}-{s.version}"
            folder.mkdir()
            (folder / "Chart.yaml").write_text(yaml.safe_dump(s.chart_yaml(), sort_keys=False))
            sources.append(folder)
        for src in sources:
            subprocess.run([str(helm), "package", str(src), "-d", str(out_dir)], check=True,
                           capture_output=True, text=True, timeout=120)
    subprocess.run([str(helm), "repo", "index", str(out_dir), "--url", url], check=True,
                   capture_output=True, text=True, timeout=120)
    return sorted(p.name for p in out_dir.glob("*.tgz"))


def serve(root: Path, port: int, host: str = "127.0.0.1") -> None:
    """Serve ``root`` over HTTP on ``host:port`` until killed."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    with ThreadingHTTPServer((host, port), handler) as server:
        server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    """``build --out DIR --helm PATH --url URL`` or ``serve --root DIR --port N``."""
    ap = argparse.ArgumentParser(prog="python -m lab.chart_repo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="package the charts and write index.yaml")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--helm", type=Path, required=True)
    b.add_argument("--url", required=True)
    s = sub.add_parser("serve", help="serve a built repository")
    s.add_argument("--root", type=Path, required=True)
    s.add_argument("--port", type=int, required=True)
    args = ap.parse_args(argv)
    if args.command == "build":
        for name in build(args.out, helm=args.helm, url=args.url):
            print(name)
        return 0
    serve(args.root, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
