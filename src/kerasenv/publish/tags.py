"""Image tags, derived from the matrix.

- `<registry>/kerasenv:<id>`, e.g. `tf2.21-cuda12.9`: what users type;
- a full tag carrying every pinned version, e.g. `tf2.21.0-keras3.15.1-cuda12.5-cudnn9.3-py3.11`:
  never moves to other contents;
- floating `latest-gpu` / `latest-cpu` / `latest-rocm` on the matrix's default variants;
- the full tag with the date of the Debian updates the image carries (its io.kerasenv.
  debian-updates label, security/debian.py), e.g. `...-py3.11-20261201`: written once and never
  moved, so when a security rebuild moves the short and full tags to a new image (the weekly
  workflow, .github/workflows/security.yml), the old digest stays reachable by a tag.
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


def dated_tag(v: Variant, labels: dict | None) -> str | None:
    """The full tag dated by the newest Debian archive date in the image's label; None without one."""
    from ..security import debian

    state = debian.parse_label((labels or {}).get(debian.LABEL, ""))
    return f"{full_tag(v)}-{state.newest[:10].replace('-', '')}" if state else None


def tags(matrix: Matrix, v: Variant, labels: dict | None = None) -> list[str]:
    """Every tag of the variant; `labels`: the built image's, for the dated full tag."""
    result = [v.id, full_tag(v)]
    dated = dated_tag(v, labels)
    if dated:
        result.append(dated)
    result += [tag for key, tag in _FLOATING.items() if getattr(matrix, key) == v.id]
    return result


def repository(registry: str) -> str:
    registry = registry.rstrip("/")
    return f"{registry}/{REPOSITORY}" if registry else REPOSITORY
