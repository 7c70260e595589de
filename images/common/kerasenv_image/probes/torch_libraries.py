"""PyTorch's own GPU-library check, run inside a CUDA image; no GPU is needed.

`import torch` loads libtorch_cuda.so, whose NEEDED entries pull in cudart, cuBLAS(Lt),
cuDNN, cuSPARSE(Lt), cuFFT, cuSOLVER, cuRAND, NCCL, nvJitLink, cuFile ... (torch's
`_load_global_deps()` first, retrying by path from the `nvidia` wheels' directories when
that fails). Others are dlopened on first use, by soname: NVRTC (ATen's LazyNVRTC, for
jiterator and fused kernels), cuDNN's sub-libraries, CUPTI (the profiler). This probe
imports torch, reads /proc/self/maps for what it mapped, loads the lazy ones by soname
the way torch does, and reports torch.version.cuda, the cuDNN version, the architectures
the build carries (`torch._C._cuda_getArchFlags()`: `torch.cuda.get_arch_list()` returns
[] when CUDA is not available, so the flags are read directly), `torch.cuda.is_available()`
with the reason it is False (the lazy init's error), and Triton's ptxas compiling for
sm_100a / sm_120a.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import warnings

from . import loading, ptxas

# Mapped by `import torch` (NEEDED of libtorch_cuda.so) on a CUDA build: by purpose.
AT_IMPORT = ("cudart", "cublas", "cusparse", "cufft", "cusolver", "nccl", "nvjitlink")
# Opened later by soname, and the cuDNN sub-libraries.
LAZY = ("nvrtc", "cupti")
# Shipped by some torch releases only: checked when the image has the file.
OPTIONAL = ("libcusparseLt.so.0", "libcufile.so.0", "libcurand.so.10", "libnvshmem_host.so.3")


def expected(cuda_major: str, cudnn_major: str, lib_files: list[str]) -> dict[str, list[str]]:
    table = loading.LIBRARIES.get(cuda_major, loading.LIBRARIES["12"])
    groups = {g: list(table[g]) for g in AT_IMPORT + LAZY}
    groups["cudnn"] = [f"libcudnn.so.{cudnn_major}", *loading.CUDNN_SUBLIBRARIES.get(cudnn_major, ())]
    optional = [name for name in OPTIONAL if name in lib_files]
    if optional:
        groups["other"] = optional
    return groups


def nvidia_lib_files(site: str) -> list[str]:
    """Basenames in the wheels' lib dirs: nvidia/*/lib (CUDA 12) and nvidia/cu13/lib (CUDA 13)."""
    return sorted({os.path.basename(p) for p in glob.glob(os.path.join(site, "nvidia", "**", "lib*.so*"),
                                                          recursive=True)})


def triton_ptxas() -> list[str]:
    """Triton's bundled ptxas binaries (ptxas, and ptxas-blackwell where it ships one)."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.origin:
        return []
    bindir = os.path.join(os.path.dirname(spec.origin), "backends", "nvidia", "bin")
    return sorted(p for p in glob.glob(os.path.join(bindir, "ptxas*")) if os.access(p, os.X_OK))


def check(targets: list[str] | None = None) -> dict:
    restore = loading.capture_stderr()
    result: dict = {"backend": "torch"}
    try:
        try:
            import torch
        except Exception as exc:  # noqa: BLE001 - a missing library shows here first
            result["import_error"] = f"{type(exc).__name__}: {exc}"
            torch = None
        if torch is not None:
            result["import_error"] = None
            result["torch"] = torch.__version__
            result["cuda_version"] = torch.version.cuda
            result["loaded_by_torch"] = dict(sorted((n, p) for n, p in loading.mapped_libraries().items()
                                                    if "/nvidia/" in p))
            try:
                result["cudnn_version"] = torch.backends.cudnn.version()
            except Exception as exc:  # noqa: BLE001
                result["cudnn_version"] = None
                result["cudnn_error"] = f"{type(exc).__name__}: {exc}"
            try:
                result["arch_flags"] = torch._C._cuda_getArchFlags()
            except Exception as exc:  # noqa: BLE001
                result["arch_flags"] = None
                result["arch_flags_error"] = f"{type(exc).__name__}: {exc}"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result["is_available"] = torch.cuda.is_available()
            result["device_count"] = torch.cuda.device_count()
            reason = None
            if not result["is_available"]:
                try:
                    torch.cuda.init()
                except Exception as exc:  # noqa: BLE001 - "Found no NVIDIA driver on your system..."
                    reason = str(exc).strip().splitlines()[0]
                reason = reason or "; ".join(str(w.message).strip().splitlines()[0] for w in caught) or None
            result["not_available_reason"] = reason
            site = os.path.dirname(os.path.dirname(torch.__file__))
            cuda_major = (torch.version.cuda or "").split(".")[0]
            cudnn_major = str(result.get("cudnn_version") or "9")[:1]
            groups = expected(cuda_major, cudnn_major, nvidia_lib_files(site)) if cuda_major else {}
            result["libraries"] = {g: {name: loading.dlopen_or_wheel(name, site) for name in names}
                                   for g, names in groups.items()}
            result["cuda_major"] = cuda_major
    finally:
        restore()
    result["ptxas"] = {os.path.basename(p): ptxas.check(p, targets or list(ptxas.BLACKWELL)) for p in triton_ptxas()}
    result["gpu"] = bool(result.get("is_available"))
    result["failed"] = summarize(result)
    return result


def summarize(result: dict) -> list[str]:
    failed = []
    if result.get("import_error"):
        missing = re.findall(r"(lib[\w.+-]+\.so[\d.]*)", result["import_error"])
        failed.append(f"import torch failed: {', '.join(dict.fromkeys(missing)) or result['import_error']}"
                      + (f" ({result['import_error']})" if missing else ""))
        return failed
    if not result.get("cuda_version"):
        failed.append("torch is not a CUDA build (torch.version.cuda is None)")
    for group, libs in result.get("libraries", {}).items():
        for name, r in libs.items():
            if not r["ok"]:
                failed.append(f"{group}: {name} ({r['error']})")
    if result.get("cudnn_version") is None:
        failed.append(f"torch.backends.cudnn.version(): {result.get('cudnn_error', 'None')}")
    for name, r in result.get("ptxas", {}).items():
        # Triton's plain ptxas may predate a target that its ptxas-blackwell covers.
        other_ok = {arch for n, o in result["ptxas"].items() if n != name
                    for arch, t in o["targets"].items() if t["ok"]}
        failed += [f for f in ptxas.failures(f"Triton's {name}", r)
                   if not any(f.endswith(f"compile for {a}: " + r['targets'][a].get('error', ''))
                              for a in other_ok)]
    return failed
