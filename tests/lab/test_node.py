"""The lab's real node: its containerd, CNI and kubelet configuration, and the PKI it needs."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

from cryptography import x509

from lab import node, pki
from lab.settings import LabConfig


def test_containerd_v2_uses_runc_with_cgroupfs_the_lab_pause_image_debian_cni_and_the_lab_cdi_dir(
        tmp_path: Path) -> None:
    p = node.NodePaths(tmp_path)
    cfg = tomllib.loads(node.containerd_config(p))
    assert cfg["version"] == 4  # containerd v2.4's config version
    assert cfg["imports"] == []  # nothing from the machine's /etc/containerd/conf.d
    plugins = cfg["plugins"]
    assert plugins["io.containerd.server.v1.grpc"]["address"] == str(tmp_path / "containerd.sock")
    assert cfg["root"].startswith(str(tmp_path)) and cfg["state"].startswith(str(tmp_path))
    images = plugins["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == node.PAUSE_IMAGE
    cri = plugins["io.containerd.cri.v1.runtime"]
    assert cri["restrict_oom_score_adj"] is True  # the process may not lower oom_score_adj
    assert cri["cdi_spec_dirs"] == [str(p.cdi_dir)]  # where the kubelet plugin writes
    runc = cri["containerd"]["runtimes"]["runc"]
    assert cri["containerd"]["default_runtime_name"] == "runc"
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    # the shim built with it, not Debian's 1.6 one
    assert runc["runtime_path"] == str(node.CONTAINERD_BIN / "containerd-shim-runc-v2")
    assert runc["options"]["SystemdCgroup"] is False  # hybrid cgroups: the cgroupfs driver
    assert runc["options"]["BinaryName"].endswith("runc")
    assert cri["cni"]["bin_dirs"] == ["/usr/lib/cni"]


def test_kubelet_plugin_registers_in_the_kubelets_registry_and_writes_into_containerds_cdi_dir(
        tmp_path: Path) -> None:
    cfg = LabConfig(lab_dir=tmp_path / "lab")
    p = node.paths(cfg)
    argv = node.kubelet_plugin_argv(cfg, p)
    flags = dict(a.removeprefix("--").split("=", 1) for a in argv[1:])
    assert argv[0] == str(cfg.bin_dir / "composer-kubelet-plugin")
    assert flags["node-name"] == node.NODE_NAME
    assert Path(flags["kubelet-registrar-dir"]) == p.kubelet_root / "plugins_registry"
    registry = Path(flags["kubelet-registrar-dir"])
    assert p.plugin_registration_socket == registry / "gpu.composer.liqid.io-reg.sock"
    assert Path(flags["cdi-dir"]) == p.cdi_dir
    assert tomllib.loads(node.containerd_config(p))["plugins"]["io.containerd.cri.v1.runtime"][
        "cdi_spec_dirs"] == [flags["cdi-dir"]]
    assert Path(flags["device-dir"]) == tmp_path / "lab" / "gpus" / "mgmt-1"  # the gpu-agent's layout


def test_cni_bridge_gateway_is_the_node_address() -> None:
    (bridge,) = node.cni_config()["plugins"]
    assert bridge["type"] == "bridge" and bridge["bridge"] == node.BRIDGE and bridge["isGateway"]
    (rng,) = bridge["ipam"]["ranges"]
    assert rng == [{"subnet": node.POD_SUBNET, "gateway": node.NODE_IP}]
    assert ipaddress.ip_address(node.NODE_IP) in ipaddress.ip_network(node.POD_SUBNET)


def test_kubelet_config_cgroupfs_taint_and_authn(tmp_path: Path) -> None:
    kc = node.kubelet_config(node.NodePaths(tmp_path), tmp_path / "pki")
    assert kc["cgroupDriver"] == "cgroupfs"
    assert kc["containerRuntimeEndpoint"] == f"unix://{tmp_path / 'containerd.sock'}"
    assert kc["registerWithTaints"] == [node.TAINT]
    assert kc["authentication"]["anonymous"]["enabled"] is False
    assert kc["authentication"]["x509"]["clientCAFile"] == str(tmp_path / "pki" / "ca.crt")
    assert kc["authorization"]["mode"] == "Webhook"
    assert kc["readOnlyPort"] == 0 and kc["address"] == node.NODE_IP


def _sans(path: Path) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.IPAddress)


def test_apiserver_cert_names_the_node_address_and_an_old_cert_is_reissued(tmp_path: Path) -> None:
    pki.ensure_pki(tmp_path)
    assert ipaddress.ip_address(node.NODE_IP) in _sans(tmp_path / "apiserver.crt")
    assert pki.NODE_IP == node.NODE_IP
    # a cert from before the node existed (127.0.0.1 only) is re-issued by the same CA
    ca_name, ca_key = pki._load_ca(tmp_path)
    old_ip = pki.NODE_IP
    try:
        pki.NODE_IP = "127.0.0.1"
        pki._issue_apiserver_cert(tmp_path, ca_name, ca_key)
    finally:
        pki.NODE_IP = old_ip
    assert ipaddress.ip_address(node.NODE_IP) not in _sans(tmp_path / "apiserver.crt")
    ca_before = (tmp_path / "ca.crt").read_bytes()
    pki.ensure_pki(tmp_path)
    assert ipaddress.ip_address(node.NODE_IP) in _sans(tmp_path / "apiserver.crt")
    assert (tmp_path / "ca.crt").read_bytes() == ca_before


def test_node_client_cert_is_the_node_authorizer_identity(tmp_path: Path) -> None:
    pki.ensure_pki(tmp_path)
    crt, key = pki.ensure_node_cert(tmp_path, "mgmt-1")
    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    assert cert.subject.rfc4514_string() == "CN=system:node:mgmt-1,O=system:nodes"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    before = crt.read_bytes()
    assert pki.ensure_node_cert(tmp_path, "mgmt-1") == (crt, key)
    assert crt.read_bytes() == before  # created once
