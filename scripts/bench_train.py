#!/usr/bin/env python3
"""kerasenv bench: training throughput of two small Keras models on this container's device.

`kerasenv bench` mounts this file read-only at /opt/kerasenv-bench/bench_train.py (no
image rebuild) and runs one container per device: the CPU (no GPU given to the
container) and each GPU on its own (`--gpus device=N`). Runs on Keras 3 and tf.keras 2.

For every configuration (model x batch size x XLA jit x precision) it measures, with
synthetic data already in memory (one batch, repeated: no input pipeline in the figure):

- time to first step: model build + compile + the first training step (tracing, XLA
  compilation, cuDNN autotuning);
- steady-state samples/s: after `--warmup-steps` more steps, at least `--min-steps`
  timed steps and then until `--time-box` seconds have passed (or `--max-steps`);
- the wall-clock window (epoch seconds) of those timed steps, so the host can attribute
  GPU utilisation samples to the steady state only.

A configuration that fails (out of memory at a large batch, a precision the device
cannot run) is recorded with its reason; the others still run.

Output: progress lines on stderr; the results as ONE JSON line on stdout, prefixed with
`KERASENV_BENCH_RESULT ` (TensorFlow never writes that). Exit codes: 0 every
configuration ran (failed ones included), 2 bad usage, 3 `--device gpu` but TensorFlow
sees no GPU, 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import signal
import sys
import time

RESULT_PREFIX = "KERASENV_BENCH_RESULT "
SCHEMA = 1
EXIT_OK, EXIT_USAGE, EXIT_NO_GPU = 0, 2, 3
MODELS = ("conv", "mlp")
JIT_CHOICES = ("off", "on")
PRECISIONS = ("off", "float16", "bfloat16")
# Keras dtype policy for each precision choice.
POLICY = {"off": "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}
MODEL_INFO = {
    "conv": "Keras MNIST conv net (keras.io/examples/vision/mnist_convnet): 28x28x1, Conv2D 32 + 64, "
            "max-pool, dropout, softmax 10; 34,826 parameters",
    "mlp": "MNIST MLP (Keras mnist_mlp example): 784 -> Dense 512 -> Dense 512 -> softmax 10, dropout 0.2; "
           "669,706 parameters",
}


class Interrupted(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"interrupted (exit {code})")
        self.code = code


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --- pure helpers (unit-tested on the host without TensorFlow) ------------------------

def parse_cc(cc) -> tuple[int, int] | None:
    """'8.6' or (8, 6) -> (8, 6); None or garbage -> None."""
    if cc is None:
        return None
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    parts = str(cc).strip().split(".")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of native bfloat16 math


def cpu_bf16_flags(cpuinfo: str) -> list[str]:
    """The native-bfloat16 flags among the CPU's flags in /proc/cpuinfo text."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
    return [f for f in CPU_BF16_FLAGS if f in flags]


def read_cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            return handle.read()
    except OSError:
        return ""


def supported_precisions(device: str, compute_capability=None) -> dict[str, str | None]:
    """For each precision: None when the device can run it as mixed precision, else why not.

    NVIDIA: float16 needs tensor cores (compute capability >= 7.0, Volta); bfloat16 needs
    >= 8.0 (Ampere). CPU: bfloat16 runs (oneDNN; fast only with AVX512-BF16/AMX), float16
    is not a mixed-precision speedup path on CPUs.
    """
    if device == "cpu":
        return {"off": None, "bfloat16": None,
                "float16": "float16 is a GPU mixed-precision path; on CPUs use bfloat16"}
    cc = parse_cc(compute_capability)
    if cc is None:
        return {"off": None, "float16": "compute capability unknown", "bfloat16": "compute capability unknown"}
    shown = f"{cc[0]}.{cc[1]}"
    return {"off": None,
            "float16": None if cc >= (7, 0) else f"needs compute capability >= 7.0 (tensor cores); this GPU has {shown}",
            "bfloat16": None if cc >= (8, 0) else f"needs compute capability >= 8.0 (Ampere); this GPU has {shown}"}


def choose_precisions(requested: list[str] | str, device: str, compute_capability=None,
                      cpu_bf16: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(precisions to measure, {precision: reason skipped}).

    "auto": off always; on an NVIDIA GPU float16 when compute capability >= 7.0 and
    bfloat16 when >= 8.0; on the CPU bfloat16 only where it has native bfloat16 math
    (`cpu_bf16`: AMX-BF16 / AVX512-BF16 flags), since elsewhere it is emulated and slower
    than float32 (ask for it explicitly to see by how much). Choices the device cannot
    run, or that auto leaves out, are listed with the reason, never silently dropped.
    """
    support = supported_precisions(device, compute_capability)
    if requested == "auto" or requested == ["auto"]:
        if device == "cpu":
            if cpu_bf16:
                return ["off", "bfloat16"], {"float16": support["float16"]}
            return ["off"], {"bfloat16": "this CPU has no native bfloat16 math (no AMX-BF16 or AVX512-BF16 "
                                         "flag), so it would be emulated and slower than float32; "
                                         "--precision off,bfloat16 measures it anyway"}
        chosen = [p for p in PRECISIONS if support[p] is None]
        return chosen, {p: support[p] for p in PRECISIONS if support[p] is not None}
    chosen, skipped = [], {}
    for p in requested:
        if p not in PRECISIONS:
            raise ValueError(f"unknown precision {p!r} (use {', '.join(PRECISIONS)} or auto)")
        if support[p] is None:
            if p not in chosen:
                chosen.append(p)
        else:
            skipped[p] = support[p]
    return chosen, skipped


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


def parse_list(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if not items or bad:
        raise ValueError(f"{what} {text!r}: use a comma-separated list of {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def parse_batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(s < 1 or s > 65536 for s in sizes):
        raise ValueError(f"batch sizes {text!r}: use a comma-separated list of integers from 1 to 65536")
    return sorted(set(sizes))


# --- TensorFlow side ---------------------------------------------------------------

def import_stack():
    import tensorflow as tf

    if tuple(int(p) for p in tf.__version__.split(".")[:2]) >= (2, 16):
        import keras  # Keras 3
    else:
        keras = tf.keras  # Keras 2 on TF 2.14/2.15
    return tf, keras


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


def measure(tf, keras, np, args, model_name: str, batch_size: int, jit: str, precision: str, device: str) -> dict:
    record = {"model": model_name, "batch_size": batch_size, "jit": jit, "precision": precision,
              "policy": POLICY[precision]}
    keras.backend.clear_session()
    gc.collect()
    keras.mixed_precision.set_global_policy(POLICY[precision])
    keras.utils.set_random_seed(args.seed)
    x, y = synthetic_batch(np, model_name, batch_size, args.seed)
    total_cap = 1 + args.warmup_steps + args.max_steps
    dataset = tf.data.Dataset.from_tensors((x, y)).repeat()
    clock = step_clock(keras, total_cap, args.min_steps, args.warmup_steps, args.time_box)
    tf_device = "/GPU:0" if device == "gpu" else "/CPU:0"
    started = time.perf_counter()
    with tf.device(tf_device):
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


def failure_reason(tf, exc: BaseException) -> tuple[str, str]:
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, (tf.errors.ResourceExhaustedError, MemoryError)) or "OOM" in text:
        return "oom", f"out of memory: {text}"
    return "error", f"{type(exc).__name__}: {text}"


def device_info(tf, device: str) -> dict:
    if device == "cpu":
        return {"kind": "cpu", "name": platform.processor() or cpu_model(), "tf_device": "/CPU:0"}
    gpu = tf.config.list_physical_devices("GPU")[0]
    details = tf.config.experimental.get_device_details(gpu)
    cc = details.get("compute_capability")
    return {"kind": "gpu", "name": details.get("device_name"), "tf_device": "/GPU:0",
            "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None}


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench_train.py", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                   help="what to measure; auto: the GPU when TensorFlow sees one, else the CPU")
    p.add_argument("--models", default="conv,mlp")
    p.add_argument("--batch-sizes", default="32,128,512,1024")
    p.add_argument("--jit", default="off,on", help="XLA jit_compile settings to measure: off,on")
    p.add_argument("--precision", default="auto", help="auto, or a list of off,float16,bfloat16")
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--min-steps", type=int, default=5, help="timed steps at least")
    p.add_argument("--max-steps", type=int, default=2000, help="timed steps at most")
    p.add_argument("--time-box", type=float, default=1.5, help="seconds of timed steady state per configuration")
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args(argv)
    try:
        args.model_list = parse_list(args.models, MODELS, "models")
        args.batch_list = parse_batch_sizes(args.batch_sizes)
        args.jit_list = parse_list(args.jit, JIT_CHOICES, "jit")
        args.precision_list = "auto" if args.precision.strip() == "auto" else parse_list(
            args.precision, PRECISIONS, "precision")
    except ValueError as exc:
        p.error(str(exc))
    if args.warmup_steps < 1 or args.min_steps < 2 or args.max_steps < args.min_steps:
        p.error("need --warmup-steps >= 1, --min-steps >= 2 and --max-steps >= --min-steps")
    if not math.isfinite(args.time_box) or args.time_box < 0:
        p.error("--time-box must be a number of seconds >= 0")
    return args


def _on_signal(signum, frame):
    raise Interrupted(143 if signum == signal.SIGTERM else 130)


# Blackwell (compute capability 10.x-12.x): XLA aborts the whole process there ("LLVM ERROR:
# PTX version 8.5 does not support target 'sm_120'", tensorflow/tensorflow#111958), which
# would lose every row measured so far; src/kerasenv/host/blackwell.py has the facts.
BLACKWELL_MAJORS = (10, 11, 12)


def xla_skipped(jit_list: list[str], device: str, compute_capability: str | None) -> dict[str, str]:
    """{"on": why} when XLA cannot run on this GPU, else {}."""
    if device != "gpu" or "on" not in jit_list or not compute_capability:
        return {}
    if int(str(compute_capability).split(".")[0]) in BLACKWELL_MAJORS:
        return {"on": f"compute capability {compute_capability} is Blackwell: this TensorFlow's XLA cannot "
                      "emit PTX for it and aborts the process (tensorflow/tensorflow#111958)"}
    return {}


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    log("importing TensorFlow")
    tf, keras = import_stack()
    import numpy as np

    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)  # an OOM is per configuration, not up front
    device = args.device if args.device != "auto" else ("gpu" if gpus else "cpu")
    out = {"schema": SCHEMA, "kind": "kerasenv-bench-container",
           "versions": {"tensorflow": tf.__version__,
                        # tf.keras 2 has no __version__: the `keras` distribution it is
                        "keras": getattr(keras, "__version__", None) or __import__("importlib.metadata").metadata.version("keras"),
                        "python": platform.python_version(), "numpy": np.__version__},
           "image": {"variant": os.environ.get("KERASENV_VARIANT"), "family": os.environ.get("KERASENV_FAMILY")},
           "container": {"cpu_count": os.cpu_count(), "cpu_model": cpu_model()},
           "models": {m: MODEL_INFO[m] for m in args.model_list},
           "settings": {"models": args.model_list, "batch_sizes": args.batch_list, "jit": args.jit_list,
                        "precision_requested": args.precision_list, "warmup_steps": args.warmup_steps,
                        "min_steps": args.min_steps, "max_steps": args.max_steps, "time_box_s": args.time_box,
                        "data": "synthetic, one in-memory batch repeated (no input pipeline)",
                        "optimizer": "Adam(1e-3)", "loss": "sparse_categorical_crossentropy"},
           "results": []}
    if device == "gpu" and not gpus:
        out["error"] = "--device gpu: TensorFlow sees no GPU in this container"
        print(RESULT_PREFIX + json.dumps(out), flush=True)
        log(out["error"])
        return EXIT_NO_GPU
    out["device"] = device_info(tf, device)
    precisions, skipped = choose_precisions(args.precision_list, device, out["device"].get("compute_capability"),
                                            cpu_bf16=cpu_bf16_flags(read_cpuinfo()) if device == "cpu" else None)
    out["settings"]["precisions"] = precisions
    out["settings"]["precisions_skipped"] = skipped
    for p, reason in skipped.items():
        log(f"precision {p} skipped: {reason}")
    jit_skipped = xla_skipped(args.jit_list, device, out["device"].get("compute_capability"))
    out["settings"]["jit_skipped"] = jit_skipped
    for jit, reason in jit_skipped.items():
        log(f"jit {jit} skipped: {reason}")
    code = EXIT_OK
    try:
        for model_name in args.model_list:
            for precision in precisions:
                for jit in [j for j in args.jit_list if j not in jit_skipped]:
                    for batch_size in args.batch_list:
                        label = f"{device} {model_name} batch {batch_size} jit {jit} precision {precision}"
                        try:
                            record = measure(tf, keras, np, args, model_name, batch_size, jit, precision, device)
                            log(f"{label}: {record['samples_per_second']:.0f} samples/s, first step "
                                f"{record['time_to_first_step_s']:.2f} s ({record['timed_steps']} timed steps)")
                        except Interrupted:
                            raise
                        except Exception as exc:  # noqa: BLE001 - one failed configuration is a result
                            kind, reason = failure_reason(tf, exc)
                            record = {"model": model_name, "batch_size": batch_size, "jit": jit,
                                      "precision": precision, "policy": POLICY[precision], "status": "failed",
                                      "failure": kind, "reason": reason}
                            log(f"{label}: FAILED ({reason})")
                        out["results"].append(record)
    except Interrupted as exc:
        out["interrupted"] = True
        code = exc.code
    finally:
        keras.mixed_precision.set_global_policy("float32")
    out["wall_seconds"] = time.perf_counter() - started
    print(RESULT_PREFIX + json.dumps(out, allow_nan=False), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
