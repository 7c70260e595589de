#!/usr/bin/env python3
# GENERATED copy of scripts/smoke_train.py by `kerasenv generate`: edit that file, then run `make generate`.
"""kerasenv smoke training: prove that Keras trains on this container's GPU (or CPU).

Baked into every kerasenv image as /opt/kerasenv/smoke_train.py and its default
command, so `docker run --gpus all kerasenv:<id>` is already a verification.
Runs on Keras 3 (TF >= 2.16) and on tf.keras 2 (TF 2.14/2.15), with no network
and no downloads: the data is synthetic (seeded) but learnable.

Exit codes:
  0  ok: the model learned
  2  bad usage (arguments, unwritable output directory)
  3  a GPU was required (--require-gpu) but none is visible, or TensorFlow is not
     built for the device family of this image
  4  training failed: NaN/inf loss, or the model did not learn
  5  out of memory (GPU ResourceExhausted or host MemoryError)
  6  the results could not be written (disk full or I/O error in the output directory);
     no partial report.json is left behind
  130/143  interrupted (SIGINT/SIGTERM)
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone

REPORT_SCHEMA = 1
EXIT_OK, EXIT_USAGE, EXIT_NO_GPU, EXIT_TRAINING, EXIT_OOM, EXIT_OUTPUT = 0, 2, 3, 4, 5, 6
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
IMAGE_SIZE, CLASSES = 28, 4
LOSS_RATIO_MAX = 0.9  # final loss must end below 0.9x the first
ACCURACY_MIN = 0.8  # final training accuracy (chance is 0.25)
DOCKER_DEFAULT_SHM = 64 * 1024 * 1024


class SmokeFailure(Exception):
    def __init__(self, exit_code: int, kind: str, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.exit_code, self.kind, self.message, self.fix = exit_code, kind, message, fix


class Interrupted(BaseException):
    """SIGTERM/SIGINT. A BaseException, like KeyboardInterrupt: the handler raises it in
    whatever Python frame runs when the signal lands, and as an Exception it could be
    caught and re-raised as another error by an `except Exception` in TF or Keras (a
    `docker stop` once ended with exit 1 instead of 143)."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(f"interrupted (exit {exit_code})")
        self.exit_code = exit_code


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ
    p = argparse.ArgumentParser(
        prog="smoke_train.py",
        description="Train a small conv net on synthetic data and verify that it learned.")
    p.add_argument("--epochs", type=int, default=_env_int("KERASENV_EPOCHS", 3))
    p.add_argument("--batch-size", type=int, default=_env_int("KERASENV_BATCH_SIZE", 64),
                   help="per-replica batch size (the global batch is this x replicas)")
    p.add_argument("--samples", type=int, default=_env_int("KERASENV_SAMPLES", 2048))
    p.add_argument("--learning-rate", type=float, default=float(env.get("KERASENV_LEARNING_RATE", "0.003")))
    p.add_argument("--mixed-precision", choices=("auto", "off", "float16", "bfloat16"),
                   default=env.get("KERASENV_MIXED_PRECISION", "auto"),
                   help="auto: mixed_float16 when every GPU has compute capability >= 7.0")
    p.add_argument("--memory-limit", type=int, default=_env_int("KERASENV_GPU_MEMORY_LIMIT_MB", 0),
                   metavar="MB", help="per-GPU memory limit (a logical device); 0: none")
    p.add_argument("--no-memory-growth", action="store_true",
                   help="let TensorFlow map all GPU memory up front (its default)")
    p.add_argument("--visible-gpus", default=env.get("KERASENV_VISIBLE_GPUS", ""),
                   help="comma-separated GPU indexes made visible in-process (tf.config.set_visible_devices)")
    p.add_argument("--require-gpu", action="store_true",
                   default=env.get("KERASENV_REQUIRE_GPU", "") in ("1", "true", "yes"),
                   help="exit 3 unless TensorFlow sees a GPU")
    p.add_argument("--jit-compile", choices=("auto", "on", "off"), default=env.get("KERASENV_JIT_COMPILE", "auto"),
                   help="XLA for the train step; auto: the Keras default (XLA where supported on Keras 3)")
    p.add_argument("--seed", type=int, default=_env_int("KERASENV_SEED", 1234))
    p.add_argument("--run-id", default=env.get("KERASENV_RUN_ID", ""),
                   help="name of the run directory; the same id resumes an interrupted run")
    p.add_argument("--output-dir", default=env.get("KERASENV_OUTPUT_DIR", ""),
                   help="default: /workspace/runs/<run-id>")
    p.add_argument("--json", action="store_true", help="print the JSON report on stdout")
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "samples"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.samples < args.batch_size:
        p.error("--samples must be at least --batch-size")
    if args.memory_limit < 0:
        p.error("--memory-limit must be >= 0")
    if not math.isfinite(args.learning_rate) or args.learning_rate <= 0:
        p.error("--learning-rate must be a positive number")
    try:
        args.visible_gpu_indexes = [int(i) for i in args.visible_gpus.split(",") if i.strip()]
    except ValueError:
        p.error(f"--visible-gpus must be indexes like 0 or 0,1, not {args.visible_gpus!r}")
    if not args.run_id:
        args.run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    if not args.output_dir:
        args.output_dir = os.path.join("/workspace/runs", args.run_id)
    return args


def log(message: str) -> None:
    print(f"[smoke] {message}", file=sys.stderr, flush=True)


def prepare_output_dir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-", delete=True)
        probe.close()
    except OSError as exc:
        raise SmokeFailure(
            EXIT_USAGE, "output-dir", f"output directory {path} is not writable ({exc.strerror})",
            "mount a directory you own (e.g. -v $PWD/runs:/workspace/runs with --user $(id -u):$(id -g)) "
            "or pass --output-dir") from None


def strict_json(value):
    """NaN/inf are not JSON: they become null (the verdict's `finite` says why)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def write_json_atomically(value, target: str) -> None:
    """Write to a temporary file beside `target`, fsync, then rename over it: a reader
    sees the old file or the new one, never half of one. On error nothing is left."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp-", suffix=".json")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as handle:
            json.dump(strict_json(value), handle, indent=2, sort_keys=True, allow_nan=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_report(report: dict, output_dir: str | None) -> bool:
    """report.json is written atomically: a reader never sees half a report. Returns
    False (and says why) when it could not be written, e.g. the disk is full."""
    if not output_dir or not os.path.isdir(output_dir):
        return True
    target = os.path.join(output_dir, "report.json")
    try:
        write_json_atomically(report, target)
    except OSError as exc:
        log(f"ERROR: could not write {target} ({exc.strerror}); no partial report was left behind")
        return False
    return True


# --- environment -----------------------------------------------------------------------

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
    if not smi.get("present") and not os.path.exists("/dev/nvidia0") and not os.path.exists("/dev/kfd"):
        return ("the container was started without a GPU (no /dev/nvidia*, no nvidia-smi)",
                "run with --gpus all (NVIDIA Container Toolkit installed and configured on the host; "
                "`kerasenv doctor` checks it)")
    if smi.get("error"):
        return (f"nvidia-smi fails in the container: {smi['error'].splitlines()[0]}",
                "check the host driver with `nvidia-smi` and `kerasenv doctor`")
    return ("the GPU is present but TensorFlow cannot use it (driver too old for this image's CUDA, "
            "or CUDA libraries failed to load; see the TensorFlow log above)",
            "run `kerasenv doctor` on the host: it compares the driver with the image's minimum")


# --- data and model ----------------------------------------------------------------------

def synthetic_images(samples: int, seed: int):
    """Four translation-invariant textures (horizontal, vertical, diagonal stripes, checker)
    with random phase and Gaussian noise: easy for a conv net, impossible to guess."""
    import numpy as np

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=samples)
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE]
    phase = rng.integers(0, 4, size=samples)[:, None, None]
    patterns = np.stack([
        ((yy[None] + phase) // 2) % 2,
        ((xx[None] + phase) // 2) % 2,
        ((xx[None] + yy[None] + phase) // 2) % 2,
        (((xx[None] + phase) // 3 + (yy[None] + phase) // 3) % 2),
    ], axis=1)[np.arange(samples), labels]
    images = patterns.astype(np.float32) * 160 + rng.normal(40, 35, size=patterns.shape)
    images = np.clip(images, 0, 255).astype(np.uint8)[..., None]
    return images, labels.astype(np.int32)


def make_dataset(tf, images, labels, global_batch: int, seed: int):
    autotune = tf.data.AUTOTUNE

    def to_float(image, label):
        return tf.cast(image, tf.float32) / 255.0, label

    return (tf.data.Dataset.from_tensor_slices((images, labels))
            .map(to_float, num_parallel_calls=autotune)
            .cache()
            .shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
            .batch(global_batch, drop_remainder=True)
            .prefetch(autotune))


def build_model(keras):
    layers = keras.layers
    model = keras.Sequential([
        keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 1)),
        layers.Conv2D(16, 3, activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(32, activation="relu"),
        layers.Dense(CLASSES),
        # float32 output keeps softmax/loss numerically stable under mixed precision.
        layers.Activation("softmax", dtype="float32"),
    ])
    return model


# --- the run -----------------------------------------------------------------------------

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
    return physical


def choose_precision(args, gpus: list[dict]) -> str:
    if args.mixed_precision == "off":
        return "float32"
    if args.mixed_precision == "float16":
        return "mixed_float16"
    if args.mixed_precision == "bfloat16":
        return "mixed_bfloat16"
    ccs = [g["compute_capability"] for g in gpus]
    if ccs and all(cc and tuple(int(x) for x in cc.split(".")) >= (7, 0) for cc in ccs):
        return "mixed_float16"
    return "float32"


def placement_check(tf, gpus: list) -> dict:
    device = "/GPU:0" if gpus else "/CPU:0"
    with tf.device(device):
        a = tf.random.stateless_uniform((256, 256), seed=(1, 2))
        result = tf.matmul(a, a)
    actual = result.device
    ok = ("GPU:0" in actual) if gpus else ("CPU:0" in actual)
    return {"requested": device, "result_device": actual, "ok": ok,
            "checksum": float(tf.reduce_sum(result).numpy())}


# Blackwell (compute capability 10.x-12.x): TF's XLA takes its PTX version from the CUDA TF
# was built with (8.5 for TF 2.21), LLVM needs 8.6 for sm_100 and 8.7 for sm_120, and aborts
# the whole process ("LLVM ERROR: PTX version 8.5 does not support target 'sm_120'",
# tensorflow/tensorflow#111958). So "auto" means XLA off there; `kerasenv doctor` says the
# same (src/kerasenv/blackwell.py, BLACKWELL_MAJORS; a unit test keeps the two equal).
BLACKWELL_MAJORS = (10, 11, 12)


def xla_blocker(gpus: list[dict]) -> str | None:
    """Why XLA must stay off on these GPUs, or None."""
    for gpu in gpus:
        cc = gpu.get("compute_capability")
        if cc and int(cc.split(".")[0]) in BLACKWELL_MAJORS:
            return (f"{gpu.get('name')} is a Blackwell GPU (compute capability {cc}): this TensorFlow's "
                    "XLA cannot emit PTX for it (tensorflow/tensorflow#111958)")
    return None


def jit_compile_arg(choice: str, keras, gpus: list[dict]):
    """(value for Model.compile, the effective setting, why it was changed or None)."""
    if choice == "auto":
        blocker = xla_blocker(gpus)
        if blocker:
            return False, "off", blocker + "; jit_compile turned off (pass --jit-compile on to force it)"
        return ("auto" if keras_version(keras).startswith("3.") else None), "auto", None
    return choice == "on", choice, None


def multi_worker(tf, tf_config: str, report: dict):
    """MultiWorkerMirroredStrategy from TF_CONFIG; it must exist before any op runs."""
    try:
        config = json.loads(tf_config)
        workers = config["cluster"]["worker"]
        index = int(config["task"]["index"])
        assert config["task"]["type"] == "worker" and 0 <= index < len(workers)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise SmokeFailure(EXIT_USAGE, "tf-config", "TF_CONFIG is not a worker cluster spec",
                           'use {"cluster": {"worker": ["host0:port", ...]}, "task": {"type": "worker", "index": N}}')
    # A bounded collective timeout: a lost peer becomes an error instead of a hang.
    timeout = float(os.environ.get("KERASENV_COLLECTIVE_TIMEOUT", "120"))
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    report["distributed"] = {"strategy": "MultiWorkerMirroredStrategy", "workers": len(workers),
                             "task_index": index, "chief": index == 0, "cluster": workers,
                             "collective_timeout_s": timeout}
    return strategy


def worker_dir(args, report: dict) -> str:
    """The chief (worker 0) writes to the run directory; worker i to worker-<i>/ in it."""
    dist = report.get("distributed")
    if not dist or dist["chief"]:
        return args.output_dir
    path = os.path.join(args.output_dir, f"worker-{dist['task_index']}")
    os.makedirs(path, exist_ok=True)
    return path


def train_multi_worker(tf, keras, args, report: dict, strategy) -> dict:
    """A custom training loop: Keras 3's model.fit does not support
    MultiWorkerMirroredStrategy (keras-team/keras#20585, tensorflow/tensorflow#72388),
    but Keras layers and optimizers do, under strategy.run."""
    precision = choose_precision(args, report["gpus"])
    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(args.seed)
    replicas = strategy.num_replicas_in_sync
    global_batch = args.batch_size * replicas
    images, labels = synthetic_images(args.samples, args.seed)
    dataset = strategy.experimental_distribute_dataset(make_dataset(tf, images, labels, global_batch, args.seed))
    steps_per_epoch = args.samples // global_batch
    with strategy.scope():
        model = build_model(keras)
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
        if precision == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None)

    def replica_step(batch):
        x, y = batch
        with tf.GradientTape() as tape:
            probs = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(y, probs), global_batch_size=global_batch)
            scaled = optimizer.scale_loss(loss) if hasattr(optimizer, "scale_loss") else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(probs, axis=-1, output_type=tf.int32), y), tf.float32))
        return loss, correct

    @tf.function
    def train_step(iterator):
        loss, correct = strategy.run(replica_step, args=(next(iterator),))
        reduce = tf.distribute.ReduceOp.SUM
        return strategy.reduce(reduce, loss, axis=None), strategy.reduce(reduce, correct, axis=None)

    out_dir = worker_dir(args, report)
    writer = tf.summary.create_file_writer(os.path.join(out_dir, "tensorboard", "train"))
    log(f"training: {args.epochs} epoch(s) x {steps_per_epoch} steps, global batch {global_batch}, "
        f"{replicas} replica(s) on {report['distributed']['workers']} worker(s), precision {precision}")
    losses, accuracies, epoch_seconds = [], [], []
    first_loss = time_to_first_step = None
    started = time.perf_counter()
    for epoch in range(args.epochs):
        epoch_start, iterator, total, correct = time.perf_counter(), iter(dataset), 0.0, 0.0
        for _ in range(steps_per_epoch):
            loss, hits = train_step(iterator)
            loss = float(loss)
            if first_loss is None:
                first_loss, time_to_first_step = loss, time.perf_counter() - started
            if not math.isfinite(loss):
                break
            total, correct = total + loss, correct + float(hits)
        epoch_seconds.append(time.perf_counter() - epoch_start)
        losses.append(total / steps_per_epoch)
        accuracies.append(correct / (steps_per_epoch * global_batch))
        with writer.as_default():
            tf.summary.scalar("epoch_loss", losses[-1], step=epoch)
            tf.summary.scalar("epoch_accuracy", accuracies[-1], step=epoch)
        if not math.isfinite(loss):
            losses[-1] = float("nan")
            break
    writer.flush()
    model_path = os.path.join(out_dir, "model.keras")
    model.save(model_path)
    steady = epoch_seconds[1:] or epoch_seconds
    return {
        "epochs": args.epochs, "epochs_run": len(losses), "resumed": False,
        "batch_size": args.batch_size, "global_batch_size": global_batch, "samples": args.samples,
        "steps_per_epoch": steps_per_epoch, "learning_rate": args.learning_rate,
        "mixed_precision": precision, "jit_compile": "off", "strategy": "MultiWorkerMirroredStrategy",
        "replicas": replicas, "loss_per_epoch": losses, "accuracy_per_epoch": accuracies,
        "first_loss": first_loss, "final_loss": losses[-1] if losses else None,
        "final_accuracy": accuracies[-1] if accuracies else None,
        "time_to_first_step_s": time_to_first_step, "epoch_seconds": epoch_seconds,
        "samples_per_second": steps_per_epoch * global_batch / (sum(steady) / len(steady)) if steady else None,
        "model_path": model_path,
    }


def train(tf, keras, args, report: dict, gpus: list) -> dict:
    precision = choose_precision(args, report["gpus"])
    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(args.seed)
    logical_gpus = tf.config.list_logical_devices("GPU")
    strategy = tf.distribute.MirroredStrategy() if len(logical_gpus) > 1 else tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    global_batch = args.batch_size * replicas
    if global_batch > args.samples:
        raise SmokeFailure(EXIT_USAGE, "batch-size", f"global batch {global_batch} exceeds --samples {args.samples}",
                           "lower --batch-size or raise --samples")
    images, labels = synthetic_images(args.samples, args.seed)
    dataset = make_dataset(tf, images, labels, global_batch, args.seed)
    steps_per_epoch = args.samples // global_batch

    jit_compile, jit_setting, jit_reason = jit_compile_arg(args.jit_compile, keras, report["gpus"])
    if jit_reason:
        log(jit_reason)
    with strategy.scope():
        model = build_model(keras)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=args.learning_rate),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      jit_compile=jit_compile)

    backup_dir = os.path.join(args.output_dir, "backup")
    resumed = os.path.isdir(backup_dir) and bool(os.listdir(backup_dir))
    timing = timing_callback(keras)
    progress = epoch_log_callback(keras, os.path.join(args.output_dir, "epochs.json"))
    callbacks = [
        timing,
        keras.callbacks.TerminateOnNaN(),
        # The epoch log is written before the backup: a kill between the two leaves the
        # log one epoch ahead, and the resumed run truncates it to the backup's epoch.
        progress,
        backup_callback(keras, backup_dir),
        keras.callbacks.TensorBoard(log_dir=os.path.join(args.output_dir, "tensorboard"),
                                    update_freq="epoch", profile_batch=0),
    ]
    log(f"training: {args.epochs} epoch(s) x {steps_per_epoch} steps, global batch {global_batch}, "
        f"{replicas} replica(s), precision {precision}" + (", resuming from backup" if resumed else ""))
    timing.fit_started = time.perf_counter()
    model.fit(dataset, epochs=args.epochs, verbose=0, callbacks=callbacks)
    # Over the whole run, the epochs before a resume included (the log keeps them).
    losses = [e["loss"] for e in progress.epochs]
    accuracies = [e["accuracy"] for e in progress.epochs]
    resumed_from = progress.first_epoch or 0
    epochs_run = len(losses) - resumed_from
    steady = timing.epoch_seconds[1:] or timing.epoch_seconds
    samples_per_s = (steps_per_epoch * global_batch) / (sum(steady) / len(steady)) if steady else None
    # The first loss of the run, not of the resumed part: the verdict compares the
    # whole run, so a resumed run reaches the same verdict as an uninterrupted one.
    first_loss = progress.first_batch_loss if progress.first_batch_loss is not None else timing.first_batch_loss
    final_loss = losses[-1] if losses else None
    return {
        "epochs": args.epochs, "epochs_run": epochs_run, "resumed": resumed_from > 0 or resumed,
        "resumed_from_epoch": resumed_from,
        "batch_size": args.batch_size, "global_batch_size": global_batch, "samples": args.samples,
        "steps_per_epoch": steps_per_epoch, "learning_rate": args.learning_rate,
        "mixed_precision": precision, "jit_compile": jit_setting, "jit_compile_reason": jit_reason,
        "strategy": type(strategy).__name__, "replicas": replicas,
        "loss_per_epoch": losses, "accuracy_per_epoch": accuracies,
        "first_loss": first_loss, "final_loss": final_loss,
        "final_accuracy": accuracies[-1] if accuracies else None,
        "time_to_first_step_s": timing.time_to_first_step,
        "epoch_seconds": timing.epoch_seconds,
        "samples_per_second": samples_per_s,
    }


def backup_callback(keras, backup_dir: str):
    """BackupAndRestore, keeping the previous backup too where Keras can (3.x): a kill
    while the weights are being written then falls back to the epoch before."""
    import inspect

    cls = keras.callbacks.BackupAndRestore
    if "double_checkpoint" in inspect.signature(cls.__init__).parameters:
        return cls(backup_dir, double_checkpoint=True)
    return cls(backup_dir)


def epoch_log_callback(keras, path: str):
    """Per-epoch loss/accuracy of the whole run in `path` (atomically rewritten each
    epoch), so a run resumed from BackupAndRestore reports every epoch, once."""

    class EpochLog(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.epochs: list[dict] = []
            self.first_batch_loss: float | None = None
            self.first_epoch: int | None = None
            try:
                with open(path) as handle:
                    saved = json.load(handle)
                self.epochs, self.first_batch_loss = list(saved["epochs"]), saved.get("first_batch_loss")
            except (OSError, ValueError, KeyError, TypeError):
                pass

        def on_epoch_begin(self, epoch, logs=None):
            if self.first_epoch is None:
                # The backup decides where training restarts; drop what came after it.
                self.first_epoch = epoch
                self.epochs = self.epochs[:epoch]
                if epoch == 0:
                    self.first_batch_loss = None
                else:
                    done = f"epochs 1-{epoch} are" if epoch > 1 else "epoch 1 is"
                    log(f"resumed from the backup after epoch {epoch} of {self.params.get('epochs')}: "
                        f"{done} not repeated")

        def on_train_batch_end(self, batch, logs=None):
            if self.first_batch_loss is None and (logs or {}).get("loss") is not None:
                self.first_batch_loss = float(logs["loss"])

        def on_epoch_end(self, epoch, logs=None):
            logs = logs or {}
            self.epochs.append({"epoch": epoch + 1, "loss": float(logs.get("loss", float("nan"))),
                                "accuracy": float(logs.get("accuracy", float("nan")))})
            write_json_atomically({"first_batch_loss": self.first_batch_loss, "epochs": self.epochs}, path)

    return EpochLog()


def timing_callback(keras):
    """A Keras callback: time to the first step, epoch times, the first batch's loss."""

    class Timing(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.fit_started = 0.0
            self.time_to_first_step: float | None = None
            self.first_batch_loss: float | None = None
            self.epoch_seconds: list[float] = []
            self._epoch_start = 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self._epoch_start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_seconds.append(time.perf_counter() - self._epoch_start)

        def on_train_batch_end(self, batch, logs=None):
            if self.time_to_first_step is None:
                self.time_to_first_step = time.perf_counter() - self.fit_started
                loss = (logs or {}).get("loss")
                self.first_batch_loss = float(loss) if loss is not None else None

    return Timing()


def is_disk_full(exc: BaseException) -> bool:
    text = str(exc)
    return getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or \
        "No space left on device" in text or "Disk quota exceeded" in text


def disk_full(exc: BaseException, output_dir: str) -> SmokeFailure:
    first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
    return SmokeFailure(EXIT_OUTPUT, "disk-full", f"no space left in {output_dir} while writing results ({first})",
                        "free space on the disk behind the runs directory, or pass --runs-dir on a larger disk")


def verdict(training: dict) -> dict:
    first, final, accuracy = training["first_loss"], training["final_loss"], training["final_accuracy"]
    finite = all(v is not None and math.isfinite(v) for v in [first, final, *training["loss_per_epoch"]])
    ratio = (final / first) if finite and first else None
    learned = bool(finite and ratio is not None and ratio < LOSS_RATIO_MAX
                   and accuracy is not None and accuracy >= ACCURACY_MIN)
    complete = training["epochs_run"] > 0
    return {"finite": finite, "loss_ratio": ratio, "loss_ratio_max": LOSS_RATIO_MAX,
            "accuracy": accuracy, "accuracy_min": ACCURACY_MIN, "learned": learned and complete}


def run(args, report: dict) -> int:
    prepare_output_dir(args.output_dir)
    report["output_dir"] = args.output_dir
    shm = shm_report()
    report["shm"] = shm
    if shm["warning"]:
        log(f"WARNING: {shm['warning']}")
    log("importing TensorFlow")
    tf, keras = import_stack()
    build_info = {k: (list(v) if isinstance(v, (list, tuple)) else v)
                  for k, v in dict(tf.sysconfig.get_build_info()).items()}
    report["versions"] = {"tensorflow": tf.__version__, "keras": keras_version(keras),
                          "python": platform.python_version(), "numpy": __import__("numpy").__version__}
    report["build_info"] = build_info
    family = os.environ.get("KERASENV_FAMILY", "")
    report["image"] = {"variant": os.environ.get("KERASENV_VARIANT"), "family": family or None}
    smi = nvidia_smi()
    report["nvidia_smi"] = smi
    report["driver_version"] = smi.get("driver_version")
    if family == "cuda" and not build_info.get("is_cuda_build"):
        raise SmokeFailure(EXIT_NO_GPU, "wrong-build", "this is a CUDA image but TensorFlow is not a CUDA build",
                           "rebuild the image (`make build`); the lock installed the wrong wheel")
    if family == "rocm" and not build_info.get("is_rocm_build"):
        raise SmokeFailure(EXIT_NO_GPU, "wrong-build", "this is a ROCm image but TensorFlow is not a ROCm build",
                           "rebuild the image from AMD's rocm/tensorflow base")

    gpus = configure_gpus(tf, args, report)
    strategy = multi_worker(tf, os.environ["TF_CONFIG"], report) if os.environ.get("TF_CONFIG") else None
    # Listing logical devices initialises the runtime: only after the GPU options are set.
    report["devices"] = {"physical": [d.name for d in tf.config.list_physical_devices()],
                         "logical": [d.name for d in tf.config.list_logical_devices()]}
    if not gpus:
        reason, fix = no_gpu_reason(smi)
        if args.require_gpu:
            raise SmokeFailure(EXIT_NO_GPU, "no-gpu", f"a GPU is required but TensorFlow sees none: {reason}", fix)
        if family in ("cuda", "rocm"):
            log(f"WARNING: no GPU visible ({reason}); training on the CPU")
    for gpu in report["gpus"]:
        log(f"GPU {gpu['device']}: {gpu['name']} (compute capability {gpu['compute_capability']})")
    report["placement"] = placement_check(tf, gpus)
    log(f"placement: requested {report['placement']['requested']}, "
        f"result on {report['placement']['result_device']}")

    try:
        training = (train_multi_worker(tf, keras, args, report, strategy) if strategy is not None
                    else train(tf, keras, args, report, gpus))
    except tf.errors.ResourceExhaustedError as exc:
        # TensorFlow maps ENOSPC to RESOURCE_EXHAUSTED too (file writes of TensorBoard and
        # checkpoints): a full disk is not a GPU out of memory.
        if is_disk_full(exc):
            raise disk_full(exc, args.output_dir) from None
        raise SmokeFailure(EXIT_OOM, "oom", f"GPU out of memory: {str(exc).splitlines()[0][:200]}",
                           "lower --batch-size (BATCH_SIZE=) or set --memory-limit for the GPU") from None
    except OSError as exc:
        if is_disk_full(exc):
            raise disk_full(exc, args.output_dir) from None
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise SmokeFailure(EXIT_OUTPUT, "output-io", f"I/O error in {args.output_dir}: {first}",
                           "check the mounted runs directory (permissions, free space, a damaged "
                           "backup/: delete it or use a new --run-id)") from None
    except MemoryError:
        raise SmokeFailure(EXIT_OOM, "oom", "host out of memory",
                           "lower --batch-size / --samples or give the container more memory") from None
    report["training"] = training
    report["verdict"] = verdict(training)
    if not report["verdict"]["finite"]:
        raise SmokeFailure(EXIT_TRAINING, "nan", "training diverged: the loss became NaN or infinite",
                           "lower --learning-rate; with float16, try --mixed-precision bfloat16 or off")
    if not report["verdict"]["learned"]:
        v = report["verdict"]
        ratio = "n/a" if v["loss_ratio"] is None else f"{v['loss_ratio']:.2f}"
        raise SmokeFailure(EXIT_TRAINING, "did-not-learn",
                           f"the model did not learn (loss ratio {ratio}, needs < {LOSS_RATIO_MAX}; "
                           f"accuracy {v['accuracy']}, needs >= {ACCURACY_MIN})",
                           "check --learning-rate and the TensorFlow log above")
    return EXIT_OK


def summary(report: dict, report_written: bool = True) -> None:
    t = report.get("training") or {}
    versions = report.get("versions") or {}
    device = report.get("placement", {}).get("result_device", "?")
    lines = [f"TensorFlow {versions.get('tensorflow')} / Keras {versions.get('keras')} / "
             f"Python {versions.get('python')} ({report.get('image', {}).get('variant') or 'no variant'})",
             f"device: {device}; GPUs: {len(report.get('gpus') or [])}; driver: {report.get('driver_version') or '-'}"]
    if t:
        lines.append(f"loss {t['first_loss']:.3f} -> {t['final_loss']:.3f}, accuracy {t['final_accuracy']:.3f}, "
                     f"{t['samples_per_second'] or 0:.0f} samples/s, first step after {t['time_to_first_step_s'] or 0:.1f} s"
                     if t.get("final_loss") is not None and math.isfinite(t["final_loss"]) else "loss not finite")
    status = report["status"].upper()
    if report.get("error"):
        lines.append(f"{report['error']['message']}")
        if report["error"].get("fix"):
            lines.append(f"fix: {report['error']['fix']}")
    print(f"[smoke] {status} (exit {report['exit_code']})", file=sys.stderr)
    for line in lines:
        print(f"[smoke]   {line}", file=sys.stderr)
    dist = report.get("distributed")
    if dist:
        print(f"[smoke]   multi-worker: worker {dist['task_index']} of {dist['workers']}"
              f"{' (chief)' if dist['chief'] else ''}", file=sys.stderr)
    where = os.path.join(worker_dir_or_none(report) or "-", "report.json")
    print(f"[smoke]   report: {where if report_written else 'not written'}", file=sys.stderr)


def worker_dir_or_none(report: dict) -> str | None:
    base = report.get("output_dir")
    dist = report.get("distributed")
    if base and dist and not dist["chief"]:
        return os.path.join(base, f"worker-{dist['task_index']}")
    return base


def _on_signal(signum, frame):
    raise Interrupted(EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # As PID 1 without --init, Python ignores SIGTERM unless it handles it: handle it so
    # `docker stop` ends the run at once instead of waiting 10 s for SIGKILL.
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    started = time.perf_counter()
    report: dict = {"schema_version": REPORT_SCHEMA, "run_id": args.run_id,
                    "started_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "require_gpu": args.require_gpu, "gpus": []}
    output_ready = False
    try:
        code = run(args, report)
        output_ready = True
        report.update(status="ok", exit_code=code)
    except SmokeFailure as exc:
        output_ready = exc.kind != "output-dir"
        report.update(status="failed", exit_code=exc.exit_code,
                      error={"kind": exc.kind, "message": exc.message, "fix": exc.fix})
    except Interrupted as exc:
        output_ready = True
        report.update(status="interrupted", exit_code=exc.exit_code,
                      error={"kind": "interrupted", "message": "the run was interrupted; "
                             "the same --run-id resumes it from the last epoch backup", "fix": ""})
    report["wall_seconds"] = round(time.perf_counter() - started, 3)
    written = write_report(report, worker_dir(args, report) if output_ready else None)
    if not written:
        # Training may have passed, but a run whose results are not on disk has not.
        if report["exit_code"] == EXIT_OK:
            report.update(status="failed", exit_code=EXIT_OUTPUT)
        report.setdefault("error", {"kind": "disk-full", "message": "report.json could not be written "
                                    f"to {args.output_dir} (see the ERROR above)",
                                    "fix": "free space on the disk behind the runs directory, "
                                    "or pass --runs-dir on a larger disk"})
    summary(report, report_written=written and output_ready)
    if args.json:
        print(json.dumps(strict_json(report), indent=2, sort_keys=True, allow_nan=False))
    return report["exit_code"]


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown: native objects (h5py files whose writes failed on a
    # full disk, TF's thread pools) can crash while being freed at exit, turning a clean
    # exit code into a segfault (139) after everything that matters is already on disk.
    os._exit(code)
