"""The Go-built toolchain matches the pins and the Python packages."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".toolchain" / "bin"


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "lab" / "toolchain" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            pins[k.strip()] = v.strip()
    return pins


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout.strip()


def test_pulumi_cli_matches_pin_and_python_sdk() -> None:
    pins = _pins()
    assert _run(str(BIN / "pulumi"), "version") == pins["PULUMI_VERSION"]
    assert "v" + importlib.metadata.version("pulumi") == pins["PULUMI_VERSION"]


def test_kubernetes_provider_matches_python_package() -> None:
    pins = _pins()
    assert "v" + importlib.metadata.version("pulumi-kubernetes") == pins["PULUMI_KUBERNETES_VERSION"]
    # Installed into the Pulumi plugin cache (not on PATH, so no "ambient plugin" warning).
    listing = _run(str(BIN / "pulumi"), "plugin", "ls")
    want = pins["PULUMI_KUBERNETES_VERSION"].lstrip("v")
    assert any(line.split()[:3] == ["kubernetes", "resource", want] for line in listing.splitlines()), listing
    assert not (BIN / "pulumi-resource-kubernetes").exists()


def test_control_plane_binaries_match_pins() -> None:
    pins = _pins()
    assert _run(str(BIN / "kube-apiserver"), "--version") == f"Kubernetes {pins['KUBERNETES_VERSION']}"
    assert pins["KUBERNETES_VERSION"] in _run(str(BIN / "kubectl"), "version", "--client")
    assert pins["ETCD_VERSION"].lstrip("v") in _run(str(BIN / "etcd"), "--version")
    assert pins["HELM_VERSION"] in _run(str(BIN / "helm"), "version", "--short")


def test_language_host_and_shims_are_installed_executable() -> None:
    for name in ("pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python"):
        path = BIN / name
        assert path.exists() and path.stat().st_mode & 0o111, name


def test_source_controller_is_built_from_the_release_its_lab_crds_come_from() -> None:
    """The lab runs the source-controller of the pin against the CRDs of that same module release
    (lab/crds/flux, ``module:`` in lab/crds/sources.yaml)."""
    from lab.crdsync import load_sources

    pin = _pins()["SOURCE_CONTROLLER_VERSION"]
    flux = {s.commit for s in load_sources() if s.project == "flux"}
    assert flux == {f"github.com/fluxcd/source-controller@{pin}"}
    assert (BIN / "source-controller").stat().st_mode & 0o111


def test_prometheus_and_promtool_report_the_release_of_the_pinned_module() -> None:
    """Module v0.N.M carries Prometheus release 3.N.M (lab/toolchain/versions.env)."""
    pin = _pins()["PROMETHEUS_VERSION"]
    minor = int(pin.split(".")[1])
    release = f"{minor // 100}.{minor % 100}.{pin.split('.')[2]}"
    for name in ("prometheus", "promtool"):
        assert f"version {release} " in _run(str(BIN / name), "--version"), name


def test_kubelet_plugin_is_built_against_the_lab_kubernetes_release() -> None:
    """node/kubeletplugin/go.mod requires the staging modules of the lab's release (v1.N.P's are
    tagged v0.N.P), and ``make setup`` installed the plugin."""
    staging = "v0." + _pins()["KUBERNETES_VERSION"].removeprefix("v1.")
    go_mod = (ROOT / "node" / "kubeletplugin" / "go.mod").read_text()
    for module in ("k8s.io/dynamic-resource-allocation", "k8s.io/api", "k8s.io/client-go", "k8s.io/kubelet"):
        assert re.search(rf"^\s*{re.escape(module)} {re.escape(staging)}$", go_mod, re.M), module
    usage = subprocess.run([str(BIN / "composer-kubelet-plugin"), "-h"], capture_output=True, text=True,
                           timeout=60, check=False)
    assert usage.returncode == 0 and "-device-dir" in usage.stderr, usage.stderr


def test_lab_node_containerd_matches_its_pin_and_stays_off_path() -> None:
    """containerd, ctr and the runc shim of the lab node are the pinned v2 release (the one with
    CDI always on), in ``.toolchain/containerd/bin``, not beside the tools on ``$PATH``."""
    from lab import node

    pin = _pins()["CONTAINERD_VERSION"]
    assert node.CONTAINERD_BIN == ROOT / ".toolchain" / "containerd" / "bin"
    assert _run(str(node.CONTAINERD_BIN / "containerd"), "--version").split()[1:3] == [
        "github.com/containerd/containerd/v2", pin]
    assert _run(str(node.CONTAINERD_BIN / "ctr"), "--version").split()[1:] == [
        "github.com/containerd/containerd/v2", pin]
    shim = node.CONTAINERD_BIN / "containerd-shim-runc-v2"
    assert shim.exists() and shim.stat().st_mode & 0o111
    assert not any((BIN / name).exists() for name in node.CONTAINERD_TOOLS)
