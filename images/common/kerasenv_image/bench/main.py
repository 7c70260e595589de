"""The bench run: every configuration on this container's device, one JSON result line."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import sys
import time

from .args import parse_args
from .capabilities import choose_precisions, cpu_bf16_flags, read_cpuinfo, xla_skipped
from .. import backends
from .measure import MODEL_INFO, POLICY, failure_reason, measure
from .protocol import EXIT_NO_GPU, EXIT_OK, EXIT_USAGE, RESULT_PREFIX, SCHEMA


class Interrupted(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"interrupted (exit {code})")
        self.code = code


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def device_info(backend, fw, device: str, gpus: list) -> dict:
    name = backend.bench_device_name(device)
    # tf_device: the key the host has always read on TensorFlow; framework_device on every backend.
    named = {"tf_device": name} if backend.NAME == "tensorflow" else {}
    if device == "cpu":
        return {"kind": "cpu", "name": platform.processor() or cpu_model(), **named, "framework_device": name}
    return {"kind": "gpu", **backend.bench_gpu_details(fw, gpus), **named, "framework_device": name}


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _on_signal(signum, frame):
    raise Interrupted(143 if signum == signal.SIGTERM else 130)


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        backend = backends.current()
    except backends.UnknownBackend as exc:
        log(f"error: {exc}")
        return EXIT_USAGE
    if backend.NAME == "jax":
        # JAX would take 75 % of the GPU at start-up: allocate per configuration, as TF's memory growth.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    log(f"importing {backend.DISPLAY}")
    fw, keras = backend.import_stack()
    import numpy as np

    gpus = backend.bench_gpus(fw)  # TensorFlow: memory growth on, an OOM is per configuration
    device = args.device if args.device != "auto" else ("gpu" if gpus else "cpu")
    out = {"schema": SCHEMA, "kind": "kerasenv-bench-container",
           "versions": {**backend.versions(fw, keras), "backend": backend.NAME,
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
        out["error"] = f"--device gpu: {backend.DISPLAY} sees no GPU in this container"
        print(RESULT_PREFIX + json.dumps(out), flush=True)
        log(out["error"])
        return EXIT_NO_GPU
    out["device"] = device_info(backend, fw, device, gpus)
    precisions, skipped = choose_precisions(args.precision_list, device, out["device"].get("compute_capability"),
                                            cpu_bf16=cpu_bf16_flags(read_cpuinfo()) if device == "cpu" else None)
    out["settings"]["precisions"] = precisions
    out["settings"]["precisions_skipped"] = skipped
    for p, reason in skipped.items():
        log(f"precision {p} skipped: {reason}")
    jit_skipped = xla_skipped(args.jit_list, device, out["device"].get("compute_capability"), backend.NAME,
                              c_compiler=shutil.which("cc") or shutil.which("gcc"))
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
                            record = measure(backend, fw, keras, np, args, model_name, batch_size, jit, precision, device)
                            log(f"{label}: {record['samples_per_second']:.0f} samples/s, first step "
                                f"{record['time_to_first_step_s']:.2f} s ({record['timed_steps']} timed steps)")
                        except Interrupted:
                            raise
                        except Exception as exc:  # noqa: BLE001 - one failed configuration is a result
                            kind, reason = failure_reason(backend, fw, exc)
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

