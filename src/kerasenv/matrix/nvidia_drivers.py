"""Minimum NVIDIA driver for a CUDA userspace, Linux and Windows (WSL2), from NVIDIA's own table.

Two floors per CUDA variant:

- load floor ("loads at all"): CUDA minor-version compatibility lets an application
  built with any 12.x toolkit run, with a limited feature set, on any driver >= 525
  (11.x: >= 450.80.02). Below it the CUDA runtime does not initialise.
- PTX-JIT floor: GPUs that get no native (SASS) kernels from a TensorFlow build, only
  PTX (e.g. Hopper sm_90 and newer for TF >= 2.17, whose wheels carry compute_90 PTX),
  need a driver that can JIT PTX from that toolkit, i.e. the toolkit's own driver.
  An older driver gives CUDA_ERROR_UNSUPPORTED_PTX_VERSION.

Sources:
- NVIDIA CUDA Toolkit 13.1 Release Notes, section 2.2 "CUDA Driver", Table 3
  "CUDA Toolkit and Corresponding Driver Versions" (Linux x86_64, ">=" values),
  https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
- https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
- The per-TF floors are DERIVED from both (shared/reference/compatibility.md §3b):
  they are not stated per TensorFlow release by TensorFlow or NVIDIA.

Windows (WSL2): the same Table 3 has a Windows x86_64 column, and under WSL2 the driver is
the Windows one (nvidia-smi's "Driver Version" prints its number), so the floors of a WSL2
host are derived from that column the same way (compatibility.md, "WSL2"). From CUDA 13.1 the
toolkit no longer bundles the Windows driver and the column says N/A; CUDA 13 on Windows
needs the R580 branch, whose first Windows release, 580.88, is reported by third parties and
not on an NVIDIA page: it is marked so where it is shown.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

# Table 3, Linux x86_64 column. There is no CUDA 12.7.
TOOLKIT_DRIVER: Mapping[str, str] = MappingProxyType({
    "11.8 GA": "520.61.05",
    "12.0 GA": "525.60.13",
    "12.0 Update 1": "525.85.12",
    "12.1 GA": "530.30.02",
    "12.1 Update 1": "530.30.02",
    "12.2 GA": "535.54.03",
    "12.2 Update 1": "535.86.09",
    "12.2 Update 2": "535.104.05",
    "12.3 GA": "545.23.06",
    "12.3 Update 1": "545.23.08",
    "12.4 GA": "550.54.14",
    "12.4 Update 1": "550.54.15",
    "12.5 GA": "555.42.02",
    "12.5 Update 1": "555.42.06",
    "12.6 GA": "560.28.03",
    "12.6 Update 1": "560.35.03",
    "12.6 Update 2": "560.35.03",
    "12.6 Update 3": "560.35.05",
    "12.8 GA": "570.26",
    "12.8 Update 1": "570.124.06",
    "12.9 GA": "575.51.03",
    "12.9 Update 1": "575.57.08",
    "13.0 GA": "580.65.06",
    "13.0 Update 1": "580.82.07",
    "13.0 Update 2": "580.95.05",
    "13.1": "590.44.01",
})

# Table 3, Windows x86_64 column, for the same releases (none where NVIDIA gives N/A).
TOOLKIT_DRIVER_WINDOWS: Mapping[str, str] = MappingProxyType({
    "11.8 GA": "520.06",
    "12.0 GA": "527.41",
    "12.0 Update 1": "528.33",
    "12.1 GA": "531.14",
    "12.1 Update 1": "531.14",
    "12.2 GA": "536.25",
    "12.2 Update 1": "536.67",
    "12.2 Update 2": "537.13",
    "12.3 GA": "545.84",
    "12.3 Update 1": "546.12",
    "12.4 GA": "551.61",
    "12.4 Update 1": "551.78",
    "12.5 GA": "555.85",
    "12.5 Update 1": "555.85",
    "12.6 GA": "560.76",
    "12.6 Update 1": "560.94",
    "12.6 Update 2": "560.94",
    "12.6 Update 3": "561.17",
    "12.8 GA": "570.65",
    "12.8 Update 1": "572.61",
    "12.9 GA": "576.02",
    "12.9 Update 1": "576.57",
})

# Minor-version compatibility: the lowest driver any toolkit of a CUDA major runs on.
MINOR_VERSION_COMPAT_FLOOR: Mapping[int, str] = MappingProxyType({
    11: "450.80.02",
    12: "525.60.13",
    13: "580.65.06",
})
# The same on Windows: 452.39 (11.x) and 528.33 (12.x, NVIDIA's minor-version-compatibility
# page; TF's pip page says ">= 528.33 for WSL"); 13.x: R580, first Windows release 580.88
# (REPORTED, see the module docstring).
MINOR_VERSION_COMPAT_FLOOR_WINDOWS: Mapping[int, str] = MappingProxyType({
    11: "452.39",
    12: "528.33",
    13: "580.88",
})
REPORTED_ONLY_WINDOWS = frozenset({"580.88"})  # numbers no NVIDIA page confirms
OSES = ("linux", "windows")


def driver_tuple(version: str) -> tuple[int, ...]:
    """'555.42.06' -> (555, 42, 6), for comparing driver versions."""
    try:
        return tuple(int(part) for part in version.strip().split("."))
    except ValueError:
        raise ValueError(f"not an NVIDIA driver version: {version!r}") from None


def load_floor(cuda: str, os: str = "linux") -> str:
    """Lowest driver on which a CUDA X.Y userspace loads at all (on Linux, or under WSL2 the
    Windows driver)."""
    major = int(cuda.split(".")[0])
    table = MINOR_VERSION_COMPAT_FLOOR_WINDOWS if os == "windows" else MINOR_VERSION_COMPAT_FLOOR
    try:
        return table[major]
    except KeyError:
        raise ValueError(f"no minor-version-compatibility floor known for CUDA {cuda}") from None


def toolkit_driver(toolkit_release: str, os: str = "linux") -> str | None:
    """The driver a toolkit release bundles (Table 3), None where NVIDIA's column says N/A or
    the release is not in it (Windows from CUDA 13)."""
    return (TOOLKIT_DRIVER_WINDOWS if os == "windows" else TOOLKIT_DRIVER).get(toolkit_release)


def ptx_jit_floor(toolkit_release: str, os: str = "linux") -> str:
    """Driver that can JIT PTX produced by the given toolkit release."""
    found = toolkit_driver(toolkit_release, os)
    if found is None:
        raise ValueError(f"CUDA toolkit release {toolkit_release!r} is not in NVIDIA's table ({os})")
    return found
