"""The CUDA library audit of a CUDA image: which libcudnn.so.N / libcublas.so.N the dynamic
loader can find for TensorFlow (RUNPATH of its libraries with $ORIGIN expanded, ldconfig's
cache, the default directories, LD_LIBRARY_PATH), every copy on disk, the versions the
libraries report about themselves (no GPU needed for either call), and which ptxas is on
PATH. Prints one JSON line.

Run in the image, as root (it searches the whole file system), as
`python -m kerasenv_image.probes.cuda_audit` (acceptance/test_cuda_libraries.py).
TensorFlow is imported inside main(), so importing this module is cheap.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import struct
import subprocess


def runpaths(path: str) -> list[str]:
    """DT_RPATH/DT_RUNPATH strings of a shared object (a minimal ELF64 reader), $ORIGIN expanded."""
    with open(path, "rb") as f:
        data = f.read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for sec in sections:
        if sec[1] != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[sec[6]]
        for off in range(sec[4], sec[4] + sec[5], 16):
            tag, val = struct.unpack_from("<qQ", data, off)
            if tag in (15, 29):  # DT_RPATH, DT_RUNPATH
                start = strtab[4] + val
                out += data[start:data.index(b"\0", start)].decode().split(":")
    return [p.replace("$ORIGIN", os.path.dirname(path)) for p in out]


def resolve(soname: str, search: list[str], ldconfig: str) -> tuple[list[str], list[str]]:
    """(what the loader can resolve `soname` to, every copy of it on disk)."""
    hits = [os.path.realpath(os.path.join(d, soname)) for d in dict.fromkeys(search)
            if os.path.exists(os.path.join(d, soname))]
    hits += [line.split("=>")[-1].strip() for line in ldconfig.splitlines() if line.strip().startswith(soname + " ")]
    on_disk = subprocess.run(["find", "/", "-xdev", "-name", soname + "*", "-not", "-path", "/proc/*"],
                             capture_output=True, text=True).stdout.split()
    return sorted(set(hits)), sorted(on_disk)


def cudnn_version(path: str) -> str:
    lib = ctypes.CDLL(path)
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    v = lib.cudnnGetVersion()
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def cublas_version(path: str) -> str:
    lib = ctypes.CDLL(path)
    parts = []
    for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        value = ctypes.c_int()
        assert lib.cublasGetProperty(prop, ctypes.byref(value)) == 0
        parts.append(str(value.value))
    return ".".join(parts)


def main() -> None:
    import tensorflow as tf

    tf_dir = os.path.dirname(tf.__file__)
    libs = [os.path.join(tf_dir, "libtensorflow_framework.so.2")] + glob.glob(
        os.path.join(tf_dir, "python", "_pywrap_tensorflow_internal.so"))
    search = []
    for lib in libs:
        search += [os.path.realpath(p) for p in runpaths(lib)]
    search += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    search += ["/lib", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"]
    ldconfig = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout

    info = dict(tf.sysconfig.get_build_info())
    cudnn_major = str(info["cudnn_version"]).split(".")[0]
    cuda_major = str(info["cuda_version"]).split(".")[0]
    out = {"search": list(dict.fromkeys(search))}
    for key, soname, version in (("cudnn", f"libcudnn.so.{cudnn_major}", cudnn_version),
                                 ("cublas", f"libcublas.so.{cuda_major}", cublas_version)):
        resolvable, on_disk = resolve(soname, search, ldconfig)
        out[key] = {"soname": soname, "resolvable": resolvable, "on_disk": on_disk,
                    "version": version(resolvable[0]) if len(resolvable) == 1 else None}
    ptxas = subprocess.run(["ptxas", "--version"], capture_output=True, text=True)
    ptxas_path = subprocess.run(["sh", "-c", "command -v ptxas"], capture_output=True, text=True).stdout.strip()
    out["ptxas"] = {"path": os.path.realpath(ptxas_path or "/nonexistent"),
                    "version": ptxas.stdout.strip() if ptxas.returncode == 0 else None}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
