"""What the container gives this run: shared memory, nvidia-smi, TensorFlow's devices, placement."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

from .errors import EXIT_USAGE, SmokeFailure

DOCKER_DEFAULT_SHM = 64 * 1024 * 1024


def shm_report() -> dict:
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return {"size_bytes": None, "warning": None}
    size = stat.f_frsize * stat.f_blocks
    warning = None
    if size <= DOCKER_DEFAULT_SHM:
        warning = (f"/dev/shm is {size // (1024 * 1024)} MB (Docker's default): tf.data and "
                   "multi-GPU NCCL can fail or slow down; run with --shm-size=2g (kerasenv does)")
    return {"size_bytes": size, "warning": warning}


def nvidia_smi() -> dict:
    """Driver version and per-GPU memory from nvidia-smi, when the toolkit injected it."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"present": False}
    try:
        proc = subprocess.run(
            [exe, "--query-gpu=index,name,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"present": True, "error": str(exc)}
    if proc.returncode != 0:
        return {"present": True, "error": (proc.stdout + proc.stderr).strip()[:500]}
    gpus = []
    for line in proc.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            gpus.append({"index": parts[0], "name": parts[1], "driver_version": parts[2],
                         "memory_total_mb": int(parts[3]) if parts[3].isdigit() else None})
    driver = gpus[0]["driver_version"] if gpus else None
    return {"present": True, "driver_version": driver, "gpus": gpus}


def no_gpu_reason(smi: dict) -> tuple[str, str]:
    """Why TensorFlow sees no GPU, and the fix, from what the container can observe."""
    if os.environ.get("NVIDIA_VISIBLE_DEVICES") in ("void", "none", ""):
        return ("NVIDIA_VISIBLE_DEVICES disables GPUs in this container",
                "unset it or set it to all")
    # Any GPU node: `--gpus device=1` gives the container /dev/nvidia1 and no /dev/nvidia0.
    nvidia_nodes = glob.glob("/dev/nvidia[0-9]*")
    if not smi.get("present") and not nvidia_nodes and not os.path.exists("/dev/kfd"):
        return ("the container was started without a GPU (no /dev/nvidia*, no nvidia-smi)",
                "run with --gpus all (NVIDIA Container Toolkit installed and configured on the host; "
                "`kerasenv doctor` checks it)")
    if smi.get("error"):
        return (f"nvidia-smi fails in the container: {smi['error'].splitlines()[0]}",
                "check the host driver with `nvidia-smi` and `kerasenv doctor`")
    return ("the GPU is present but TensorFlow cannot use it (driver too old for this image's CUDA, "
            "or CUDA libraries failed to load; see the TensorFlow log above)",
            "run `kerasenv doctor` on the host: it compares the driver with the image's minimum")


def import_stack():
    import tensorflow as tf

    major_minor = tuple(int(p) for p in tf.__version__.split(".")[:2])
    if major_minor >= (2, 16):
        import keras  # Keras 3
    else:
        keras = tf.keras  # Keras 2 (tf.keras) on TF 2.14/2.15
    return tf, keras


def keras_version(keras) -> str:
    """The Keras release: Keras 3 has `keras.__version__`; tf.keras 2 (module
    keras.api._v2.keras on TF 2.14/2.15) has none, so ask the `keras` distribution it is."""
    version = getattr(keras, "__version__", None)
    if version:
        return version
    from importlib import metadata

    return metadata.version("keras")


def configure_gpus(tf, args, report: dict) -> list:
    physical = tf.config.list_physical_devices("GPU")
    if args.visible_gpu_indexes:
        missing = [i for i in args.visible_gpu_indexes if i >= len(physical)]
        if missing:
            raise SmokeFailure(EXIT_USAGE, "visible-gpus",
                               f"--visible-gpus {args.visible_gpus}: only {len(physical)} GPU(s) visible",
                               "use indexes from 0 to the number of GPUs minus one")
        physical = [physical[i] for i in args.visible_gpu_indexes]
        tf.config.set_visible_devices(physical, "GPU")
    for gpu in physical:
        if args.memory_limit:
            tf.config.set_logical_device_configuration(
                gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=args.memory_limit)])
        elif not args.no_memory_growth:
            tf.config.experimental.set_memory_growth(gpu, True)
    details = []
    for gpu in physical:
        info = tf.config.experimental.get_device_details(gpu)
        cc = info.get("compute_capability")
        details.append({"device": gpu.name, "name": info.get("device_name"),
                        "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None})
    report["gpus"] = details
    report["gpu_config"] = {"memory_growth": bool(physical) and not args.no_memory_growth and not args.memory_limit,
                            "memory_limit_mb": args.memory_limit or None,
                            "visible_gpus": args.visible_gpu_indexes or None}
    if args.logical_cpus > 1 and not physical:
        # N logical CPU devices: MirroredStrategy runs N replicas on a host without GPUs,
        # which is how the replica-count behaviour is tested (and can be tried) anywhere.
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(args.logical_cpus)])
        report["gpu_config"]["logical_cpus"] = args.logical_cpus
    return physical


def placement_check(tf, gpus: list) -> dict:
    device = "/GPU:0" if gpus else "/CPU:0"
    with tf.device(device):
        a = tf.random.stateless_uniform((256, 256), seed=(1, 2))
        result = tf.matmul(a, a)
    actual = result.device
    ok = ("GPU:0" in actual) if gpus else ("CPU:0" in actual)
    return {"requested": device, "result_device": actual, "ok": ok,
            "checksum": float(tf.reduce_sum(result).numpy())}
