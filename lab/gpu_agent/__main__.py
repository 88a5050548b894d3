"""``python -m lab.gpu_agent``: run the GPU-Operator stand-in (lab only).

Example::

    GPU_AGENT_DIRECTOR_PASSWORD=... python -m lab.gpu_agent --kubeconfig .lab/kubeconfig \\
        --director-url http://127.0.0.1:18080 --interval 0.5 --advertise-delay 1

The Director password comes from ``$GPU_AGENT_DIRECTOR_PASSWORD`` (or
``$DIRECTOR_SIM_PASSWORD``), never from the command line. Stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from lab.gpu_agent.agent import DirectorReader, GpuAgent, NodeAdverts
from lab.gpu_agent.device_files import DeviceFiles
from lab.gpu_agent.nvidia import parse_plugin_config


def _load(path: Path) -> dict[str, Any]:
    """A YAML (or JSON) mapping from ``path``; ValueError when it is not a mapping."""
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a mapping")
    return doc


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    ap = argparse.ArgumentParser(
        prog="python -m lab.gpu_agent",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--kubeconfig", required=True, help="kubeconfig of the lab cluster (admin)")
    ap.add_argument("--director-url", required=True, help="Director base URL")
    ap.add_argument("--director-username", default=os.environ.get("GPU_AGENT_DIRECTOR_USERNAME", "admin"))
    ap.add_argument("--node-selector", default="", help="label selector of the Nodes to manage")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    ap.add_argument(
        "--advertise-delay",
        type=float,
        default=1.0,
        help="seconds between a change on the Director and the node advertising it",
    )
    ap.add_argument(
        "--plugin-restart-quirk",
        action="store_true",
        help="advertise hot-plugged GPUs only after the device-plugin pod restarts",
    )
    ap.add_argument(
        "--plugin-namespace", default="gpu-operator", help="namespace of the fake device-plugin pods"
    )
    ap.add_argument(
        "--plugin-configs",
        type=Path,
        default=None,
        help="YAML/JSON file: device-plugin config name -> config (version: v1, the GPU Operator's "
        "devicePlugin.config.data); a node's nvidia.com/device-plugin.config label picks one and the "
        "node advertises as NVIDIA's device plugin and GFD would (time-slicing, MPS, MIG)",
    )
    ap.add_argument("--default-config", default=None, help="config of nodes without the label")
    ap.add_argument(
        "--mig-strategy",
        choices=("none", "single", "mixed"),
        default=None,
        help="the cluster's MIG strategy (the GPU Operator's MIG_STRATEGY; wins over configs)",
    )
    ap.add_argument(
        "--mig-layouts",
        type=Path,
        default=None,
        help="YAML/JSON file: mig-parted config name -> GPU product -> MIG profile -> devices per GPU",
    )
    ap.add_argument("--mig-apply-delay", type=float, default=1.0, help="seconds a mig-parted run takes")
    ap.add_argument(
        "--dra",
        action="store_true",
        help="GPUs reach pods through DRA: write GFD's labels only, no nvidia.com/gpu capacity",
    )
    ap.add_argument(
        "--device-dir",
        type=Path,
        default=None,
        help="also keep DIR/<machine>/<DRA device name> device files of the attached GPUs "
        "(what the DRA kubelet plugin's --device-dir DIR/<node> reads)",
    )
    ap.add_argument(
        "--passthrough-resources",
        type=Path,
        default=None,
        help="YAML/JSON file: GPU product -> the sandbox device plugin's resource "
        "(nvidia.com/GA100_A100_PCIE_40GB); with --plugin-configs, a node labelled "
        "nvidia.com/gpu.workload.config=vm-passthrough advertises its GPUs under it only",
    )
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    if args.dra and args.plugin_configs:
        print("gpu-agent: --dra and --plugin-configs exclude each other", file=sys.stderr)
        return 2
    try:
        configs = (
            {k: parse_plugin_config(v) for k, v in _load(args.plugin_configs).items()}
            if args.plugin_configs
            else None
        )
        layouts = _load(args.mig_layouts) if args.mig_layouts else {}
        passthrough = _load(args.passthrough_resources) if args.passthrough_resources else {}
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"gpu-agent: {exc}", file=sys.stderr)
        return 2
    password = os.environ.get("GPU_AGENT_DIRECTOR_PASSWORD") or os.environ.get("DIRECTOR_SIM_PASSWORD")
    if not password:
        print("gpu-agent: set $GPU_AGENT_DIRECTOR_PASSWORD", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    api = config.new_client_from_config(config_file=args.kubeconfig)
    core = client.CoreV1Api(api)
    adverts = NodeAdverts(api, args.node_selector)
    adverts.start()
    director = DirectorReader(args.director_url, username=args.director_username, password=password)
    agent = GpuAgent(
        core,
        director,
        node_selector=args.node_selector,
        advertise_delay_seconds=args.advertise_delay,
        plugin_restart_quirk=args.plugin_restart_quirk,
        plugin_configs=configs,
        default_config=args.default_config,
        mig_strategy=args.mig_strategy,
        mig_layouts=layouts,
        mig_apply_seconds=args.mig_apply_delay,
        dra=args.dra,
        passthrough_resources={str(k): str(v) for k, v in passthrough.items()},
        plugin_namespace=args.plugin_namespace,
        adverts=adverts,
        device_files=DeviceFiles(args.device_dir) if args.device_dir else None,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print("gpu-agent running", flush=True)
    while not stop.is_set():
        try:
            agent.step()
        except Exception as exc:  # keep polling: the Director or the API server may be restarting
            logging.getLogger("lab.gpu_agent").warning("poll failed: %s", exc)
        stop.wait(agent.next_due(args.interval))
    adverts.stop()
    director.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
