#!/usr/bin/env bash
# CI recipe: the tests, the policy pack on every stack, and the preview summary for the PR.
#
#   ci/pipeline.sh             # all stages: test, then previews
#   ci/pipeline.sh test        # ruff + mypy + pytest
#   ci/pipeline.sh image       # build the composer image (Containerfile, podman) and check it:
#                              # OCI labels, non-root user, entrypoint, no credential baked in
#   ci/pipeline.sh previews    # per stack: offline config check, preview with the policy pack,
#                              # Markdown summary -> $OUT_DIR/preview.md, and the same cut to
#                              # fit a GitHub comment -> $OUT_DIR/preview-comment.md
#
# Environment (all optional):
#   STACKS               stacks to check, space-separated (default: every Pulumi.<stack>.yaml)
#   PROJECT_DIR          the Pulumi project (default: the repository root)
#   OUT_DIR              summaries, engine events and diff texts (default: ci-out)
#   POLICY_PACK          policy pack directory (default: $PROJECT_DIR/policies); its config per
#                        stack is <pack>/config/<estate.environment>.json when present
#   PYTEST_ARGS          extra pytest arguments, e.g. "-m 'not lab'"
#   REQUIRE_ALL_STACKS   1 = a stack whose backend is not configured fails the job (default: skipped)
#   START_LAB            0 = do not start the lab for the dev stack (default 1)
# Per stack S (upper case, '-' -> '_'), e.g. for staging:
#   BACKEND_URL_STAGING               its state backend (s3://...; see docs/environments.md)
#   PULUMI_CONFIG_PASSPHRASE_STAGING  its passphrase, for passphrase-encrypted stacks
#   (KMS- or Vault-encrypted stacks use the cloud credentials already in the environment.)
# The dev stack defaults to the lab: backend file://<repo>/.pulumi-state, the lab-only passphrase.
#
# Exit status: non-zero if the tests fail, a stack's config is invalid, or a preview fails or
# violates a mandatory policy. The summary is written in every case (post it, then fail).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=/dev/null
source "$ROOT/lab/env.sh"
PROJECT_DIR="$(cd "${PROJECT_DIR:-$ROOT}" && pwd)"
OUT_DIR="${OUT_DIR:-$ROOT/ci-out}"
REQUIRE_ALL_STACKS="${REQUIRE_ALL_STACKS:-0}"
START_LAB="${START_LAB:-1}"
POLICY_PACK="${POLICY_PACK:-$PROJECT_DIR/policies}"
DEV_PASSPHRASE="dev-lab-only-passphrase"  # the lab constant of the Makefile's STACK=dev

log() { printf '\n=== %s\n' "$*" >&2; }

# Stages and helpers run in `||` lists, where bash ignores `set -e`: every step checks its own status.
stage_test() {
  local rc=0
  log "lint"
  (cd "$ROOT" && ruff check .) || rc=1
  log "type check"
  (cd "$ROOT" && mypy) || rc=1
  log "tests"
  # shellcheck disable=SC2086  # PYTEST_ARGS is a word list on purpose
  (cd "$ROOT" && eval python -m pytest ${PYTEST_ARGS:-}) || rc=1
  return "$rc"
}

stage_image() {
  local ref
  log "composer image: build"
  ref="$(cd "$ROOT" && python -m lab.image build)" || return 1
  log "composer image: labels, user, entrypoint, credential scan ($ref)"
  (cd "$ROOT" && python -m lab.image check "$ref") || return 1
}

all_stacks() {
  local f
  for f in "$PROJECT_DIR"/Pulumi.*.yaml; do
    [[ -e $f ]] || continue
    f="${f##*/Pulumi.}"
    echo "${f%.yaml}"
  done
}

lab_running() {
  (cd "$ROOT" && python -c 'import sys
from lab import controlplane
sys.exit(0 if all(controlplane.status(controlplane.LabConfig()).values()) else 1)')
}

STARTED_LAB=0
stop_lab_if_started() {
  if [[ $STARTED_LAB == 1 ]]; then
    log "stopping the lab this pipeline started"
    (cd "$ROOT" && python -m lab down) || true
  fi
}

preview_stack() {  # $1 = stack; appends to $OUT_DIR/preview.md; returns 1 if it blocks merging
  local stack="$1" key backend_var pass_var backend pass rc=0
  key="$(tr 'a-z-' 'A-Z_' <<<"$stack")"
  backend_var="BACKEND_URL_${key}"
  pass_var="PULUMI_CONFIG_PASSPHRASE_${key}"
  backend="${!backend_var:-}"
  pass="${!pass_var:-}"

  log "$stack: offline config check"
  : >"$OUT_DIR/config-$stack.txt"
  if [[ -d $PROJECT_DIR/stack_config ]] && ! (cd "$PROJECT_DIR" && python -m stack_config validate \
        --allow-missing-secrets "Pulumi.$stack.yaml" >"$OUT_DIR/config-$stack.txt" 2>&1); then
    cat "$OUT_DIR/config-$stack.txt" >&2
    printf '## `%s`: invalid stack config\n\n```text\n%s\n```\n\n' "$stack" "$(cat "$OUT_DIR/config-$stack.txt")" \
      >>"$OUT_DIR/preview.md"
    return 1
  fi

  if [[ $stack == dev ]]; then
    backend="${backend:-file://$ROOT/.pulumi-state}"
    pass="${pass:-$DEV_PASSPHRASE}"
    if [[ $START_LAB == 1 ]] && ! lab_running; then
      log "starting the lab for the dev stack"
      STARTED_LAB=1
      (cd "$ROOT" && python -m lab up) || return 1
    fi
  fi
  if [[ -z $backend ]]; then
    log "$stack: skipped ($backend_var is not set)"
    printf '## `%s`: not previewed\n\n⏭️ `%s` is not set in this CI job, so the policy pack did not run on this stack.%s\n\n' \
      "$stack" "$backend_var" "$(sed -n '$s/^/ Offline config check: /p' "$OUT_DIR/config-$stack.txt")" \
      >>"$OUT_DIR/preview.md"
    [[ $REQUIRE_ALL_STACKS == 1 ]] && return 1
    return 0
  fi

  log "$stack: preview with the policy pack"
  (
    export PULUMI_BACKEND_URL="$backend"
    if [[ -n $pass ]]; then export PULUMI_CONFIG_PASSPHRASE="$pass"; fi
    if [[ $backend == file://* ]]; then  # a local backend in CI starts empty: create the stack
      mkdir -p "${backend#file://}" || exit 2
      pulumi stack select "$stack" --cwd "$PROJECT_DIR" --non-interactive 2>/dev/null \
        || pulumi stack init "$stack" --cwd "$PROJECT_DIR" --non-interactive || exit 2
    fi
    cd "$ROOT" || exit 2
    exec python -m ops.preview_report --stack "$stack" --cwd "$PROJECT_DIR" --policy-pack "$POLICY_PACK" \
      --out "$OUT_DIR/preview-$stack.md" --events-out "$OUT_DIR/preview-$stack.events.jsonl" \
      --diff-out "$OUT_DIR/preview-$stack.diff.txt"
  ) || rc=$?
  if [[ -f $OUT_DIR/preview-$stack.md ]]; then
    cat "$OUT_DIR/preview-$stack.md" >>"$OUT_DIR/preview.md"
    printf '\n' >>"$OUT_DIR/preview.md"
  else
    printf '## `%s`: preview could not run (exit %s)\n\nSee the CI job log.\n\n' "$stack" "$rc" >>"$OUT_DIR/preview.md"
  fi
  return "$rc"
}

stage_previews() {
  local stacks stack failed=()
  mkdir -p "$OUT_DIR"
  printf '# Infrastructure preview\n\n' >"$OUT_DIR/preview.md"
  stacks="${STACKS:-$(all_stacks | tr '\n' ' ')}"
  trap stop_lab_if_started EXIT
  for stack in $stacks; do
    preview_stack "$stack" || failed+=("$stack")
  done
  (cd "$ROOT" && python -m ops.preview_markdown fit "$OUT_DIR/preview.md" "$OUT_DIR/preview-comment.md") || true
  if [[ -n ${GITHUB_STEP_SUMMARY:-} ]]; then
    cat "$OUT_DIR/preview.md" >>"$GITHUB_STEP_SUMMARY"
  fi
  log "summary: $OUT_DIR/preview.md"
  if ((${#failed[@]})); then
    log "blocked: ${failed[*]}"
    return 1
  fi
}

case "${1:-all}" in
  test) stage_test ;;
  image) stage_image ;;
  previews) stage_previews ;;
  all)  # previews run even when tests fail, so that the PR still gets its summary
    rc=0
    stage_test || rc=1
    stage_image || rc=1
    stage_previews || rc=1
    exit "$rc" ;;
  *) echo "usage: $0 [all|test|image|previews]" >&2; exit 2 ;;
esac
