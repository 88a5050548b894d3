"""Where the lab's k0rdent templates get their charts: the lab's chart repository, the real Flux
source-controller, and the kcm stand-in between them.

:func:`start` builds the chart repository (``lab.chart_repo``: the platform's charts and the
stand-ins, packaged and indexed by the real Helm) into ``<lab_dir>/charts`` and starts three
processes:

- ``chart-repo``: an HTTP file server for that folder on ``127.0.0.1`` (the URL the dev stack's
  ``catalog.repositories`` name, and kcm's default registry for ``kcm-templates``);
- ``source-controller``: Flux source-controller built from its Go module (``lab/toolchain/build.sh``),
  watching every namespace of the lab API server, its artifacts served on ``127.0.0.1`` too;
- ``kcm-standin``: :mod:`lab.kcm_standin`, the step of kcm's template controller that turns each
  template into a HelmChart and the HelmChart's result into the template's ``status.valid``.

:func:`template_states` reads every template's verdict, which ``make demo`` prints.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lab import processes
from lab.chart_repo import ROOT, build

if TYPE_CHECKING:
    from kubernetes import client

    from lab.settings import LabConfig

#: The processes :func:`start` starts, in start order.
PROCESSES = ("chart-repo", "source-controller", "kcm-standin")

#: The lab chart repository's port, and source-controller's artifact, metrics and health ports.
CHART_REPO_PORT = 18090
SOURCE_CONTROLLER_STORAGE_PORT = 18091
SOURCE_CONTROLLER_METRICS_PORT = 18092
SOURCE_CONTROLLER_HEALTH_PORT = 18093


def chart_repo_url() -> str:
    """The lab chart repository's URL (``http://127.0.0.1:<port>/``)."""
    return f"http://127.0.0.1:{CHART_REPO_PORT}/"


@dataclass(frozen=True)
class TemplateState:
    """A template's verdict as kcm (here its stand-in) writes it.

    Attributes:
        kind: ``ClusterTemplate`` or ``ServiceTemplate``.
        namespace: its namespace.
        name: its name.
        chart: ``<chart> <version>`` from its ``chartSpec``.
        valid: ``status.valid``, or None while it has no verdict yet.
        error: ``status.validationError`` (empty when valid).
    """

    kind: str
    namespace: str
    name: str
    chart: str
    valid: bool | None
    error: str


#: What the chart path keeps under the lab directory: the packaged and indexed repository, and
#: source-controller's artifact storage.
STATE_DIRS = ("charts", "source-controller")


def wipe_state(cfg: LabConfig) -> None:
    """Delete :data:`STATE_DIRS` under ``cfg.lab_dir`` (``python -m lab down --wipe``, after the
    processes stopped), so the next start packages the charts again and source-controller fetches
    every artifact anew. Missing folders are fine."""
    for name in STATE_DIRS:
        shutil.rmtree(cfg.lab_dir / name, ignore_errors=True)


def start(cfg: LabConfig) -> None:
    """Build the chart repository and start the three processes (idempotent).

    Raises:
        LabProcessError: helm or source-controller is not built, a port is taken, or a process
            does not come up (its log is named).
    """
    helm, controller = cfg.bin_dir / "helm", cfg.bin_dir / "source-controller"
    for binary in (helm, controller):
        if not binary.exists():
            raise processes.LabProcessError(f"{binary} is not built: run `make setup`")
    repo_dir = cfg.lab_dir / "charts"
    if not processes.running(cfg.lab_dir, "chart-repo"):
        build(repo_dir, helm=helm, url=chart_repo_url())
    processes.start(cfg.lab_dir, "chart-repo", [
        sys.executable, "-m", "lab.chart_repo", "serve", "--root", str(repo_dir),
        "--port", str(CHART_REPO_PORT),
    ], cwd=ROOT, ports=[CHART_REPO_PORT])
    processes.wait_until(lambda: processes.port_open(CHART_REPO_PORT), what="lab chart repository",
                         timeout_seconds=30, lab_dir=cfg.lab_dir, name="chart-repo")
    storage = cfg.lab_dir / "source-controller"
    storage.mkdir(parents=True, exist_ok=True)
    address = f"127.0.0.1:{SOURCE_CONTROLLER_STORAGE_PORT}"
    processes.start(cfg.lab_dir, "source-controller", [
        str(controller),
        f"--storage-path={storage}",
        f"--storage-addr={address}",
        f"--storage-adv-addr={address}",
        f"--metrics-addr=127.0.0.1:{SOURCE_CONTROLLER_METRICS_PORT}",
        f"--health-addr=127.0.0.1:{SOURCE_CONTROLLER_HEALTH_PORT}",
        "--enable-leader-election=false",
        "--watch-all-namespaces=true",
        "--log-level=info",
    ], env={"KUBECONFIG": str(cfg.kubeconfig), "RUNTIME_NAMESPACE": "flux-system"}, ports=[
        SOURCE_CONTROLLER_STORAGE_PORT, SOURCE_CONTROLLER_METRICS_PORT, SOURCE_CONTROLLER_HEALTH_PORT])
    processes.wait_until(lambda: processes.port_open(SOURCE_CONTROLLER_HEALTH_PORT),
                         what="source-controller health endpoint", timeout_seconds=60,
                         lab_dir=cfg.lab_dir, name="source-controller")
    processes.start(cfg.lab_dir, "kcm-standin", [
        sys.executable, "-m", "lab.kcm_standin", "--kubeconfig", str(cfg.kubeconfig),
        "--default-registry-url", chart_repo_url(),
    ], cwd=ROOT)


def template_states(
    api: client.ApiClient, namespaces: Sequence[str] | None = None
) -> list[TemplateState]:
    """Every ClusterTemplate and ServiceTemplate (of ``namespaces``, default all) with its verdict,
    sorted by namespace, kind and name."""
    from kubernetes import client as k8s

    from lab.kcm_standin import KCM_GROUP, KCM_VERSION, TEMPLATE_PLURALS

    custom = k8s.CustomObjectsApi(api)
    out: list[TemplateState] = []
    for kind, plural in TEMPLATE_PLURALS.items():
        listing = custom.list_cluster_custom_object(KCM_GROUP, KCM_VERSION, plural)
        items: list[dict[str, Any]] = listing["items"]
        for t in items:
            meta = t["metadata"]
            if namespaces is not None and meta["namespace"] not in namespaces:
                continue
            spec = (t["spec"].get("helm") or {}).get("chartSpec") or {}
            status = t.get("status") or {}
            out.append(TemplateState(
                kind=kind, namespace=meta["namespace"], name=meta["name"],
                chart=f"{spec.get('chart', '?')} {spec.get('version', '?')}",
                valid=status.get("valid") if "valid" in status else None,
                error=status.get("validationError", ""),
            ))
    return sorted(out, key=lambda s: (s.namespace, s.kind, s.name))


def render(states: Sequence[TemplateState]) -> str:
    """One line per template: ``valid`` / ``INVALID: <error>`` / ``no verdict yet``."""
    lines = []
    for s in states:
        verdict = "valid" if s.valid else ("no verdict yet" if s.valid is None else f"INVALID: {s.error}")
        lines.append(f"{s.namespace}/{s.kind} {s.name} ({s.chart}): {verdict}")
    return "\n".join(lines)


def wait_for_verdicts(
    api: client.ApiClient, namespaces: Sequence[str], *, timeout_seconds: float = 120.0
) -> list[TemplateState]:
    """The templates of ``namespaces`` once each has a verdict (or ``timeout_seconds`` passed:
    those without one are returned as they are)."""
    import time

    deadline = time.monotonic() + timeout_seconds
    while True:
        states = template_states(api, namespaces)
        if (states and all(s.valid is not None for s in states)) or time.monotonic() > deadline:
            return states
        time.sleep(1.0)
