"""``python -m lab up|down|status``: the local lab (control plane and hardware simulators).

- ``up [--nodes N] [--no-node] [--hosts-on-mothership]``: start two control planes (etcd,
  kube-apiserver, kube-controller-manager, kube-scheduler, kwok): the mothership (kubeconfig
  ``.lab/kubeconfig``) and the hypervisor cluster ``lab-workers`` (``.lab/lab-workers/kubeconfig``,
  its kubeconfig also published on the mothership for its ClusterDeployment by
  ``lab.capi_standin``); install the upstream CRDs in each; create Nodes ``blade-slot-1..N`` in
  ``lab-workers`` (with ``--hosts-on-mothership`` or ``LAB_HOSTS_ON_MOTHERSHIP=1`` on the
  mothership, as before the second cluster); start the hardware simulators on 127.0.0.1 and the
  real node ``mgmt-1``
  (containerd, runc, kubelet and the DRA kubelet plugin: ``lab.node``) and load the composer
  image last built by ``make image`` into it; start a Prometheus scraping the composer Pods on 127.0.0.1:19090
  (``lab.prometheus``); start the k0rdent templates' chart path (``lab.template_sources``: the
  lab's chart repository, Flux source-controller, the kcm stand-in). Idempotent.
- ``down [--wipe]``: stop every lab process (and with ``--wipe`` delete cluster and
  simulator state, the lab's chart repository and source-controller's artifacts).
- ``status``: one line per process (the second control plane's named ``lab-workers/<process>``)
  with its resident memory, and the total.
"""

from __future__ import annotations

import argparse
import sys
import time

from lab import controlplane, node, processes, prometheus, services, settings, sshd, template_sources


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    ap = argparse.ArgumentParser(prog="python -m lab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start the lab")
    up.add_argument("--nodes", type=int, default=2, help="number of blade-slot-N Nodes (default 2)")
    up.add_argument("--no-simulators", action="store_true", help="control plane only")
    up.add_argument("--no-node", action="store_true", help="without the real kubelet node mgmt-1")
    up.add_argument("--hosts-on-mothership", action="store_true",
                    help="register the blade-slot-N Nodes on the mothership, not in lab-workers")
    down = sub.add_parser("down", help="stop the lab")
    down.add_argument("--wipe", action="store_true",
                      help="also delete cluster, simulator and chart-path state")
    sub.add_parser("status", help="show lab processes")
    args = ap.parse_args(argv)

    if args.cmd == "up":
        t0 = time.monotonic()
        on_mothership = args.hosts_on_mothership or settings.LabConfig().hosts_on_mothership
        cfg = settings.LabConfig(nodes=tuple(f"blade-slot-{i}" for i in range(1, args.nodes + 1)),
                                 hosts_on_mothership=on_mothership)
        try:
            controlplane.start(cfg)
            if not args.no_simulators:
                services.start_simulators(cfg)
                problem = services.start_sshd(cfg)
                if problem:
                    print(f"note: lab sshd not started ({problem}); host preparation over SSH "
                          "is unavailable", file=sys.stderr)
                try:
                    template_sources.start(cfg)
                except processes.LabProcessError as exc:
                    print(f"note: the templates' chart path is not running ({exc}); no template "
                          "gets a verdict", file=sys.stderr)
            if not args.no_node:
                try:
                    node.start(cfg, images=node.built_images(cfg))
                except processes.LabProcessError as exc:
                    print(f"note: real node {node.NODE_NAME} not started: {exc}\nThe rest of the lab "
                          "runs; the composer cannot run as a Pod (make lab-down stops what started).",
                          file=sys.stderr)
            problem = prometheus.start_lab(cfg)
            if problem:
                print(f"note: Prometheus not started ({problem})", file=sys.stderr)
        except processes.LabProcessError as exc:
            print(f"lab up failed: {exc}", file=sys.stderr)
            print("Stop what started with: make lab-down", file=sys.stderr)
            return 1
        second = cfg.hypervisor.kubeconfig if cfg.hypervisor else "-"
        print(f"lab up in {time.monotonic() - t0:.1f} s; KUBECONFIG={cfg.kubeconfig}; hypervisor "
              f"cluster {settings.HYPERVISOR_CLUSTER}: {second}; hosts' Nodes in {cfg.hosts_cluster.name}")
        return 0
    if args.cmd == "down":
        cfg = settings.LabConfig()
        sshd_stopped = services.stop_sshd(cfg, wipe=args.wipe)
        stopped = controlplane.stop(cfg, wipe=args.wipe) + (["sshd"] if sshd_stopped else [])
        if args.wipe:
            services.wipe_state(cfg)
            template_sources.wipe_state(cfg)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return 0
    cfg = settings.LabConfig()
    rows = [(name, cfg.lab_dir, name) for name in (*controlplane.CONTROL_PLANE, controlplane.CAPI_STANDIN)]
    hypervisor = cfg.hypervisor
    if hypervisor is not None:
        rows += [(f"{hypervisor.name}/{n}", hypervisor.lab_dir, n) for n in controlplane.CONTROL_PLANE]
    rows += [(name, cfg.lab_dir, name) for name in (*services.SIMULATORS, *template_sources.PROCESSES,
                                                    *node.PROCESSES, prometheus.PROCESS)]
    total = 0
    for label, lab_dir, name in rows:
        pid = processes.running(lab_dir, name)
        rss = processes.rss_bytes(lab_dir, name) or 0
        total += rss
        print(f"{label:34} {f'running, pid {pid}, {rss / 2**20:.0f} MiB' if pid else 'stopped'}")
    pid = sshd.status(services.sshd_dir(cfg))
    print(f"{'sshd':34} {'running, pid ' + str(pid) if pid else 'stopped'}")
    print(f"{'total resident memory':34} {total / 2**20:.0f} MiB (without sshd and the node's Pods)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
