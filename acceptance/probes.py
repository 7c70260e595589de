"""Python snippets run inside the image under test; each prints one JSON line."""

INVENTORY = r"""
import importlib.metadata as md, json, os, platform, shutil, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
try:
    import keras
    keras_version = keras.__version__
except ImportError:
    keras_version = None
home = os.path.expanduser("~")
# setuptools >= 70 vendors its own dependencies (autocommand, jaraco.*, packaging, wheel, ...)
# with their .dist-info under setuptools/_vendor, and once setuptools or pkg_resources is
# imported that directory is on sys.path: those are setuptools' files, not installed
# distributions, so they are listed apart (and must not shadow the real packaging/wheel).
dists, vendored = {}, {}
for d in md.distributions():
    base = str(d.locate_file(""))
    if "/_vendor" in base:
        vendored[d.metadata["Name"]] = {"version": d.version, "in": base}
    else:
        dists.setdefault(d.metadata["Name"], d.version)
# tf.keras 2 (TF 2.14/2.15) is the module keras.api._v2.keras of the `keras` distribution
# and has no __version__ of its own.
tf_keras_module = getattr(tf.keras, "__name__", "")
tf_keras = getattr(tf.keras, "__version__", None) or (
    md.version("keras") if tf_keras_module.startswith("keras.") else None)
print(json.dumps({
    "os_release": dict(l.rstrip("\n").split("=", 1) for l in open("/etc/os-release") if "=" in l),
    "python": platform.python_version(),
    "executable": sys.executable,
    "which_python": shutil.which("python"),
    "tensorflow": tf.__version__,
    "keras": keras_version,
    "tf_keras": tf_keras,
    "tf_keras_module": tf_keras_module,
    "build_info": {k: (list(v) if isinstance(v, (list, tuple)) else v)
                   for k, v in dict(tf.sysconfig.get_build_info()).items()},
    "dists": dists,
    "vendored": vendored,
    "uid": os.getuid(), "gid": os.getgid(),
    "home": home, "home_writable": os.access(home, os.W_OK),
    "env": dict(os.environ),
}))
"""

# The CUDA library audit: which libcudnn.so.N / libcublas.so.N the dynamic loader can
# find for TensorFlow (RUNPATH of its libraries with $ORIGIN expanded, ldconfig's cache,
# the default directories, LD_LIBRARY_PATH), every copy on disk, and the versions the
# libraries report about themselves (no GPU needed for either call).
CUDA_AUDIT = r"""
import ctypes, glob, json, os, struct, subprocess, sys
import tensorflow as tf

def runpaths(path):
    # Minimal ELF64 reader: DT_RPATH/DT_RUNPATH strings of a shared object.
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

tf_dir = os.path.dirname(tf.__file__)
libs = [os.path.join(tf_dir, "libtensorflow_framework.so.2")] + glob.glob(os.path.join(tf_dir, "python", "_pywrap_tensorflow_internal.so"))
search = []
for lib in libs:
    search += [os.path.realpath(p) for p in runpaths(lib)]
search += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
search += ["/lib", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"]
ldconfig = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout

def resolve(soname):
    hits = [os.path.realpath(os.path.join(d, soname)) for d in dict.fromkeys(search) if os.path.exists(os.path.join(d, soname))]
    hits += [line.split("=>")[-1].strip() for line in ldconfig.splitlines() if line.strip().startswith(soname + " ")]
    on_disk = subprocess.run(["find", "/", "-xdev", "-name", soname + "*", "-not", "-path", "/proc/*"],
                             capture_output=True, text=True).stdout.split()
    return sorted(set(hits)), sorted(on_disk)

def cudnn_version(path):
    lib = ctypes.CDLL(path)
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    v = lib.cudnnGetVersion()
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v % 1000 // 100}.{v % 100}"

def cublas_version(path):
    lib = ctypes.CDLL(path)
    parts = []
    for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        value = ctypes.c_int()
        assert lib.cublasGetProperty(prop, ctypes.byref(value)) == 0
        parts.append(str(value.value))
    return ".".join(parts)

info = dict(tf.sysconfig.get_build_info())
cudnn_major = str(info["cudnn_version"]).split(".")[0]
cuda_major = str(info["cuda_version"]).split(".")[0]
out = {"search": list(dict.fromkeys(search))}
for key, soname, version in (("cudnn", f"libcudnn.so.{cudnn_major}", cudnn_version),
                             ("cublas", f"libcublas.so.{cuda_major}", cublas_version)):
    resolvable, on_disk = resolve(soname)
    out[key] = {"soname": soname, "resolvable": resolvable, "on_disk": on_disk,
                "version": version(resolvable[0]) if len(resolvable) == 1 else None}
ptxas = subprocess.run(["ptxas", "--version"], capture_output=True, text=True)
out["ptxas"] = {"path": os.path.realpath(subprocess.run(["sh", "-c", "command -v ptxas"], capture_output=True, text=True).stdout.strip() or "/nonexistent"),
                "version": ptxas.stdout.strip() if ptxas.returncode == 0 else None}
print(json.dumps(out))
"""
