"""What each TensorFlow release was built and tested with.

One table per fact, each with its source. The matrix (images/matrix.toml) is
validated against these tables, and the locks are resolved with the CUDA pins
below as constraints, so an image can only carry the CUDA stack its TensorFlow
release was tested with, or one of OVERRIDE_STACKS backed by GPU evidence in the
matrix (someone ran it on a named GPU: matrix.py refuses an override without it).

Sources (all quoted in shared/reference/compatibility.md):
- CUDA / cuDNN per release: tensorflow/docs@7c365021 site/en/install/source.md,
  "Tested build configurations", Linux GPU table.
- nvidia-* pins: the `and-cuda` extra in each TensorFlow wheel's METADATA on PyPI.
  From 2.20 on the extra gives only ranges (">=12.5.82,<13"); unpinned, a build
  silently pulls the newest 12.x/9.x wheels (measured: 6.93 GB instead of 5.49 GB),
  so we pin the range floors, which are exactly the 2.18/2.19 pins, i.e. the
  tested CUDA 12.5 / cuDNN 9.3 stack (hermetic CUDA 12.5.1, cuDNN 9.3.0 in .bazelrc).
- Compute capabilities: tensorflow/tensorflow .bazelrc (HERMETIC_CUDA_COMPUTE_CAPABILITIES
  @0071ad1d for 2.18+, the 2.16 dev-cycle .bazelrc for 2.16/2.17 minus 5.x per the 2.17
  release notes). The acceptance tests compare them with tf.sysconfig.get_build_info()
  of each built image.
- ROCm: ROCm/ROCm@e396b489 compatibility matrix and tensorflow-compatibility.rst.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class CudaStack:
    """The CUDA userspace a TensorFlow release was tested with, as pip wheels."""

    cuda: str  # toolkit X.Y
    cudnn: str  # nvidia-cudnn-cu1x version
    # NVIDIA toolkit release the wheels come from; keys nvidia_drivers.TOOLKIT_DRIVER.
    toolkit_release: str
    # Exact pins of every nvidia-* wheel except NCCL (NCCL is per matrix entry).
    wheels: Mapping[str, str]
    nccl_package: str


def _stack(cuda: str, toolkit_release: str, suffix: str, **pins: str) -> CudaStack:
    wheels = {f"nvidia-{name.replace('_', '-')}-{suffix}": v for name, v in pins.items()}
    cudnn = wheels[f"nvidia-cudnn-{suffix}"]
    return CudaStack(
        cuda=cuda,
        cudnn=cudnn,
        toolkit_release=toolkit_release,
        wheels=MappingProxyType(wheels),
        nccl_package=f"nvidia-nccl-{suffix}",
    )


# tensorflow 2.14.x `and-cuda` (cu11). The extra also pulls tensorrt==8.5.3.1, which
# we leave out (no TensorRT in our images), so the wheels are listed rather than the extra.
# One addition to the extra: NVRTC 11.8.89 (CUDA 11.8 GA, the same release as the other
# wheels). cuDNN 8.7's libcudnn_ops_infer/libcudnn_cnn_infer dlopen `libnvrtc.so`, and the
# extra has no cuda_nvrtc wheel, so the first cuDNN call (every convolution) aborts with
# "Could not load library libcudnn_ops_infer.so.8. Error: libnvrtc.so: cannot open shared
# object file" (seen in kerasenv:tf2.14-cuda11.8 before this pin; the same error from pip's
# cuDNN 8 wheels in AUTOMATIC1111/stable-diffusion-webui#10230, fixed by a libnvrtc.so link
# in facefusion/facefusion-docker#9). The image links libnvrtc.so to the wheel's
# libnvrtc.so.11.2 (the ld.so.conf.d step of the Dockerfile template).
CUDA_11_8 = _stack(
    "11.8", "11.8 GA", "cu11",
    cuda_runtime="11.8.89", cublas="11.11.3.6", cuda_cupti="11.8.87", cuda_nvcc="11.8.89",
    cuda_nvrtc="11.8.89", cudnn="8.7.0.84", cufft="10.9.0.58", curand="10.3.0.86",
    cusolver="11.4.1.48", cusparse="11.7.5.86",
)
# tensorflow 2.15.0.post1 / 2.15.1 `and-cuda`. Runtime 12.2.140 is CUDA 12.2 Update 2.
CUDA_12_2 = _stack(
    "12.2", "12.2 Update 2", "cu12",
    cublas="12.2.5.6", cuda_cupti="12.2.142", cuda_nvcc="12.2.140", cuda_nvrtc="12.2.140",
    cuda_runtime="12.2.140", cudnn="8.9.4.25", cufft="11.0.8.103", curand="10.3.3.141",
    cusolver="11.5.2.141", cusparse="12.1.2.141", nvjitlink="12.2.140",
)
# tensorflow 2.16.1 - 2.17.1 `and-cuda`. The derived PTX floor uses 12.3 GA's driver
# (compatibility.md §3b).
CUDA_12_3 = _stack(
    "12.3", "12.3 GA", "cu12",
    cublas="12.3.4.1", cuda_cupti="12.3.101", cuda_nvcc="12.3.107", cuda_nvrtc="12.3.107",
    cuda_runtime="12.3.101", cudnn="8.9.7.29", cufft="11.0.12.1", curand="10.3.4.107",
    cusolver="11.5.4.101", cusparse="12.2.0.103", nvjitlink="12.3.101",
)
# tensorflow 2.18.x / 2.19.x pins = the floors of the 2.20 / 2.21 ranges.
# Runtime 12.5.82 is CUDA 12.5 Update 1 (hermetic CUDA 12.5.1).
CUDA_12_5 = _stack(
    "12.5", "12.5 Update 1", "cu12",
    cublas="12.5.3.2", cuda_cupti="12.5.82", cuda_nvcc="12.5.82", cuda_nvrtc="12.5.82",
    cuda_runtime="12.5.82", cudnn="9.3.0.75", cufft="11.2.3.61", curand="10.3.6.82",
    cusolver="11.6.3.83", cusparse="12.5.1.3", nvjitlink="12.5.82",
)

# Not a TensorFlow tested configuration: the stack a GPU-verified override may pin
# (images/matrix.toml `gpu_evidence`). CUDA 12.9 Update 1 (12.9.1) component versions,
# as in NVIDIA's CUDA 12.9.1 release notes: the toolkit AWS builds its TF 2.21 DLC on
# (docker/tensorflow/2.21/versions-cuda.env, CUDA_VERSION=12.9.1, from NVIDIA's RPMs;
# here the same components as pip wheels), with cuDNN 9.24.0.43 from pip, which AWS
# pinned after TF 2.21 + cuDNN 9.3 / 9.5 broke every XLA Conv2D (compatibility.md,
# "Added 2026-12-01"). All fit TF 2.21's `and-cuda` ranges (cu12 >= 12.5, cuDNN 9.x).
CUDA_12_9_CUDNN_9_24 = _stack(
    "12.9", "12.9 Update 1", "cu12",
    cublas="12.9.1.4", cuda_cupti="12.9.79", cuda_nvcc="12.9.86", cuda_nvrtc="12.9.86",
    cuda_runtime="12.9.79", cudnn="9.24.0.43", cufft="11.4.1.4", curand="10.3.10.19",
    cusolver="11.7.5.82", cusparse="12.5.10.65", nvjitlink="12.9.86",
)

# Stacks a matrix entry may choose instead of its release's tested one, keyed by
# (CUDA X.Y, cuDNN). Each needs `gpu_evidence` in the matrix (matrix.py enforces it),
# and only a release whose `and-cuda` extra is a range (TF >= 2.20) can take one: the
# exact pins of older extras leave pip no room.
OVERRIDE_STACKS: Mapping[tuple[str, str], CudaStack] = MappingProxyType({
    (s.cuda, s.cudnn): s for s in (CUDA_12_9_CUDNN_9_24,)
})


@dataclass(frozen=True)
class NcclRule:
    """NCCL that a release accepts: an exact pin, or a floor below 3.0 (2.20+)."""

    exact: str | None = None
    floor: str | None = None

    def accepts(self, version: str) -> bool:
        if self.exact is not None:
            return version == self.exact
        assert self.floor is not None
        return _vtuple(self.floor) <= _vtuple(version) < (3,)

    def describe(self) -> str:
        return f"=={self.exact}" if self.exact else f">={self.floor},<3.0"


@dataclass(frozen=True)
class TensorflowRelease:
    version: str
    python_min: str
    python_max: str
    keras_major: int
    stack: CudaStack | None  # None: no CUDA stack we ship (e.g. 2.12/2.13)
    nccl: NcclRule | None
    compute_capabilities: tuple[str, ...]

    @property
    def and_cuda_is_range(self) -> bool:
        """True when the `and-cuda` extra gives ranges (2.20+), so another stack fits it."""
        return self.nccl is not None and self.nccl.floor is not None


_CC_2_14 = ("sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80")
# TF 2.15 dropped Kepler (sm_35): tf.sysconfig.get_build_info() of the tensorflow 2.15.1
# wheel reports exactly these (measured in kerasenv:tf2.15-cuda12.2; the acceptance suite
# compares the label with it, which is how the sm_35 we used to claim was caught).
_CC_2_15 = ("sm_50", "sm_60", "sm_70", "sm_75", "compute_80")
_CC_2_16 = ("sm_50", "sm_60", "sm_70", "sm_80", "compute_90")
_CC_2_17 = ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90")


def _release(version, py, keras_major, stack, nccl, cc) -> TensorflowRelease:
    lo, hi = py.split("-")
    return TensorflowRelease(version, lo, hi, keras_major, stack, nccl, cc)


TENSORFLOW_RELEASES: Mapping[str, TensorflowRelease] = MappingProxyType({
    r.version: r
    for r in (
        _release("2.14.0", "3.9-3.11", 2, CUDA_11_8, NcclRule(exact="2.16.5"), _CC_2_14),
        _release("2.14.1", "3.9-3.11", 2, CUDA_11_8, NcclRule(exact="2.16.5"), _CC_2_14),
        _release("2.15.1", "3.9-3.11", 2, CUDA_12_2, NcclRule(exact="2.16.5"), _CC_2_15),
        _release("2.16.1", "3.9-3.12", 3, CUDA_12_3, NcclRule(exact="2.19.3"), _CC_2_16),
        _release("2.16.2", "3.9-3.12", 3, CUDA_12_3, NcclRule(exact="2.19.3"), _CC_2_16),
        _release("2.17.0", "3.9-3.12", 3, CUDA_12_3, NcclRule(exact="2.19.3"), _CC_2_17),
        _release("2.17.1", "3.9-3.12", 3, CUDA_12_3, NcclRule(exact="2.19.3"), _CC_2_17),
        _release("2.18.0", "3.9-3.12", 3, CUDA_12_5, NcclRule(exact="2.21.5"), _CC_2_17),
        _release("2.18.1", "3.9-3.12", 3, CUDA_12_5, NcclRule(exact="2.21.5"), _CC_2_17),
        _release("2.19.0", "3.9-3.12", 3, CUDA_12_5, NcclRule(exact="2.23.4"), _CC_2_17),
        _release("2.19.1", "3.9-3.12", 3, CUDA_12_5, NcclRule(exact="2.23.4"), _CC_2_17),
        _release("2.20.0", "3.9-3.13", 3, CUDA_12_5, NcclRule(floor="2.25.1"), _CC_2_17),
        _release("2.21.0", "3.10-3.13", 3, CUDA_12_5, NcclRule(floor="2.27.7"), _CC_2_17),
    )
})

# ROCm release (X.Y) -> TensorFlow X.Y lines AMD validated on it.
ROCM_TENSORFLOW: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "6.0": ("2.14", "2.13", "2.12"),
    "6.1": ("2.15", "2.14", "2.13"),
    "6.2": ("2.16", "2.15", "2.14"),
    "6.3": ("2.17", "2.16", "2.15"),
})

# Python that a Debian suite ships (python3 package); used to check `python` against
# `base_image` when the base is a Debian image we know.
DEBIAN_PYTHON: Mapping[str, str] = MappingProxyType({
    "bookworm": "3.11",
    "trixie": "3.13",
})


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def version_tuple(version: str) -> tuple[int, ...]:
    """'2.21.0' -> (2, 21, 0); non-numeric parts are ignored."""
    return _vtuple(version)
