"""TensorFlow's own GPU-library check, run inside a CUDA image; no GPU is needed.

TensorFlow registers no GPU unless `tsl::internal::DsoLoader::TryDlopenCUDALibraries()`
(in libtensorflow_framework.so.2) can dlopen cudart, cuBLAS, cuBLASLt, cuFFT, cuSOLVER,
cuSPARSE and cuDNN: gpu_device.cc calls it and otherwise logs "Cannot dlopen some GPU
libraries ... Skipping registering GPU devices". This probe calls that very function
through ctypes, then loads what TensorFlow and cuDNN open later, by soname, the way they
do it: cuDNN's sub-libraries, NVRTC (which cuDNN dlopens for runtime-compiled kernels),
NCCL (multi-GPU), CUPTI (the profiler), nvJitLink. Each load goes through the dynamic
loader's normal search, and /proc/self/maps shows which file was mapped.

Run in the image as `python -m kerasenv_image.probes.gpu_libraries` (by `kerasenv doctor
--container` and the acceptance suite), it prints one JSON line; with `--devices` it also
lists TensorFlow's physical GPUs and nvidia-smi -L, and with `--devices-only` it lists
only those (every family); with `--inventory` the inventory probe's JSON comes first, as
`{"inventory": ...}`, from the same interpreter. TensorFlow is imported inside check(), after stderr is
captured, so importing this module (the host does, for its name) is cheap.

The backend is KERAS_BACKEND's (or `--backend NAME`): tensorflow (this module's check()),
jax (jax_libraries: what JAX's CUDA plugin loads, and ptxas) or torch (torch_libraries:
what `import torch` maps and what it opens later, and Triton's ptxas). Every result has
`backend` and `failed` (one phrase per failure); with failures the probe exits 1 and
prints the first ones on stderr in one line. `--ptxas-targets sm_75,sm_100a` chooses what
ptxas compiles for (JAX and PyTorch).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import re
import shutil
import subprocess
import sys

from .loading import CUDNN_SUBLIBRARIES, capture_stderr, dlopen, mapped_libraries

# The mangled name of TryDlopenCUDALibraries(): tsl:: since TF 2.12 (tsl/platform/default/
# dso_loader.cc); tensorflow:: in older releases.
SYMBOLS = (
    "_ZN3tsl8internal9DsoLoader22TryDlopenCUDALibrariesEv",
    "_ZN10tensorflow8internal9DsoLoader22TryDlopenCUDALibrariesEv",
)

_LOG_LINE = re.compile(r"(Could not load dynamic library|Successfully opened dynamic library|Cannot dlopen)")


def status_is_ok(rep: int) -> bool:
    """Decode the absl::Status (tsl::Status) the function returned through its hidden pointer.

    OK is an inlined representation: 1 in current abseil (CodeToInlinedRep(kOk)), 0 in
    the older tsl::Status (a null unique_ptr). Any error that carries a message is a heap
    pointer, which is never 0 or 1."""
    return rep in (0, 1)


def expected_libraries(cuda_major: str, cudnn_major: str, lib_files: list[str]) -> dict[str, list[str]]:
    """Sonames TF and cuDNN dlopen after TryDlopenCUDALibraries(), by purpose.

    lib_files are the basenames found in the wheels' nvidia/*/lib directories: CUPTI's and
    NVRTC's sonames carry the toolkit version on CUDA 11 (libcupti.so.11.8, libnvrtc.so.11.2)."""
    def named(prefix: str) -> list[str]:
        return sorted(f for f in lib_files if f.startswith(prefix + ".so."))

    groups = {
        "cudnn": list(CUDNN_SUBLIBRARIES.get(cudnn_major, ())),
        # cuDNN dlopens NVRTC by its unversioned name (cuDNN 8 only that; cuDNN 9's
        # libcudnn_graph.so.9 also tries libnvrtc.so.<major>).
        "nvrtc": ["libnvrtc.so"] + (named("libnvrtc") if cuda_major == "11" else [f"libnvrtc.so.{cuda_major}"]),
        "nccl": ["libnccl.so.2"],
        "cupti": named("libcupti") or [f"libcupti.so.{cuda_major}"],
    }
    if cuda_major != "11":  # CUDA 11.8's stack has no nvJitLink
        groups["nvjitlink"] = [f"libnvJitLink.so.{cuda_major}"]
    return groups


def check(with_devices: bool = False) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    os.environ.setdefault("TF_CPP_MAX_VLOG_LEVEL", "1")
    restore = capture_stderr()
    try:
        import tensorflow as tf

        framework = os.path.join(os.path.dirname(tf.__file__), "libtensorflow_framework.so.2")
        lib = ctypes.CDLL(framework)
        symbol = next((s for s in SYMBOLS if hasattr(lib, s)), None)
        rep = None
        if symbol is not None:
            fn = getattr(lib, symbol)
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p]
            status = (ctypes.c_uint64 * 4)()  # absl::Status is one word; spare room
            fn(ctypes.addressof(status))
            rep = int(status[0])
        loaded_by_tf = mapped_libraries()
        info = dict(tf.sysconfig.get_build_info())
        cuda_major = str(info.get("cuda_version", "")).split(".")[0]
        cudnn_major = str(info.get("cudnn_version", "")).split(".")[0]
        site = os.path.join(os.path.dirname(os.path.dirname(tf.__file__)), "nvidia")
        lib_files = sorted({os.path.basename(p) for p in glob.glob(os.path.join(site, "*", "lib", "lib*.so*"))})
        groups = expected_libraries(cuda_major, cudnn_major, lib_files)
        later = {group: {name: dlopen(name) for name in names} for group, names in groups.items()}
        devices = None
        if with_devices:
            devices = [d.name for d in tf.config.list_physical_devices("GPU")]
    finally:
        log = restore()
    ok = symbol is not None and rep is not None and status_is_ok(rep)
    nvidia = {name: path for name, path in loaded_by_tf.items() if "/nvidia/" in path}
    result = {
        "backend": "tensorflow",
        "symbol": symbol,
        "status_rep": rep,
        "try_dlopen_ok": ok,
        "loaded_by_tensorflow": dict(sorted(nvidia.items())),
        "log": [line.strip() for line in log.splitlines() if _LOG_LINE.search(line)],
        "cuda_major": cuda_major,
        "cudnn_major": cudnn_major,
        "later": later,
        "later_ok": all(r["ok"] for group in later.values() for r in group.values()),
    }
    result["failed"] = summarize(result)
    if with_devices:
        result.update(gpu_devices(devices))
    return result


def gpu_devices(tf_gpus: list[str] | None = None) -> dict:
    """nvidia-smi -L and TensorFlow's physical GPUs, as the container sees them (any family)."""
    if tf_gpus is None:
        import tensorflow as tf

        tf_gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    smi = shutil.which("nvidia-smi")
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True).stdout.strip() if smi else None
    return {"tf_gpus": tf_gpus, "gpus": tf_gpus, "nvidia_smi_l": listed}


def backend_gpus(backend: str) -> list[str]:
    """The GPUs the backend's framework sees (an empty list when it sees none)."""
    if backend == "jax":
        import jax

        return [str(d) for d in jax.devices() if d.platform in ("gpu", "cuda")]
    if backend == "torch":
        import torch

        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] \
            if torch.cuda.is_available() else []
    import tensorflow as tf

    return [d.name for d in tf.config.list_physical_devices("GPU")]


def backend_of(argv: list[str], env: dict | None = None) -> str:
    """--backend NAME, else KERAS_BACKEND, else tensorflow."""
    env = os.environ if env is None else env
    if "--backend" in argv:
        return argv[argv.index("--backend") + 1]
    return env.get("KERAS_BACKEND") or "tensorflow"


def ptxas_targets(argv: list[str]) -> list[str] | None:
    if "--ptxas-targets" in argv:
        return [t for t in argv[argv.index("--ptxas-targets") + 1].split(",") if t]
    return None


def run(backend: str, argv: list[str]) -> dict:
    """The backend's own check (and, with --devices, the GPUs it sees and nvidia-smi -L)."""
    if backend == "jax":
        from . import jax_libraries

        result = jax_libraries.check(ptxas_targets(argv))
    elif backend == "torch":
        from . import torch_libraries

        result = torch_libraries.check(ptxas_targets(argv))
    else:
        return check(with_devices="--devices" in argv)
    if "--devices" in argv:
        result.update(gpu_devices(backend_gpus(backend)))
    return result


def one_line(result: dict) -> str:
    failed = result.get("failed") or []
    return (f"gpu_libraries ({result.get('backend', 'tensorflow')}): FAIL: "
            f"{'; '.join(failed[:3])}{' ...' if len(failed) > 3 else ''}")


def summarize(result: dict) -> list[str]:
    """One short phrase per failure: what could not be loaded, and TF's own words for it."""
    failed = []
    if result["symbol"] is None:
        failed.append("TryDlopenCUDALibraries() not found in libtensorflow_framework.so.2")
    elif not result["try_dlopen_ok"]:
        missing = [m.group(1) for line in result["log"]
                   for m in [re.search(r"Could not load dynamic library '([^']+)'", line)] if m]
        failed.append("TensorFlow cannot dlopen " + (", ".join(dict.fromkeys(missing)) or "its GPU libraries"))
    for group, libs in result["later"].items():
        for name, r in libs.items():
            if not r["ok"]:
                failed.append(f"{group}: {name} ({r['error']})")
    return failed


def main(argv: list[str]) -> int:
    # --devices: also the GPUs; --devices-only: just those (CPU and ROCm images, which
    # have no CUDA libraries to check).
    backend = backend_of(argv)
    if "--devices-only" in argv:
        gpus = None if backend == "tensorflow" else backend_gpus(backend)
        print(json.dumps({"backend": backend, **gpu_devices(gpus)}))
        return 0
    result = run(backend, argv)
    if "--inventory" in argv:
        # The inventory probe's JSON too, from this interpreter, after the check (which read
        # /proc/self/maps before anything more was imported), on a line of its own before the
        # result's, which stays the last: the acceptance suite's arm64 images run under qemu,
        # where importing the framework a second time cost 25-50 s (cold run of 25c27a0).
        from . import inventory

        print(json.dumps({"inventory": inventory.collect()}), flush=True)
    print(json.dumps(result), flush=True)
    if result.get("failed"):
        print(one_line(result), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
