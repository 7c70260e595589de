"""The CUDA library audit of a CUDA image: which libcudnn.so.N / libcublas.so.N the dynamic
loader can find for the image's framework (RUNPATH of its GPU libraries with $ORIGIN
expanded, ldconfig's cache, the default directories, LD_LIBRARY_PATH), every copy on disk,
which installed wheel owns the one it finds, the versions the libraries report about
themselves (no GPU needed for either call), and which ptxas is on PATH. Prints one JSON line.

The framework's GPU libraries, whose RUNPATH the loader follows: TensorFlow's framework and
pywrap libraries, JAX's CUDA plugin (jax_plugins/xla_cuda*), PyTorch's libtorch_cuda. The
sonames' majors are those of the NVIDIA wheels installed (libcudnn.so.9, libcublas.so.12 or .13),
so nothing is imported: the audit reads files only.

Run in the image, as root (it searches the whole file system), as
`python -m kerasenv_image.probes.cuda_audit` (smoke_tests/test_cuda_libraries.py).
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


FRAMEWORK_GPU_LIBRARIES = {
    "tensorflow": ("tensorflow/libtensorflow_framework.so.2", "tensorflow/python/_pywrap_tensorflow_internal.so"),
    "jax": ("jax_plugins/xla_cuda*/xla_cuda_plugin.so",),
    "torch": ("torch/lib/libtorch_cuda.so",),
}


def site_packages() -> str:
    import sysconfig

    return sysconfig.get_paths()["purelib"]


def wheel_major(site: str, stem: str) -> str | None:
    """N of the lib<stem>.so.N an installed NVIDIA wheel ships (its soname's major)."""
    for path in sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", f"lib{stem}.so.*"))):
        rest = os.path.basename(path)[len(f"lib{stem}.so."):]
        if rest.isdigit():
            return rest
    return None


def owner(path: str) -> str | None:
    """The installed distribution whose RECORD lists `path`."""
    from importlib import metadata

    real = os.path.realpath(path)
    for dist in metadata.distributions():
        if not dist.metadata["Name"].lower().startswith("nvidia"):
            continue
        for file in dist.files or ():
            if os.path.realpath(dist.locate_file(file)) == real:
                return dist.metadata["Name"]
    return None


def main() -> None:
    site = site_packages()
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    libs = [hit for pattern in FRAMEWORK_GPU_LIBRARIES.get(backend, ())
            for hit in glob.glob(os.path.join(site, pattern))]
    search = []
    for lib in libs:
        search += [os.path.realpath(p) for p in runpaths(lib)]
    search += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    search += ["/lib", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"]
    ldconfig = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout

    out = {"backend": backend, "framework_libraries": libs, "search": list(dict.fromkeys(search))}
    for key, stem, version in (("cudnn", "cudnn", cudnn_version), ("cublas", "cublas", cublas_version)):
        soname = f"lib{stem}.so.{wheel_major(site, stem)}"
        resolvable, on_disk = resolve(soname, search, ldconfig)
        out[key] = {"soname": soname, "resolvable": resolvable, "on_disk": on_disk,
                    "owner": owner(resolvable[0]) if len(resolvable) == 1 else None,
                    "version": version(resolvable[0]) if len(resolvable) == 1 else None}
    ptxas = subprocess.run(["ptxas", "--version"], capture_output=True, text=True) \
        if subprocess.run(["sh", "-c", "command -v ptxas"], capture_output=True).returncode == 0 else None
    ptxas_path = subprocess.run(["sh", "-c", "command -v ptxas"], capture_output=True, text=True).stdout.strip()
    out["ptxas"] = {"path": os.path.realpath(ptxas_path) if ptxas_path else None,
                    "version": ptxas.stdout.strip() if ptxas is not None and ptxas.returncode == 0 else None}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
