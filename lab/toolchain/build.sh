#!/usr/bin/env bash
# Build the Pulumi and Kubernetes toolchain from Go modules, idempotently.
#
# Every binary is built in a small wrapper module under $CACHE/build/<name> (the project's own
# DRA kubelet plugin: in its module node/kubeletplugin) and installed to $CACHE/bin. A stamp
# file per binary records the pinned inputs it was built from; when the stamp matches, the step
# is skipped, so a warm run takes seconds.
# $CACHE lives outside the checkout (default ~/.cache/composable-gpu/toolchain) so that
# fresh clones on the same machine (CI) reuse it; the checkout links to it as .toolchain.
#
# Usage: lab/toolchain/build.sh [name ...]   (default: all)
# Pins, and the upstream facts behind each build step: lab/toolchain/versions.env.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

CACHE="${COMPOSABLE_GPU_TOOLCHAIN:-$HOME/.cache/composable-gpu/toolchain}"
BIN="$CACHE/bin"
# Resource-provider plugins are kept off $PATH (the engine would use them as "ambient"
# plugins, with a warning on every run); lab/setup.sh installs them into $PULUMI_HOME.
PLUGINS="$CACHE/plugins"
BUILD="$CACHE/build"
mkdir -p "$BIN" "$BUILD" "$PLUGINS"
# One build at a time per cache (a second caller waits for the first).
exec 9>"$CACHE/.build.lock"
flock 9
export GOFLAGS=-mod=mod
export CGO_ENABLED=0
export GOTOOLCHAIN=local
# One compile job at a time keeps peak memory down on a 2-core, 24 GiB machine.
export GOMAXPROCS="${GOMAXPROCS:-2}"
MODCACHE="$(go env GOMODCACHE)"

log() { printf '[toolchain %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# stamp_ok NAME KEY: true when NAME was built from exactly KEY and its outputs exist.
stamp_ok() {
  local name="$1" key="$2"; shift 2
  [ -f "$CACHE/stamps/$name" ] && [ "$(cat "$CACHE/stamps/$name")" = "$key" ] || return 1
  local f; for f in "$@"; do [ -x "$BIN/$f" ] || return 1; done
}
stamp_write() { mkdir -p "$CACHE/stamps"; printf '%s' "$2" > "$CACHE/stamps/$1"; }

# wrapper DIR MODULE: fresh wrapper module directory.
wrapper() {
  local dir="$BUILD/$1"
  rm -rf "$dir"; mkdir -p "$dir"
  (cd "$dir" && go mod init "composable-gpu.local/toolchain/$1" >/dev/null 2>&1)
  echo "$dir"
}

build_pulumi() {
  local key="pulumi=$PULUMI_VERSION"
  stamp_ok pulumi "$key" pulumi pulumi-language-python-exec pulumi-resource-pulumi-python && { log "pulumi $PULUMI_VERSION: cached"; return; }
  log "pulumi $PULUMI_VERSION: building CLI (cold: ~10 min)"
  local dir; dir="$(wrapper pulumi)"
  (cd "$dir"
    go mod edit -require="github.com/pulumi/pulumi/pkg/v3@$PULUMI_VERSION" \
                -require="github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION" \
                -replace="github.com/atotto/clipboard=github.com/tgummerer/clipboard@v0.0.0-20241001131231-d02d263e614e"
    go build -tags osusergo,grpcnotrace -trimpath \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
      -o "$BIN/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  # Plain files shipped inside the sdk/v3 module zip: the program runner the language
  # host executes, and the dynamic-provider shim (`python -u -m pulumi.dynamic`).
  local sdk="$MODCACHE/github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION/python"
  install -m 0755 "$sdk/cmd/pulumi-language-python-exec" "$BIN/pulumi-language-python-exec"
  install -m 0755 "$sdk/dist/pulumi-resource-pulumi-python" "$BIN/pulumi-resource-pulumi-python"
  stamp_write pulumi "$key"
}

build_langhost() {
  # Upstream's pulumi-language-python module is not served by this machine's Go proxy
  # (403 for every version), so the project builds its own small language host
  # (lab/toolchain/langhost) against the same sdk/v3 release.
  local key; key="langhost=$PULUMI_VERSION:$(cat "$here"/langhost/*.go | sha256sum | cut -c1-16)"
  stamp_ok langhost "$key" pulumi-language-python && { log "pulumi-language-python: cached"; return; }
  log "pulumi-language-python: building (project's own host, sdk $PULUMI_VERSION)"
  local dir; dir="$(wrapper langhost)"
  cp "$here"/langhost/*.go "$dir/"
  (cd "$dir"
    go mod edit -require="github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION"
    go build -trimpath -ldflags "-s -w -X main.version=$PULUMI_VERSION" -o "$BIN/pulumi-language-python" .)
  stamp_write langhost "$key"
}

build_kubernetes_provider() {
  local key="k8s-provider=$PULUMI_KUBERNETES_PROVIDER_PSEUDO:$PULUMI_KUBERNETES_VERSION"
  if stamp_ok k8s-provider "$key" && [ -x "$PLUGINS/pulumi-resource-kubernetes" ]; then
    log "pulumi-resource-kubernetes: cached"; return
  fi
  log "pulumi-resource-kubernetes $PULUMI_KUBERNETES_VERSION: building (cold: ~10 min)"
  local mod="github.com/pulumi/pulumi-kubernetes/provider/v4"
  go mod download "$mod@$PULUMI_KUBERNETES_PROVIDER_PSEUDO"
  local src="$BUILD/k8s-provider"
  rm -rf "$src"; mkdir -p "$src"
  cp -r "$MODCACHE/$mod@$PULUMI_KUBERNETES_PROVIDER_PSEUDO/." "$src/"
  chmod -R u+w "$src"
  (cd "$src"
    # The provider's go.mod points sdk/v4 at ../sdk (not in the zip): use the tagged sdk.
    go mod edit -dropreplace=github.com/pulumi/pulumi-kubernetes/sdk/v4 \
                -require="github.com/pulumi/pulumi-kubernetes/sdk/v4@$PULUMI_KUBERNETES_VERSION"
    # main.go embeds schema-embed.json / terraform-mapping-embed.json, which are
    # git-ignored upstream; generate.go makes them from the committed files.
    (cd cmd/pulumi-resource-kubernetes && VERSION="${PULUMI_KUBERNETES_VERSION#v}" go run generate.go)
    go build -trimpath \
      -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${PULUMI_KUBERNETES_VERSION#v}" \
      -o "$PLUGINS/pulumi-resource-kubernetes" ./cmd/pulumi-resource-kubernetes)
  rm -f "$BIN/pulumi-resource-kubernetes"
  stamp_write k8s-provider "$key"
}

build_etcd() {
  local key="etcd=$ETCD_VERSION"
  stamp_ok etcd "$key" etcd && { log "etcd $ETCD_VERSION: cached"; return; }
  log "etcd $ETCD_VERSION: building"
  local dir; dir="$(wrapper etcd)"
  cat > "$dir/main.go" <<'GO'
// Command etcd runs the etcd server from go.etcd.io/etcd/server/v3 (built by the
// project's toolchain script because Debian's etcd-server is 3.4).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$dir"
    go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" .)
  stamp_write etcd "$key"
}

# kubernetes_wrapper NAME: wrapper module requiring k8s.io/kubernetes at the pin, with every
# staging module upstream replaces with ./staging/... set to its published release.
kubernetes_wrapper() {
  go mod download "k8s.io/kubernetes@$KUBERNETES_VERSION"
  local dir; dir="$(wrapper "$1")"
  local upstream="$MODCACHE/k8s.io/kubernetes@$KUBERNETES_VERSION/go.mod"
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  local args=(-require="k8s.io/kubernetes@$KUBERNETES_VERSION")
  local m
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$upstream"); do
    args+=(-replace="$m=$m@$staging_version")
  done
  (cd "$dir" && go mod edit "${args[@]}")
  echo "$dir"
}

kubernetes_ldflags() {
  local pkg="k8s.io/component-base/version"
  echo "-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2) -X $pkg.gitTreeState=clean"
}

build_kubernetes() {
  local key="kubernetes=$KUBERNETES_VERSION"
  stamp_ok kubernetes "$key" kube-apiserver kube-controller-manager kube-scheduler kubectl && { log "kubernetes $KUBERNETES_VERSION: cached"; return; }
  log "kubernetes $KUBERNETES_VERSION: building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (cold: ~15 min)"
  local dir ld; dir="$(kubernetes_wrapper kubernetes)"; ld="$(kubernetes_ldflags)"
  (cd "$dir"
    for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
      log "  $cmd"
      go build -trimpath -ldflags "$ld" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
    done)
  stamp_write kubernetes "$key"
}

# The kubelet of the lab's real node (lab/node.py), same module and pin as the control plane;
# a stamp of its own, so adding it does not rebuild the control plane.
build_kubelet() {
  local key="kubelet=$KUBERNETES_VERSION"
  stamp_ok kubelet "$key" kubelet && { log "kubelet $KUBERNETES_VERSION: cached"; return; }
  log "kubelet $KUBERNETES_VERSION: building (cold: ~5 min after the control plane)"
  local dir ld; dir="$(kubernetes_wrapper kubelet)"; ld="$(kubernetes_ldflags)"
  (cd "$dir" && go build -trimpath -ldflags "$ld" -o "$BIN/kubelet" k8s.io/kubernetes/cmd/kubelet)
  stamp_write kubelet "$key"
}

# The pod sandbox ("pause") process of the lab node's containerd (lab/toolchain/pause).
build_pause() {
  local key; key="pause=$(sha256sum "$here/pause/main.go" | cut -c1-16)"
  stamp_ok pause "$key" pause && { log "pause: cached"; return; }
  log "pause: building"
  local dir; dir="$(wrapper pause)"
  cp "$here/pause/main.go" "$dir/"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/pause" .)
  stamp_write pause "$key"
}

# The DRA kubelet plugin (node/kubeletplugin): the project's own module, built from its committed
# go.mod/go.sum (-mod=readonly: the pins there are what is built; GOFLAGS=-mod=mod above is for the
# wrapper modules). Static (CGO_ENABLED=0): the same binary runs beside the lab's kubelet and in the
# plugin's image, which has nothing else in it (node/kubeletplugin/Containerfile). Keyed on the
# module's files.
KUBELETPLUGIN_SRC="$here/../../node/kubeletplugin"
build_kubeletplugin() {
  local key; key="kubeletplugin=$(cd "$KUBELETPLUGIN_SRC" && find . -name '*.go' -o -name 'go.mod' -o -name 'go.sum' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)-static"
  stamp_ok kubeletplugin "$key" composer-kubelet-plugin && { log "composer-kubelet-plugin: cached"; return; }
  log "composer-kubelet-plugin: building (node/kubeletplugin)"
  (cd "$KUBELETPLUGIN_SRC" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$BIN/composer-kubelet-plugin" .)
  stamp_write kubeletplugin "$key"
}

# containerd v2 for the lab's real node (lab/node.py): Debian 12's containerd is 1.6.20, which has
# no CDI, so a DRA claim's CDI devices never reach the container. containerd v2 reads the CRI
# CDIDevices field with CDI on by default. Built from its Go module (its go.mod has no replace
# directives) in a wrapper module: the daemon, ctr and the runc shim (lab/node.py points the daemon
# at this shim, not Debian's 1.6 one). They go to $CACHE/containerd/bin, off $PATH, so they never
# shadow Debian's containerd and ctr. Without cgo the btrfs snapshotter drops out on its own
# (cmd/containerd/builtins/btrfs_linux.go: `!no_btrfs && cgo`); no_devmapper and no_zfs leave out
# two more the lab's config disables anyway; no_grpc is upstream's tag for the shim
# (Makefile SHIM_GO_BUILDTAGS).
build_containerd() {
  local key="containerd=$CONTAINERD_VERSION" out="$CACHE/containerd/bin"
  if stamp_ok containerd "$key" && [ -x "$out/containerd" ] && [ -x "$out/ctr" ] && [ -x "$out/containerd-shim-runc-v2" ]; then
    log "containerd $CONTAINERD_VERSION: cached"; return
  fi
  log "containerd $CONTAINERD_VERSION: building containerd, ctr, containerd-shim-runc-v2 (cold: ~4 min of CPU)"
  local mod="github.com/containerd/containerd/v2"
  local ld="-s -w -X $mod/version.Version=$CONTAINERD_VERSION -X $mod/version.Revision=$CONTAINERD_VERSION"
  local tags=no_btrfs,no_devmapper,no_zfs
  local dir; dir="$(wrapper containerd)"
  mkdir -p "$out"
  (cd "$dir"
    go mod edit -require="$mod@$CONTAINERD_VERSION"
    for cmd in containerd ctr containerd-shim-runc-v2; do
      log "  $cmd"
      [ "$cmd" = containerd-shim-runc-v2 ] && tags="$tags,no_grpc"
      nice -n 10 go build -tags "$tags" -trimpath -ldflags "$ld" -o "$out/$cmd" "$mod/cmd/$cmd"
    done)
  stamp_write containerd "$key"
}

build_kwok() {
  local key="kwok=$KWOK_VERSION"
  stamp_ok kwok "$key" kwok && { log "kwok $KWOK_VERSION: cached"; return; }
  log "kwok $KWOK_VERSION: building"
  local dir; dir="$(wrapper kwok)"
  (cd "$dir"
    go mod edit -require="sigs.k8s.io/kwok@$KWOK_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$BIN/kwok" sigs.k8s.io/kwok/cmd/kwok)
  stamp_write kwok "$key"
}

build_helm() {
  local key="helm=$HELM_VERSION"
  stamp_ok helm "$key" helm && { log "helm $HELM_VERSION: cached"; return; }
  log "helm $HELM_VERSION: building"
  local dir; dir="$(wrapper helm)"
  (cd "$dir"
    go mod edit -require="helm.sh/helm/v3@$HELM_VERSION"
    go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
      -o "$BIN/helm" helm.sh/helm/v3/cmd/helm)
  stamp_write helm "$key"
}

# Flux source-controller, which fetches the k0rdent templates' charts in the lab.
# Built from a copy of its module: its go.mod points the api module at ./api, a nested module the
# module zip leaves out, so the api module is required at the same release instead; and it
# requires github.com/fluxcd/pkg/helmtestserver, used only by its tests, whose go.mod this
# machine's Go proxy refuses (403), so that requirement is dropped.
build_source_controller() {
  local key="source-controller=$SOURCE_CONTROLLER_VERSION"
  stamp_ok source-controller "$key" source-controller && { log "source-controller $SOURCE_CONTROLLER_VERSION: cached"; return; }
  log "source-controller $SOURCE_CONTROLLER_VERSION: building (cold: ~10 min)"
  local mod="github.com/fluxcd/source-controller"
  go mod download "$mod@$SOURCE_CONTROLLER_VERSION"
  local src="$BUILD/source-controller"
  rm -rf "$src"; mkdir -p "$src"
  cp -r "$MODCACHE/$mod@$SOURCE_CONTROLLER_VERSION/." "$src/"
  chmod -R u+w "$src"
  (cd "$src"
    go mod edit -dropreplace="$mod/api" -require="$mod/api@$SOURCE_CONTROLLER_VERSION" \
                -droprequire=github.com/fluxcd/pkg/helmtestserver
    go build -trimpath -ldflags "-s -w" -o "$BIN/source-controller" .)
  stamp_write source-controller "$key"
}

# Prometheus and promtool: the lab's Prometheus scrapes the composer Pods (lab/prometheus.py), and
# promtool checks and unit-tests the chart's alert rules (tests/observability). Only the file,
# HTTP and Kubernetes service discoveries are compiled in (upstream's build tags remove_all_sd and
# enable_kubernetes_sd, plugins/*.go of the module), and without upstream's builtinassets tag the
# web UI's pages are left out: the HTTP API (/api/v1/...) is all the lab uses. Module v0.N.M is
# Prometheus release 3.N.M (the module's VERSION file), which the binaries report.
build_prometheus() {
  local key="prometheus=$PROMETHEUS_VERSION"
  stamp_ok prometheus "$key" prometheus promtool && { log "prometheus $PROMETHEUS_VERSION: cached"; return; }
  log "prometheus $PROMETHEUS_VERSION: building prometheus, promtool (cold: ~10 min)"
  local mod="github.com/prometheus/prometheus"
  go mod download "$mod@$PROMETHEUS_VERSION"
  local release; release="$(cat "$MODCACHE/$mod@$PROMETHEUS_VERSION/VERSION")"
  local v="github.com/prometheus/common/version"
  local dir; dir="$(wrapper prometheus)"
  (cd "$dir"
    go mod edit -require="$mod@$PROMETHEUS_VERSION"
    for cmd in prometheus promtool; do
      log "  $cmd"
      nice -n 10 go build -tags netgo,remove_all_sd,enable_kubernetes_sd -trimpath \
        -ldflags "-s -w -X $v.Version=$release -X $v.Branch=HEAD -X $v.Revision=$PROMETHEUS_VERSION" \
        -o "$BIN/$cmd" "$mod/cmd/$cmd"
    done)
  stamp_write prometheus "$key"
}

all=(pulumi langhost kubernetes_provider etcd kubernetes kubelet pause containerd kubeletplugin kwok helm source_controller prometheus)
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do "build_$t"; done
log "toolchain ready in $BIN"
