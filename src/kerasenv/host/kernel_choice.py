"""Which variants can run a GPU's kernels, by CUDA's binary compatibility rules, and the best
one with native kernels for a host.

The targets are the variant's recorded ones for the host's architecture (Variant.kernels_for:
images/<id>/kernel-targets.json for amd64, kernel-targets-arm64.json for arm64, read from that
image's binaries), else, on amd64 only, TF's published list (tested_builds) for a variant not
recorded yet. An arm64 image without its own record is not judged by the amd64 one: the
aarch64 wheels may carry other kernels (PyTorch 2.15's aarch64 build has sm_110 and no sm_75/86/89).

CUDA binary compatibility (CUDA C++ Programming Guide, "Binary Compatibility" and
"Application Compatibility"):
- SASS sm_XY runs on compute capability X.Z for Z >= Y, same major only.
- Arch-specific SASS sm_XYa (e.g. sm_90a, sm_100a) runs only on X.Y itself.
- PTX compute_XY is JIT-compiled by the driver for any compute capability >= X.Y
  (compute_XYa only for X.Y).
"""

from __future__ import annotations

import re

from ..matrix.kernel_targets import KernelTargets, from_compute_capabilities
from ..matrix.nvidia_drivers import driver_tuple
from ..matrix.schema import Variant
from ..matrix.tested_builds import version_tuple

_TARGET_RE = re.compile(r"^(sm|compute)_(\d+)(\d)([a-z]?)$")


def _cc(value: str) -> tuple[int, int]:
    major, minor = value.split(".")
    return int(major), int(minor)


def parse_target(target: str) -> tuple[str, int, int, str]:
    """'sm_100a' -> ('sm', 10, 0, 'a'); 'compute_90' -> ('compute', 9, 0, '')."""
    match = _TARGET_RE.match(target)
    if not match:
        raise ValueError(f"not a CUDA target like sm_90 or compute_90: {target!r}")
    kind, major, minor, suffix = match.groups()
    return kind, int(major), int(minor), suffix


def kernel_support(gpu_cc: str, targets: tuple[str, ...]) -> str:
    """'native' (SASS this GPU runs), 'ptx' (PTX the driver can JIT for it), or 'none'."""
    gpu = _cc(gpu_cc)
    parsed = [parse_target(t) for t in targets]
    for kind, major, minor, suffix in parsed:
        if kind == "sm" and ((major, minor) == gpu if suffix else (major == gpu[0] and minor <= gpu[1])):
            return "native"
    for kind, major, minor, suffix in parsed:
        if kind == "compute" and ((major, minor) == gpu if suffix else (major, minor) <= gpu):
            return "ptx"
    return "none"


def has_image(v: Variant, arch: str) -> bool:
    """Whether `v` has a linux/<arch> image (arch: amd64 | arm64)."""
    return f"linux/{arch}" in v.platforms


def targets_of(v: Variant, arch: str = "amd64") -> KernelTargets | None:
    """The recorded targets of `v`'s image for `arch`, else (amd64) TF's published compute
    capabilities in the same shape; None when neither is known (a JAX or PyTorch variant not
    recorded yet, an arm64 image before its kernel-targets-arm64.json), so the caller says
    "not checked" instead of judging an empty or another architecture's list."""
    recorded = v.kernels_for(arch)
    if recorded is not None:
        return recorded
    if arch == "amd64" and v.backend == "tensorflow" and v.tensorflow and v.compute_capabilities:
        return from_compute_capabilities("tensorflow", v.tensorflow, v.compute_capabilities)
    return None


def record_name(arch: str) -> str:
    """The file the kernel targets of `arch`'s image are recorded in (images/<id>/...)."""
    return "kernel-targets.json" if arch == "amd64" else f"kernel-targets-{arch}.json"


def describe(targets: KernelTargets) -> str:
    return f"SASS {','.join(targets.sass) or 'none'}; PTX {','.join(targets.ptx) or 'none'}"


def best_native(variants: list[Variant], gpu_ccs: list[str], driver: str | None, default_gpu: str,
                also_needed=lambda v: True, os: str = "linux", arch: str = "amd64") -> Variant | None:
    """Among the CUDA variants with an image for `arch` whose recorded kernel targets (of that
    image) have native SASS for every GPU in `gpu_ccs`, whose driver floor (minor-version
    compatibility) `driver` meets and which `also_needed` accepts (e.g. a cuDNN with kernels
    for the GPU), the best: one whose wheels' own driver the host has, then the default GPU
    image, then the newest CUDA. `os`: whose driver floors (linux, or windows: the driver of
    a WSL2 host); `arch`: the host's CPU architecture (amd64 | arm64)."""
    host = driver_tuple(driver) if driver else None
    floors = {v.id: v.driver_floors(os) for v in variants if v.family == "cuda"}
    recorded = {v.id: v.kernels_for(arch) for v in variants if v.family == "cuda"}
    candidates = [v for v in variants
                  if v.family == "cuda" and has_image(v, arch) and recorded[v.id] is not None and floors[v.id]
                  and host is not None and host >= driver_tuple(floors[v.id].load)
                  and all(kernel_support(cc, recorded[v.id].sass) == "native" for cc in gpu_ccs)
                  and also_needed(v)]
    if not candidates:
        return None
    return min(candidates, key=lambda v: (
        not host >= driver_tuple(floors[v.id].toolkit),
        v.id != default_gpu,
        tuple(-p for p in version_tuple(v.cuda or "0"))))
