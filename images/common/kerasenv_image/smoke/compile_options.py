"""Mixed precision: what this host's GPUs can take (XLA: each backend's jit_compile())."""

from __future__ import annotations


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
