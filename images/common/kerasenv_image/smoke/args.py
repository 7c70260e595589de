"""Command-line arguments (each also an environment variable, for `docker run -e`)."""

from __future__ import annotations

import argparse
import math
import os
import uuid
from datetime import datetime, timezone


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
                   help="comma-separated GPU indexes to train on (in-process: tf.config.set_visible_devices on TensorFlow)")
    p.add_argument("--require-gpu", action="store_true",
                   default=env.get("KERASENV_REQUIRE_GPU", "") in ("1", "true", "yes"),
                   help="exit 3 unless the framework (TensorFlow, JAX, PyTorch) sees a GPU")
    p.add_argument("--jit-compile", choices=("auto", "on", "off"), default=env.get("KERASENV_JIT_COMPILE", "auto"),
                   help="XLA for the train step; auto: the Keras default (XLA where supported on Keras 3)")
    p.add_argument("--steps-per-epoch", type=int, default=_env_int("KERASENV_STEPS_PER_EPOCH", 32),
                   help="optimizer steps per epoch, whatever the batch size and replica count "
                        "(the data set repeats; default 32)")
    p.add_argument("--logical-cpus", type=int, default=_env_int("KERASENV_LOGICAL_CPUS", 0), metavar="N",
                   help="without GPUs: split the CPU into N logical devices and train N replicas "
                        "(TensorFlow, JAX; not PyTorch)")
    p.add_argument("--seed", type=int, default=_env_int("KERASENV_SEED", 1234))
    p.add_argument("--run-id", default=env.get("KERASENV_RUN_ID", ""),
                   help="name of the run directory; the same id resumes an interrupted run")
    p.add_argument("--output-dir", default=env.get("KERASENV_OUTPUT_DIR", ""),
                   help="default: /workspace/runs/<run-id>")
    p.add_argument("--json", action="store_true", help="print the JSON report on stdout")
    p.add_argument("--verbose", action="store_true",
                   default=env.get("KERASENV_VERBOSE", "") in ("1", "true", "yes"),
                   help="show TensorFlow's whole C++ log; by default its known start-up noise "
                        "(log_filter.py) is hidden from the terminal (never from the report)")
    p.add_argument("--profile", action="store_true",
                   default=env.get("KERASENV_PROFILE", "") in ("1", "true", "yes"),
                   help="capture 6 steady-state steps with the framework's profiler (TensorBoard's Profile tab on "
                        "TensorFlow and JAX, a Chrome trace on PyTorch) and report how long each step waited "
                        "for its input")
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "samples", "steps_per_epoch"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.samples < args.batch_size:
        p.error("--samples must be at least --batch-size")
    if args.logical_cpus < 0:
        p.error("--logical-cpus must be >= 0")
    if args.memory_limit < 0:
        p.error("--memory-limit must be >= 0")
    if not math.isfinite(args.learning_rate) or args.learning_rate <= 0:
        p.error("--learning-rate must be a positive number")
    try:
        args.visible_gpu_indexes = [int(i) for i in args.visible_gpus.split(",") if i.strip()]
    except ValueError:
        p.error(f"--visible-gpus must be indexes like 0 or 0,1, not {args.visible_gpus!r}")
    if args.profile:
        from ..profiling import steady_steps

        try:
            args.profile_steps = steady_steps(args.steps_per_epoch, args.epochs)
        except ValueError as exc:
            p.error(f"--profile: {exc}")
    else:
        args.profile_steps = None
    if not args.run_id:
        args.run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    # Given (--output-dir, KERASENV_OUTPUT_DIR): used as is. The default may move where the
    # runtime keeps /workspace/runs read-only (Apptainer: report.default_output_dir).
    args.output_dir_given = bool(args.output_dir)
    if not args.output_dir:
        args.output_dir = os.path.join("/workspace/runs", args.run_id)
    return args
