"""Mixed precision and XLA: what this host's GPUs can take."""

from __future__ import annotations

from ..blackwell import is_blackwell
from .environment import keras_version


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


def jit_compile_arg(choice: str, keras, gpus: list[dict]):
    """(value for Model.compile, the effective setting, why it was changed or None)."""
    if choice == "auto":
        blocker = xla_blocker(gpus)
        if blocker:
            return False, "off", blocker + "; jit_compile turned off (pass --jit-compile on to force it)"
        return ("auto" if keras_version(keras).startswith("3.") else None), "auto", None
    return choice == "on", choice, None
