"""Single-host training with Keras fit(): one device, or the backend's distribution over several
(MirroredStrategy on TensorFlow, DataParallel on JAX; PyTorch trains on one)."""

from __future__ import annotations

import json
import os
import time

from .. import gpu_monitor, gpu_verdict, profiling
from .compile_options import choose_precision
from .console import log
from .data import synthetic_images
from .model import build_model
from .report import write_json_atomically


def choose_strategy(tf):
    """TensorFlow's strategy (backends.tensorflow.distribution, which the run uses)."""
    from ..backends import tensorflow

    return tensorflow.distribution(tf, None, None, []).strategy


def train(backend, fw, keras, args, report: dict, gpus: list) -> dict:
    precision = choose_precision(args, report["gpus"])
    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(args.seed)
    spread = backend.distribution(fw, keras, args, gpus)
    if spread.note:
        log(spread.note)
    replicas = spread.replicas
    global_batch = args.batch_size * replicas
    images, labels = synthetic_images(args.samples, args.seed)
    # A fixed number of optimizer steps, whatever the batch and the replica count: with
    # steps = samples // global batch, 8 replicas got 4 steps per epoch and a batch of 512
    # got 4, and both ended "did not learn" (accuracy 0.58 and 0.49) on a host that works.
    steps_per_epoch = args.steps_per_epoch
    dataset = backend.make_dataset(fw, keras, images, labels, global_batch, args.seed, steps_per_epoch)

    jit_compile, jit_setting, jit_reason = backend.jit_compile(args.jit_compile, keras, report["gpus"])
    if jit_reason:
        log(jit_reason)
    with spread.scope():
        model = build_model(keras)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=args.learning_rate),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      jit_compile=jit_compile)

    backup_dir = os.path.join(args.output_dir, "backup")
    resumed = os.path.isdir(backup_dir) and bool(os.listdir(backup_dir))
    timing = timing_callback(keras)
    progress = epoch_log_callback(keras, os.path.join(args.output_dir, "epochs.json"))
    tensorboard_dir = os.path.join(args.output_dir, "tensorboard")
    # GPU utilisation and memory per epoch (nvidia-smi, TF's peak) beside the loss in
    # TensorBoard (tensorboard/gpu). Right after the timing: its epoch window closes before
    # the backup and TensorBoard write, which are not training steps.
    # Only the GPUs this run trains on (--visible-gpus): an idle neighbour is not underuse.
    monitor = (gpu_monitor.monitor_class(keras)(
        tensorboard_dir, gpus=gpu_monitor.smi_indexes_of_ordinals(backend.cuda_ordinals(gpus)))
               if gpus else None)
    # --profile: the profiler over a few steady steps (args.profile_steps), and their wall
    # time, against which the input pipeline's wait is read from the profile after fit().
    window = profiling.step_window_class(keras)(*args.profile_steps) if args.profile_steps else None
    board = backend.training_callbacks(fw, keras, tensorboard_dir, args.profile_steps)
    callbacks = [
        timing,
        *([monitor] if monitor is not None else []),
        *([window] if window is not None else []),
        keras.callbacks.TerminateOnNaN(),
        # The epoch log is written before the backup: a kill between the two leaves the
        # log one epoch ahead, and the resumed run truncates it to the backup's epoch.
        progress,
        # Not across processes: a weight that spans every process's devices cannot be fetched
        # into one process's numpy array to save, so a failed multi-process run starts over (as
        # TensorFlow's multi-worker loop does).
        *([] if report.get("distributed") else [backup_callback(keras, backup_dir)]),
        # TensorBoard's epoch scalars and the profiler: Keras' TensorBoard callback on
        # TensorFlow; tensorboard's own writer and the framework's profiler elsewhere.
        *board,
    ]
    log(f"training: {args.epochs} epoch(s) x {steps_per_epoch} steps, global batch {global_batch}, "
        f"{replicas} replica(s), precision {precision}" + (f", on {backend.DISPLAY}" if backend.NAME != "tensorflow" else "")
        + (", resuming from backup" if resumed else "")
        + (f", profiling steps {args.profile_steps[0]}-{args.profile_steps[1]}" if window is not None else ""))
    timing.fit_started = time.perf_counter()
    # shuffle=False: the tf.data pipeline shuffles itself (data.make_dataset), and fit()'s
    # default shuffle=True makes Keras 3 warn that it ignores it for a Dataset (tf.keras 2
    # on TF 2.14/2.15 ignores it silently); the data are shuffled the same either way. The
    # PyDataset of JAX and PyTorch reshuffles itself each epoch too (backends.keras3_data).
    try:
        model.fit(dataset, epochs=args.epochs, steps_per_epoch=steps_per_epoch, verbose=0, callbacks=callbacks,
                  shuffle=False)
    except BaseException:
        # Also when fit() raised (Keras then calls no on_train_end): nvidia-smi is stopped,
        # and the epochs measured so far are in the report (an OOM run shows its memory).
        # No profile analysis here: a signal must end the run at once.
        report["gpu_monitor"] = gpu_monitor_report(monitor)
        raise
    if report.get("distributed") and hasattr(backend, "weights_digest"):
        # Every process's copy of the replicated weights: `kerasenv multiworker` compares them.
        report["distributed"]["weights_sha256"] = backend.weights_digest(model)
    report["profile"] = backend.profile_report(window, args.profile_steps, tensorboard_dir, board)
    report["gpu_monitor"] = gpu_monitor_report(monitor, (report["profile"] or {}).get("input_wait_fraction"))
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
        "strategy": spread.name, "replicas": replicas,
        **({"distribution_note": spread.note} if spread.note else {}),
        "loss_per_epoch": losses, "accuracy_per_epoch": accuracies,
        "first_loss": first_loss, "final_loss": final_loss,
        "final_accuracy": accuracies[-1] if accuracies else None,
        "time_to_first_step_s": timing.time_to_first_step,
        "epoch_seconds": timing.epoch_seconds,
        "samples_per_second": samples_per_s,
    }


def gpu_monitor_report(monitor, input_wait_fraction: float | None = None) -> dict:
    """report.json's gpu_monitor: the per-epoch numbers and their verdict (with the
    profile's input wait when --profile measured one), or why none."""
    if monitor is None:
        return {"sampled": False, "reason": "training on the CPU: no GPU to sample"}
    monitor.stop()
    result = monitor.report()
    if result["sampled"]:
        result["verdict"] = gpu_verdict.verdict(result["epochs"], memory_total_mib=None,
                                                interval_ms=result["interval_ms"],
                                                input_wait_fraction=input_wait_fraction)
    return result


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
