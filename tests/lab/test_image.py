"""The composer image: its dependency list, the credential scan, and the built image itself."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab import image

ROOT = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _third_party_imports(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    local = {"composer", "dynamic_providers", "__future__"}
    return {m for m in found if m not in local and m not in sys.stdlib_module_names}


def test_composer_requirements_cover_exactly_the_imports_of_what_the_image_runs() -> None:
    # What the image copies and runs: the composer package and the Director client (its
    # Pulumi provider module is copied but never imported by the composer).
    sources = [*ROOT.glob("composer/**/*.py"),
               *(p for p in ROOT.glob("dynamic_providers/director/**/*.py") if p.name != "provider.py"),
               ROOT / "dynamic_providers" / "__init__.py"]
    modules = _third_party_imports(sources)
    dists = importlib.metadata.packages_distributions()
    needed = {_norm(dists[m][0]) for m in modules}
    listed = {_norm(line.strip()) for line in (ROOT / "requirements-composer.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    assert needed == listed
    locked = {_norm(line.split("==")[0]) for line in (ROOT / "requirements.lock").read_text().splitlines()
              if "==" in line}
    assert listed <= locked, "every image requirement is pinned by requirements.lock"


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
    assert info["user"] == "65532:65532"
    assert info["entrypoint"] == ["python", "-m", "composer"]


def test_built_image_runs_read_only_with_only_the_composer_dependencies(built: image.Built) -> None:
    run = [*image.PODMAN, "run", "--rm", "--network", "none", "--read-only", *image.ULIMITS,
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    help_ = subprocess.run([*run, built.ref, "--help"], capture_output=True, text=True, timeout=120)
    assert help_.returncode == 0, help_.stderr
    assert "--director-url" in help_.stdout
    # Every composer module imports without the Pulumi SDK (and the tools only tests need).
    probe = ("import composer.__main__, composer.wiring, dynamic_providers.director; "
             "import importlib.util as u, os; print(os.getuid(), "
             "[m for m in ('pulumi', 'grpc', 'paramiko', 'flask') if u.find_spec(m)])")
    out = subprocess.run([*run, "--entrypoint", "python", built.ref, "-c", probe],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "65532 []"
