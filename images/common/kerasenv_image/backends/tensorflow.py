"""The TensorFlow backend: TF 2.14/2.15 with tf.keras 2, TF >= 2.16 with Keras 3.

What the smoke training did before the backend seam, unchanged: tf.config for the GPUs'
memory growth/limit, visible GPUs and logical CPUs, tf.device for the placement check,
MirroredStrategy over several devices, tf.data for the input, Keras' TensorBoard callback
(and its profiler), TensorFlow's error classes.
"""

from __future__ import annotations

from ..blackwell import is_blackwell
from ..profiling import xspace_profile_report
from ..smoke.errors import EXIT_OOM, EXIT_USAGE, SmokeFailure, classify_tf_error, disk_full, is_disk_full
from .keras_release import keras_version

NAME = "tensorflow"
DISPLAY = "TensorFlow"


def prepare(args, smi: dict) -> dict:
    """Nothing to set before the import: tf.config does it all in-process."""
    return {}


def import_stack():
    import tensorflow as tf

    major_minor = tuple(int(p) for p in tf.__version__.split(".")[:2])
    if major_minor >= (2, 16):
        import keras  # Keras 3
    else:
        keras = tf.keras  # Keras 2 (tf.keras) on TF 2.14/2.15
    return tf, keras


def versions(tf, keras) -> dict:
    return {"tensorflow": tf.__version__}


def build_info(tf) -> dict:
    return {k: (list(v) if isinstance(v, (list, tuple)) else v)
            for k, v in dict(tf.sysconfig.get_build_info()).items()}


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


def devices(tf) -> dict:
    # Listing logical devices initialises the runtime: only after the GPU options are set.
    return {"physical": [d.name for d in tf.config.list_physical_devices()],
            "logical": [d.name for d in tf.config.list_logical_devices()]}


def cuda_ordinals(gpus: list) -> list:
    """The CUDA device numbers of the GPUs trained on (`/physical_device:GPU:N`)."""
    return [int(d.name.rsplit(":", 1)[1]) for d in gpus]


def placement_check(tf, gpus: list) -> dict:
    device = "/GPU:0" if gpus else "/CPU:0"
    with tf.device(device):
        a = tf.random.stateless_uniform((256, 256), seed=(1, 2))
        result = tf.matmul(a, a)
    actual = result.device
    ok = ("GPU:0" in actual) if gpus else ("CPU:0" in actual)
    return {"requested": device, "result_device": actual, "ok": ok,
            "checksum": float(tf.reduce_sum(result).numpy())}


class Distribution:
    """How fit() spreads over the devices: a tf.distribute strategy."""

    def __init__(self, strategy) -> None:
        self.strategy = strategy
        self.replicas = strategy.num_replicas_in_sync
        self.name = type(strategy).__name__
        self.note = None

    def scope(self):
        return self.strategy.scope()


def distribution(tf, keras, args, gpus: list) -> Distribution:
    """MirroredStrategy over every logical GPU, or over logical CPUs (--logical-cpus) on a
    host without GPUs; the default strategy on one device."""
    logical_gpus = tf.config.list_logical_devices("GPU")
    if len(logical_gpus) > 1:
        return Distribution(tf.distribute.MirroredStrategy())
    logical_cpus = tf.config.list_logical_devices("CPU")
    if not logical_gpus and len(logical_cpus) > 1:
        return Distribution(tf.distribute.MirroredStrategy(devices=[d.name for d in logical_cpus]))
    return Distribution(tf.distribute.get_strategy())


def make_dataset(tf, keras, images, labels, global_batch: int, seed: int, steps_per_epoch: int):
    from ..smoke.data import make_dataset as tf_data_pipeline

    return tf_data_pipeline(tf, images, labels, global_batch, seed)


# On Blackwell, TensorFlow's XLA aborts the whole process (kerasenv_image.blackwell says
# why), so "auto" means XLA off there. TensorFlow only: JAX's and PyTorch's choices are
# their backend modules' jit_compile().
def xla_blocker(gpus: list[dict]) -> str | None:
    """Why XLA must stay off on these GPUs, or None."""
    for gpu in gpus:
        cc = gpu.get("compute_capability")
        if cc and is_blackwell(cc):
            return (f"{gpu.get('name')} is a Blackwell GPU (compute capability {cc}): this TensorFlow's "
                    "XLA cannot emit PTX for it (tensorflow/tensorflow#111958)")
    return None


def jit_compile(choice: str, keras, gpus: list[dict]):
    """(value for Model.compile, the effective setting, why it was changed or None)."""
    if choice == "auto":
        blocker = xla_blocker(gpus)
        if blocker:
            return False, "off", blocker + "; jit_compile turned off (pass --jit-compile on to force it)"
        return ("auto" if keras_version(keras).startswith("3.") else None), "auto", None
    return choice == "on", choice, None


def training_callbacks(fw, keras, tensorboard_dir: str, profile_steps) -> list:
    """Keras' TensorBoard callback: the epoch scalars, and the profiler over `profile_steps`."""
    return [keras.callbacks.TensorBoard(log_dir=tensorboard_dir, update_freq="epoch",
                                        profile_batch=profile_steps or 0)]


def profile_report(window, steps, tensorboard_dir: str, callbacks: list) -> dict | None:
    return xspace_profile_report(window, steps, tensorboard_dir)


def classify_error(tf, exc: BaseException, tf_log, output_dir: str) -> SmokeFailure | None:
    """TensorFlow's errors as SmokeFailures; None: not a TensorFlow error."""
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        # TensorFlow maps ENOSPC to RESOURCE_EXHAUSTED too (file writes of TensorBoard and
        # checkpoints): a full disk is not a GPU out of memory.
        if is_disk_full(exc):
            return disk_full(exc, output_dir)
        return SmokeFailure(EXIT_OOM, "oom", f"GPU out of memory: {str(exc).splitlines()[0][:200]}",
                            "lower --batch-size (BATCH_SIZE=) or set --memory-limit for the GPU")
    if isinstance(exc, tf.errors.OpError):
        # GPU init, PTX JIT, cuDNN autotuning, NCCL, XLA: what `kerasenv doctor` predicts.
        return classify_tf_error(exc, tf_log())
    return None


def multi_worker_supported() -> str | None:
    """None: TF_CONFIG multi-worker training runs here (MultiWorkerMirroredStrategy)."""
    return None


# -- the bench ------------------------------------------------------------------------------
def bench_gpus(tf) -> list:
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)  # an OOM is per configuration, not up front
    return gpus


def bench_gpu_details(tf, gpus: list) -> dict:
    details = tf.config.experimental.get_device_details(gpus[0])
    cc = details.get("compute_capability")
    return {"name": details.get("device_name"), "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None}


def bench_device_name(device: str) -> str:
    return "/GPU:0" if device == "gpu" else "/CPU:0"


def bench_device_scope(tf, keras, device: str):
    return tf.device(bench_device_name(device))


def bench_batches(tf, keras, x, y, steps: int):
    """One in-memory batch, repeated (no input pipeline in the figure)."""
    return tf.data.Dataset.from_tensors((x, y)).repeat()


def is_oom(tf, exc: BaseException) -> bool:
    return isinstance(exc, tf.errors.ResourceExhaustedError)
