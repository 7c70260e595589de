"""The JAX backend: Keras 3 on JAX (jax + jax-cuda12-plugin); the image's tensorflow-cpu serves
only tf.data and Keras' TensorBoard callback, never the GPU.

JAX reads its memory and device-count settings once, from the environment, when it
starts: `prepare()` sets them before the import. GPUs are `jax.devices("gpu")`; several
devices train with `keras.distribution.DataParallel` (the one Keras 3 distribution API
that is real on JAX); the input is numpy batches in a PyDataset; the profiler is
`jax.profiler.start_trace`, which writes the same XSpace (`*.xplane.pb`) TensorBoard's
Profile tab (XProf) reads.
"""

from __future__ import annotations

import logging
import os
import re

from ..profiling import xspace_profile_report
from ..smoke.errors import EXIT_OOM, EXIT_USAGE, SmokeFailure, classify_runtime_error, disk_full, is_disk_full
from . import keras3_data

NAME = "jax"
DISPLAY = "JAX"
HOST_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
CUDA_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin")


class _PluginErrors(logging.Handler):
    """Keeps the CUDA plugin's start-up failure (jax._src.xla_bridge logs it with a
    traceback and falls back to the CPU): its first line goes into the report."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {record.exc_info[1]}"
        self.messages.append(text)


_PLUGIN_ERRORS = _PluginErrors()


def prepare(args, smi: dict, environ=os.environ) -> dict:
    """The environment JAX reads once at start-up, from the smoke's options. Returns what
    was set, for report["gpu_config"]. Call it before jax is imported."""
    settings: dict = {}
    # TF's memory growth, JAX-style: allocate on demand instead of 75 % of the GPU up front
    # (JAX's default), unless the user chose (XLA_PYTHON_CLIENT_PREALLOCATE) or asked for
    # a limit, or --no-memory-growth.
    if args.memory_limit:
        totals = [g["memory_total_mb"] for g in (smi.get("gpus") or []) if g.get("memory_total_mb")]
        if totals:
            fraction = min(1.0, args.memory_limit / min(totals))
            environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{fraction:.4f}"
            settings["xla_python_client_mem_fraction"] = environ["XLA_PYTHON_CLIENT_MEM_FRACTION"]
        elif any(g.get("memory_note") for g in (smi.get("gpus") or [])):
            # GB10: the GPU's memory is the system's RAM and the driver reports none, so there is
            # no total to take a fraction of (gpu_sampler.MEMORY_NOT_REPORTED).
            settings["memory_limit_note"] = ("--memory-limit not applied: unified memory: not reported by the "
                                             "driver, so there is no GPU total to turn it into a fraction; set "
                                             "XLA_PYTHON_CLIENT_MEM_FRACTION (a share of the system's RAM) instead")
        else:
            settings["memory_limit_note"] = ("--memory-limit not applied: nvidia-smi reports no GPU memory to "
                                             "turn it into XLA_PYTHON_CLIENT_MEM_FRACTION")
    elif not args.no_memory_growth and "XLA_PYTHON_CLIENT_PREALLOCATE" not in environ:
        environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    settings["xla_python_client_preallocate"] = environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true (JAX's default)")
    if args.logical_cpus > 1:
        # N host devices: DataParallel trains N replicas on a host without GPUs, as
        # TensorFlow's logical CPUs do. The images' own XLA_FLAGS (CUDA data dir) are kept.
        flags = re.sub(rf"{HOST_DEVICE_COUNT_FLAG}=\S+", "", environ.get("XLA_FLAGS", "")).split()
        environ["XLA_FLAGS"] = " ".join([*flags, f"{HOST_DEVICE_COUNT_FLAG}={args.logical_cpus}"])
    logger = logging.getLogger("jax._src.xla_bridge")
    if _PLUGIN_ERRORS not in logger.handlers:
        logger.addHandler(_PLUGIN_ERRORS)
    return settings


def import_stack():
    import jax
    import keras

    return jax, keras


def versions(jax, keras) -> dict:
    import jaxlib

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}


def _cuda_version(number) -> str | None:
    """12090 -> '12.9' (CUDA's major*1000 + minor*10)."""
    if not isinstance(number, int) or number <= 0:
        return None
    return f"{number // 1000}.{(number % 1000) // 10}"


def _cudnn_version(number) -> str | None:
    """92400 -> '9.24.0' (cuDNN 9's major*10000 + minor*100 + patch)."""
    if not isinstance(number, int) or number <= 0:
        return None
    return f"{number // 10000}.{(number % 10000) // 100}.{number % 100}"


def build_info(jax) -> dict:
    """jaxlib and its CUDA plugin, and the CUDA/cuDNN the plugin was built with (the
    plugin's `_versions` module, jax._src.lib.cuda_versions in 0.10: build versions are
    compile-time constants, readable without a GPU)."""
    from importlib import metadata

    import jaxlib

    info: dict = {"jaxlib_version": jaxlib.__version__, "cuda_plugin": None,
                  "is_cuda_build": False, "is_rocm_build": False}
    for plugin in CUDA_PLUGINS:
        try:
            info["cuda_plugin"] = f"{plugin.replace('_', '-')} {metadata.version(plugin.replace('_', '-'))}"
        except metadata.PackageNotFoundError:
            continue
        info["is_cuda_build"] = True
        break
    for plugin in ("jax_rocm7_plugin", "jax_rocm60_plugin"):
        try:
            metadata.version(plugin.replace("_", "-"))
            info["is_rocm_build"] = True
        except metadata.PackageNotFoundError:
            pass
    try:
        from jax._src.lib import cuda_versions  # private, hence guarded: None without the plugin
    except ImportError:
        cuda_versions = None
    if cuda_versions is not None:
        for key, function, fmt in (("cuda_version", "cuda_runtime_build_version", _cuda_version),
                                   ("cudnn_version", "cudnn_build_version", _cudnn_version),
                                   ("cublas_version", "cublas_build_version", str)):
            try:
                info[key] = fmt(getattr(cuda_versions, function)())
            except Exception:  # noqa: BLE001 - a plugin without that query
                info[key] = None
    return info


def _gpus(jax) -> list:
    """This process's GPUs: across processes (jax_processes) jax.devices() lists every process's,
    and only the local ones can be placed on from here."""
    try:
        return list(jax.local_devices(backend="gpu"))
    except RuntimeError:  # "Unknown backend: 'gpu' requested, but no platforms ... are present"
        return []


def configure_gpus(jax, args, report: dict) -> list:
    gpus = _gpus(jax)
    if args.visible_gpu_indexes:
        missing = [i for i in args.visible_gpu_indexes if i >= len(gpus)]
        if missing:
            raise SmokeFailure(EXIT_USAGE, "visible-gpus",
                               f"--visible-gpus {args.visible_gpus}: only {len(gpus)} GPU(s) visible",
                               "use indexes from 0 to the number of GPUs minus one")
        gpus = [gpus[i] for i in args.visible_gpu_indexes]
    if gpus:
        jax.config.update("jax_default_device", gpus[0])
    report["gpus"] = [{"device": f"gpu:{d.id}", "name": d.device_kind,
                       "compute_capability": getattr(d, "compute_capability", None)} for d in gpus]
    preallocate = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower() not in ("false", "0")
    report["gpu_config"] = {"memory_growth": bool(gpus) and not preallocate and not args.memory_limit,
                            "memory_limit_mb": args.memory_limit or None,
                            "visible_gpus": args.visible_gpu_indexes or None}
    if _PLUGIN_ERRORS.messages:  # why JAX fell back to the CPU, e.g. "cuInit(0) failed"
        report["gpu_config"]["cuda_plugin_error"] = _PLUGIN_ERRORS.messages[0].splitlines()[-1][:300]
    if args.logical_cpus > 1 and not gpus:
        report["gpu_config"]["logical_cpus"] = len(jax.local_devices(backend="cpu"))
    return gpus


def devices(jax) -> dict:
    every = [f"{d.platform}:{d.id}" for d in jax.local_devices(backend="cpu")] + [f"gpu:{d.id}" for d in _gpus(jax)]
    return {"physical": every, "logical": every}


def cuda_ordinals(gpus: list) -> list:
    return [d.id for d in gpus]


def placement_check(jax, gpus: list) -> dict:
    device = gpus[0] if gpus else jax.local_devices(backend="cpu")[0]
    requested = "gpu:0" if gpus else "cpu:0"
    a = jax.device_put(jax.random.uniform(jax.random.key(1), (256, 256)), device)
    result = (a @ a).block_until_ready()
    actual = next(iter(result.devices()))
    platform = "gpu" if actual.platform in ("gpu", "cuda", "rocm") else actual.platform
    return {"requested": requested, "result_device": f"{platform}:{actual.id}",
            "ok": platform == ("gpu" if gpus else "cpu"), "checksum": float(result.sum())}


class Distribution:
    def __init__(self, name: str, replicas: int, note: str | None = None) -> None:
        self.name, self.replicas, self.note = name, replicas, note

    def scope(self):
        import contextlib

        return contextlib.nullcontext()


def distribution(jax, keras, args, gpus: list) -> Distribution:
    """keras.distribution.DataParallel over every GPU trained on, or over the host devices
    of --logical-cpus on a host without GPUs; nothing to set on one device. Across processes
    (jax_processes), over every process's devices: keras.distribution.list_devices() is global."""
    if jax.process_count() > 1:
        names = keras.distribution.list_devices("gpu" if gpus else "cpu")
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=names))
        return Distribution("DataParallel", len(names),
                            f"DataParallel over {len(names)} devices of {jax.process_count()} processes")
    if len(gpus) > 1:
        names = [f"gpu:{d.id}" for d in gpus]
    elif not gpus and len(jax.devices("cpu")) > 1:
        names = [f"cpu:{d.id}" for d in jax.devices("cpu")]
    else:
        keras.distribution.set_distribution(None)
        return Distribution("SingleDevice", 1)
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=names))
    return Distribution("DataParallel", len(names))


def make_dataset(jax, keras, images, labels, global_batch: int, seed: int, steps_per_epoch: int):
    """numpy batches in a PyDataset; across processes tf.data (the image's tensorflow-cpu), which
    Keras 3.15 shards between the processes itself (DataParallel.distribute_dataset: a PyDataset
    it refuses there; its sharding is on Keras's master, unreleased)."""
    if jax.process_count() > 1:
        import tensorflow as tf

        from ..smoke.data import make_dataset as tf_dataset

        tf.config.set_visible_devices([], "GPU")  # tf.data only: the GPUs are JAX's
        return tf_dataset(tf, images, labels, global_batch, seed)
    return keras3_data.synthetic_batches(keras, images, labels, global_batch, seed, steps_per_epoch)


def jit_compile(choice: str, keras, gpus: list[dict]):
    """Keras on JAX always compiles the train step with XLA ("auto" means on). JAX's XLA
    brings its own PTX support, so TensorFlow's Blackwell rule (blackwell.py) does not apply."""
    if choice == "auto":
        return "auto", "auto", None
    return choice == "on", choice, None


def training_callbacks(jax, keras, tensorboard_dir: str, profile_steps) -> list:
    """Epoch scalars through Keras' TensorBoard callback (tensorflow-cpu in the image; tensorboard's
    own writer without TensorFlow), and jax.profiler's trace over `profile_steps` into
    <tensorboard_dir>/plugins/profile/<run>/<host>.xplane.pb: not the callback's profile_batch,
    which Keras 3.15 turns off on JAX under Python < 3.12."""
    from ..tb_writer import epoch_scalars_callbacks

    callbacks = epoch_scalars_callbacks(keras, tensorboard_dir)
    if profile_steps:
        callbacks.append(keras3_data.step_hooks_class(keras)(
            *profile_steps, start=lambda: jax.profiler.start_trace(tensorboard_dir), stop=jax.profiler.stop_trace))
    return callbacks


def profile_report(window, steps, tensorboard_dir: str, callbacks: list) -> dict | None:
    report = xspace_profile_report(window, steps, tensorboard_dir)
    hooks = [c for c in callbacks if hasattr(c, "_start")]
    if report is not None and hooks and hooks[0].error:
        report["line"] = hooks[0].error
    elif report is not None and report.get("input_wait_fraction") is None and report.get("get_next_calls") is None \
            and report.get("xplane") and report.get("step_ms") is not None and "analysis failed" not in report["line"]:
        # The analysis measures the wait of tf.data's Iterator::Root; Keras on JAX feeds
        # numpy batches from a PyDataset, so there is no such op to read.
        report["line"] = ("input wait not measured on JAX: XProf's input-pipeline analysis reads tf.data's "
                          "iterator, and Keras on JAX feeds numpy batches (the trace viewer still shows the steps)")
    return report


def _runtime_error_class(jax):
    return getattr(getattr(jax, "errors", None), "JaxRuntimeError", None) or RuntimeError


def classify_error(jax, exc: BaseException, tf_log, output_dir: str) -> SmokeFailure | None:
    """XLA's runtime errors (jax.errors.JaxRuntimeError) as SmokeFailures."""
    if not isinstance(exc, _runtime_error_class(jax)):
        return None
    text = str(exc)
    if "RESOURCE_EXHAUSTED" in text or "Out of memory" in text:
        if is_disk_full(exc):
            return disk_full(exc, output_dir)
        return SmokeFailure(EXIT_OOM, "oom", f"GPU out of memory: {text.strip().splitlines()[0][:200]}",
                            "lower --batch-size (BATCH_SIZE=) or set --memory-limit for the GPU")
    return classify_runtime_error(exc, tf_log(), framework=DISPLAY)


def multi_worker_supported() -> str | None:
    return ("TF_CONFIG multi-worker training is TensorFlow's (MultiWorkerMirroredStrategy); "
            "Keras on JAX spans processes with keras.distribution.initialize() and "
            "KERAS_DISTRIBUTION_JOB_ADDRESSES/_NUM_PROCESSES/_PROCESS_ID (`kerasenv multiworker` sets them)")


def join_processes(jax, keras, job, report: dict, log) -> None:
    """Several processes (jax_processes.job_from_env found a job): keras.distribution.initialize()."""
    from . import jax_processes

    jax_processes.initialize(jax, keras, job, report, log=log)


def weights_digest(model) -> str:
    from .jax_processes import weights_digest as digest

    return digest(model)


# -- the bench ------------------------------------------------------------------------------
def bench_gpus(jax) -> list:
    return _gpus(jax)


def bench_gpu_details(jax, gpus: list) -> dict:
    return {"name": gpus[0].device_kind, "compute_capability": getattr(gpus[0], "compute_capability", None)}


def bench_device_name(device: str) -> str:
    return "gpu:0" if device == "gpu" else "cpu:0"


def bench_device_scope(jax, keras, device: str):
    # keras.device on JAX is jax.default_device: the model's variables, and so its
    # jitted train step, live there.
    return keras.device(bench_device_name(device))


def bench_batches(jax, keras, x, y, steps: int):
    return keras3_data.repeated_batch(keras, x, y, steps)


def is_oom(jax, exc: BaseException) -> bool:
    return isinstance(exc, _runtime_error_class(jax)) and "RESOURCE_EXHAUSTED" in str(exc)
