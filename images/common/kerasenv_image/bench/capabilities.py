"""Which precisions and XLA settings the device can run, decided before TensorFlow is
imported (pure functions, unit-tested on the host)."""

from __future__ import annotations

from ..blackwell import is_blackwell
from .protocol import PRECISIONS


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


# On Blackwell XLA aborts the whole process (kerasenv_image.blackwell says why), which would
# lose every row measured so far: its XLA rows are skipped with the reason.
def xla_skipped(jit_list: list[str], device: str, compute_capability: str | None,
                backend: str = "tensorflow", c_compiler: str | None = None) -> dict[str, str]:
    """{"on": why} when XLA cannot run on this GPU, else {}. The Blackwell rule is
    TensorFlow's XLA; JAX's XLA emits PTX for Blackwell, and PyTorch's jit is torch.compile."""
    if backend == "torch" and "on" in jit_list and not c_compiler:
        return {"on": "jit on PyTorch is torch.compile, which needs a C compiler (for Inductor's CPU code and "
                      "Triton's launcher), and this image has none"}
    if backend != "tensorflow" or device != "gpu" or "on" not in jit_list or not compute_capability:
        return {}
    if is_blackwell(compute_capability):
        return {"on": f"compute capability {compute_capability} is Blackwell: this TensorFlow's XLA cannot "
                      "emit PTX for it and aborts the process (tensorflow/tensorflow#111958)"}
    return {}
