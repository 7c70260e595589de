"""The bench's command line."""

from __future__ import annotations

import argparse
import math

from .protocol import JIT_CHOICES, MODELS, PRECISIONS


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


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m kerasenv_image.bench",
                                description="training throughput of two small Keras models on this container's device")
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
