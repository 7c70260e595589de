"""The models and the timed training of one configuration. The framework (KERAS_BACKEND:
kerasenv_image.backends) is imported only when the bench runs, so the pure parts are tested
without it."""

from __future__ import annotations

import gc
import time

# Keras dtype policy for each precision choice.
POLICY = {"off": "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}
MODEL_INFO = {
    "conv": "Keras MNIST conv net (keras.io/examples/vision/mnist_convnet): 28x28x1, Conv2D 32 + 64, "
            "max-pool, dropout, softmax 10; 34,826 parameters",
    "mlp": "MNIST MLP (Keras mnist_mlp example): 784 -> Dense 512 -> Dense 512 -> softmax 10, dropout 0.2; "
           "669,706 parameters",
}


def import_stack():
    """TensorFlow and its Keras (the bench's TensorFlow backend: backends.tensorflow)."""
    from ..backends import tensorflow

    return tensorflow.import_stack()


def build_model(keras, name: str):
    layers = keras.layers
    if name == "conv":
        return keras.Sequential([
            keras.Input(shape=(28, 28, 1)),
            layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax", dtype="float32"),  # float32 softmax under mixed precision
        ])
    return keras.Sequential([
        keras.Input(shape=(784,)),
        layers.Dense(512, activation="relu"),
        layers.Dropout(0.2),
        layers.Dense(512, activation="relu"),
        layers.Dropout(0.2),
        layers.Dense(10, activation="softmax", dtype="float32"),
    ])


def synthetic_batch(np, model: str, batch_size: int, seed: int):
    rng = np.random.default_rng(seed)
    shape = (batch_size, 28, 28, 1) if model == "conv" else (batch_size, 784)
    x = rng.random(shape, dtype=np.float32)
    y = rng.integers(0, 10, size=(batch_size,)).astype(np.int32)
    return x, y


def steady_rate(batch_size: int, step_end_times: list[float], warmup_steps: int) -> dict:
    """Samples/s over the steps after the first step and the warm-up steps.

    step_end_times[i] is when step i finished (step 0 is the first step). The window
    starts when the last warm-up step finished, so it holds only timed steps.
    """
    start_index = warmup_steps  # index of the last warm-up step (step 0 is the first step)
    if len(step_end_times) < start_index + 2:
        raise ValueError("not enough steps after the warm-up to time the steady state")
    start, end = step_end_times[start_index], step_end_times[-1]
    steps = len(step_end_times) - 1 - start_index
    seconds = end - start
    if seconds <= 0:
        raise ValueError("timed window has no duration")
    return {"timed_steps": steps, "timed_seconds": seconds, "samples_per_second": steps * batch_size / seconds}


def step_clock(keras, total_steps_cap: int, min_timed: int, warmup: int, time_box: float):
    """A callback that records when each step ended (after syncing on the loss) and
    stops training once the timed part has run `min_timed` steps and `time_box` seconds."""

    class Clock(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.ends: list[float] = []
            self.wall_ends: list[float] = []

        def on_train_batch_end(self, batch, logs=None):
            loss = (logs or {}).get("loss")
            if loss is not None:
                float(loss)  # wait for the step to finish on the device
            self.ends.append(time.perf_counter())
            self.wall_ends.append(time.time())
            timed = len(self.ends) - 1 - warmup
            if timed >= min_timed and self.ends[-1] - self.ends[warmup] >= time_box:
                self.model.stop_training = True
            if len(self.ends) >= total_steps_cap:
                self.model.stop_training = True

    return Clock()


def measure(backend, fw, keras, np, args, model_name: str, batch_size: int, jit: str, precision: str,
            device: str) -> dict:
    record = {"model": model_name, "batch_size": batch_size, "jit": jit, "precision": precision,
              "policy": POLICY[precision]}
    keras.backend.clear_session()
    gc.collect()
    keras.mixed_precision.set_global_policy(POLICY[precision])
    keras.utils.set_random_seed(args.seed)
    x, y = synthetic_batch(np, model_name, batch_size, args.seed)
    total_cap = 1 + args.warmup_steps + args.max_steps
    dataset = backend.bench_batches(fw, keras, x, y, total_cap)
    clock = step_clock(keras, total_cap, args.min_steps, args.warmup_steps, args.time_box)
    started = time.perf_counter()
    with backend.bench_device_scope(fw, keras, device):
        model = build_model(keras, model_name)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                      loss="sparse_categorical_crossentropy", jit_compile=(jit == "on"))
        model.fit(dataset, epochs=1, steps_per_epoch=total_cap, verbose=0, callbacks=[clock], shuffle=False)
    ends = clock.ends
    record["time_to_first_step_s"] = ends[0] - started
    record.update(steady_rate(batch_size, ends, args.warmup_steps))
    start_index = args.warmup_steps
    record["window"] = [clock.wall_ends[start_index], clock.wall_ends[-1]]
    record["status"] = "ok"
    del model
    return record


def failure_reason(backend, fw, exc: BaseException) -> tuple[str, str]:
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, MemoryError) or backend.is_oom(fw, exc) or "OOM" in text:
        return "oom", f"out of memory: {text}"
    return "error", f"{type(exc).__name__}: {text}"
