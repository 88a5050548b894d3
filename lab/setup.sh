#!/usr/bin/env bash
# One-time (idempotent) setup: Python virtualenv from requirements.lock, the Go-built
# toolchain (lab/toolchain/build.sh), Debian packages the lab needs, and the links
# .venv and .toolchain in the checkout. A warm run takes seconds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
CACHE="${COMPOSABLE_GPU_CACHE:-$HOME/.cache/composable-gpu}"
log() { printf '[setup %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
start=$(date +%s)

# 1. Debian packages: openssh-server for the lab's sshd (host preparation over SSH).
if ! command -v /usr/sbin/sshd >/dev/null 2>&1; then
  log "installing openssh-server (Debian)"
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null) \
      || log "warning: could not install openssh-server; SSH host-preparation tests will be skipped"
  else
    log "warning: not root; install openssh-server to run the SSH host-preparation lab"
  fi
fi

# 1b. Debian packages for the composer image and the lab's real node: podman (builds and runs the
# image, with runc: crun refuses this machine's hybrid cgroups), mmdebstrap (the image's Debian
# base), runc + containernetworking-plugins (the real kubelet node's runtime and CNI; its
# containerd is built from Go modules in step 3: Debian 12's 1.6 has no CDI).
need=()
for pair in podman:podman runc:runc mmdebstrap:mmdebstrap \
            /usr/lib/cni/bridge:containernetworking-plugins; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || [ -x "${pair%%:*}" ] || need+=("${pair#*:}")
done
if ((${#need[@]})); then
  log "installing ${need[*]} (Debian)"
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null) \
      || log "warning: could not install ${need[*]}; the composer image and the real lab node are unavailable"
  else
    log "warning: not root; install ${need[*]} to build the composer image and run the real lab node"
  fi
fi

# 2. Python virtualenv, keyed on the lock file and the interpreter version.
py="${PYTHON:-python3}"
key="$( (cat requirements.lock; "$py" --version) | sha256sum | cut -c1-12)"
venv="$CACHE/venv-$key"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  log "creating virtualenv $venv"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r requirements.lock
  touch "$venv/.complete"
else
  log "virtualenv $venv: cached"
fi
ln -sfn "$venv" .venv

# 3. Toolchain from Go modules.
COMPOSABLE_GPU_TOOLCHAIN="$CACHE/toolchain" bash lab/toolchain/build.sh
ln -sfn "$CACHE/toolchain" .toolchain

# 4. Resource plugins into the shared Pulumi home (the plugin cache the engine reads).
source lab/env.sh
# shellcheck source=toolchain/versions.env
source lab/toolchain/versions.env
plugin_dir="$PULUMI_HOME/plugins/resource-kubernetes-$PULUMI_KUBERNETES_VERSION"
if ! cmp -s "$plugin_dir/pulumi-resource-kubernetes" "$CACHE/toolchain/plugins/pulumi-resource-kubernetes"; then
  log "installing plugin resource kubernetes $PULUMI_KUBERNETES_VERSION into $PULUMI_HOME"
  rm -rf "$plugin_dir" "$plugin_dir.lock"
  pulumi plugin install resource kubernetes "$PULUMI_KUBERNETES_VERSION" \
    --file "$CACHE/toolchain/plugins/pulumi-resource-kubernetes" >/dev/null
fi

log "ready in $(( $(date +%s) - start )) s: $(.toolchain/bin/pulumi version), $(.toolchain/bin/kube-apiserver --version 2>/dev/null || echo 'kube-apiserver missing')"
