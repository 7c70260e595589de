"""What a Blackwell GPU (compute capability 10.x / 12.x) needs from a CUDA variant.

The facts, each with its source (shared/reference/compatibility.md, "Added 2026-12-01"):

- TF wheels ship SASS for sm_60/70/80/89 and PTX only for compute_90, so a Blackwell GPU
  runs TF's kernels JIT-compiled by the driver from that PTX: "TensorFlow was not built
  with CUDA kernel binaries compatible with compute capability 12.0"
  (tensorflow/tensorflow#97387, #89272). The first run compiles for a long time; the
  images keep the driver's cache on a volume (CUDA_CACHE_PATH).
- cuDNN has Blackwell kernels from 9.7 on (cuDNN 9.7.0 release notes). Older cuDNN
  cannot run a convolution there, so the variant cannot serve the GPU.
- XLA takes its PTX version from the CUDA TF was built with (openxla/xla#47776): TF 2.21
  (CUDA 12.5.1) emits PTX 8.5, while sm_100 needs PTX 8.6 and sm_120 PTX 8.7, and LLVM
  aborts the process: "LLVM ERROR: PTX version 8.5 does not support target 'sm_120'"
  (tensorflow/tensorflow#111958, labelled 2.21.0; fix proposed in openxla/xla#47978).
  Keras 3 compiles fit() with XLA by default on one GPU, so XLA must be off there.
"""

from __future__ import annotations

from dataclasses import dataclass

# Which GPUs are Blackwell is the in-image package's fact (the smoke and the bench use it
# inside the images); the doctor draws the same line by importing it.
from kerasenv_image.blackwell import is_blackwell  # noqa: F401 - doctor calls blackwell.is_blackwell

from ..matrix.schema import Variant
from ..matrix.tested_builds import version_tuple

CUDNN_FIRST_BLACKWELL = "9.7"
# The first TF release whose XLA can emit PTX for Blackwell: none yet (2.21 is the newest
# release we know; tensorflow/tensorflow#111958 was open against it).
XLA_FIRST_BLACKWELL_TF: str | None = None

XLA_OFF_HOW = ("compile with jit_compile=False (Keras 3 defaults to XLA on one GPU); "
               "`kerasenv smoke` turns XLA off on Blackwell by itself")


@dataclass(frozen=True)
class Verdict:
    status: str  # "FAIL" | "WARN"
    message: str
    fix: str


def xla_can_target(tensorflow: str) -> bool:
    return XLA_FIRST_BLACKWELL_TF is not None and \
        version_tuple(tensorflow) >= version_tuple(XLA_FIRST_BLACKWELL_TF)


def verdict(v: Variant, gpu_name: str, compute_capability: str, cuda_variants: list[Variant]) -> Verdict:
    """FAIL when the variant's stack cannot serve this Blackwell GPU, else WARN with what
    to expect and how to work around it."""
    gpu = f"{gpu_name} (compute capability {compute_capability}, Blackwell)"
    assert v.cudnn is not None
    if version_tuple(v.cudnn)[:2] < version_tuple(CUDNN_FIRST_BLACKWELL):
        serving = [x.id for x in cuda_variants
                   if x.cudnn and version_tuple(x.cudnn)[:2] >= version_tuple(CUDNN_FIRST_BLACKWELL)]
        fix = (f"use {serving[0]} (cuDNN >= {CUDNN_FIRST_BLACKWELL})" if serving else
               "use NVIDIA's NGC TensorFlow container, which is built for Blackwell")
        return Verdict("FAIL", f"{gpu}: cuDNN {v.cudnn} has no Blackwell kernels (they came in cuDNN "
                               f"{CUDNN_FIRST_BLACKWELL}), so every convolution fails", fix)
    expect = (f"{gpu}: no native kernels in TF {v.tensorflow} (it ships "
              f"{', '.join(v.compute_capabilities)}), the driver JIT-compiles its compute_90 PTX "
              "(the first run takes many minutes; the cache is kept)")
    if xla_can_target(v.tensorflow):
        return Verdict("WARN", expect, "let the first run finish; later runs reuse the JIT cache")
    built_with = v.tested_stack.cuda if v.tested_stack else "?"
    return Verdict("WARN", f"{expect}; XLA cannot target it (TF {v.tensorflow} was built with CUDA {built_with} "
                           "and its XLA emits that CUDA's PTX version, too old for Blackwell: "
                           "tensorflow/tensorflow#111958), so jit_compile must be off", XLA_OFF_HOW)
