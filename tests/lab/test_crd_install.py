"""The lab's start installs the repository's CRDs (``lab/crds``) or fails naming the CRD and file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from lab import controlplane, processes, settings

pytestmark = pytest.mark.lab


def _copy_crds(tmp_path: Path) -> tuple[Path, ...]:
    dirs = []
    for d in settings.default_crd_dirs():
        shutil.copytree(d, tmp_path / d.name)
        dirs.append(tmp_path / d.name)
    return tuple(dirs)


def _make_unreadable(path: Path) -> None:
    """``path`` cannot be read afterwards: mode 000, or for root (who reads any mode) a link to
    nowhere in its place."""
    if os.geteuid() == 0:
        path.unlink()
        path.symlink_to(path.with_name("gone.yaml.missing"))
    else:
        path.chmod(0)


def test_the_default_crds_are_the_repository_folders() -> None:
    dirs = settings.default_crd_dirs()
    assert dirs and all(d.is_relative_to(settings.ROOT / "lab" / "crds") for d in dirs)
    assert {"kcm", "metal3", "dpf", "multus", "gpu-operator", "capi"} <= {d.name for d in dirs}


def test_start_fails_naming_an_unreadable_crd_file(lab, tmp_path: Path) -> None:
    dirs = _copy_crds(tmp_path)
    broken = tmp_path / "kcm" / "k0rdent.mirantis.com_servicetemplates.yaml"
    _make_unreadable(broken)
    cfg = settings.LabConfig(crd_dirs=dirs, nodes=lab.nodes)
    with pytest.raises(processes.LabProcessError) as err:
        controlplane.start(cfg)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"CRD file {broken}: cannot read it")


def test_start_fails_naming_a_crd_the_api_server_refuses(lab, tmp_path: Path) -> None:
    dirs = _copy_crds(tmp_path)
    path = tmp_path / "multus" / "k8s.cni.cncf.io_network-attachment-definitions.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["names"]["plural"] = "Not_A_Plural"  # the plural must be a lowercase DNS label
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(processes.LabProcessError) as err:
        controlplane.start(settings.LabConfig(crd_dirs=dirs, nodes=lab.nodes))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(
        f"CRD network-attachment-definitions.k8s.cni.cncf.io from {path}: the API server refused it: "
    )
    assert "spec.names.plural" in message or "metadata.name" in message


def test_a_missing_crd_folder_fails_the_start(lab, tmp_path: Path) -> None:
    with pytest.raises(processes.LabProcessError, match=f"CRD folder {tmp_path / 'nothing'}: missing"):
        controlplane.start(settings.LabConfig(crd_dirs=(tmp_path / "nothing",), nodes=lab.nodes))
