"""Fixtures of the composer tests.

End-to-end tests need the lab (the suite-wide ``lab`` fixture of ``tests/conftest.py``); they
skip only when the lab's binaries are not built (``make setup``), never for any other reason.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.composer import harness
from tests.composer.fakes import Clock

if TYPE_CHECKING:
    from lab import image as lab_image
    from tests.composer import deployed as dep

ROOT = Path(__file__).resolve().parents[2]
LAB_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "helm")


def lab_binaries_missing() -> list[str]:
    """Names of lab binaries that are not built."""
    return [b for b in LAB_BINARIES if not (ROOT / ".toolchain" / "bin" / b).exists()]


@pytest.fixture(scope="session")
def composer_lab(request: pytest.FixtureRequest) -> Any:
    """The running lab (``LabConfig``), or a skip when its binaries are not built."""
    missing = lab_binaries_missing()
    if missing:
        pytest.skip(f"lab binaries not built ({', '.join(missing)}): run `make setup`")
    return request.getfixturevalue("lab")


@pytest.fixture(scope="session")
def lab_api(composer_lab: Any) -> Any:
    """Admin ApiClient of the lab API server."""
    return harness.admin_api(composer_lab.kubeconfig)


@pytest.fixture(scope="session")
def chart_identity(
    composer_lab: Any, lab_api: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The chart's ServiceAccount and RBAC applied to the lab, with a TokenRequest kubeconfig."""
    if shutil.which("helm") is None:
        pytest.skip("helm is not on PATH: run `make setup`")
    ident = harness.apply_chart_rbac(lab_api, composer_lab, tmp_path_factory.mktemp("composer-rbac"))
    yield ident
    harness.delete_chart_rbac(lab_api, ident)


@pytest.fixture
def make_scenario(
    composer_lab: Any, lab_api: Any, chart_identity: Any, tmp_path: Path
) -> Callable[..., AbstractContextManager[harness.Scenario]]:
    """``with make_scenario(inventory="rich.yaml") as sc:`` -> a running :class:`harness.Scenario`."""

    def make(**kw: Any) -> AbstractContextManager[harness.Scenario]:
        return harness.scenario(lab_api, chart_identity, tmp_path, composer_lab.kubeconfig, **kw)

    return make


@pytest.fixture
def clock() -> Clock:
    """A settable clock starting at 1,800,000,000 s."""
    return Clock()


# The chart's Deployment on the lab's real kubelet node (tests/composer/deployed.py); the lab
# modules are imported when a lab test asks for these, not by every composer test.
@pytest.fixture(scope="module")
def composer_image() -> lab_image.Built:
    """The image built from ``Containerfile`` (warm: seconds)."""
    from lab import image as lab_image

    if not (shutil.which("podman") and shutil.which("mmdebstrap")):
        pytest.skip("podman or mmdebstrap missing (make setup installs them)")
    return lab_image.build(log=lambda _msg: None)


@pytest.fixture(scope="module")
def real_node(composer_lab: Any, composer_image: lab_image.Built) -> Iterator[Any]:
    """The lab's real kubelet node with the composer image loaded (left running)."""
    from lab import node as lab_node

    reason = lab_node.unavailable_reason(composer_lab)
    if reason:
        pytest.skip(f"real node unavailable: {reason}")
    lab_node.start(composer_lab, images=(composer_image.ref,))
    yield composer_lab


@pytest.fixture(scope="module")
def kubelet_plugin_image(real_node: Any) -> str:
    """The DRA kubelet plugin's image (``node/kubeletplugin/Containerfile``), built and loaded into
    ``mgmt-1``'s containerd; its reference."""
    from lab import image as lab_image
    from lab import node as lab_node

    built = lab_image.build_kubelet_plugin(log=lambda _msg: None)
    lab_node.load_image(lab_node.paths(real_node), built.ref)
    return built.ref


@pytest.fixture
def make_deployed(real_node: Any, lab_api: Any, composer_image: lab_image.Built,
                  tmp_path: Path) -> Callable[..., AbstractContextManager[dep.Deployed]]:
    """``with make_deployed() as d:`` -> the chart's Deployment serving a fresh scenario."""
    from tests.composer import deployed as dep

    if shutil.which("helm") is None:
        pytest.skip("helm is not on PATH: run `make setup`")

    def make(**kw: Any) -> AbstractContextManager[dep.Deployed]:
        return dep.deployed(lab_api, real_node.kubeconfig, composer_image.ref, tmp_path,
                            image_id=composer_image.image_id, **kw)

    return make
