"""What each JAX and PyTorch release of the matrix runs on: Python, and its CUDA wheels.

TensorFlow's facts are in tested_builds.py (TF publishes tested build configurations);
JAX and PyTorch publish none, so each entry here is what the release's own wheel metadata
on PyPI accepts, resolved to exact pins (shared/reference/compatibility.md, "Keras 3 on
JAX and PyTorch"), and the matrix entry that pins it must carry `gpu_evidence`: who ran
that release on which GPU (the project's own GPU CI or release notes).

- JAX 0.12.0.1 (Python >= 3.12, so on Debian 13's 3.13; 0.10.2 was the last release for
  Python 3.11 and Debian 12): `jax[cuda12]` has only lower bounds, and it resolves with
  exactly the CUDA 12.9.1 / cuDNN 9.24.0.43 stack of tf2.21-cuda12.9. So both images pin one stack, and the CUDA wheel layer is the same
  bytes in both (the CUDA lock names no variant). JAX needs two wheels beyond it,
  nvidia-nvshmem-cu12 and nvidia-cuda-cccl-cu12: they go in the JAX image's own layer so
  the shared one stays shared. Kernels (SASS sm_50..sm_120, PTX compute_120 in 0.12.0.1's
  plugin per compatibility.md) are read from the binaries: images/<id>/kernel-targets.json.
- PyTorch 2.15.0: CUDA 13.2 only on PyPI (no cu12 build of torch >= 2.11 there), pinned
  exactly by the wheel (`cuda-toolkit[...]==13.2.2`, cuDNN cu13 9.26.0.51, NCCL cu13
  2.30.7, nvshmem cu13 3.7.2). nvJitLink and CCCL float to 13.5 unless held: they are
  held to the CUDA 13.2 Update 2 release of the rest. No PTX in torch's own kernels, so the
  driver must load CUDA 13 (>= 580) and GPUs older than Turing get nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from .tested_builds import CUDA_12_9_CUDNN_9_24, CudaStack

BACKENDS = ("tensorflow", "jax", "torch")

# CUDA 13.2 Update 2 as torch 2.15.0 pins it. The CUDA 13 wheels drop the -cu13 suffix
# except cuDNN, cuSPARSELt, NCCL and NVSHMEM. Sizes and layout: benchmarks/README.md.
CUDA_13_2 = CudaStack(
    cuda="13.2", cudnn="9.26.0.51", toolkit_release="13.2 Update 2",
    wheels=MappingProxyType({
        "nvidia-cublas": "13.4.1.3", "nvidia-cuda-cccl": "13.2.86", "nvidia-cuda-cupti": "13.2.86",
        "nvidia-cuda-nvrtc": "13.2.86", "nvidia-cuda-runtime": "13.2.86", "nvidia-cudnn-cu13": "9.26.0.51",
        "nvidia-cufft": "12.2.0.57", "nvidia-cufile": "1.17.1.22", "nvidia-cusolver": "12.2.0.11",
        "nvidia-cusparse": "12.7.10.12", "nvidia-cusparselt-cu13": "0.8.1", "nvidia-nvjitlink": "13.2.86",
        "nvidia-nvshmem-cu13": "3.7.2", "nvidia-nvtx": "13.2.86",
    }),
    nccl_package="nvidia-nccl-cu13",
)


@dataclass(frozen=True)
class BackendRelease:
    backend: str  # "jax" | "torch"
    version: str
    python_min: str
    python_max: str
    # The requirement that installs the GPU build (the CPU build for the cpu family).
    gpu_requirement: str
    cpu_requirement: str | None  # None: PyPI has no CPU-only build (torch: the CUDA wheel)
    stack: CudaStack
    nccl: str  # exact NCCL the release's metadata pins or resolves to
    # NVIDIA wheels the release needs beyond `stack`, pinned, in the variant's own lock
    extra_cuda_wheels: Mapping[str, str]


JAX_RELEASES: Mapping[str, BackendRelease] = MappingProxyType({
    # 2026-10-21; Python >= 3.12 (cp312-cp314): the JAX images since Debian 13.
    "0.12.0.1": BackendRelease(
        "jax", "0.12.0.1", "3.12", "3.14", "jax[cuda12]==0.12.0.1", "jax==0.12.0.1",
        CUDA_12_9_CUDNN_9_24, "2.30.7",
        MappingProxyType({"nvidia-nvshmem-cu12": "3.8.0", "nvidia-cuda-cccl-cu12": "12.9.27"})),
    # The last JAX for Python 3.11 (Debian 12): what the retired jax0.10-* ids shipped.
    "0.10.2": BackendRelease(
        "jax", "0.10.2", "3.11", "3.13", "jax[cuda12]==0.10.2", "jax==0.10.2",
        CUDA_12_9_CUDNN_9_24, "2.30.7",
        MappingProxyType({"nvidia-nvshmem-cu12": "3.8.0", "nvidia-cuda-cccl-cu12": "12.9.27"})),
})

TORCH_RELEASES: Mapping[str, BackendRelease] = MappingProxyType({
    "2.15.0": BackendRelease(
        "torch", "2.15.0", "3.11", "3.14", "torch==2.15.0", None, CUDA_13_2, "2.30.7",
        MappingProxyType({})),
})

RELEASES: Mapping[str, Mapping[str, BackendRelease]] = MappingProxyType(
    {"jax": JAX_RELEASES, "torch": TORCH_RELEASES})
