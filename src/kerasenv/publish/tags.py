"""Image tags, derived from the matrix.

- `<registry>/kerasenv:<id>`, e.g. `tf2.21-cuda12.9`: what users type;
- a full tag carrying every pinned version, e.g. `tf2.21.0-keras3.15.1-cuda12.5-cudnn9.3-py3.11`:
  never moves to other contents;
- floating `latest-gpu` / `latest-cpu` / `latest-rocm` on the matrix's default variants.
Pull by digest (`<registry>/kerasenv@sha256:...`, printed by `kerasenv push`) to pin exactly.
"""

from __future__ import annotations

from ..matrix.schema import Matrix, Variant

REPOSITORY = "kerasenv"
_FLOATING = {"default_gpu": "latest-gpu", "default_cpu": "latest-cpu", "default_rocm": "latest-rocm"}


def full_tag(v: Variant) -> str:
    prefix = {"tensorflow": "tf"}.get(v.backend, v.backend)
    parts = [f"{prefix}{v.framework_version}", f"keras{v.keras}" + (".x" if v.family == "rocm" else "")]
    if v.family == "cuda":
        parts += [f"cuda{v.cuda}", "cudnn" + ".".join((v.cudnn or "").split(".")[:2])]
    elif v.family == "rocm":
        parts.append(f"rocm{v.rocm}")
    else:
        parts.append("cpu")
    parts.append(f"py{v.python}")
    return "-".join(parts)


def tags(matrix: Matrix, v: Variant) -> list[str]:
    result = [v.id, full_tag(v)]
    result += [tag for key, tag in _FLOATING.items() if getattr(matrix, key) == v.id]
    return result


def repository(registry: str) -> str:
    registry = registry.rstrip("/")
    return f"{registry}/{REPOSITORY}" if registry else REPOSITORY
