"""An isolated lab control plane for the benchmarks, beside any lab other people run.

``lab.controlplane`` listens on fixed ports (etcd 12379/12380, kube-apiserver 16443) that the
dev stack and other engineers' tests use. The benchmarks must neither stop nor load that lab,
so :func:`isolated_control_plane` starts the same binaries, through the same
``lab.controlplane.start``, as one more ``lab.settings.LabConfig``: free ports and its own
``lab_dir``; kube-controller-manager and kube-scheduler run
with ``--secure-port=0`` and kwok without a server, so nothing else binds a port. It stops only
the processes recorded in its own ``lab_dir`` (by pid, ``lab.processes.stop_all``).

Equivalent by hand: ``LAB_DIR=<dir> python -m lab up --nodes N --no-simulators`` when the fixed
ports are free.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lab import controlplane, settings


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class IsolatedLab:
    """A running isolated control plane.

    Attributes:
        cfg: its ``lab.settings.LabConfig`` (``lab_dir``, node names).
        apiserver_port: the kube-apiserver's HTTPS port on 127.0.0.1.
        etcd_port: etcd's client port.
        start_seconds: how long starting it took (including Nodes Ready).
    """

    cfg: settings.LabConfig
    apiserver_port: int
    etcd_port: int
    start_seconds: float

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client certificate) of this control plane."""
        return self.cfg.kubeconfig


@contextmanager
def isolated_control_plane(lab_dir: Path, nodes: tuple[str, ...]) -> Iterator[IsolatedLab]:
    """Start etcd, kube-apiserver, controller-manager, scheduler and kwok on free ports in
    ``lab_dir`` with kwok Nodes ``nodes``; stop them (and only them) on exit.

    Raises:
        lab.processes.LabProcessError: a component did not start (the message quotes its log).
    """
    etcd, peer, api = free_port(), free_port(), free_port()
    ports = settings.ControlPlanePorts(etcd=etcd, etcd_peer=peer, apiserver=api)
    # No second control plane: its ports are fixed, and the benchmark's Nodes are this one's.
    cfg = settings.LabConfig(lab_dir=Path(lab_dir), nodes=nodes, ports=ports, hypervisor_ports=None)
    t0 = time.monotonic()
    try:
        controlplane.start(cfg)
        yield IsolatedLab(cfg, api, etcd, time.monotonic() - t0)
    finally:
        controlplane.stop(cfg, wipe=True)
