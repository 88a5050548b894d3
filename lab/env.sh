# Source me: the environment every project command runs in.
# PATH puts the Go-built toolchain first (pulumi, plugins found there as ambient plugins)
# and the project virtualenv; the dev stack's state stays inside the checkout (git-ignored).
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export COMPOSABLE_GPU_ROOT="$_root"
export PATH="$_root/.toolchain/bin:$_root/.venv/bin:$PATH"
# Shared by every clone on this machine: holds the plugin cache that `make setup` fills.
export PULUMI_HOME="${PULUMI_HOME:-${COMPOSABLE_GPU_CACHE:-$HOME/.cache/composable-gpu}/pulumi-home}"
export PULUMI_SKIP_UPDATE_CHECK=1
export PULUMI_DIY_BACKEND_DISABLE_CHECKPOINT_BACKUPS=1
export PULUMI_BACKEND_URL="${PULUMI_BACKEND_URL:-file://$_root/.pulumi-state}"
export LAB_DIR="${LAB_DIR:-$_root/.lab}"
export KUBECONFIG="${KUBECONFIG_OVERRIDE:-$LAB_DIR/kubeconfig}"
unset _root
