"""The composer image: its dependency list, the credential scan, and the built image itself."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from lab import image

ROOT = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


#: What the image runs: the entrypoint, the controller wiring and the Director client (imported
#: lazily by composer.model.fabric).
_ENTRY_MODULES = ("composer.__main__", "composer.run.wiring", "composer.model.fabric",
                  "dynamic_providers.director.client")


def _imported_distributions() -> set[str]:
    probe = (f"import importlib, sys\nfor m in {_ENTRY_MODULES!r}: importlib.import_module(m)\n"
             "print('\\n'.join(sorted({n.split('.')[0] for n in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    local = {"composer", "dynamic_providers"}
    third_party = {m for m in out if m not in local and m not in sys.stdlib_module_names
                   and not m.startswith("_")}
    dists = importlib.metadata.packages_distributions()
    return {_norm(dists[m][0]) for m in third_party if m in dists}


def test_composer_requirements_are_the_distributions_the_composer_imports() -> None:
    """requirements-composer.txt lists top-level distributions the composer imports (no Pulumi SDK);
    with their dependencies they are all pinned by requirements.lock."""
    imported = _imported_distributions()
    listed = {_norm(line.strip()) for line in (ROOT / "requirements-composer.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    assert listed <= imported, f"listed but not imported: {listed - imported}"
    assert "pulumi" not in imported, "the composer must not need the Pulumi SDK"
    reachable = set(listed)
    todo = list(listed)
    while todo:
        for text in importlib.metadata.requires(todo.pop()) or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra, or another Python
            name = _norm(req.name)
            if name not in reachable:
                reachable.add(name)
                todo.append(name)
    # Modules present here but not in the image (optional imports, e.g. protobuf's google namespace
    # that the Kubernetes client tries for google-auth) are fine: the built image imports every entry
    # module (test_built_image_runs_read_only_with_only_the_composer_dependencies).
    locked = {_norm(line.split("==")[0]) for line in (ROOT / "requirements.lock").read_text().splitlines()
              if "==" in line}
    assert reachable <= locked, "every image requirement is pinned by requirements.lock"


def test_secret_scan_flags_keys_state_files_known_secrets_and_env() -> None:
    members = [
        ("./opt/composer/app/composer/__init__.py", b"x = 1\n"),
        ("./opt/composer/site/certifi/cacert.pem", b"-----BEGIN CERTIFICATE-----\nMII\n"),
        ("./opt/composer/app/.git/config", b"[core]\n"),
        ("./opt/composer/app/Pulumi.dev.yaml", b"config: {}\n"),
        ("./tmp/notes.txt", b"password is lab-director-password\n"),
        ("./opt/x/server.dat", b"-----BEGIN RSA PRIVATE KEY-----\nMII\n"),
        ("./root/.kube/config", None),
    ]
    found = image.secret_findings(members, ["PATH=/usr/bin", "COMPOSER_DIRECTOR_PASSWORD=hunter2",
                                            "API_TOKEN="], ["lab-director-password"])
    text = "\n".join(found)
    assert "opt/composer/app/.git/config" in text
    assert "Pulumi.dev.yaml" in text
    assert "tmp/notes.txt: contains the known secret la***" in text
    assert "server.dat: contains a PEM private key" in text
    assert "root/.kube/config" in text
    assert "env COMPOSER_DIRECTOR_PASSWORD" in text
    assert "API_TOKEN" not in text, "an empty credential variable is fine"
    assert "cacert.pem" not in text and "__init__.py" not in text
    assert "hunter2" not in text and "lab-director-password" not in text, "findings never echo a secret"


def test_secret_scan_of_a_clean_tree_is_empty() -> None:
    assert image.secret_findings([("./usr/lib/ssl/cert.pem", b"-----BEGIN CERTIFICATE-----")],
                                 ["HOME=/tmp"], ["s3cret"]) == []


def test_lab_secrets_include_the_dev_passphrase_and_lab_passwords() -> None:
    secrets = image.lab_secrets()
    assert "dev-lab-only-passphrase" in secrets and "lab-director-password" in secrets


@pytest.fixture(scope="module")
def built() -> image.Built:
    if not (shutil.which("podman") and shutil.which("runc") and shutil.which("mmdebstrap")):
        pytest.skip("podman, runc or mmdebstrap missing (make setup installs them)")
    return image.build(log=lambda _msg: None)


def test_built_image_has_labels_non_root_user_entrypoint_and_no_credentials(built: image.Built) -> None:
    assert image.check(built.ref) == []
    info = image.summary(built.ref)
    labels = info["labels"]
    assert labels["org.opencontainers.image.version"] == image.chart_app_version()
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", labels["org.opencontainers.image.revision"])
    assert labels["org.opencontainers.image.revision"] == image.git_revision()  # not a cached, stale one
    assert info["user"] == "65532:65532"
    assert info["entrypoint"] == ["python", "-m", "composer"]


def test_built_image_runs_read_only_with_only_the_composer_dependencies(built: image.Built) -> None:
    run = [*image.PODMAN, "run", "--rm", "--network", "none", "--read-only", *image.ULIMITS,
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    help_ = subprocess.run([*run, built.ref, "--help"], capture_output=True, text=True, timeout=120)
    assert help_.returncode == 0, help_.stderr
    assert "--director-url" in help_.stdout
    # Every composer module imports without the Pulumi SDK (and the tools only tests need).
    probe = (f"import {', '.join(_ENTRY_MODULES)}; "
             "import importlib.util as u, os; print(os.getuid(), "
             "[m for m in ('pulumi', 'grpc', 'paramiko', 'flask') if u.find_spec(m)])")
    out = subprocess.run([*run, "--entrypoint", "python", built.ref, "-c", probe],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "65532 []"
