# Composable GPU infrastructure as code: the commands a platform team runs.
# Every target runs inside lab/env.sh (toolchain and venv on PATH, local dev backend).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
STACK ?= dev
ENV := source lab/env.sh &&
# The dev stack's passphrase is a lab-only constant; other stacks must bring their own
# PULUMI_CONFIG_PASSPHRASE (or a secrets provider), see README "Environments".
ifeq ($(STACK),dev)
PASS := export PULUMI_CONFIG_PASSPHRASE=dev-lab-only-passphrase &&
POLICY_ENV ?= lab
else
POLICY_ENV ?= $(STACK)
endif
# Every preview and update runs the tenant-isolation policy pack with the stack's enforcement.
# `make up` refreshes first (--refresh), so a change made out of band (a DPU's rshim re-enabled on
# its BMC, a GPU decomposed by hand) is put back; `make drift` shows it without changing anything.
# `make preview` does not refresh: its diff is the config change under review, not the Kubernetes
# objects' status and managedFields that a refresh reads back on every run.
POLICY := --policy-pack policies --policy-pack-config policies/config/$(POLICY_ENV).json
# The stack config is validated offline first: a config error is reported one line per problem
# and the CLI never runs, so it cannot print its policy-pack summary above a program that
# stopped before the policies judged anything.
CHECK := python -m stack_config validate Pulumi.$(STACK).yaml &&

.PHONY: setup image kubelet-plugin-image demo lab-up lab-down lab-status preview drift review up destroy test lint bench soak ci

setup:  ## Build/cache the toolchain and virtualenv (idempotent; seconds when warm)
	bash lab/setup.sh

image: setup  ## Build the composer image (Containerfile) with podman; the lab's Debian bases are made if missing
	$(ENV) python -m lab.image build --also-tag lab --ref-file .lab/composer-image

kubelet-plugin-image: setup  ## Build the DRA kubelet plugin's image (node/kubeletplugin/Containerfile, FROM scratch)
	$(ENV) python -m lab.image kubelet-plugin --ref-file .lab/kubelet-plugin-image

demo: setup  ## The main job: lab up, `pulumi up` of the dev stack, readable summary
	$(ENV) $(PASS) python -m lab.demo --stack $(STACK)

lab-up:  ## Start the local control planes (mothership, lab-workers) and simulators on 127.0.0.1
	$(ENV) python -m lab up

lab-down:  ## Stop every lab process
	$(ENV) python -m lab down

lab-status:
	$(ENV) python -m lab status

# A local backend that does not exist yet: say what creates it (pulumi's own error names only the path).
STATE := if [[ "$$PULUMI_BACKEND_URL" == file://* && ! -d "$${PULUMI_BACKEND_URL\#file://}" ]]; then \
	echo "no Pulumi state at $$PULUMI_BACKEND_URL yet: run 'make demo' first (it creates the dev stack there), or set PULUMI_BACKEND_URL to your backend" >&2; exit 2; fi &&

preview:
	$(ENV) $(STATE) $(CHECK) $(PASS) pulumi preview --stack $(STACK) --diff $(POLICY)

drift:  ## Compare the stack with the live estate (refresh, nothing changed): fails when it drifted
	$(ENV) $(STATE) $(CHECK) $(PASS) pulumi preview --stack $(STACK) --refresh --expect-no-changes --diff $(POLICY)

# With FLEET=<fleet> (the estate as stacks, README "The estate as stacks"): the stacks a change since
# SINCE (a git revision; every stack without it) touches, each previewed with the policy pack, and
# their summaries in one comment, review-<fleet>/estate-review.md.
review:  ## Markdown preview summary (with the policy pack) for a pull-request comment; FLEET=F [SINCE=REF]: the estate's stacks
ifdef FLEET
	$(ENV) python -m stack_config validate Pulumi.$(FLEET).yaml && $(PASS) python -m ops.estate preview --fleet $(FLEET) \
	  $(if $(SINCE),--changed-since $(SINCE),) $(POLICY) --report-dir review-$(FLEET) --log-dir review-$(FLEET)/logs
else
	$(ENV) $(STATE) $(CHECK) $(PASS) python -m ops.preview_report --stack $(STACK) --out preview-$(STACK).md
endif

up:
	$(ENV) $(STATE) $(CHECK) $(PASS) pulumi up --stack $(STACK) --yes --refresh $(POLICY)

destroy:
	$(ENV) $(PASS) pulumi destroy --stack $(STACK) --yes

test: setup  ## Lint, type check and the whole test suite (unit, simulators, lab, real CLI)
	$(ENV) ruff check .
	$(ENV) mypy
	$(ENV) python -m pytest

lint:
	$(ENV) ruff check .
	$(ENV) mypy

bench: setup
	$(ENV) python -m bench

# Random GPU pods against the composer under injected faults, invariants checked from the Director
# and the cluster (bench/soak/); SOAK_SECONDS (default 1800) and SOAK_SEED (default: the time).
SOAK_SECONDS ?= 1800
soak: setup  ## Soak the composer on the lab under faults -> bench/results/SOAK.md (SOAK_SECONDS, SOAK_SEED)
	$(ENV) python -m bench.soak --seconds $(SOAK_SECONDS) $(if $(SOAK_SEED),--seed $(SOAK_SEED),)

ci: setup  ## The CI recipe: tests, policy pack on every stack, preview summaries
	bash ci/pipeline.sh
