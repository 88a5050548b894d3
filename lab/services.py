"""The lab's hardware stand-ins, started beside the control plane.

- ``director-sim``: the LIQID Director simulator (``lab.director_sim``) on 127.0.0.1:18080,
  loaded with ``lab/inventories/dev.yaml`` (2 hosts, 2 GPUs).
- ``gpu-agent``: the GPU-Operator stand-in (``lab.gpu_agent``) that reflects the Director's
  attachments into the kwok Nodes' ``nvidia.com/gpu`` capacity and GFD labels, in the cluster
  whose Nodes the hosts are (``LabConfig.hosts_cluster``: the hypervisor cluster ``lab-workers``,
  or the mothership); started again when that changed.
- ``redfish-sim``: BlueField-3 DPU BMCs on 127.0.0.1:18441-18442 and host BMCs on
  18451-18452 (``lab.redfish_sim``), HTTPS with a self-signed certificate.

Their ports and the lab credentials are ``lab.settings``'s (the ones ``Pulumi.dev.yaml``
names); the credentials reach the simulators through the environment, never the command line.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from lab import processes, sshd
from lab.kube import LAB_FABRIC_LABEL
from lab.settings import (
    BMC_PASSWORD,
    BMC_USER,
    DIRECTOR_PASSWORD,
    DIRECTOR_PORT,
    DIRECTOR_USER,
    DPU_BMC_PORTS,
    HOST_BMC_PORTS,
    ROOT,
    SSHD_PORT,
    director_url,
)

if TYPE_CHECKING:
    from lab.settings import LabConfig

SIMULATORS = ("director-sim", "redfish-sim", "gpu-agent")


def start_simulators(cfg: LabConfig, *, hotplug_latency_seconds: float = 2.0,
                     advertise_delay_seconds: float = 1.0, inventory: Path | None = None,
                     async_seconds: float | None = None) -> None:
    """Start the Director and Redfish simulators (idempotent) and wait until they answer.

    ``async_seconds``: the Director simulator answers every change with HTTP 202 and a job of
    that many seconds (``--async-seconds``; ``None`` leaves it to ``$DIRECTOR_SIM_ASYNC_SECONDS``,
    e.g. ``DIRECTOR_SIM_ASYNC_SECONDS=2 make lab-up``).

    Raises:
        processes.LabProcessError: a simulator did not start; the message quotes its log.
    """
    state = cfg.lab_dir / "sim-state"
    state.mkdir(parents=True, exist_ok=True)
    processes.start(cfg.lab_dir, "director-sim", [
        sys.executable, "-m", "lab.director_sim",
        "--host", "127.0.0.1", "--port", str(DIRECTOR_PORT),
        "--inventory", str(inventory or ROOT / "lab" / "inventories" / "dev.yaml"),
        "--state-file", str(state / "director.json"),
        "--hotplug-latency", str(hotplug_latency_seconds),
        *(["--async-seconds", str(async_seconds)] if async_seconds is not None else []),
    ], env={"DIRECTOR_SIM_USERNAME": DIRECTOR_USER, "DIRECTOR_SIM_PASSWORD": DIRECTOR_PASSWORD},
        cwd=ROOT, ports=[DIRECTOR_PORT])
    processes.wait_until(lambda: processes.port_open(DIRECTOR_PORT), what="director-sim",
                         timeout_seconds=120, lab_dir=cfg.lab_dir, name="director-sim")
    processes.start(cfg.lab_dir, "gpu-agent", [
        sys.executable, "-m", "lab.gpu_agent", "--kubeconfig", str(cfg.hosts_cluster.kubeconfig),
        "--director-url", director_url(), "--interval", "0.5",
        "--advertise-delay", str(advertise_delay_seconds),
        "--node-selector", "=".join(LAB_FABRIC_LABEL),
    ], env={"GPU_AGENT_DIRECTOR_PASSWORD": DIRECTOR_PASSWORD}, cwd=ROOT, restart_if_changed=True)
    bmcs = [f"{n}={p}" for n, p in {**DPU_BMC_PORTS, **HOST_BMC_PORTS}.items()]
    argv = [sys.executable, "-m", "lab.redfish_sim", "--host", "127.0.0.1",
            "--state-dir", str(state / "redfish"), "--tls"]
    for b in bmcs:
        argv += ["--bmc", b]
    processes.start(cfg.lab_dir, "redfish-sim", argv,
                    env={"REDFISH_SIM_USERNAME": BMC_USER, "REDFISH_SIM_PASSWORD": BMC_PASSWORD},
                    cwd=ROOT, ports=[*DPU_BMC_PORTS.values(), *HOST_BMC_PORTS.values()])
    ports = [*DPU_BMC_PORTS.values(), *HOST_BMC_PORTS.values()]
    processes.wait_until(lambda: all(processes.port_open(p) for p in ports), what="redfish-sim",
                         timeout_seconds=120, lab_dir=cfg.lab_dir, name="redfish-sim")


def sshd_dir(cfg: LabConfig) -> Path:
    """Instance directory of the lab sshd: under /tmp, because the unprivileged SSH user must
    be able to traverse its parents (a checkout under /root would not allow that)."""
    digest = hashlib.sha256(str(cfg.lab_dir.resolve()).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"composable-gpu-sshd-{digest}"


def start_sshd(cfg: LabConfig) -> str | None:
    """Start the lab sshd (host-preparation target) on 127.0.0.1:18022.

    Returns None when it runs, or the reason it could not start (not root, no sshd): the
    rest of the lab does not need it, so ``lab up`` reports it and goes on.
    """
    try:
        sshd.start(sshd_dir(cfg), port=SSHD_PORT)
    except processes.LabProcessError as exc:
        return str(exc)
    return None


def stop_sshd(cfg: LabConfig, *, wipe: bool = False) -> bool:
    """Stop the lab sshd (and delete its user); True if it was running."""
    return sshd.stop(sshd_dir(cfg), wipe=wipe)


def wipe_state(cfg: LabConfig) -> None:
    """Delete the simulators' persisted state."""
    shutil.rmtree(cfg.lab_dir / "sim-state", ignore_errors=True)

