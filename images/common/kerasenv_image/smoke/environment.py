"""What the container gives this run: shared memory, nvidia-smi, why no GPU is seen (the
framework's own devices and placement: kerasenv_image.backends)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

from ..gpu_sampler import MEMORY_NOT_REPORTED
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
    """Driver version and per-GPU memory from nvidia-smi, when the toolkit injected it. A GPU
    whose memory.total is not a number (a GPU that shares the system's RAM, GB10: the driver has
    none to report) gets memory_total_mb None and a `memory_note` saying so, never a figure."""
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
            gpu = {"index": parts[0], "name": parts[1], "driver_version": parts[2],
                   "memory_total_mb": int(parts[3]) if parts[3].isdigit() else None}
            if gpu["memory_total_mb"] is None:
                gpu["memory_note"] = f"{MEMORY_NOT_REPORTED} (memory.total reads {parts[3]!r})"
            gpus.append(gpu)
    driver = gpus[0]["driver_version"] if gpus else None
    return {"present": True, "driver_version": driver, "gpus": gpus}


def no_gpu_reason(smi: dict, framework: str = "TensorFlow") -> tuple[str, str]:
    """Why the framework sees no GPU, and the fix, from what the container can observe."""
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
    return (f"the GPU is present but {framework} cannot use it (driver too old for this image's CUDA, "
            f"or CUDA libraries failed to load; see the {framework} log above)",
            "run `kerasenv doctor` on the host: it compares the driver with the image's minimum")
