"""Derive every generated file from the matrix, and detect drift.

Generated: images/<id>/Dockerfile, images/<id>/jupyter.Dockerfile (the JupyterLab flavour),
images/<id>/build-ca.md, images/.dockerignore
(images/ is the one build context of every image) and the README variant table. Checked (not generated, since `kerasenv lock` needs the network):
that every lock file agrees with the matrix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..matrix import labels as labels_mod
from . import locks
from ..matrix import table
from ..matrix.schema import IN_IMAGE_DIR, JUPYTER_DOCKERFILE, Matrix, Variant

# What variant folders held before images/ became one build context: a leftover is drift.
_LEFTOVERS = (".dockerignore", "smoke_train.py")
_SECTION_RE = re.compile(r"\{\{#(\w+)\}\}\n(.*?)\{\{/\1\}\}\n", re.S)
_PLACEHOLDER_RE = re.compile(r"\{\{(\w+)\}\}")


def _template(name: str) -> str:
    return resources.files("kerasenv").joinpath("templates", name).read_text(encoding="utf-8")


def render(template: str, values: dict[str, str], sections: dict[str, bool]) -> str:
    def section(match: re.Match[str]) -> str:
        return match.group(2) if sections[match.group(1)] else ""

    text = _SECTION_RE.sub(section, template)

    def placeholder(match: re.Match[str]) -> str:
        return values[match.group(1)]

    text = _PLACEHOLDER_RE.sub(placeholder, text)
    return re.sub(r"\n{3,}", "\n\n", text)


def _label_block(matrix: Matrix, v: Variant) -> str:
    pairs = [(k, _quote(val)) for k, val in labels_mod.static_labels(matrix, v).items()]
    pairs += [(k, f'"{val}"') for k, val in labels_mod.DYNAMIC_LABELS.items()]
    return " \\\n      ".join(f"{k}={val}" for k, val in pairs)


def _quote(value: str) -> str:
    # Label values are literal: escape what Dockerfile double quotes interpret.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def dockerfile(matrix: Matrix, v: Variant) -> str:
    values = {
        "id": v.id,
        "family": v.family,
        "tensorflow": v.tensorflow,
        "keras": v.keras,
        "python": v.python,
        "python_re": v.python.replace(".", r"\."),
        "cuda_re": (v.cuda or "").replace(".", r"\."),
        "tensorflow_re": v.tensorflow.replace(".", r"\."),
        "base_image": v.base_image,
        "rocm": v.rocm or "",
        "cuda_summary": f", CUDA {v.cuda}, cuDNN {v.cudnn}, NCCL {v.nccl}" if v.family == "cuda" else "",
        "labels": _label_block(matrix, v),
    }
    name = "rocm.Dockerfile.in" if v.family == "rocm" else "debian.Dockerfile.in"
    return render(_template(name), values, {"cuda": v.family == "cuda"})


def jupyter_dockerfile(matrix: Matrix, v: Variant) -> str:
    lab = matrix.jupyter.jupyterlab
    return render(_template("jupyter.Dockerfile.in"),
                  {"id": v.id, "jupyterlab": lab, "jupyterlab_re": lab.replace(".", r"\.")}, {})


def expected_files(matrix: Matrix, root: Path) -> dict[Path, str]:
    files: dict[Path, str] = {}
    files[root / "images" / ".dockerignore"] = _template("dockerignore.in")
    for v in matrix.variants:
        folder = root / "images" / v.id
        files[folder / "Dockerfile"] = dockerfile(matrix, v)
        files[folder / "build-ca.md"] = _template("build-ca.md.in")
    for v in matrix.with_jupyter():
        files[root / "images" / v.id / JUPYTER_DOCKERFILE] = jupyter_dockerfile(matrix, v)
    readme = root / "README.md"
    if readme.exists():
        files[readme] = table.replace_in_readme(readme.read_text(encoding="utf-8"), matrix)
    return files


@dataclass
class Drift:
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def write(matrix: Matrix, root: Path) -> list[Path]:
    """Write every generated file that differs; returns the paths written."""
    written = []
    for path, content in expected_files(matrix, root).items():
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(content, encoding="utf-8")
            tmp.replace(path)  # atomic: never a half-written Dockerfile
            written.append(path)
    return written


def check(matrix: Matrix, root: Path) -> list[Drift]:
    """Everything that differs from what the matrix produces (empty: no drift)."""
    drift = []
    for path, content in expected_files(matrix, root).items():
        if not path.exists():
            drift.append(Drift(path, "missing; run `make generate`"))
        elif path.read_text(encoding="utf-8") != content:
            drift.append(Drift(path, "differs from what the matrix produces; run `make generate`"))
    readme = root / "README.md"
    if readme.exists() and table.BEGIN not in readme.read_text(encoding="utf-8"):
        drift.append(Drift(readme, f"has no variant table markers ({table.BEGIN})"))
    known = {v.id for v in matrix.variants}
    for folder in sorted((root / "images").iterdir()):
        if folder.is_dir() and folder.name not in known and folder.name != IN_IMAGE_DIR:
            drift.append(Drift(folder, "folder of a variant that is not in the matrix; remove it"))
        for name in _LEFTOVERS if folder.name in known else ():
            if (folder / name).exists():
                drift.append(Drift(folder / name, "left over from per-variant build contexts; remove it "
                                                  f"(the in-image code is images/{IN_IMAGE_DIR}/)"))
    for v in matrix.variants:
        drift.extend(Drift(p, r) for p, r in locks.check_variant(v, root / "images" / v.id))
    for v in matrix.with_jupyter():
        drift.extend(Drift(p, r) for p, r in locks.check_jupyter(v, root / "images" / v.id,
                                                                  matrix.jupyter.jupyterlab))
    return drift
