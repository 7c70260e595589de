#!/bin/bash
# Usage: cuda-loader-config.sh VENV PYTHON_VERSION CUDA_VERSION
# Runs as root in the runtime stage of a CUDA variant, once the venv and the CUDA wheels
# (from the cuda-libs stage) are in place; the Dockerfile deletes this script in the same step.
set -euo pipefail
venv=$1 python=$2 cuda=$3
nvidia=$venv/lib/python$python/site-packages/nvidia

# The CUDA wheels' lib directories go into the dynamic loader's own configuration.
# TensorFlow registers no GPU unless TryDlopenCUDALibraries() (tsl dso_loader) can dlopen
# cudart, cuBLAS(Lt), cuFFT, cuSOLVER, cuSPARSE and cuDNN, and it finds them only through
# the RUNPATH of libtensorflow_framework.so.2. TF 2.21's no longer lists nvidia/cusolver/lib
# (it moved to libtensorflow_cc.so.2), so without this "Could not load dynamic library
# 'libcusolver.so.11'" and "Skipping registering GPU devices": the image trains on the CPU.
# cuDNN also dlopens NVRTC (outside its RUNPATH) and CUPTI/NCCL are opened by name; JAX's
# CUDA plugin and PyTorch dlopen the same libraries by soname. docker-stacks hits the same
# class of problem (tensorflow/tensorflow#63362) and sets LD_LIBRARY_PATH; /etc/ld.so.conf.d
# instead holds for every process: any --user, `env -i`, subprocesses, and the NVIDIA
# Container Toolkit's ldconfig at container start (it rebuilds the cache from this same
# configuration). Every directory that holds a shared library: the CUDA 12 wheels keep one
# lib/ per component (nvidia/cublas/lib), the CUDA 13 ones share nvidia/cu13/lib.
find "$nvidia" -name 'lib*.so*' -type f -printf '%h\n' | sort -u > /etc/ld.so.conf.d/kerasenv-cuda-wheels.conf

# cuDNN dlopens NVRTC by its unversioned name, which the wheel does not ship
# (AUTOMATIC1111/stable-diffusion-webui#10230): link it to the versioned library.
# Checks read their whole input (`grep >/dev/null`, `sed -n 1p`), never `grep -q`/`head`:
# under pipefail a reader that exits early kills the writer with SIGPIPE, and the step
# failed with exit 141 when `ldconfig -p` was still writing (seen in CI, 2026-12-01).
nvrtc_path=$(find "$nvidia" -name 'libnvrtc.so.*' ! -name '*builtins*' -type f | sort | sed -n 1p)
test -n "$nvrtc_path"
nvrtc_dir=$(dirname "$nvrtc_path")
[ -e "$nvrtc_dir"/libnvrtc.so ] || ln -s "$(basename "$nvrtc_path")" "$nvrtc_dir"/libnvrtc.so
ldconfig
ldconfig -p | grep "libnvrtc.so (.*$nvrtc_dir/libnvrtc.so$" >/dev/null

# XLA (TensorFlow, JAX) compiles with ptxas and libdevice from the nvcc wheel; older TF
# releases look for ptxas on PATH (tensorflow/tensorflow#58681, tensorflow/docs pip.md step
# 6): link the pinned wheel's ptxas into the venv, and check it is the CUDA release of the
# matrix. PyTorch's stack has no nvcc wheel (Triton carries its own ptxas): nothing to link.
if [ -d "$nvidia"/cuda_nvcc ]; then
  ln -s ../lib/python"$python"/site-packages/nvidia/cuda_nvcc/bin/ptxas "$venv"/bin/ptxas
  ptxas --version | grep "release ${cuda//./\\.}," >/dev/null
  test -f "$nvidia"/cuda_nvcc/nvvm/libdevice/libdevice.10.bc
fi

# With the CUDA wheels in place the venv is complete: every requirement of every package met.
# One exception, on aarch64 only: NVIDIA tags some aarch64 wheels inside as `..._sbsa` (Arm's name
# for its servers) while the file is named `..._aarch64`, and pip check then calls the package "not
# supported on this platform" on every arm64 machine (nvidia-cusparselt-cu13 0.8.1: its WHEEL says
# `py3-none-manylinux2014_sbsa`; seen building the arm64 image, issue 36). Exactly those lines are
# let through, where every tag of the package's WHEEL file is an sbsa one and its libraries are
# aarch64 (the arm64 checks read every ELF file's machine); anything else pip reports fails.
problems=$("$venv"/bin/python -m pip check 2>&1) || true
if [ "$(uname -m)" = aarch64 ]; then
  kept=""
  while IFS= read -r line; do
    name=$(sed -n 's/^\([A-Za-z0-9._-]*\) \([^ ]*\) is not supported on this platform$/\1-\2/p' <<<"$line")
    wheel=$(ls "$venv"/lib/python"$python"/site-packages/"$(tr '-' '_' <<<"${name%-*}")"-"${name##*-}".dist-info/WHEEL 2>/dev/null || true)
    if [ -n "$name" ] && [ -n "$wheel" ] && grep '^Tag: ' "$wheel" >/dev/null && ! grep '^Tag: ' "$wheel" | grep -v '_sbsa$' >/dev/null; then
      echo "pip check: $line (its WHEEL tags it sbsa, NVIDIA's name for aarch64 servers: accepted)"
      continue
    fi
    kept+="$line"$'\n'
  done <<<"$problems"
  problems=$kept
fi
problems=$(printf '%s' "$problems" | grep -v '^No broken requirements found' | sed '/^$/d' || true)
if [ -n "$problems" ]; then
  printf 'pip check:\n%s\n' "$problems" >&2
  exit 1
fi
