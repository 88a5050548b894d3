"""The lab's one real node: containerd + runc + kubelet, registered as Node ``mgmt-1``.

Beside the kwok Nodes (which run no containers) the lab runs a real kubelet so that the
composer chart's Pods really run. Parts:

- ``containerd`` v2 (built from its Go module by ``lab/toolchain/build.sh``, with its ``ctr`` and
  runc shim, kept off ``$PATH`` in ``.toolchain/containerd/bin``; Debian 12's 1.6 has no CDI) with
  the ``runc`` runtime (Debian) and the ``cgroupfs`` cgroup driver:
  this machine mounts cgroup v1 with a v2 hierarchy beside it ("hybrid"), which ``crun``
  refuses and the systemd driver does not fit. containerd's CRI spec leaves RLIMIT_NOFILE at
  1024:1024 and does not touch RLIMIT_NPROC, below the machine's hard limits (the process lacks
  CAP_SYS_RESOURCE, so raising them fails with "Operation not permitted"), and
  ``restrict_oom_score_adj`` keeps the kubelet's oom_score_adj requests within what the process
  may set. CDI is on (always, in containerd 2.4) and reads the specs in ``<lab dir>/node/cdi``.
- CNI: Debian's ``containernetworking-plugins`` ``bridge`` + ``host-local`` on bridge
  ``labnode0``, pods in ``10.89.0.0/24``; the bridge address ``10.89.0.1`` is the node's
  address (Node ``InternalIP``).
- the kubelet, built from ``k8s.io/kubernetes`` at the lab's pin (``lab/toolchain/build.sh``),
  with a client certificate ``system:node:mgmt-1`` and the taint
  ``composable-gpu.io/system=true:NoSchedule`` (only system workloads that tolerate it land).
- the pod sandbox image ``localhost/composable-gpu/pause:lab`` (``lab/toolchain/pause``) and the
  composer image, loaded into containerd's ``k8s.io`` namespace from podman.
- ``kubelet-plugin``: the DRA driver's kubelet plugin (``node/kubeletplugin``,
  ``composer-kubelet-plugin``), registered through the kubelet's plugin registry; it writes each
  prepared claim's CDI spec into ``<lab dir>/node/cdi`` for the GPUs whose device files it finds in
  ``<lab dir>/gpus/mgmt-1`` (:func:`device_dir`).
- ``node-proxy``: the lab has no kube-proxy and its API server and simulators listen on
  127.0.0.1 only; this relays the node address's ports (API server 16443, Director 18080, and
  ``lab-workers``' API server 16543, whose certificate names the node address too) to them, so a
  Pod reaches them at ``10.89.0.1`` (:mod:`lab.node_proxy`).

Everything lives under ``<lab dir>/node``; :func:`stop` kills every pod container through
containerd, stops kubelet and containerd, and unmounts what the kubelet mounted there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from domain.composer_mode import DRA_DRIVER
from lab import image, kube, pki, processes, settings

if TYPE_CHECKING:
    from lab.settings import LabConfig

NODE_NAME = "mgmt-1"
#: Taint of the real node and the toleration a system workload needs to land there.
TAINT_KEY = "composable-gpu.io/system"
TAINT = {"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}
NODE_LABELS = {"composable-gpu.io/role": "system"}
BRIDGE = "labnode0"
POD_SUBNET = "10.89.0.0/24"
NODE_IP = "10.89.0.1"
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
PAUSE_IMAGE = "localhost/composable-gpu/pause:lab"
PROCESSES = ("containerd", "node-proxy", "kubelet", "kubelet-plugin")
#: Debian packages the node needs (``lab/setup.sh`` installs them as root).
REQUIRED = {"runc": "runc", "ip": "iproute2", "podman": "podman"}
CNI_BIN = Path("/usr/lib/cni")
#: containerd v2, its ``ctr`` and runc shim (``lab/toolchain/build.sh`` ``build_containerd``).
CONTAINERD_BIN = settings.ROOT / ".toolchain" / "containerd" / "bin"
CONTAINERD_TOOLS = ("containerd", "ctr", "containerd-shim-runc-v2")
#: The kubelet plugin of the DRA driver :data:`DRA_DRIVER` (``node/kubeletplugin``).
KUBELET_PLUGIN = "composer-kubelet-plugin"


@dataclass(frozen=True)
class NodePaths:
    """Files of the node under ``<lab dir>/node``."""

    base: Path

    @property
    def socket(self) -> Path:
        return self.base / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.base / "kubelet"

    @property
    def cdi_dir(self) -> Path:
        """The CDI spec directory containerd reads and the kubelet plugin writes."""
        return self.base / "cdi"

    @property
    def plugin_registration_socket(self) -> Path:
        """The kubelet plugin's registration socket in the kubelet's plugin registry
        (``kubeletplugin`` helper: ``<driver name>-reg.sock``)."""
        return self.kubelet_root / "plugins_registry" / f"{DRA_DRIVER}-reg.sock"


def paths(cfg: LabConfig) -> NodePaths:
    """The node's directory layout for lab ``cfg``."""
    return NodePaths(cfg.lab_dir / "node")


def device_dir(cfg: LabConfig) -> Path:
    """The directory of mgmt-1's simulated GPU device files, ``<lab dir>/gpus/mgmt-1``: the
    layout of the gpu-agent's ``--device-dir <lab dir>/gpus`` (:mod:`lab.gpu_agent.device_files`),
    which the kubelet plugin reads."""
    return cfg.lab_dir / "gpus" / NODE_NAME


def unavailable_reason(cfg: LabConfig) -> str | None:
    """Why the real node cannot run here (missing binary, not root), or None."""
    if os.geteuid() != 0:
        return "the real node needs root (containerd, network namespaces, mounts)"
    missing = sorted({pkg for b, pkg in REQUIRED.items() if not shutil.which(b)})
    if missing:
        return f"Debian package(s) missing: {', '.join(missing)} (make setup installs them as root)"
    if not (CNI_BIN / "bridge").exists():
        return "Debian package containernetworking-plugins missing (make setup installs it as root)"
    for path in (*(cfg.bin_dir / b for b in ("kubelet", "pause", KUBELET_PLUGIN)),
                 *(CONTAINERD_BIN / b for b in CONTAINERD_TOOLS)):
        if not path.exists():
            return f"{path} missing: run `make setup`"
    return None


# --------------------------------------------------------------------------- configuration (pure)


def containerd_config(p: NodePaths) -> str:
    """containerd v2 config (version 4 TOML): own root/state/socket, CRI with runc + cgroupfs
    through the shim built with it, the lab's pause image, CNI from Debian's plugins, CDI specs
    from :attr:`NodePaths.cdi_dir`.

    Names are containerd v2.4's: version 4 is its ``version.ConfigVersion`` (a version 3 file is
    migrated with a warning on every start: the gRPC and ttrpc addresses moved into the
    ``io.containerd.server.v1.*`` plugins, ``cmd/containerd/server/config/config.go``
    ``serviceMigrate``); images (snapshotter, pinned sandbox image) and runtime
    (``cdi_spec_dirs``, runtimes, ``cni.bin_dirs``) are separate CRI plugins
    (``internal/cri/config/config.go``). CDI has no switch any more: ``enable_cdi`` was removed
    in v2.4, "CDI support will always be enabled" (``RELEASES.md``, deprecated config properties).
    ``imports`` is emptied (its default reads ``/etc/containerd/conf.d/*.toml`` of the machine)
    and NRI is disabled (its socket would be the machine-wide ``/var/run/nri/nri.sock``).
    """
    images = "plugins.'io.containerd.cri.v1.images'"
    rt = "plugins.'io.containerd.cri.v1.runtime'"
    return f"""version = 4
root = "{p.base / 'containerd' / 'root'}"
state = "{p.base / 'containerd' / 'state'}"
imports = []
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.nri.v1.nri"]

[plugins.'io.containerd.server.v1.grpc']
  address = "{p.socket}"

[plugins.'io.containerd.server.v1.ttrpc']
  address = "{p.socket}.ttrpc"

[plugins.'io.containerd.internal.v1.opt']
  path = "{p.base / 'containerd' / 'opt'}"

[{images}]
  snapshotter = "overlayfs"

[{images}.pinned_images]
  sandbox = "{PAUSE_IMAGE}"

[{rt}]
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  cdi_spec_dirs = ["{p.cdi_dir}"]

[{rt}.containerd]
  default_runtime_name = "runc"

[{rt}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  runtime_path = "{CONTAINERD_BIN / 'containerd-shim-runc-v2'}"

[{rt}.containerd.runtimes.runc.options]
  BinaryName = "{shutil.which('runc') or '/usr/bin/runc'}"
  SystemdCgroup = false

[{rt}.cni]
  bin_dirs = ["{CNI_BIN}"]
  conf_dir = "{p.base / 'cni'}"
"""


def cni_config() -> dict:
    """CNI network list: ``bridge`` (gateway = the node address) + ``host-local`` IPAM + loopback
    is implicit in containerd; ``portmap`` is not needed (no hostPorts)."""
    return {
        "cniVersion": "1.0.0",
        "name": "lab-node",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": True,
            "ipMasq": False,
            "hairpinMode": True,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                     "routes": [{"dst": "0.0.0.0/0"}]},
        }],
    }


def kubelet_config(p: NodePaths, pki_dir: Path) -> dict:
    """KubeletConfiguration (kubelet.config.k8s.io/v1beta1) for this machine: cgroupfs, the lab's
    containerd, authn by client cert (the API server's kubelet client cert) and webhook authz,
    no swap check, no image GC or disk eviction surprises on a shared disk."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,  # this machine's cgroups are v1 (a v2 hierarchy is only mounted beside)
        "containerRuntimeEndpoint": f"unix://{p.socket}",
        "failSwapOn": False,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(pki_dir / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "registerWithTaints": [TAINT],
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "resolvConf": "/etc/resolv.conf",
        "staticPodPath": "",
        "serializeImagePulls": False,
        "maxPods": 20,
        "podPidsLimit": 1024,
        "localStorageCapacityIsolation": False,
    }


# --------------------------------------------------------------------------- run


def _run(argv: list[str], *, what: str, timeout: float = 300) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise processes.LabProcessError(f"{what}: {' '.join(argv[:4])} ... exit {proc.returncode}: "
                                        f"{(proc.stderr or proc.stdout).strip()[-1500:]}")
    return proc.stdout


def _ensure_bridge() -> None:
    """Create bridge ``labnode0`` with the node address (the CNI bridge plugin reuses it)."""
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True, check=False).returncode != 0:
        _run(["ip", "link", "add", BRIDGE, "type", "bridge"], what="create bridge")
    addrs = _run(["ip", "-o", "-4", "addr", "show", "dev", BRIDGE], what="bridge address")
    if f" {NODE_IP}/" not in addrs:
        _run(["ip", "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE], what="bridge address")
    _run(["ip", "link", "set", BRIDGE, "up"], what="bridge up")


def ctr(p: NodePaths, *args: str, timeout: float = 300) -> str:
    """``ctr`` against the node's containerd, namespace ``k8s.io``; returns stdout."""
    return _run([str(CONTAINERD_BIN / "ctr"), "--address", str(p.socket), "--namespace", "k8s.io", *args],
                what="ctr " + " ".join(args[:2]), timeout=timeout)


def load_image(p: NodePaths, ref: str) -> str:
    """Copy podman image ``ref`` into the node's containerd (``podman save`` -> ``ctr import``).

    Returns the image's config digest (``sha256:...``), as the kubelet reports it in
    ``imageID``. Skips the copy when containerd already holds ``ref`` with that config.
    """
    image_id = "sha256:" + image.inspect(ref)["Id"].removeprefix("sha256:")
    marker = p.base / "images" / (ref.replace("/", "_").replace(":", "_") + ".id")
    listed = ctr(p, "images", "ls", "-q").split()
    if ref in listed and marker.exists() and marker.read_text() == image_id:
        return image_id
    archive = p.base / "images" / (ref.replace("/", "_").replace(":", "_") + ".tar")
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)
    _run([*image.PODMAN, "save", "--format", "oci-archive", "-o", str(archive), ref],
         what=f"podman save {ref}")
    try:
        ctr(p, "images", "import", "--base-name", ref.rsplit(":", 1)[0], str(archive))
    finally:
        archive.unlink(missing_ok=True)
    marker.write_text(image_id)
    return image_id


def ensure_pause_image(cfg: LabConfig) -> str:
    """Podman image ``localhost/composable-gpu/pause:lab``: one file, the lab's ``pause``."""
    if image.image_exists(PAUSE_IMAGE):
        return PAUSE_IMAGE
    import tarfile
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "pause.tar"
        with tarfile.open(tar, "w") as tf:
            tf.add(cfg.bin_dir / "pause", arcname="pause")
        _run([*image.PODMAN, "import", "--change", 'ENTRYPOINT ["/pause"]', "--change", "USER 65535:65535",
              str(tar), PAUSE_IMAGE], what="podman import pause")
    return PAUSE_IMAGE


def built_images(cfg: LabConfig) -> tuple[str, ...]:
    """The composer image ``make image`` last built (``<lab dir>/composer-image``) and its ``:lab``
    tag (the one the dev stack names), those podman has."""
    ref_file = cfg.lab_dir / "composer-image"
    ref = ref_file.read_text().strip() if ref_file.exists() else ""
    lab_ref = f"{image.IMAGE_REPOSITORY}:{image.LAB_TAG}"
    return tuple(r for r in (ref, lab_ref) if r and image.image_exists(r))


def write_configs(cfg: LabConfig) -> NodePaths:
    """Write containerd, CNI and kubelet configuration and the kubelet's kubeconfig."""
    p = paths(cfg)
    for d in (p.base / "cni", p.base / "containerd", p.kubelet_root, p.base / "kubelet-pki", p.cdi_dir,
              device_dir(cfg)):
        d.mkdir(parents=True, exist_ok=True)
    (p.base / "containerd.toml").write_text(containerd_config(p))
    (p.base / "cni" / "10-lab-node.conflist").write_text(json.dumps(cni_config(), indent=2))
    (p.base / "kubelet-config.yaml").write_text(json.dumps(kubelet_config(p, cfg.pki_dir), indent=2))
    crt, key = pki.ensure_node_cert(cfg.pki_dir, NODE_NAME)
    kube.write_kubeconfig(cfg, p.base / "kubelet.kubeconfig", user=f"system:node:{NODE_NAME}",
                     client_cert=(crt, key))
    return p


def _kubelet_healthy() -> bool:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{KUBELET_HEALTHZ_PORT}/healthz", timeout=2) as r:
        return r.status == 200


def start(cfg: LabConfig, *, images: tuple[str, ...] = ()) -> NodePaths:
    """Start containerd, node-proxy and the kubelet (idempotent), load ``images`` and wait until
    Node ``mgmt-1`` is Ready.

    Raises:
        processes.LabProcessError: a part is missing or did not get ready (the message quotes
            its log), e.g. the kubelet's own error when it cannot run on this machine.
    """
    reason = unavailable_reason(cfg)
    if reason:
        raise processes.LabProcessError(f"real node {NODE_NAME}: {reason}")
    p = write_configs(cfg)
    _ensure_bridge()
    processes.start(cfg.lab_dir, "containerd", [str(CONTAINERD_BIN / "containerd"),
                                                "--config", str(p.base / "containerd.toml")])
    processes.wait_until(lambda: p.socket.exists() and bool(ctr(p, "version", timeout=10)),
                         what="containerd", timeout_seconds=60, lab_dir=cfg.lab_dir, name="containerd")
    load_image(p, ensure_pause_image(cfg))
    for ref in images:
        load_image(p, ref)
    processes.start(cfg.lab_dir, "node-proxy", [
        sys.executable, "-m", "lab.node_proxy", "--listen", NODE_IP,
        "--port", str(cfg.ports.apiserver), "--port", str(settings.DIRECTOR_PORT),
        *(["--port", str(cfg.hypervisor_ports.apiserver)] if cfg.hypervisor_ports else [])])
    processes.wait_until(lambda: processes.port_open(cfg.ports.apiserver, NODE_IP), what="node-proxy",
                         timeout_seconds=30, lab_dir=cfg.lab_dir, name="node-proxy")
    processes.start(cfg.lab_dir, "kubelet", [
        str(cfg.bin_dir / "kubelet"),
        f"--config={p.base / 'kubelet-config.yaml'}",
        f"--kubeconfig={p.base / 'kubelet.kubeconfig'}",
        f"--root-dir={p.kubelet_root}",
        f"--cert-dir={p.base / 'kubelet-pki'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={NODE_IP}",
        "--node-labels=" + ",".join(f"{k}={v}" for k, v in NODE_LABELS.items()),
        "--v=1",
    ])
    processes.wait_until(_kubelet_healthy, what="kubelet /healthz", timeout_seconds=90,
                         lab_dir=cfg.lab_dir, name="kubelet")
    start_kubelet_plugin(cfg)
    api = kube.admin_client(cfg)
    processes.wait_until(lambda: kube.nodes_ready(api, (NODE_NAME,)), what=f"Node {NODE_NAME} Ready",
                         timeout_seconds=120, lab_dir=cfg.lab_dir, name="kubelet")
    return p


def start_kubelet_plugin(cfg: LabConfig) -> None:
    """Start the DRA kubelet plugin as a process beside the kubelet (idempotent) and wait for its
    registration socket.

    Raises:
        processes.LabProcessError: it did not register within 30 s (the message quotes its log).
    """
    p = paths(cfg)
    processes.start(cfg.lab_dir, "kubelet-plugin", kubelet_plugin_argv(cfg, p))
    processes.wait_until(p.plugin_registration_socket.exists, what=f"{KUBELET_PLUGIN} registration socket",
                         timeout_seconds=30, lab_dir=cfg.lab_dir, name="kubelet-plugin")


def stop_kubelet_plugin(cfg: LabConfig) -> None:
    """Stop the plugin process (it removes its sockets on SIGTERM), so that another copy of the
    driver's plugin, the chart's DaemonSet, can register with this kubelet under the same name."""
    processes.stop(cfg.lab_dir, "kubelet-plugin")


def kubelet_plugin_argv(cfg: LabConfig, p: NodePaths) -> list[str]:
    """Command line of the DRA kubelet plugin beside the kubelet: the kubelet's own credentials
    (the node authorizer lets it get its pods' ResourceClaims), the kubelet's plugin registry and
    plugins directories under its root dir, the node's device and CDI directories."""
    return [
        str(cfg.bin_dir / KUBELET_PLUGIN),
        f"--node-name={NODE_NAME}",
        f"--kubeconfig={p.base / 'kubelet.kubeconfig'}",
        f"--kubelet-registrar-dir={p.plugin_registration_socket.parent}",
        f"--plugin-data-dir={p.kubelet_root / 'plugins' / DRA_DRIVER}",
        f"--device-dir={device_dir(cfg)}",
        f"--cdi-dir={p.cdi_dir}",
    ]


def _mounts_under(base: Path) -> list[str]:
    prefix = str(base.resolve()) + "/"
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1].replace("\\040", " ")
        if target.startswith(prefix):
            found.append(target)
    return sorted(found, key=len, reverse=True)


def _shim_pids(p: NodePaths) -> list[int]:
    """Pids of the containerd-shim processes of this node's containerd (their command line
    names its socket), which run in sessions of their own."""
    needle = str(p.socket).encode()
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if b"containerd-shim" in cmd and needle in cmd:
            pids.append(int(d.name))
    return pids


def stop(cfg: LabConfig) -> list[str]:
    """Stop the kubelet, every pod container, containerd and node-proxy; unmount the kubelet's
    volumes. Returns the names of the processes that were stopped."""
    p = paths(cfg)
    stopped = [n for n in ("kubelet", "kubelet-plugin") if processes.stop(cfg.lab_dir, n)]
    if processes.running(cfg.lab_dir, "containerd") and p.socket.exists():
        try:
            tasks = [str(CONTAINERD_BIN / "ctr"), "--address", str(p.socket), "-n", "k8s.io", "tasks"]
            for cid in ctr(p, "tasks", "ls", "-q", timeout=30).split():
                subprocess.run([*tasks, "kill", "-s", "SIGKILL", cid], capture_output=True, timeout=30,
                               check=False)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and ctr(p, "tasks", "ls", "-q", timeout=30).strip():
                for cid in ctr(p, "tasks", "ls", "-q", timeout=30).split():
                    subprocess.run([*tasks, "delete", "-f", cid], capture_output=True, timeout=30,
                                   check=False)
                time.sleep(0.5)
        except (processes.LabProcessError, subprocess.TimeoutExpired):
            pass
    shims = _shim_pids(p)
    stopped += [n for n in ("containerd", "node-proxy") if processes.stop(cfg.lab_dir, n)]
    for pid in shims + _shim_pids(p):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    for target in _mounts_under(p.base):
        subprocess.run(["umount", "-l", target], capture_output=True, check=False)
    return stopped


def image_digests(cfg: LabConfig, ref: str) -> set[str]:
    """``sha256:...`` digests that name image ``ref`` in the node's containerd: its manifest
    digest (``ctr images ls``) and its config digest (podman's image id)."""
    found = {"sha256:" + image.inspect(ref)["Id"].removeprefix("sha256:")}
    for line in ctr(paths(cfg), "images", "ls").splitlines()[1:]:
        cols = line.split()
        if cols and cols[0] == ref:
            found.add(cols[2])
    return found


def roll_if_stale(cfg: LabConfig, namespace: str, ref: str, *, timeout_seconds: float = 240) -> str | None:
    """Restart the composer Deployment in ``namespace`` when a Pod runs ``ref`` with another image
    than the one loaded now (a moving tag such as ``:lab`` does not change the Pod spec), and wait
    until the rollout is complete (every replica updated and ready, no old Pod left).
    Returns the Deployment name when restarted.

    Raises:
        processes.LabProcessError: the rollout did not complete within ``timeout_seconds``.
    """
    from datetime import UTC, datetime

    from kubernetes import client

    api = kube.admin_client(cfg)
    want = image_digests(cfg, ref)
    stale = False
    for p in client.CoreV1Api(api).list_namespaced_pod(namespace).items:
        # The status names the image by whichever tag the runtime lists first: match the spec.
        named = {c.name for c in p.spec.containers if c.image == ref}
        for c in p.status.container_statuses or []:
            if c.name in named and c.image_id and not any(c.image_id.endswith(d) for d in want):
                stale = True
    if not stale:
        return None
    apps = client.AppsV1Api(api)
    for d in apps.list_namespaced_deployment(namespace).items:
        if any(c.image == ref for c in d.spec.template.spec.containers):
            stamp = datetime.now(UTC).isoformat()
            name = d.metadata.name
            apps.patch_namespaced_deployment(name, namespace, {"spec": {"template": {"metadata": {
                "annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}})

            def rolled(name: str = name) -> bool:
                cur = apps.read_namespaced_deployment(name, namespace)
                want, st = cur.spec.replicas, cur.status
                return (st.observed_generation or 0) >= cur.metadata.generation and \
                    st.updated_replicas == want and st.ready_replicas == want and st.replicas == want

            processes.wait_until(rolled, what=f"rollout of Deployment {namespace}/{name}",
                                 timeout_seconds=timeout_seconds, interval_seconds=1.0)
            return name
    return None
