"""The PyTorch backend: Keras 3 on torch; the image's tensorflow-cpu serves only tf.data and
Keras' TensorBoard callback, never the GPU.

GPUs are `torch.cuda`'s; Keras' torch trainer runs on one device (Keras 3.15.1 has no
data-parallel distribution for torch: keras.distribution is implemented for JAX only), so
several GPUs are reported and one is trained on; multi-GPU PyTorch needs torchrun and
DistributedDataParallel outside Keras' fit(). `jit_compile` means torch.compile, which
needs a C compiler and Triton at run time (the PyTorch images carry Debian's, issue 35): off
unless asked for, since its first step compiles for seconds to a minute and the smoke's
model is too small to win that back. The profiler is
torch.profiler, written as a Chrome trace (TensorBoard's PyTorch profiler plugin is
deprecated, and its Profile tab reads XSpace only).
"""

from __future__ import annotations

import os

from ..smoke.errors import EXIT_OOM, EXIT_USAGE, SmokeFailure, classify_runtime_error, disk_full, is_disk_full
from . import keras3_data

NAME = "torch"
DISPLAY = "PyTorch"
ONE_DEVICE_NOTE = "PyTorch: one device; multi-GPU needs torchrun + DDP outside Keras' fit()"
TRACE_FILE = "torch-trace.json"


def prepare(args, smi: dict) -> dict:
    if args.logical_cpus > 1:
        raise SmokeFailure(EXIT_USAGE, "logical-cpus",
                           f"--logical-cpus {args.logical_cpus}: only the jax and tensorflow backends split the "
                           "CPU into logical devices; this image trains on PyTorch (one device)",
                           "drop --logical-cpus (KERASENV_LOGICAL_CPUS), or use a jax or tensorflow image")
    return {}


def import_stack():
    import keras
    import torch

    return torch, keras


def versions(torch, keras) -> dict:
    return {"torch": torch.__version__}


def build_info(torch) -> dict:
    info = {"torch_version": torch.__version__, "cuda_version": torch.version.cuda,
            "is_cuda_build": torch.version.cuda is not None,
            "is_rocm_build": getattr(torch.version, "hip", None) is not None, "cudnn_version": None,
            "cuda_arch_list": []}
    try:
        version = torch.backends.cudnn.version()  # e.g. 91002; None without cuDNN
        info["cudnn_version"] = (f"{version // 10000}.{(version % 10000) // 100}.{version % 100}"
                                 if isinstance(version, int) else None)
    except Exception:  # noqa: BLE001 - cuDNN not loadable here: no figure
        pass
    try:
        info["cuda_arch_list"] = list(torch.cuda.get_arch_list())
    except Exception:  # noqa: BLE001
        pass
    return info


def _gpu_count(torch) -> int:
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken driver: no GPU, and the reason comes from nvidia-smi
        return 0


def configure_gpus(torch, args, report: dict) -> list:
    ordinals = list(range(_gpu_count(torch)))
    if args.visible_gpu_indexes:
        missing = [i for i in args.visible_gpu_indexes if i >= len(ordinals)]
        if missing:
            raise SmokeFailure(EXIT_USAGE, "visible-gpus",
                               f"--visible-gpus {args.visible_gpus}: only {len(ordinals)} GPU(s) visible",
                               "use indexes from 0 to the number of GPUs minus one")
        ordinals = [ordinals[i] for i in args.visible_gpu_indexes]
    details = []
    for ordinal in ordinals:
        major, minor = torch.cuda.get_device_capability(ordinal)
        details.append({"device": f"cuda:{ordinal}", "name": torch.cuda.get_device_name(ordinal),
                        "compute_capability": f"{major}.{minor}"})
        if args.memory_limit:
            total_mib = torch.cuda.get_device_properties(ordinal).total_memory / (1024 * 1024)
            torch.cuda.set_per_process_memory_fraction(min(1.0, args.memory_limit / total_mib), ordinal)
    if ordinals:
        torch.cuda.set_device(ordinals[0])  # Keras' torch backend trains on the current device
    report["gpus"] = details
    # PyTorch's caching allocator always grows on demand: there is no up-front mapping to turn off.
    report["gpu_config"] = {"memory_growth": bool(ordinals) and not args.memory_limit,
                            "memory_limit_mb": args.memory_limit or None,
                            "visible_gpus": args.visible_gpu_indexes or None}
    return ordinals


def devices(torch) -> dict:
    every = ["cpu"] + [f"cuda:{i}" for i in range(_gpu_count(torch))]
    return {"physical": every, "logical": every}


def cuda_ordinals(gpus: list) -> list:
    return list(gpus)


def placement_check(torch, gpus: list) -> dict:
    device = torch.device("cuda", gpus[0]) if gpus else torch.device("cpu")
    generator = torch.Generator(device=device).manual_seed(12)
    a = torch.rand((256, 256), generator=generator, device=device)
    result = a @ a
    return {"requested": str(device) if gpus else "cpu", "result_device": str(result.device),
            "ok": result.device.type == device.type, "checksum": float(result.sum().item())}


class Distribution:
    def __init__(self, note: str | None) -> None:
        self.name, self.replicas, self.note = "SingleDevice", 1, note

    def scope(self):
        import contextlib

        return contextlib.nullcontext()


def distribution(torch, keras, args, gpus: list) -> Distribution:
    return Distribution(ONE_DEVICE_NOTE if len(gpus) > 1 else None)


def make_dataset(torch, keras, images, labels, global_batch: int, seed: int, steps_per_epoch: int):
    return keras3_data.synthetic_batches(keras, images, labels, global_batch, seed, steps_per_epoch)


def jit_compile(choice: str, keras, gpus: list[dict]):
    if choice == "on":
        import shutil

        if not (shutil.which("cc") or shutil.which("gcc")):
            raise SmokeFailure(EXIT_USAGE, "jit-compile",
                               "--jit-compile on: on PyTorch that is torch.compile, which needs a C compiler "
                               "(Inductor, Triton's launcher), and this image has none (the kerasenv PyTorch "
                               "images carry one: a derived image or another base lost it)",
                               "use --jit-compile auto or off (KERASENV_JIT_COMPILE)")
        return True, "on", None
    reason = ("off: on PyTorch jit_compile is torch.compile, whose first step compiles for seconds to a "
              "minute (Inductor, Triton), more than this small model wins back; pass --jit-compile on "
              "to use it") if choice == "auto" else None
    return False, "off", reason


def training_callbacks(torch, keras, tensorboard_dir: str, profile_steps) -> list:
    """Epoch scalars through Keras' TensorBoard callback (tensorflow-cpu in the image; tensorboard's
    own writer without TensorFlow), and torch.profiler over `profile_steps`, exported as a Chrome
    trace beside them (the callback's profile_batch is TensorFlow and JAX only)."""
    from ..tb_writer import epoch_scalars_callbacks

    callbacks = epoch_scalars_callbacks(keras, tensorboard_dir)
    if profile_steps:
        holder: dict = {}
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)

        def start() -> None:
            holder["profiler"] = torch.profiler.profile(activities=activities)
            holder["profiler"].__enter__()

        def stop() -> None:
            profiler = holder.pop("profiler")
            profiler.__exit__(None, None, None)
            os.makedirs(tensorboard_dir, exist_ok=True)
            profiler.export_chrome_trace(os.path.join(tensorboard_dir, TRACE_FILE))

        callbacks.append(keras3_data.step_hooks_class(keras)(*profile_steps, start=start, stop=stop))
    return callbacks


def profile_report(window, steps, tensorboard_dir: str, callbacks: list) -> dict | None:
    if window is None:
        return None
    trace = os.path.join(tensorboard_dir, TRACE_FILE)
    hooks = [c for c in callbacks if hasattr(c, "_start")]
    error = hooks[0].error if hooks else None
    written = os.path.isfile(trace)
    line = error or ("input wait not measured on PyTorch: torch.profiler's Chrome trace is written, "
                     "TensorBoard's input-pipeline analysis reads XSpace (TensorFlow, JAX) only")
    return {"steps": list(steps), "log_dir": tensorboard_dir, "xplane": None, "trace": trace if written else None,
            "timed_steps": window.timed_steps,
            "step_ms": 1000.0 * window.seconds / window.timed_steps if window.seconds is not None else None,
            "wait_ms_per_step": None, "get_next_calls": None, "input_wait_fraction": None,
            "input_status": "not-measured", "line": line,
            "view": "the Chrome trace in https://ui.perfetto.dev or chrome://tracing"}


def classify_error(torch, exc: BaseException, tf_log, output_dir: str) -> SmokeFailure | None:
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return SmokeFailure(EXIT_OOM, "oom", f"GPU out of memory: {str(exc).strip().splitlines()[0][:200]}",
                            "lower --batch-size (BATCH_SIZE=) or set --memory-limit for the GPU")
    text = str(exc)
    if isinstance(exc, RuntimeError) and ("CUDA" in text or "cuDNN" in text or "CUDNN" in text or "NCCL" in text):
        if is_disk_full(exc):
            return disk_full(exc, output_dir)
        return classify_runtime_error(exc, tf_log(), framework=DISPLAY)
    return None


def multi_worker_supported() -> str | None:
    return ("TF_CONFIG multi-worker training is TensorFlow's (MultiWorkerMirroredStrategy); "
            "multi-process PyTorch uses torchrun + DistributedDataParallel outside Keras' fit()")


# -- the bench ------------------------------------------------------------------------------
def bench_gpus(torch) -> list:
    return list(range(_gpu_count(torch)))


def bench_gpu_details(torch, gpus: list) -> dict:
    major, minor = torch.cuda.get_device_capability(gpus[0])
    return {"name": torch.cuda.get_device_name(gpus[0]), "compute_capability": f"{major}.{minor}"}


def bench_device_name(device: str) -> str:
    return "cuda:0" if device == "gpu" else "cpu"


def bench_device_scope(torch, keras, device: str):
    # keras.device on torch sets the device Keras creates its tensors and variables on.
    return keras.device("gpu:0" if device == "gpu" else "cpu")


def bench_batches(torch, keras, x, y, steps: int):
    return keras3_data.repeated_batch(keras, x, y, steps)


def is_oom(torch, exc: BaseException) -> bool:
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    return oom is not None and isinstance(exc, oom)
