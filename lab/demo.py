"""``python -m lab.demo``: the README's main command, end to end on the embedded lab.

1. Build the composer image from ``Containerfile`` (``lab.image``; warm: seconds).
2. Start the lab (both control planes, Director and Redfish simulators, GPU agent) and its real
   kubelet node ``mgmt-1`` (``lab.node``), and load the image into the node's containerd. By
   default (``--hosts-in lab-workers``) the hosts' Nodes are in the hypervisor cluster
   ``lab-workers``, the second control plane, as the dev stack expects: it reaches ``lab-workers``
   through the kubeconfig Secret the lab's Cluster API stand-in writes, labels the hosts' Nodes
   there, and runs the composer with ``runs_on: mothership``: its chart on the mothership, its Pods
   on ``mgmt-1`` (``lab-workers`` has no real node) watching ``lab-workers``.
   ``--hosts-in mothership`` registers them on the mothership instead
   (``LabConfig(hosts_on_mothership=True)``), for a stack whose composer serves the mothership.
3. ``pulumi up`` the dev stack with the policy pack (lab enforcement), through the real CLI: it
   installs ``charts/composer``, whose Pods run the image on ``mgmt-1``.
4. Print the estate summary (hosts, DPUs with posture, tenants, networks, clusters, GPUs), then,
   per cluster, every object the program created there (label ``composable-gpu.io/object``,
   :func:`created_objects`), then every k0rdent template of the stack valid or invalid: each chart
   fetched by the lab's Flux source-controller from the lab's chart repository, the verdict
   written by the kcm stand-in (``lab.template_sources``); an invalid template fails the demo.
5. Run the handover scenario (two hosts hand over two pooled GPUs) in the cluster of the hosts'
   Nodes against the composer Pods (their names and image digest are printed): a pod pinned to
   ``blade-slot-1`` asks for 2 GPUs and gets
   both, it ends, the GPUs go back to the free pool after the stack's idle timeout, and a pod pinned
   to ``blade-slot-2`` gets the same two GPUs. Each step is printed with its time.
   ``--local-composer`` runs the controller as a local process instead (the kwok-only mode).
6. With the chart's Pods, draw the dashboard's main panels over the scenario from the lab's
   Prometheus (``lab.prometheus``, which scrapes them) into ``.lab/composer-dashboard.png``
   (``ops.dashboard_png``), or say in one line why none was drawn (:func:`draw_dashboard`).

Exit code 0 on success; on failure the message says which step failed and where its log is.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from lab import (
    controlplane,
    image,
    kube,
    node,
    processes,
    prometheus,
    scenario,
    services,
    settings,
    template_sources,
)


class DemoError(RuntimeError):
    """A demo step failed; the message says which and what to look at."""


#: Where step 6 draws the dashboard, in the lab directory.
DASHBOARD_PNG = "composer-dashboard.png"


def draw_dashboard(cfg: settings.LabConfig, namespace: str, start: float, end: float,
                   *, prometheus_url: str | None = None) -> str:
    """Step 6: the dashboard's main panels for the composer in ``namespace`` from ``start`` to
    ``end`` (seconds since the epoch) drawn from the lab's Prometheus (``prometheus_url``, default
    its 127.0.0.1 port, 5 s scrapes) into ``<lab_dir>/composer-dashboard.png`` by
    ``ops.dashboard_png``.

    Returns the line the demo prints: the PNG's path, or why none was drawn (the lab's Prometheus
    is not running, or a query failed). The scenario has passed by then, so no PNG does not fail
    the demo.
    """
    import requests

    from ops import dashboard_png

    if not processes.running(cfg.lab_dir, prometheus.PROCESS):
        return "not drawn: the lab's Prometheus is not running (make lab-up says why)"
    url = prometheus_url or f"http://127.0.0.1:{prometheus.PROMETHEUS_PORT}"
    try:
        png = dashboard_png.render(url, cfg.lab_dir / DASHBOARD_PNG, namespace=namespace,
                                   start=start, end=end, scrape_seconds=5)
    except (requests.RequestException, ValueError) as exc:
        return f"not drawn: {url}: {exc}"
    return str(png)


def _pulumi(stack: str, *args: str, capture: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["pulumi", *args, "--stack", stack, "--non-interactive"],
        cwd=settings.ROOT, text=True, capture_output=capture, timeout=1800,
    )


def ensure_stack(stack: str) -> None:
    """Select the stack in the configured backend, creating it (config file kept) if needed."""
    (settings.ROOT / ".pulumi-state").mkdir(exist_ok=True)
    if _pulumi(stack, "stack", "select").returncode != 0:
        created = subprocess.run(["pulumi", "stack", "init", stack, "--non-interactive"], cwd=settings.ROOT,
                                 text=True, capture_output=True)
        if created.returncode != 0:
            raise DemoError(f"pulumi stack init {stack} failed:\n{created.stderr}")


def pulumi_up(stack: str) -> dict[str, Any]:
    """``pulumi up`` with the policy pack; returns the stack outputs (secrets stay hidden).

    It runs with its preview: the pack's stack-level rules judge the whole estate there, so a
    mandatory violation stops the update before any resource is touched (``--skip-preview`` would
    report it only after the resources were changed).
    """
    policy_cfg = settings.ROOT / "policies" / "config" / "lab.json"
    up = _pulumi(stack, "up", "--yes", "--policy-pack", str(settings.ROOT / "policies"),
                 "--policy-pack-config", str(policy_cfg), capture=False)
    if up.returncode != 0:
        raise DemoError(f"pulumi up --stack {stack} failed (output above)")
    out = _pulumi(stack, "stack", "output", "--json")
    if out.returncode != 0:
        raise DemoError(f"pulumi stack output failed:\n{out.stderr}")
    return json.loads(out.stdout)


def check_templates(cfg: settings.LabConfig, stack: str, *, say: Callable[[str], None]) -> None:
    """Print every template of the stack's namespaces (the mothership's, the tenants') with its
    verdict (``lab.template_sources``).

    Raises:
        DemoError: a template is invalid or got no verdict within two minutes.
    """
    from stack_config.stack_file import load_stack_file

    estate = load_stack_file(settings.ROOT / f"Pulumi.{stack}.yaml", require_secrets=False)
    namespaces = [estate.mothership.namespace, *(t.namespace_name for t in estate.tenants)]
    states = template_sources.wait_for_verdicts(kube.admin_client(cfg), namespaces)
    for line in template_sources.render(states).splitlines():
        say(line)
    if not states or not all(s.valid for s in states):
        raise DemoError("a k0rdent template is not valid (above; .lab/logs/source-controller.log, "
                        ".lab/logs/kcm-standin.log)")


def created_objects(cfg: settings.LabConfig) -> list[str]:
    """``<kind> <namespace>/<name> (<object>)`` for every object of the cluster ``cfg`` carrying the
    label :data:`domain.placement.OBJECT_LABEL` (what the program created there; docs/architecture.md
    "Where each object lives"), one kind of :data:`domain.placement.PLACEMENTS` after another, as
    ``kubectl get <kind> -A -l composable-gpu.io/object`` lists them. Kinds the cluster does not
    serve (a CRD installed on the other cluster only) are skipped. Sorted within a kind. Then the
    composer chart's Deployments (the chart's objects carry the chart's labels, not that one)."""
    from kubernetes.dynamic import DynamicClient

    from domain.placement import OBJECT_LABEL, PLACEMENTS

    dyn = DynamicClient(kube.admin_client(cfg))
    out: list[str] = []
    for kind in dict.fromkeys(p.kind for p in PLACEMENTS.values()):
        resources = [r for r in dyn.resources.search(kind=kind) if "/" not in r.name]
        if not resources:
            continue
        items = resources[0].get(label_selector=OBJECT_LABEL).items
        rows = sorted(f"{kind} {(i.metadata.namespace + '/') if i.metadata.namespace else ''}"
                      f"{i.metadata.name} ({i.metadata.labels[OBJECT_LABEL]})" for i in items)
        out.extend(rows)
    charts = dyn.resources.get(api_version="apps/v1", kind="Deployment").get(
        label_selector="app.kubernetes.io/name=composer").items
    out.extend(sorted(f"Deployment {d.metadata.namespace}/{d.metadata.name} (rendered by the composer chart)"
                      for d in charts))
    return out


def step(title: str) -> Callable[[str], None]:
    """Print a step header; returns a function printing timed lines under it."""
    t0 = time.monotonic()
    print(f"\n== {title}", flush=True)

    def line(msg: str) -> None:
        print(f"  [{time.monotonic() - t0:6.1f} s] {msg}", flush=True)

    return line


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    ap = argparse.ArgumentParser(prog="python -m lab.demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack", default="dev")
    ap.add_argument("--no-scenario", action="store_true", help="stop after the summary")
    ap.add_argument("--hosts-in", choices=(settings.MOTHERSHIP_CLUSTER, settings.HYPERVISOR_CLUSTER),
                    default=settings.HYPERVISOR_CLUSTER,
                    help="the cluster whose Nodes the hosts are (default: lab-workers)")
    ap.add_argument("--local-composer", action="store_true",
                    help="run the scenario's composer as a local process, not the chart's Pods")
    ap.add_argument("--idle-timeout-seconds", type=float, default=15.0,
                    help="idle timeout of the local-process composer (default 15 s; the chart's Pods "
                         "run with the stack's value)")
    args = ap.parse_args(argv)
    if args.stack == "dev":
        os.environ.setdefault("PULUMI_CONFIG_PASSPHRASE", "dev-lab-only-passphrase")
    try:
        say = step("composer image: Containerfile (podman, runc)")
        built = image.build(tag=None, extra_tags=(image.LAB_TAG,), log=say)
        size = image.summary(built.ref)["size"] or 0
        say(f"{built.ref} = {image.IMAGE_REPOSITORY}:{image.LAB_TAG} ({built.image_id[:19]}, "
            f"{int(size) / 1e6:.0f} MB) in {built.seconds:.0f} s")

        say = step("lab: control planes and hardware simulators on 127.0.0.1, real node mgmt-1")
        cfg = controlplane.start(settings.LabConfig(
            hosts_on_mothership=args.hosts_in == settings.MOTHERSHIP_CLUSTER))
        say(f"mothership {cfg.apiserver_url}, hypervisor cluster {settings.HYPERVISOR_CLUSTER} on "
            f"127.0.0.1:{settings.HYPERVISOR_PORTS.apiserver}; hosts' Nodes {', '.join(cfg.nodes)} in "
            f"{cfg.hosts_cluster.name}")
        services.start_simulators(cfg)
        template_sources.start(cfg)
        say(f"chart repository {template_sources.chart_repo_url()}, Flux source-controller, kcm stand-in")
        lab_ref = f"{image.IMAGE_REPOSITORY}:{image.LAB_TAG}"
        if not args.local_composer:
            node.start(cfg, images=(lab_ref,))
            say(f"node {node.NODE_NAME} Ready (containerd + runc, kubelet); {lab_ref} loaded")
            problem = prometheus.start_lab(cfg)
            say(f"Prometheus not started: {problem}" if problem else
                f"Prometheus on 127.0.0.1:{prometheus.PROMETHEUS_PORT} scraping the composer Pods")
        say(f"ready; KUBECONFIG={cfg.kubeconfig}")

        say = step(f"pulumi up --stack {args.stack} (policy pack: policies/, lab enforcement)")
        ensure_stack(args.stack)
        outputs = pulumi_up(args.stack)
        say("stack is up")
        if not args.local_composer and outputs["estate"].get("composer"):
            restarted = node.roll_if_stale(cfg, outputs["estate"]["composer"]["namespace"], lab_ref)
            if restarted:
                say(f"composer Pods ran an older {lab_ref}: rolled the Deployment ({restarted})")

        step("estate summary")
        from stack_config.summary import render_summary

        print(render_summary(outputs["estate"]), flush=True)

        clusters = [(settings.MOTHERSHIP_CLUSTER, cfg)]
        if cfg.hypervisor is not None:
            clusters.append((settings.HYPERVISOR_CLUSTER, cfg.hypervisor))
        for name, cluster in clusters:
            say = step(f"created by the program in {name} ({cluster.kubeconfig})")
            for row in created_objects(cluster):
                say(row)

        check_templates(cfg, args.stack, say=step("k0rdent templates: each chart fetched by Flux "
                                                  "source-controller, the verdict kcm would write"))

        if not args.no_scenario:
            t0 = time.time()
            # In the cluster whose Nodes the hosts are (lab-workers unless --hosts-in mothership); the
            # chart's Pods run on mgmt-1, on the mothership, whichever cluster they serve.
            scenario.run_handover_scenario(cfg.hosts_cluster, outputs["estate"], step=step,
                                          local_process=args.local_composer, composer_cfg=cfg,
                                          idle_timeout_seconds=args.idle_timeout_seconds)
            if not args.local_composer:
                say = step("dashboard: the main panels over the scenario, from the lab's Prometheus")
                say(draw_dashboard(cfg, outputs["estate"]["composer"]["namespace"], t0, time.time()))
    except (DemoError, processes.LabProcessError, scenario.ScenarioError, image.ImageError) as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        print("Lab logs: .lab/logs/; stop everything with: make lab-down", file=sys.stderr)
        return 1
    print("\ndemo done. The lab keeps running: `make lab-down` stops it; `make destroy` removes the stack.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
