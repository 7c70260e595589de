"""Multi-worker training (TF_CONFIG): MultiWorkerMirroredStrategy and a custom loop."""

from __future__ import annotations

import json
import math
import os
import time

from ..backends.keras_release import keras_version
from .compile_options import choose_precision
from .console import log
from .data import make_dataset, synthetic_images
from .errors import EXIT_USAGE, SmokeFailure
from .model import build_model


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
    if not dist or dist["chief"] or dist.get("launcher"):
        # Keras on JAX across processes: args.output_dir is this process's already (main.process_job).
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
    steps_per_epoch = args.steps_per_epoch  # fixed, as in single-host training
    keras3 = keras_version(keras).startswith("3.")
    with strategy.scope():
        model = build_model(keras)
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
        if precision == "mixed_float16":
            # Keras 3: keras.optimizers.LossScaleOptimizer; tf.keras 2 has it only under
            # keras.mixed_precision.
            scaler = keras.optimizers.LossScaleOptimizer if keras3 else keras.mixed_precision.LossScaleOptimizer
            optimizer = scaler(optimizer)
        # Per-example losses: Keras 3 spells it reduction=None, tf.keras 2 only "none".
        loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None if keras3 else "none")

    def replica_step(batch):
        x, y = batch
        with tf.GradientTape() as tape:
            probs = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(y, probs), global_batch_size=global_batch)
            scaled = loss
            if hasattr(optimizer, "scale_loss"):  # Keras 3: apply_gradients unscales
                scaled = optimizer.scale_loss(loss)
            elif hasattr(optimizer, "get_scaled_loss"):  # tf.keras 2: unscale by hand
                scaled = optimizer.get_scaled_loss(loss)
        grads = tape.gradient(scaled, model.trainable_variables)
        if scaled is not loss and hasattr(optimizer, "get_unscaled_gradients"):
            grads = optimizer.get_unscaled_gradients(grads)
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
