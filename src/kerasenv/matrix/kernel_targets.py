"""The GPU code a CUDA variant's image really carries, as recorded from its binaries.

images/<id>/kernel-targets.json is the parse of the built image's fat binaries
(kerasenv_image.probes.kernel_targets, written by `kerasenv kernel-targets ID --write`):
the framework's SASS and PTX targets and each NVIDIA library's. It replaces the hand-kept
compute capability lists where they disagree with the binaries (TF 2.21 carries SASS sm_90,
which TF's .bazelrc list, tested_builds._CC_2_17, does not name), and the doctor judges
each GPU against it. A variant without the file (a new one, not built yet) has none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import MatrixError

RECORD_NAME = "kernel-targets.json"
RECORD_HOW = "`kerasenv kernel-targets {id} --write` (needs the built image kerasenv:{id})"
_TARGET_RE = re.compile(r"^(sm|compute)_\d{2,3}[a-z]?$")


@dataclass(frozen=True)
class KernelTargets:
    framework: str  # "tensorflow" | "jax" | "torch": the package whose libraries were read
    version: str
    sass: tuple[str, ...]  # "sm_90", "sm_90a", ...: native code
    ptx: tuple[str, ...]  # "compute_90", ...: code the driver JIT-compiles
    # (name, sass, ptx) per NVIDIA library with GPU code; a tuple, so a Variant stays hashable
    libraries: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    tool_version: int = 0

    def library(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """(sass, ptx) of the NVIDIA library `name` (e.g. "cudnn"), None when not recorded."""
        return next(((sass, ptx) for lib, sass, ptx in self.libraries if lib == name), None)

    @property
    def all(self) -> tuple[str, ...]:
        return self.sass + self.ptx


def record_path(images_dir: Path, variant_id: str, arch: str = "amd64") -> Path:
    """images/<id>/kernel-targets.json (amd64), kernel-targets-arm64.json (the arm64 image's
    binaries, which are other files: PyTorch's aarch64 wheel is built for other targets)."""
    name = RECORD_NAME if arch == "amd64" else RECORD_NAME.replace(".json", f"-{arch}.json")
    return images_dir / variant_id / name


def load(images_dir: Path, variant_id: str, arch: str = "amd64") -> KernelTargets | None:
    """The recorded kernel targets of a variant, None when not recorded; a malformed file is
    a MatrixError naming the file and how to re-record it."""
    path = record_path(images_dir, variant_id, arch)
    if not path.exists():
        return None
    fix = RECORD_HOW.format(id=variant_id) + ("" if arch == "amd64" else f" --platform linux/{arch}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return from_record(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise MatrixError(f"{path}: not a kernel-targets record ({exc}); re-record it with {fix}") from None


def _targets(values, prefix: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) and _TARGET_RE.match(v) and
                                               v.startswith(prefix + "_") for v in values):
        raise ValueError(f"expected a list of {prefix}_XY targets, got {values!r}")
    return tuple(values)


def from_record(raw: Mapping) -> KernelTargets:
    framework = raw["framework"]
    libraries = tuple((str(name), _targets(lib["sass"], "sm"), _targets(lib["ptx"], "compute"))
                      for name, lib in sorted(raw["libraries"].items()))
    return KernelTargets(framework=str(framework["name"]), version=str(framework["version"]),
                         sass=_targets(framework["sass"], "sm"), ptx=_targets(framework["ptx"], "compute"),
                         libraries=libraries, tool_version=int(raw["tool_version"]))


def from_compute_capabilities(framework: str, version: str, targets: tuple[str, ...]) -> KernelTargets:
    """A hand-kept list (tested_builds) in the same shape, for a variant not recorded yet."""
    return KernelTargets(framework=framework, version=version,
                         sass=tuple(t for t in targets if t.startswith("sm_")),
                         ptx=tuple(t for t in targets if t.startswith("compute_")))
