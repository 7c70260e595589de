"""Derive every generated file from the matrix, and detect drift.

Generated from the templates in images/templates/: images/<id>/Dockerfile,
images/<id>/jupyter.Dockerfile (the JupyterLab flavour) and images/.dockerignore (images/ is the
one build context of every image), and the README variant table. The build steps' scripts and
the build-ca.md every build copies are plain files in images/build/. Checked (not generated,
since `kerasenv lock` needs the network): that every lock file agrees with the matrix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..matrix import labels as labels_mod
from . import locks
from ..matrix import table
from ..matrix.schema import (AMD64, ARM64, ARM64_DOCKERFILE, GLIBC_OF_SUITE, IN_IMAGE_DIR, JUPYTER_DOCKERFILE,
                             REPO_ROOT, Matrix, Variant)

# images/<TEMPLATES_DIR>/: what `kerasenv generate` renders (never part of a build context).
TEMPLATES_DIR = "templates"
# images/<BUILD_DIR>/: the scripts the build steps run and the build-ca.md every build copies.
BUILD_DIR = "build"
# What variant folders held before images/ became one build context and before one
# images/build/build-ca.md served every build: a leftover is drift. Name: where it went.
_LEFTOVERS = {
    ".dockerignore": "images/ is the one build context; its .dockerignore is images/.dockerignore",
    "smoke_train.py": f"the in-image code is images/{IN_IMAGE_DIR}/",
    "build-ca.md": f"one images/{BUILD_DIR}/build-ca.md anchors every build's optional CA",
}
_COPY_RE = re.compile(r"^COPY (?!--)(.+)$", re.M)


def _build_sources(dockerfile: str) -> set[str]:
    """The images/build/ files a Dockerfile's COPYs take from the context: every source of each
    COPY (`COPY build/a.sh build/b.sh /in/` names two), the last word being the destination."""
    return {word[len(BUILD_DIR) + 1:] for line in _COPY_RE.findall(dockerfile)
            for word in line.split()[:-1] if word.startswith(f"{BUILD_DIR}/")}
_SECTION_RE = re.compile(r"\{\{([#^])(\w+)\}\}\n(.*?)\{\{/\2\}\}\n", re.S)
_PLACEHOLDER_RE = re.compile(r"\{\{(\w+)\}\}")
_TEMPLATE_NOTE_RE = re.compile(r"^[ \t]*##.*\n", re.M)


def templates_dir(root: Path = REPO_ROOT) -> Path:
    return root / "images" / TEMPLATES_DIR


def _template(name: str, templates: Path) -> str:
    return (templates / name).read_text(encoding="utf-8")


def render(template: str, values: dict[str, str], sections: dict[str, bool]) -> str:
    """The template with its `{{#name}}...{{/name}}` sections kept where `name` is true (and
    `{{^name}}...{{/name}}` where it is false) or dropped, its `{{placeholders}}` filled in, and
    its `##` lines (the template's own notes on why each step is as it is) left out: a generated
    Dockerfile keeps only its `#` lines."""
    def section(match: re.Match[str]) -> str:
        keep = sections[match.group(2)] == (match.group(1) == "#")
        return match.group(3) if keep else ""

    template = _TEMPLATE_NOTE_RE.sub("", template)
    text = _SECTION_RE.sub(section, template)

    def placeholder(match: re.Match[str]) -> str:
        return values[match.group(1)]

    text = _PLACEHOLDER_RE.sub(placeholder, text)
    return re.sub(r"\n{3,}", "\n\n", text)


def _label_block(matrix: Matrix, v: Variant, arch: str = "amd64") -> str:
    pairs = [(k, _quote(val)) for k, val in labels_mod.static_labels(matrix, v, arch).items()]
    pairs += [(k, f'"{val}"') for k, val in labels_mod.dynamic_labels(v).items()]
    return " \\\n      ".join(f"{k}={val}" for k, val in pairs)


def _quote(value: str) -> str:
    # Label values are literal: escape what Dockerfile double quotes interpret.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def pip_platform_tags(v: Variant, machine: str = "aarch64") -> list[str]:
    """Every manylinux tag a wheel for the variant's Debian suite may carry, newest first: pip's
    --platform matches each tag exactly, and the locked aarch64 wheels carry many (_2_35, _2_28,
    _2_27, _2_25, _2_18, manylinux2014)."""
    suite = v.debian_suite
    if suite not in GLIBC_OF_SUITE:
        raise ValueError(f"{v.id}: no glibc version recorded for Debian {suite} (schema.GLIBC_OF_SUITE)")
    major, newest = GLIBC_OF_SUITE[suite]
    return [f"manylinux_{major}_{minor}_{machine}" for minor in range(newest, 16, -1)] + [f"manylinux2014_{machine}"]


def dockerfile(matrix: Matrix, v: Variant, templates: Path | None = None, platform: str = AMD64) -> str:
    """images/<id>/Dockerfile (linux/amd64, or the host's own platform), or with
    platform=linux/arm64 images/<id>/arm64.Dockerfile: the arm64 image cross-built on amd64."""
    cross = platform == ARM64
    values = {
        "id": v.id,
        "family": v.family,
        "tensorflow": v.tensorflow or "",
        "framework": f"{v.framework_name} {v.framework_version}",
        "framework_pin": f"{v.framework_package}=={v.framework_version}",
        "backend": v.backend,
        "keras": v.keras,
        "python": v.python,
        "python_re": v.python.replace(".", r"\."),
        "site_packages": f"/opt/venv/lib/python{v.python}/site-packages",
        "cuda": v.cuda or "",
        "base_image": v.base_image,
        "rocm": v.rocm or "",
        "cuda_summary": f", CUDA {v.cuda}, cuDNN {v.cudnn}, NCCL {v.nccl}" if v.family == "cuda" else "",
        "labels": _label_block(matrix, v, "arm64" if cross else "amd64"),
        "compiler_packages": " ".join(v.compiler_packages),
        "main_lock": locks.ARM64_LOCK if cross else locks.MAIN_LOCK,
        "pip_platforms": " ".join(pip_platform_tags(v)) if cross else "",
    }
    name = "rocm.Dockerfile.in" if v.family == "rocm" else "debian.Dockerfile.in"
    # XLA (TensorFlow, JAX) compiles with the nvcc wheel's ptxas and libdevice; PyTorch's
    # stack has no nvcc wheel (Triton brings its own ptxas).
    xla = v.family == "cuda" and any(n.startswith("nvidia-cuda-nvcc") for n in v.cuda_wheels())
    return render(_template(name, templates or templates_dir()), values,
                  {"cuda": v.family == "cuda", "xla": xla, "compiler": bool(v.compiler_packages), "cross": cross})


def jupyter_dockerfile(matrix: Matrix, v: Variant, templates: Path | None = None) -> str:
    lab = matrix.jupyter.jupyterlab
    return render(_template("jupyter.Dockerfile.in", templates or templates_dir()),
                  {"id": v.id, "jupyterlab": lab, "jupyterlab_re": lab.replace(".", r"\.")}, {})


def dockerignore(matrix: Matrix, templates: Path | None = None) -> str:
    """images/.dockerignore: the in-image code, the build scripts, and each variant's own files."""
    jupyter = set(matrix.with_jupyter())
    rules = []
    for v in matrix.variants:
        rules.append(f"!{v.id}/Dockerfile")
        if v.arm64:
            rules.append(f"!{v.id}/{ARM64_DOCKERFILE}")
        if v in jupyter:
            rules.append(f"!{v.id}/{JUPYTER_DOCKERFILE}")
        if v.family != "rocm":  # built FROM AMD's image: no locks, no pip, no CA
            rules += [f"!{v.id}/requirements*.lock", f"!{v.id}/build-ca.pem"]
    return render(_template("dockerignore.in", templates or templates_dir()),
                  {"variant_rules": "\n".join(rules)}, {})


def expected_files(matrix: Matrix, root: Path) -> dict[Path, str]:
    templates = templates_dir(root)
    files: dict[Path, str] = {}
    files[root / "images" / ".dockerignore"] = dockerignore(matrix, templates)
    for v in matrix.variants:
        files[root / "images" / v.id / "Dockerfile"] = dockerfile(matrix, v, templates)
        if v.arm64:
            files[root / "images" / v.id / ARM64_DOCKERFILE] = dockerfile(matrix, v, templates, ARM64)
    for v in matrix.with_jupyter():
        files[root / "images" / v.id / JUPYTER_DOCKERFILE] = jupyter_dockerfile(matrix, v, templates)
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
    expected = expected_files(matrix, root)
    for path, content in expected.items():
        if not path.exists():
            drift.append(Drift(path, "missing; run `make generate`"))
        elif path.read_text(encoding="utf-8") != content:
            drift.append(Drift(path, "differs from what the matrix produces; run `make generate`"))
    # Not generated, but every build needs them: a COPY whose source is gone fails every build.
    build = root / "images" / BUILD_DIR
    needed = sorted({name for content in expected.values() for name in _build_sources(content)})
    drift.extend(Drift(build / name, "missing; a generated Dockerfile copies it")
                 for name in needed if not (build / name).is_file())
    readme = root / "README.md"
    if readme.exists() and table.BEGIN not in readme.read_text(encoding="utf-8"):
        drift.append(Drift(readme, f"has no variant table markers ({table.BEGIN})"))
    known = {v.id for v in matrix.variants}
    shared = {IN_IMAGE_DIR, TEMPLATES_DIR, BUILD_DIR}
    for folder in sorted((root / "images").iterdir()):
        if folder.is_dir() and folder.name not in known and folder.name not in shared:
            drift.append(Drift(folder, "folder of a variant that is not in the matrix; remove it"))
        for name, where in _LEFTOVERS.items() if folder.name in known else ():
            if (folder / name).exists():
                drift.append(Drift(folder / name, f"left over from per-variant build contexts; remove it ({where})"))
    for v in matrix.variants:
        drift.extend(Drift(p, r) for p, r in locks.check_variant(v, root / "images" / v.id))
        drift.extend(Drift(p, r) for p, r in locks.check_arm64(v, root / "images" / v.id))
    for v in matrix.with_jupyter():
        drift.extend(Drift(p, r) for p, r in locks.check_jupyter(v, root / "images" / v.id,
                                                                  matrix.jupyter.jupyterlab))
    return drift
