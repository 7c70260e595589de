"""The loading the GPU-library probes share: the sonames by CUDA major, cuDNN's
sub-libraries, dlopen by soname (or from the pip wheels' lib dirs), what /proc/self/maps
shows mapped, and capturing fd 2 around a framework's import. Imports no framework.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import tempfile

# Sonames by CUDA major, grouped by purpose (what XLA's dso_loader and cuDNN open).
LIBRARIES = {
    "12": {"cudart": ["libcudart.so.12"], "cublas": ["libcublas.so.12", "libcublasLt.so.12"],
           "cusolver": ["libcusolver.so.11"], "cusparse": ["libcusparse.so.12"], "cufft": ["libcufft.so.11"],
           "nccl": ["libnccl.so.2"], "nvjitlink": ["libnvJitLink.so.12"], "nvrtc": ["libnvrtc.so.12"],
           "cupti": ["libcupti.so.12"]},
    "13": {"cudart": ["libcudart.so.13"], "cublas": ["libcublas.so.13", "libcublasLt.so.13"],
           "cusolver": ["libcusolver.so.12"], "cusparse": ["libcusparse.so.12"], "cufft": ["libcufft.so.12"],
           "nccl": ["libnccl.so.2"], "nvjitlink": ["libnvJitLink.so.13"], "nvrtc": ["libnvrtc.so.13"],
           "cupti": ["libcupti.so.13"]},
}

# cuDNN loads its sub-libraries on first use, not at dlopen of libcudnn.so.N.
CUDNN_SUBLIBRARIES = {
    "8": ("libcudnn_ops_infer.so.8", "libcudnn_ops_train.so.8", "libcudnn_cnn_infer.so.8",
          "libcudnn_cnn_train.so.8", "libcudnn_adv_infer.so.8", "libcudnn_adv_train.so.8"),
    "9": ("libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
          "libcudnn_heuristic.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9"),
}


def mapped_libraries() -> dict[str, str]:
    """basename -> path of every shared object mapped into this process."""
    out: dict[str, str] = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
            if ".so" in path and path.startswith("/"):
                out.setdefault(os.path.basename(path), path)
    return out


class _LinkMap(ctypes.Structure):
    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


def loaded_path(handle: int) -> str | None:
    """The file the dynamic loader opened for a dlopen handle (dlinfo RTLD_DI_LINKMAP)."""
    libc = ctypes.CDLL(None)
    link_map = ctypes.POINTER(_LinkMap)()
    if libc.dlinfo(ctypes.c_void_p(handle), 2, ctypes.byref(link_map)) != 0:  # 2: RTLD_DI_LINKMAP
        return None
    name = link_map.contents.l_name
    return os.path.realpath(name.decode()) if name else None


def dlopen(soname: str) -> dict:
    """Load a library by soname through the loader's normal search, as TF and cuDNN do."""
    try:
        handle = ctypes.CDLL(soname)._handle
    except OSError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "path": loaded_path(handle)}


def dlopen_or_wheel(soname: str, site: str | None) -> dict:
    """By soname; failing that, by path from the pip wheels' lib dirs (nvidia/*/lib,
    nvidia/cu13/lib), as JAX's plugin and torch's _preload_cuda_deps do on a host venv, where
    no ld.so.conf entry names those dirs. `how` says which way it loaded."""
    result = dlopen(soname)
    if result["ok"] or not site:
        return {**result, "how": "soname"} if result["ok"] else result
    for path in sorted(glob.glob(os.path.join(site, "nvidia", "**", soname), recursive=True)):
        by_path = dlopen(path)
        if by_path["ok"]:
            return {**by_path, "how": "path"}
    return result


def capture_stderr():
    """Point fd 2 at a temp file (TF's C++ logging writes there); return (restore, read)."""
    sys.stderr.flush()
    saved = os.dup(2)
    log = tempfile.TemporaryFile(mode="w+b")
    os.dup2(log.fileno(), 2)

    def restore() -> str:
        os.dup2(saved, 2)
        os.close(saved)
        log.seek(0)
        return log.read().decode(errors="replace")

    return restore
