"""What a Blackwell GPU (compute capability 10.x / 12.x) needs from a CUDA variant.

The facts, each with its source (shared/reference/compatibility.md, "Added 2026-12-01" and
its second pass):

- Which kernels a variant carries is read from its image's binaries (kernel-targets.json,
  host/kernel_choice.py): native SASS for the GPU -> PASS; PTX only -> the driver JIT-compiles
  it on first use, which takes minutes ("could take 30 minutes or longer":
  tensorflow/tensorflow#97387; CUDA_ERROR_INVALID_PTX on RTX 50xx: #89272), kept in the
  driver's cache (CUDA_CACHE_PATH on a named volume kerasenv mounts); neither -> FAIL. TF's
  wheels carry SASS up to sm_90 and PTX compute_90 only; JAX's cuda12 and PyTorch's cu13
  wheels carry sm_100/sm_120 SASS.
- cuDNN has Blackwell kernels from 9.7 on (cuDNN 9.7.0 release notes). Older cuDNN
  cannot run a convolution there, so the variant cannot serve the GPU.
- XLA takes its PTX version from the CUDA TF was built with (openxla/xla#47776): TF 2.21
  (CUDA 12.5.1) emits PTX 8.5, while sm_100 needs PTX 8.6 and sm_120 PTX 8.7, and LLVM
  aborts the process: "LLVM ERROR: PTX version 8.5 does not support target 'sm_120'"
  (tensorflow/tensorflow#111958, labelled 2.21.0; fix proposed in openxla/xla#47978).
  Keras 3 compiles fit() with XLA by default on one GPU, so XLA must be off there. That is
  TF's XLA: JAX's XLA compiles for Blackwell with the ptxas of its CUDA wheels.
"""

from __future__ import annotations

from dataclasses import dataclass

# Which GPUs are Blackwell is the in-image package's fact (the smoke and the bench use it
# inside the images); the doctor draws the same line by importing it.
from kerasenv_image.blackwell import is_blackwell  # noqa: F401 - doctor calls blackwell.is_blackwell

from . import kernel_choice
from ..matrix.nvidia_drivers import driver_tuple
from ..matrix.schema import Variant
from ..matrix.tested_builds import version_tuple

CUDNN_FIRST_BLACKWELL = "9.7"
# The first TF release whose XLA can emit PTX for Blackwell: none yet (2.21 is the newest
# release we know; tensorflow/tensorflow#111958 was open against it).
XLA_FIRST_BLACKWELL_TF: str | None = None

# Where the images keep the driver's JIT cache (kerasenv run/smoke mount a named volume there).
CUDA_CACHE_PATH = "/var/cache/kerasenv/cuda"
JIT_COST = ("the driver JIT-compiles {ptx} PTX on first use, which takes minutes (tensorflow/tensorflow#97387 "
            "reports 30 min and more); the result is kept in CUDA_CACHE_PATH=" + CUDA_CACHE_PATH + ", a named "
            "volume kerasenv mounts, so later runs start at once")

XLA_OFF_HOW = ("compile with jit_compile=False (Keras 3 defaults to XLA on one GPU); "
               "`kerasenv smoke` turns XLA off on Blackwell by itself")

# Warnings a framework prints on a GPU it does run natively, by (framework, compute
# capability): the doctor says they are false alarms, so nobody switches images over them.
# PyTorch warns "Found GPU0 NVIDIA GB10 which is of cuda capability 12.1 ... not supported" on
# DGX Spark, where it trains natively (pytorch/pytorch#172629: torch 2.13.0+cu130 fine-tuned a
# 9B model at 94 % GPU use); its aarch64 wheel carries sm_121a SASS (kernel-targets-arm64.json)
# and sm_120 code runs there too (pytorch/pytorch#164596). Not seen here on a GB10.
FALSE_ALARMS = {
    ("torch", "12.1"): ("PyTorch's \"cuda capability 12.1 ... not supported\" warning is a false alarm: it "
                        "trains natively there (pytorch/pytorch#172629)"),
}


@dataclass(frozen=True)
class Verdict:
    status: str  # "PASS" | "WARN" | "FAIL"
    message: str
    fix: str


def xla_can_target(tensorflow: str) -> bool:
    return XLA_FIRST_BLACKWELL_TF is not None and \
        version_tuple(tensorflow) >= version_tuple(XLA_FIRST_BLACKWELL_TF)


def cudnn_serves(v: Variant) -> bool:
    return v.cudnn is not None and version_tuple(v.cudnn)[:2] >= version_tuple(CUDNN_FIRST_BLACKWELL)


def native_image(cuda_variants: list[Variant], compute_capability: str, driver: str,
                 default_gpu: str, os: str = "linux", usable=lambda v: True, arch: str = "amd64") -> Variant | None:
    """The best variant with native kernels for this Blackwell GPU that this driver runs
    (`os`: whose driver floors; `usable`: what else the host allows, e.g. no JAX on WSL2;
    `arch`: the host's CPU architecture, whose images and their kernels count)."""
    return kernel_choice.best_native(cuda_variants, [compute_capability], driver, default_gpu,
                                     also_needed=lambda x: cudnn_serves(x) and usable(x), os=os, arch=arch)


def verdict(v: Variant, gpu_name: str, compute_capability: str, driver: str,
            cuda_variants: list[Variant], default_gpu: str, os: str = "linux", usable=lambda v: True,
            arch: str = "amd64") -> Verdict:
    """PASS with native kernels (unless TF's XLA is in the way: WARN), WARN when the driver
    must JIT-compile PTX, FAIL when the variant cannot serve this Blackwell GPU; a WARN or a
    FAIL names the image with native kernels to use instead, where the matrix has one. The
    kernels are those of `v`'s image for `arch` (the host's CPU architecture)."""
    gpu = f"{gpu_name} (compute capability {compute_capability}, Blackwell)"
    native = native_image(cuda_variants, compute_capability, driver, default_gpu, os, usable, arch)
    ptx_floor = v.driver_floors(os).ptx_jit
    use_native = f"use kerasenv:{native.id} (native kernels for it)" if native and native.id != v.id else ""
    assert v.cudnn is not None
    if not cudnn_serves(v):
        serving = [x.id for x in cuda_variants if cudnn_serves(x)]
        fix = use_native or (f"use {serving[0]} (cuDNN >= {CUDNN_FIRST_BLACKWELL})" if serving else
                             "use NVIDIA's NGC TensorFlow container, which is built for Blackwell")
        return Verdict("FAIL", f"{gpu}: cuDNN {v.cudnn} has no Blackwell kernels (they came in cuDNN "
                               f"{CUDNN_FIRST_BLACKWELL}), so every convolution fails", fix)
    targets = kernel_choice.targets_of(v, arch)
    if targets is None:
        return Verdict("WARN", f"{gpu}: {v.framework_label}'s kernel targets are not recorded for its "
                               f"linux/{arch} image (images/<id>/{kernel_choice.record_name(arch)}): kernel support "
                               "not checked",
                       use_native or f"record them: `kerasenv kernel-targets {v.id} --write` on the built image")
    framework = f"{targets.framework} {targets.version}"
    support = kernel_choice.kernel_support(compute_capability, targets.all)
    if support == "none":
        return Verdict("FAIL", f"{gpu}: {framework} carries no kernel it can run ({kernel_choice.describe(targets)})",
                       use_native or "use NVIDIA's NGC container for this framework, which is built for Blackwell")
    if support == "ptx" and driver_tuple(driver) < driver_tuple(ptx_floor):
        return Verdict("FAIL", f"{gpu}: {framework} has only PTX for it ({kernel_choice.describe(targets)}); "
                               f"JIT-compiling it needs driver >= {ptx_floor}, this host has {driver}",
                       use_native or f"upgrade the NVIDIA driver to >= {ptx_floor}")
    if support == "native":
        status, message, fix = "PASS", f"{gpu}: native kernels in {framework} ({kernel_choice.describe(targets)})", ""
        alarm = FALSE_ALARMS.get((targets.framework, compute_capability))
        if alarm:
            message += f"; {alarm}"
    else:
        ptx = ", ".join(targets.ptx)
        status = "WARN"
        message = (f"{gpu}: no native kernels in {framework} (its binaries carry {kernel_choice.describe(targets)}); "
                   + JIT_COST.format(ptx=f"its {ptx}"))
        fix = use_native or "let the first run finish; later runs reuse the JIT cache"
    if targets.framework == "tensorflow" and not xla_can_target(v.tensorflow):
        built_with = v.tested_stack.cuda if v.tested_stack else "?"
        message += (f"; XLA cannot target it (TF {v.tensorflow} was built with CUDA {built_with} and its XLA "
                    "emits that CUDA's PTX version, too old for Blackwell: tensorflow/tensorflow#111958), so "
                    "jit_compile must be off")
        status = "WARN"
        fix = "; ".join(f for f in (XLA_OFF_HOW, use_native and f"or {use_native}") if f)
    return Verdict(status, message, fix)
