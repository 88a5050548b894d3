"""The composer's container image: the lab's Debian base images, the build, and its checks.

``python -m lab.image build`` builds ``Containerfile`` with podman. No registry image can be
pulled on the lab machine, so the two bases the Containerfile takes as build arguments are
made here from Debian bookworm packages:

- ``BASE`` (runtime): ``mmdebstrap --variant=essential`` with ``python3`` (3.11, the version
  ``requirements.lock`` was resolved on), ``python-is-python3`` and ``ca-certificates``;
- ``BUILDER``: the same plus ``python3-pip``, only for the stage that runs pip.

Each root filesystem is cached as a tar under ``~/.cache/composable-gpu/images`` (keyed on its
package list) and imported with ``podman import``; a warm build reuses both.

``python -m lab.image check IMAGE`` inspects an image: OCI labels, non-root user, entrypoint,
and no credential baked in (:func:`secret_findings`). ``ci/pipeline.sh`` runs both.

Podman runs containers with ``runc`` here (crun refuses the machine's hybrid cgroup layout) and
with RLIMIT_NOFILE/NPROC at or below the current hard limits (the process lacks
CAP_SYS_RESOURCE, so a spec that raises them fails with "Operation not permitted").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lab import settings
from lab.settings import ROOT

CACHE = Path(os.environ.get("COMPOSABLE_GPU_CACHE", Path.home() / ".cache" / "composable-gpu")) / "images"
#: Local image name of the composer (the chart's default repository is the published one).
IMAGE_REPOSITORY = "localhost/composable-gpu/composer"
#: The DRA kubelet plugin's image (``node/kubeletplugin/Containerfile``), run by the chart's DaemonSet.
KUBELET_PLUGIN_REPOSITORY = "localhost/composable-gpu/kubelet-plugin"
KUBELET_PLUGIN_BINARY = "composer-kubelet-plugin"
#: The tag the dev stack names (Pulumi.dev.yaml): the lab's current build.
LAB_TAG = "lab"
SUITE = "bookworm"
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
RUNTIME_PACKAGES = ("python3-minimal", "libpython3.11-stdlib", "python-is-python3", "ca-certificates")
BUILDER_PACKAGES = (*RUNTIME_PACKAGES, "python3-pip")
#: Documentation and translations are not needed in a container.
_DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")
#: podman flags every lab container run/build needs on this machine (see the module docstring).
PODMAN = ("podman", "--runtime", "runc")
ULIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")
#: OCI labels the image must carry.
REQUIRED_LABELS = (
    "org.opencontainers.image.source",
    "org.opencontainers.image.version",
    "org.opencontainers.image.revision",
)


class ImageError(RuntimeError):
    """A base image or the composer image could not be built or failed a check."""


def _run(argv: Sequence[str], *, what: str, capture: bool = True) -> str:
    proc = subprocess.run(list(argv), capture_output=capture, text=True, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip()[-2000:] if capture else ""
        raise ImageError(f"{what} failed (exit {proc.returncode}): {' '.join(argv[:6])} ...\n{detail}")
    return proc.stdout if capture else ""


def base_key(packages: Sequence[str]) -> str:
    """Cache key of a root filesystem: its suite, mirrors, packages and excludes (12 hex chars)."""
    text = json.dumps([SUITE, list(MIRRORS), sorted(packages), list(_DPKG_EXCLUDES)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def image_exists(ref: str) -> bool:
    """True if podman's local storage holds ``ref``."""
    return subprocess.run([*PODMAN, "image", "exists", ref], check=False).returncode == 0


def ensure_base(name: str, packages: Sequence[str], *, log: Callable[[str], None] = print) -> str:
    """Make (or reuse) the Debian root filesystem ``name`` and import it into podman.

    Returns the image reference ``localhost/composable-gpu/<name>:<key>``.
    Raises:
        ImageError: mmdebstrap or ``podman import`` failed (the message quotes their output).
    """
    key = base_key(packages)
    ref = f"localhost/composable-gpu/{name}:{SUITE}-{key}"
    if image_exists(ref):
        return ref
    CACHE.mkdir(parents=True, exist_ok=True)
    tar = CACHE / f"{name}-{SUITE}-{key}.tar"
    if not tar.exists():
        log(f"building {name} root filesystem from Debian {SUITE} packages (cold: ~1 min)")
        tmp = tar.with_suffix(".tmp.tar")
        argv = ["mmdebstrap", "--quiet", "--variant=essential", f"--include={','.join(packages)}",
                *(f"--dpkgopt=path-exclude={p}" for p in _DPKG_EXCLUDES), SUITE, str(tmp), *MIRRORS]
        _run(argv, what=f"mmdebstrap ({name})")
        tmp.rename(tar)
    _run([*PODMAN, "import", "--change", 'CMD ["python3"]', str(tar), ref], what=f"podman import ({name})")
    return ref


def git_revision() -> str:
    """Commit of the checkout (with ``-dirty`` when tracked files changed), or ``unknown``."""
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--",
                                *_context_paths()], check=False).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")


def _context_paths() -> list[str]:
    return ["Containerfile", "requirements.lock", "requirements-composer.txt", "composer",
            "dynamic_providers/__init__.py", "dynamic_providers/director"]


def chart_app_version() -> str:
    """``appVersion`` of ``charts/composer/Chart.yaml`` (the image version the chart expects)."""
    import yaml

    return str(yaml.safe_load((ROOT / "charts" / "composer" / "Chart.yaml").read_text())["appVersion"])


def source_url() -> str:
    """``remote.origin.url`` of the checkout, or ``unknown`` (stored in an OCI label)."""
    proc = subprocess.run(["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"],
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "unknown"


@dataclass(frozen=True)
class Built:
    """A built image (the composer's or the kubelet plugin's): ``ref`` (``repository:tag``),
    ``image_id`` (sha256 of its config), ``seconds`` the build took."""

    ref: str
    image_id: str
    seconds: float


def _podman_build(containerfile: Path, context: Path, *, repository: str, extra_args: Sequence[str] = (),
                  tag: str | None = None, extra_tags: Sequence[str] = (), what: str) -> Built:
    """``podman build`` of ``containerfile`` in ``context`` with this checkout's OCI labels, then tag
    it ``repository:<tag>`` (default ``<chart appVersion>-<12 hex of the image id>``, so a changed
    image gets a new tag), ``:<appVersion>`` and ``extra_tags``.

    The labels' values go in both as build arguments (``VERSION``, ``REVISION``, ``SOURCE``, which
    the Containerfiles' LABEL uses) and as ``--label``: with ``--layers``, podman 4.3 (buildah)
    reuses a cached LABEL step whose build argument changed, so the Containerfile's labels alone can
    be stale; CLI labels are applied to the final image on every build.

    Raises:
        ImageError: podman failed.
    """
    t0 = time.monotonic()
    version = chart_app_version()
    labels = {"source": source_url(), "version": version, "revision": git_revision()}
    label_flags = [f for k, v in labels.items() for f in ("--label", f"org.opencontainers.image.{k}={v}")]
    with tempfile.TemporaryDirectory() as tmp:
        iidfile = Path(tmp) / "iid"
        _run([*PODMAN, "build", "--pull=never", *ULIMITS, "--layers", *extra_args,
              "-f", str(containerfile), "--iidfile", str(iidfile),
              "--build-arg", f"VERSION={version}", "--build-arg", f"REVISION={labels['revision']}",
              "--build-arg", f"SOURCE={labels['source']}", *label_flags,
              "-t", f"{repository}:{version}", str(context)], what=what)
        image_id = iidfile.read_text().strip()
    ref = f"{repository}:{tag or version + '-' + image_id.removeprefix('sha256:')[:12]}"
    _run([*PODMAN, "tag", image_id, ref, *(f"{repository}:{t}" for t in extra_tags)], what="podman tag")
    return Built(ref=ref, image_id=image_id, seconds=time.monotonic() - t0)


def build(*, tag: str | None = None, base: str | None = None, builder: str | None = None,
          extra_tags: Sequence[str] = (), log: Callable[[str], None] = print) -> Built:
    """Build ``Containerfile`` (podman, runc, host network for pip) and tag it.

    ``base``/``builder`` default to the lab's Debian images (made if missing). The tag defaults to
    ``<chart appVersion>-<12 hex of the image id>``, so a changed image gets a new tag (and a
    Deployment that names it rolls); ``:<appVersion>`` and ``extra_tags`` are tagged too.
    Raises:
        ImageError: a step failed.
    """
    t0 = time.monotonic()
    base = base or ensure_base("python-base", RUNTIME_PACKAGES, log=log)
    builder = builder or ensure_base("python-builder", BUILDER_PACKAGES, log=log)
    built = _podman_build(
        ROOT / "Containerfile", ROOT, repository=IMAGE_REPOSITORY, tag=tag, extra_tags=extra_tags,
        extra_args=["--network=host", "--build-arg", f"BASE={base}", "--build-arg", f"BUILDER={builder}",
                    *_ca_secret()],
        what="podman build")
    return Built(ref=built.ref, image_id=built.image_id, seconds=time.monotonic() - t0)


def build_kubelet_plugin(binary: Path | None = None, *, log: Callable[[str], None] = print) -> Built:
    """Build the kubelet plugin's image from ``node/kubeletplugin/Containerfile``: the static
    binary ``make setup`` built (``binary``, default ``<toolchain>/bin/composer-kubelet-plugin``)
    copied into an otherwise empty context, FROM scratch. Tagged
    ``localhost/composable-gpu/kubelet-plugin:<appVersion>-<12 hex of the image id>`` and
    ``:<appVersion>``.

    Raises:
        ImageError: the binary is missing (run ``make setup``) or podman failed.
    """
    binary = binary or settings.LabConfig().bin_dir / KUBELET_PLUGIN_BINARY
    if not binary.is_file():
        raise ImageError(f"{binary} missing: run `make setup` (it builds node/kubeletplugin)")
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        (context / KUBELET_PLUGIN_BINARY).write_bytes(binary.read_bytes())
        (context / KUBELET_PLUGIN_BINARY).chmod(0o755)
        built = _podman_build(ROOT / "node" / "kubeletplugin" / "Containerfile", context,
                              repository=KUBELET_PLUGIN_REPOSITORY, what="podman build kubelet plugin")
    log(f"built {built.ref}")
    return built


def _ca_secret() -> list[str]:
    """``--secret id=pip-ca,...`` with the host's CA bundle (pip inside the build trusts what the
    host trusts, e.g. a TLS-intercepting egress proxy's CA); the secret is not stored in a layer."""
    bundle = (os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
              or "/etc/ssl/certs/ca-certificates.crt")
    return ["--secret", f"id=pip-ca,src={bundle}"] if Path(bundle).is_file() else []


def inspect(ref: str) -> dict:
    """``podman image inspect`` of ``ref`` (its first record)."""
    return json.loads(_run([*PODMAN, "image", "inspect", ref], what="podman image inspect"))[0]


# --------------------------------------------------------------------------- secret scan (pure)

#: Paths that must never be inside the image (credentials, state, keys).
#: (PEM files are judged by content: CA bundles such as certifi's cacert.pem are public.)
_FORBIDDEN_PATHS = re.compile(
    r"(^|/)(\.git|\.pulumi(-state|-home)?|\.lab|\.kube|\.ssh|\.aws|\.docker|\.netrc|\.env"
    r"|Pulumi\.[^/]*\.yaml|kubeconfig[^/]*|[^/]*\.(key|p12|pfx)|id_(rsa|ed25519|ecdsa))(/|$)"
)
_SECRET_ENV = re.compile(r"(PASSWORD|PASSPHRASE|SECRET|TOKEN|API_KEY|ACCESS_KEY|PRIVATE_KEY)", re.I)
_PRIVATE_KEY = b"-----BEGIN " + b"(RSA |EC |OPENSSH |ENCRYPTED |)PRIVATE KEY-----"


def secret_findings(members: Iterable[tuple[str, bytes | None]], env: Sequence[str],
                    known_secrets: Sequence[str] = ()) -> list[str]:
    """Credentials baked into an image, as one line each; empty when clean.

    Args:
        members: ``(path, content)`` of every file of the image's flattened filesystem
            (content None for non-regular files or files not read).
        env: the image config's ``Env`` (``NAME=value``).
        known_secrets: literal secret values that must not appear in any file (the lab's
            passwords and passphrase).
    Checks: forbidden paths (keys, kubeconfigs, Pulumi stack files/state, .git, cloud/SSH
    credentials), PEM private keys in any file, any known secret value in any file, and
    environment variables named like credentials with a non-empty value.
    """
    found: list[str] = []
    needles = [s.encode() for s in known_secrets if s]
    key_re = re.compile(_PRIVATE_KEY)
    for path, content in members:
        rel = path.removeprefix("./").lstrip("/")
        if _FORBIDDEN_PATHS.search(rel):
            found.append(f"file {rel}: a credential or state file must not be in the image")
        if content is None:
            continue
        if key_re.search(content):
            found.append(f"file {rel}: contains a PEM private key")
        for needle, raw in zip(needles, known_secrets, strict=False):
            if needle in content:
                found.append(f"file {rel}: contains the known secret {raw[:2]}***")
    for item in env:
        name, _, value = item.partition("=")
        if _SECRET_ENV.search(name) and value:
            found.append(f"env {name}: a credential-like variable has a value")
    return found


def exported_members(tar_path: Path, *,
                     max_bytes: int = 4 * 1024 * 1024) -> Iterable[tuple[str, bytes | None]]:
    """``(path, content)`` of a ``podman export`` tar; files larger than ``max_bytes`` yield None
    content (the scan reads text and small binaries; wheels' shared objects are skipped)."""
    with tarfile.open(tar_path) as tf:
        for m in tf:
            content = None
            if m.isfile() and m.size <= max_bytes:
                f = tf.extractfile(m)
                content = f.read() if f else None
            yield m.name, content


def lab_secrets() -> list[str]:
    """The lab's literal secrets (Director/BMC passwords, dev stack passphrase)."""
    secrets = [settings.DIRECTOR_PASSWORD, settings.BMC_PASSWORD]
    make = (ROOT / "Makefile").read_text()
    m = re.search(r"PULUMI_CONFIG_PASSPHRASE=(\S+)", make)
    if m:
        secrets.append(m.group(1))
    return secrets


def check(ref: str) -> list[str]:
    """Problems of image ``ref``: missing OCI labels, root user, wrong entrypoint, credentials.

    Raises:
        ImageError: podman could not inspect or export the image.
    """
    info = inspect(ref)
    cfg = info.get("Config") or {}
    problems = [f"label {name} is missing" for name in REQUIRED_LABELS
                if not (cfg.get("Labels") or {}).get(name)]
    user = str(cfg.get("User") or "")
    if user in ("", "0", "root") or user.startswith(("0:", "root:")):
        problems.append(f"user is {user or 'unset (root)'}, expected a non-root uid")
    if cfg.get("Entrypoint") != ["python", "-m", "composer"]:
        problems.append(f"entrypoint is {cfg.get('Entrypoint')}, expected ['python', '-m', 'composer']")
    with tempfile.TemporaryDirectory() as tmp:
        cid = _run([*PODMAN, "create", ref], what="podman create").strip()
        try:
            tar = Path(tmp) / "fs.tar"
            _run([*PODMAN, "export", "-o", str(tar), cid], what="podman export")
            problems += secret_findings(exported_members(tar), cfg.get("Env") or [], lab_secrets())
        finally:
            subprocess.run([*PODMAN, "rm", "-f", cid], capture_output=True, check=False)
    return problems


def summary(ref: str) -> Mapping[str, object]:
    """Size (bytes), id, digest, user, entrypoint and labels of image ``ref``."""
    info = inspect(ref)
    cfg = info.get("Config") or {}
    return {"ref": ref, "id": info.get("Id"), "digest": info.get("Digest"), "size": info.get("Size"),
            "user": cfg.get("User"), "entrypoint": cfg.get("Entrypoint"), "labels": cfg.get("Labels")}


def _emit(built: Built, ref_file: Path | None) -> None:
    """Print the built image's reference, and write it to ``ref_file`` when given."""
    if ref_file:
        ref_file.parent.mkdir(parents=True, exist_ok=True)
        ref_file.write_text(built.ref + "\n")
    print(built.ref)


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.image build|check|base``; returns the exit code."""
    ap = argparse.ArgumentParser(prog="python -m lab.image", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the composer image (and the lab bases if missing)")
    b.add_argument("--base", help="runtime base image (default: the lab's Debian base)")
    b.add_argument("--builder", help="image that runs pip (default: the lab's Debian builder)")
    b.add_argument("--tag", help="tag (default: <appVersion>-<image id>)")
    b.add_argument("--ref-file", type=Path, help="write the built image reference here")
    b.add_argument("--also-tag", action="append", default=[], help=f"extra tag (e.g. {LAB_TAG})")
    c = sub.add_parser("check", help="labels, user, entrypoint and no credentials")
    c.add_argument("image")
    sub.add_parser("base", help="make the lab's Debian base images only")
    k = sub.add_parser("kubelet-plugin", help="build the DRA kubelet plugin's image (node/kubeletplugin)")
    k.add_argument("--ref-file", type=Path, help="write the built image reference here")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(f"[image] {msg}", file=sys.stderr)

    try:
        if args.cmd == "base":
            print(ensure_base("python-base", RUNTIME_PACKAGES, log=log))
            print(ensure_base("python-builder", BUILDER_PACKAGES, log=log))
            return 0
        if args.cmd == "kubelet-plugin":
            _emit(build_kubelet_plugin(log=log), args.ref_file)
            return 0
        if args.cmd == "build":
            built = build(tag=args.tag, base=args.base, builder=args.builder, extra_tags=args.also_tag,
                          log=log)
            info = summary(built.ref)
            log(f"built {built.ref} ({built.image_id[:19]}, {int(info['size'] or 0) / 1e6:.0f} MB) "
                f"in {built.seconds:.0f} s")
            _emit(built, args.ref_file)
            return 0
        problems = check(args.image)
    except ImageError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1
    for p in problems:
        print(f"image {args.image}: {p}", file=sys.stderr)
    if not problems:
        print(f"image {args.image}: labels, non-root user, entrypoint and credential scan OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
