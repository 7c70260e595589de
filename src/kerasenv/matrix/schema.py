"""Load and validate images/matrix.toml, the single source of truth for versions.

Every error names the file, the entry and the field, in one line.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import backend_releases
from . import keras_tools as keras_tools_mod
from . import kernel_targets as kernel_targets_record
from . import nvidia_drivers
from . import tested_builds
from .backend_releases import BACKENDS
from ..errors import MatrixError, UsageError
from .tested_builds import version_tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FAMILIES = ("cpu", "cuda", "rocm")
REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_MATRIX = REPO_ROOT / "images" / "matrix.toml"
# images/<IN_IMAGE_DIR>/: the in-image code (kerasenv_image), one copy for every image;
# images/ is the build context of each (`docker build -f images/<id>/Dockerfile images`).
IN_IMAGE_DIR = "common"

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")  # a valid Docker tag, lower-case
_VERSION_RE = re.compile(r"^\d+(\.\d+)+$")
_PYTHON_RE = re.compile(r"^3\.\d+$")
# Debian's own images: debian:<suite>, debian:<suite>-slim (or a dated -slim), under any registry path.
_DEBIAN_BASE_RE = re.compile(r"^(?:[^/]+/)*debian:([a-z]+)(?:-[\w.-]+)?$")


def debian_suite_of(image: str) -> str | None:
    """The Debian suite an image reference names (`debian:trixie-slim`, `registry/debian:bookworm`,
    `debian:trixie-slim@sha256:...`: trixie, bookworm, trixie), None for any other image."""
    m = _DEBIAN_BASE_RE.match(image.split("@", 1)[0])
    return m.group(1) if m else None

# Where TensorFlow publishes its tested build configurations (compatibility.md §1).
TF_TESTED_SOURCE = "https://www.tensorflow.org/install/source#gpu"
TF_TESTED_TABLE_DATE = "2026-03-11"  # tensorflow/docs@7c365021, the table we validate against


@dataclass(frozen=True)
class GpuEvidence:
    """Who ran a CUDA stack on a real GPU: a matrix `gpu_evidence` table, or TF's table."""

    kind: str  # "tensorflow-tested" | "gpu-verified-override"
    source: str  # https URL of the CI run, pull request, release note or bug thread
    gpu: str  # the GPU(s) it ran on, as the source names them
    date: str  # YYYY-MM-DD of that run
    ran: str  # what was run, one line

    def one_line(self) -> str:
        return f"{self.kind}: {self.ran} on {self.gpu} ({self.date}, {self.source})"


@dataclass(frozen=True)
class DriverFloors:
    """A CUDA variant's driver floors on one OS (Variant.driver_floors)."""

    os: str  # linux | windows
    load: str
    ptx_jit: str
    toolkit: str

    @property
    def full(self) -> str:
        """The driver that runs everything the image does: the highest of the three."""
        return max(self.load, self.ptx_jit, self.toolkit, key=nvidia_drivers.driver_tuple)


ARM64 = "linux/arm64"
AMD64 = "linux/amd64"


@dataclass(frozen=True)
class Arm64Build:
    """A variant's linux/arm64 image (issue 36: Grace hosts, GH200, GB200/GB300, DGX Spark):
    the same id, stack and pins as its amd64 image, built from the same matrix entry, pushed
    under one tag with it (an image index). What differs per architecture is here."""

    # Who ran this stack on an arm64 GPU, as close to the pinned versions as was found
    gpu_evidence: GpuEvidence | None
    # One line: what the evidence does not cover (other versions, other GPUs), or that none exists
    evidence_gap: str
    size_budget_mb: int | None = None


@dataclass(frozen=True)
class Variant:
    id: str
    family: str
    tensorflow: str | None  # the TensorFlow release; None on the JAX and PyTorch backends
    keras: str
    python: str
    base_image: str
    notes: str = ""
    size_budget_mb: int | None = None
    cuda: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    rocm: str | None = None
    gpu_evidence: GpuEvidence | None = None  # set only by an override (or extra evidence)
    # tensorboard-plugin-profile (XProf) release locked into the image, from [profiler]
    # (None: no profiler in the image; always None for ROCm, whose Python is AMD's)
    profile_plugin: str | None = None
    # [keras_tools]: tensorflow-cpu beside JAX/PyTorch, grain, pydot, the ONNX exporter; which
    # of them this variant gets is keras_tools.KerasTools.requirements (None: no such table)
    keras_tools: keras_tools_mod.KerasTools | None = None
    # [torch_compiler]: Debian packages the runtime installs so torch.compile works
    # (PyTorch images only; empty elsewhere)
    compiler_packages: tuple[str, ...] = ()
    # The Keras backend the image trains on (KERAS_BACKEND in the image), and the release of
    # that framework: the matrix field named after the backend (tensorflow, jax or torch).
    backend: str = "tensorflow"
    jax: str | None = None
    torch: str | None = None
    # What the built image's binaries carry (images/<id>/kernel-targets.json; set by parse(),
    # never from the TOML): None until recorded.
    recorded_kernels: kernel_targets_record.KernelTargets | None = None
    # The linux/arm64 image of this variant ([variant.arm64] in the matrix), None: amd64 only
    arm64: Arm64Build | None = None
    # What the arm64 image's binaries carry (images/<id>/kernel-targets-arm64.json)
    recorded_kernels_arm64: kernel_targets_record.KernelTargets | None = None

    # --- derived facts -------------------------------------------------------------
    @property
    def framework_version(self) -> str:
        """The release of the backend's framework (TensorFlow, JAX or PyTorch)."""
        version = {"tensorflow": self.tensorflow, "jax": self.jax, "torch": self.torch}[self.backend]
        assert version is not None
        return version

    @property
    def framework_name(self) -> str:
        return {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}[self.backend]

    @property
    def framework_label(self) -> str:
        """'TF 2.21.0', 'JAX 0.10.2', 'PyTorch 2.15.0': the framework in a few characters."""
        short = {"tensorflow": "TF"}.get(self.backend, self.framework_name)
        return f"{short} {self.framework_version}"

    @property
    def framework_package(self) -> str:
        """The distribution that carries the framework (and the version the locks must pin)."""
        return self.tensorflow_package if self.backend == "tensorflow" else self.backend

    @property
    def tf_release(self) -> tested_builds.TensorflowRelease | None:
        if self.backend != "tensorflow" or self.tensorflow is None:
            return None
        return tested_builds.TENSORFLOW_RELEASES.get(self.tensorflow)

    @property
    def backend_release(self) -> backend_releases.BackendRelease | None:
        """The JAX or PyTorch release's facts (None on TensorFlow)."""
        if self.backend == "tensorflow":
            return None
        return backend_releases.RELEASES[self.backend].get(self.framework_version)

    @property
    def built_with_stack(self) -> tested_builds.CudaStack | None:
        """The CUDA the framework's own kernels and PTX were built with: TF's tested stack,
        or the stack a JAX/PyTorch release's wheels are made for."""
        if self.family != "cuda":
            return None
        release = self.backend_release
        return release.stack if release else self.tested_stack

    @property
    def tested_stack(self) -> tested_builds.CudaStack | None:
        """The CUDA stack TensorFlow built and tested this release with."""
        release = self.tf_release
        return release.stack if (release and self.family == "cuda") else None

    @property
    def is_override(self) -> bool:
        """True when the image pins another CUDA stack than TF's tested one."""
        tested = self.tested_stack
        return tested is not None and (self.cuda, self.cudnn) != (tested.cuda, tested.cudnn)

    @property
    def cuda_stack(self) -> tested_builds.CudaStack | None:
        """The CUDA stack in the image: TF's tested one, or a GPU-verified override; on JAX
        and PyTorch the one their release pins (backend_releases.py)."""
        if self.backend != "tensorflow":
            release = self.backend_release
            return release.stack if (release and self.family == "cuda") else None
        if not self.is_override:
            return self.tested_stack
        return tested_builds.OVERRIDE_STACKS.get((self.cuda or "", self.cudnn or ""))

    @property
    def provenance(self) -> GpuEvidence | None:
        """Why this CUDA stack: the override's GPU evidence, or TF's tested configuration."""
        if self.family != "cuda":
            return None
        if self.gpu_evidence is not None and self.backend != "tensorflow":
            return dataclasses.replace(self.gpu_evidence, kind=f"{self.backend}-gpu-ci")
        if self.gpu_evidence is not None:
            kind = "gpu-verified-override" if self.is_override else "tensorflow-tested, gpu-verified"
            return dataclasses.replace(self.gpu_evidence, kind=kind)
        return GpuEvidence(
            kind="tensorflow-tested", source=TF_TESTED_SOURCE,
            gpu="TensorFlow's release CI (GPU model not published)", date=TF_TESTED_TABLE_DATE,
            ran=f"TensorFlow {self.tensorflow} tested build configuration CUDA {self.cuda} / cuDNN {self.cudnn}")

    def driver_floors(self, os: str = "linux") -> "DriverFloors | None":
        """The three driver floors on `os` ("linux", or "windows": the Windows driver a WSL2
        host runs), each derived from NVIDIA's Table 3 column for that OS the same way.

        - load: the lowest driver the CUDA runtime loads on (minor-version compatibility);
        - ptx_jit: the lowest that can JIT the framework's own PTX (GPUs without native
          kernels): the PTX in TF's kernels and the PTX XLA emits both follow the CUDA TF was
          built with (XLA takes its PTX version from the build-time CUDA_VERSION,
          openxla/xla#47776), which is the tested stack's toolkit even when the image carries
          newer wheels. JAX: the CUDA its wheels were built with. PyTorch's wheels carry no
          PTX: the floor is then the driver that loads the CUDA at all;
        - toolkit: the driver of the image's own CUDA wheels. Below it (down to load) the
          image runs under CUDA minor-version compatibility: NVIDIA's limited feature set.
        Where NVIDIA's column has no number (Windows from CUDA 13) a floor falls back to the
        one below it."""
        if not self.cuda:
            return None
        load = nvidia_drivers.load_floor(self.cuda, os)
        built = self.built_with_stack
        ptx = load if self.backend == "torch" or built is None else \
            (nvidia_drivers.toolkit_driver(built.toolkit_release, os) or load)
        stack = self.cuda_stack
        toolkit = (nvidia_drivers.toolkit_driver(stack.toolkit_release, os) if stack else None) or load
        return DriverFloors(os=os, load=load, ptx_jit=ptx, toolkit=toolkit)

    @property
    def min_driver(self) -> str | None:
        """Lowest Linux driver the CUDA runtime loads on (minor-version compatibility)."""
        floors = self.driver_floors()
        return floors.load if floors else None

    @property
    def min_driver_ptx(self) -> str | None:
        """Lowest Linux driver that can JIT the framework's own PTX (driver_floors says why)."""
        floors = self.driver_floors()
        return floors.ptx_jit if floors else None

    @property
    def min_driver_toolkit(self) -> str | None:
        """The Linux driver of the image's own CUDA wheels (driver_floors)."""
        floors = self.driver_floors()
        return floors.toolkit if floors else None

    @property
    def compute_capabilities(self) -> tuple[str, ...]:
        """The targets the framework says it was built for: TF's published list (what
        tf.sysconfig.get_build_info() reports). JAX and PyTorch publish none per release, so
        theirs are the recorded ones, read from the binaries (kernel_targets)."""
        if self.family != "cuda":
            return ()
        release = self.tf_release
        if release is not None:
            return release.compute_capabilities
        kernels = self.recorded_kernels
        return kernels.all if kernels else ()

    @property
    def kernel_targets(self) -> kernel_targets_record.KernelTargets | None:
        """The framework's SASS/PTX targets read from the built image's binaries (None for a
        variant not recorded yet, and for CPU/ROCm ones). Where they disagree with
        compute_capabilities (TF's published list, which its build info reports), these
        are what the GPU can run."""
        return self.recorded_kernels if self.family == "cuda" else None

    @property
    def tensorflow_package(self) -> str:
        return {"cpu": "tensorflow-cpu", "cuda": "tensorflow", "rocm": "tensorflow-rocm"}[self.family]

    @property
    def keras_is_tf_keras(self) -> bool:
        return self.keras.split(".")[0] == "2"

    @property
    def debian_suite(self) -> str | None:
        """The Debian suite the image is built on (debian:trixie-slim: trixie), which names the
        archive it applies updates from and the base `kerasenv base-offline` makes; None for a
        base that is not Debian's own image (AMD's ROCm image)."""
        return debian_suite_of(self.base_image)

    @property
    def image_ref(self) -> str:
        return f"kerasenv:{self.id}"

    @property
    def platforms(self) -> tuple[str, ...]:
        """The platforms this variant's tag covers: linux/amd64, and linux/arm64 where the
        matrix has [variant.arm64]."""
        return (AMD64, ARM64) if self.arm64 else (AMD64,)

    def platform_ref(self, platform: str) -> str:
        """The local tag of one platform's image. Docker 20.10's image store keeps one image per
        tag, so a cross-built arm64 image is kerasenv:<id>-arm64 here (the per-architecture tag
        convention `docker manifest create` combines); `kerasenv push` writes the two under
        kerasenv:<id> as one image index."""
        if platform == AMD64:
            return self.image_ref
        if platform == ARM64 and self.arm64:
            return f"{self.image_ref}-arm64"
        raise UsageError(f"{self.id} has no {platform} image (its platforms: {', '.join(self.platforms)})")

    def kernels_for(self, arch: str) -> kernel_targets_record.KernelTargets | None:
        """The recorded kernel targets of the image for `arch` (amd64 | arm64)."""
        if self.family != "cuda":
            return None
        return self.recorded_kernels_arm64 if arch == "arm64" else self.recorded_kernels

    @property
    def jupyter_ref(self) -> str:
        """The JupyterLab flavour: this image plus a layer with JupyterLab (see Jupyter)."""
        return f"kerasenv:{self.id}-jupyter"

    @property
    def interpreter(self) -> str:
        """The image's Python command: AMD's ROCm image has only `python3`."""
        return "python3" if self.family == "rocm" else "python"

    def cuda_wheels(self) -> dict[str, str]:
        """Every nvidia-* wheel of this variant, exactly pinned (empty unless cuda)."""
        stack = self.cuda_stack
        if stack is None or self.nccl is None:
            return {}
        return {**stack.wheels, stack.nccl_package: self.nccl}

    def extra_cuda_wheels(self) -> dict[str, str]:
        """NVIDIA wheels the backend needs beyond the CUDA stack: pinned in the variant's own
        lock, so the stack's layer stays byte-identical with other variants' (JAX)."""
        release = self.backend_release
        return dict(release.extra_cuda_wheels) if (release and self.family == "cuda") else {}


JUPYTER_DOCKERFILE = "jupyter.Dockerfile"  # images/<id>/jupyter.Dockerfile, the flavour's
ARM64_DOCKERFILE = "arm64.Dockerfile"  # images/<id>/arm64.Dockerfile: the arm64 image, built on amd64
# glibc of each Debian suite the matrix builds on: the newest manylinux tag its wheels may carry
GLIBC_OF_SUITE = {"bookworm": (2, 36), "trixie": (2, 41)}


@dataclass(frozen=True)
class Jupyter:
    """The JupyterLab flavour, `kerasenv:<id>-jupyter`: the variant's image plus one layer
    (JupyterLab and its dependencies, hash-locked per variant under the variant's pins), so
    the training images stay as they are for people who do not want it."""

    jupyterlab: str  # exact JupyterLab release
    added_size_budget_mb: int  # what the layer may add to the variant's image

    def families(self) -> tuple[str, ...]:
        # ROCm's image comes from AMD with its own Python: not built or tested here.
        return ("cpu", "cuda")


@dataclass(frozen=True)
class Retired:
    """An id no longer built ([[retired]] in the matrix): what replaced it, since when, and why."""

    id: str
    replaced_by: str
    since: str  # YYYY-MM-DD
    why: str

    def message(self) -> str:
        return (f"{self.id} is retired since {self.since} ({self.why}): use {self.replaced_by} "
                f"(kerasenv:{self.replaced_by})")


@dataclass(frozen=True)
class Matrix:
    path: Path
    variants: tuple[Variant, ...]
    default_gpu: str
    default_cpu: str
    default_rocm: str
    project: Mapping[str, str] = field(default_factory=dict)
    jupyter: Jupyter | None = None
    retired: tuple[Retired, ...] = ()

    def with_jupyter(self) -> list[Variant]:
        """The variants that have a JupyterLab flavour."""
        return [v for v in self.variants if self.jupyter and v.family in self.jupyter.families()]

    @property
    def ids(self) -> list[str]:
        return [v.id for v in self.variants]

    def get(self, variant_id: str) -> Variant:
        for variant in self.variants:
            if variant.id == variant_id:
                return variant
        # A pinned old id (or its -jupyter tag) gets its replacement, not "unknown variant".
        for old in self.retired:
            if variant_id in (old.id, f"{old.id}-jupyter"):
                raise UsageError(old.message())
        raise UsageError(
            f"unknown variant {variant_id!r}; valid ids: {', '.join(self.ids)}"
        )

    @property
    def debian_based(self) -> list[Variant]:
        """The variants built FROM Debian (cpu, cuda): what `build --all`, `make test` and CI
        build and accept. ROCm is built FROM AMD's image, which needs Docker Hub."""
        return [v for v in self.variants if v.family != "rocm"]

    @property
    def debian_bases(self) -> dict[str, str]:
        """Each Debian base_image the variants name -> its suite, in the matrix's order."""
        bases: dict[str, str] = {}
        for v in self.variants:
            if v.debian_suite:
                bases.setdefault(v.base_image, v.debian_suite)
        return bases

    def select(self, ids: list[str]) -> list[Variant]:
        return [self.get(i) for i in ids]


_FIELD_TYPES: dict[str, type] = {
    "id": str, "family": str, "backend": str, "tensorflow": str, "jax": str, "torch": str,
    "keras": str, "python": str,
    "base_image": str, "notes": str, "size_budget_mb": int,
    "cuda": str, "cudnn": str, "nccl": str, "rocm": str, "gpu_evidence": dict, "arm64": dict,
}
_ARM64_FIELDS = ("gpu_evidence", "evidence_gap", "size_budget_mb")
_EVIDENCE_FIELDS = ("source", "gpu", "date", "ran")
_REQUIRED = ("id", "family", "backend", "keras", "python", "base_image")
_FAMILY_FIELDS = {"cuda": ("cuda", "cudnn", "nccl"), "rocm": ("rocm",)}


def load(path: Path | str = DEFAULT_MATRIX) -> Matrix:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MatrixError(f"{path}: matrix file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{path}: not valid TOML: {exc}") from None
    return parse(raw, path)


def parse(raw: Mapping[str, Any], path: Path) -> Matrix:
    def fail(where: str, message: str) -> MatrixError:
        return MatrixError(f"{path}: {where}: {message}")

    if raw.get("schema_version") != 1:
        raise fail("schema_version", f"expected 1, got {raw.get('schema_version')!r}")
    entries = raw.get("variant")
    if not isinstance(entries, list) or not entries:
        raise fail("variant", "no [[variant]] entries")

    variants: list[Variant] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        label = f"variant #{index + 1}"
        if not isinstance(entry, dict):
            raise fail(label, "must be a table")
        if isinstance(entry.get("id"), str):
            label = f"variant {entry['id']!r}"
        variant = _parse_variant(entry, lambda f, m, label=label: fail(f"{label}, field {f!r}", m))
        if variant.id in seen:
            raise fail(f"{label}, field 'id'", f"duplicate id (also variant #{seen[variant.id] + 1})")
        seen[variant.id] = index
        variants.append(variant)

    defaults = {}
    for key, family in (("default_gpu", "cuda"), ("default_cpu", "cpu"), ("default_rocm", "rocm")):
        value = raw.get(key)
        match = [v for v in variants if v.id == value]
        if not match:
            raise fail(key, f"{value!r} is not a variant id")
        if match[0].family != family:
            raise fail(key, f"{value!r} is a {match[0].family} variant, expected {family}")
        defaults[key] = value
    project = raw.get("project", {})
    if not isinstance(project, dict) or not all(isinstance(v, str) for v in project.values()):
        raise fail("project", "must be a table of strings")
    for key in ("name", "source", "license"):
        if key not in project:
            raise fail(f"project, field {key!r}", "missing")
    if not project["source"].startswith("https://"):
        raise fail("project, field 'source'", "must be an https:// URL")
    plugin = _parse_profiler(raw, fail)
    if plugin:
        variants = [dataclasses.replace(v, profile_plugin=plugin) if v.family != "rocm" else v for v in variants]
    tools = keras_tools_mod.parse(raw, variants, fail)
    if tools:
        variants = [dataclasses.replace(v, keras_tools=tools) if tools.applies(v) else v for v in variants]
    compiler = _parse_torch_compiler(raw, fail)
    if compiler:
        variants = [dataclasses.replace(v, compiler_packages=compiler)
                    if v.backend == "torch" and v.family != "rocm" else v for v in variants]
    variants = [dataclasses.replace(v, recorded_kernels=kernel_targets_record.load(path.parent, v.id))
                if v.family == "cuda" else v for v in variants]
    variants = [dataclasses.replace(v, recorded_kernels_arm64=kernel_targets_record.load(path.parent, v.id, "arm64"))
                if v.family == "cuda" and v.arm64 else v for v in variants]
    return Matrix(path=path, variants=tuple(variants), project=project, jupyter=_parse_jupyter(raw, fail),
                  retired=_parse_retired(raw, variants, fail), **defaults)


def _parse_retired(raw: Mapping[str, Any], variants: list[Variant], fail) -> tuple[Retired, ...]:
    entries = raw.get("retired", [])
    if not isinstance(entries, list):
        raise fail("retired", "must be an array of tables ([[retired]])")
    current = {v.id for v in variants}
    found: list[Retired] = []
    for index, entry in enumerate(entries):
        where = f"retired #{index + 1}"
        if not isinstance(entry, dict) or set(entry) != {"id", "replaced_by", "since", "why"} \
                or not all(isinstance(value, str) and value for value in entry.values()):
            raise fail(where, "needs exactly the strings id, replaced_by, since (YYYY-MM-DD) and why")
        if entry["id"] in current:
            raise fail(where, f"{entry['id']!r} is still a variant: retire it by removing its [[variant]]")
        if entry["replaced_by"] not in current:
            raise fail(where, f"replaced_by {entry['replaced_by']!r} is not a variant id")
        if not re.fullmatch(r"\d{4}-\d\d-\d\d", entry["since"]):
            raise fail(where, f"since {entry['since']!r} is not a date like 2026-12-04")
        found.append(Retired(**entry))
    return tuple(found)


def _optional_table(raw: Mapping[str, Any], name: str, fields: set[str], fail) -> Mapping[str, Any] | None:
    """The top-level table `name` (None when absent), refusing a non-table and unknown fields."""
    table = raw.get(name)
    if table is None:
        return None
    if not isinstance(table, dict):
        raise fail(name, "must be a table")
    unknown = set(table) - fields
    if unknown:
        raise fail(name, f"unknown field(s) {', '.join(sorted(unknown))}")
    return table


def _exact_release(table: Mapping[str, Any], where: str, key: str, example: str, fail) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", value):
        raise fail(f"{where}, field '{key}'", f"must be an exact release like \"{example}\", got {value!r}")
    return value


def _parse_profiler(raw: Mapping[str, Any], fail) -> str | None:
    table = _optional_table(raw, "profiler", {"tensorboard_plugin_profile"}, fail)
    return None if table is None else _exact_release(table, "profiler", "tensorboard_plugin_profile", "2.24.2", fail)


def _parse_torch_compiler(raw: Mapping[str, Any], fail) -> tuple[str, ...]:
    table = _optional_table(raw, "torch_compiler", {"debian_packages"}, fail)
    if table is None:
        return ()
    packages = table.get("debian_packages")
    if (not isinstance(packages, list) or not packages
            or not all(isinstance(p, str) and re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", p) for p in packages)):
        raise fail("torch_compiler, field 'debian_packages'",
                   f"must be a non-empty list of Debian package names like [\"gcc\", \"g++\"], got {packages!r}")
    return tuple(packages)


def _parse_jupyter(raw: Mapping[str, Any], fail) -> Jupyter | None:
    table = _optional_table(raw, "jupyter", {"jupyterlab", "added_size_budget_mb"}, fail)
    if table is None:
        return None
    lab = _exact_release(table, "jupyter", "jupyterlab", "4.6.6", fail)
    budget = table.get("added_size_budget_mb")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        raise fail("jupyter, field 'added_size_budget_mb'", f"must be a positive integer, got {budget!r}")
    return Jupyter(jupyterlab=lab, added_size_budget_mb=budget)


def _parse_variant(entry: Mapping[str, Any], fail) -> Variant:
    for key, value in entry.items():
        expected = _FIELD_TYPES.get(key)
        if expected is None:
            raise fail(key, f"unknown field (known: {', '.join(_FIELD_TYPES)})")
        if not isinstance(value, expected) or isinstance(value, bool):
            raise fail(key, f"must be a {expected.__name__}, got {type(value).__name__} {value!r}")
    for key in _REQUIRED:
        if key not in entry:
            raise fail(key, "missing")

    family = entry["family"]
    if family not in FAMILIES:
        raise fail("family", f"unknown family {family!r}; expected one of {', '.join(FAMILIES)}")
    backend = entry["backend"]
    if backend not in BACKENDS:
        raise fail("backend", f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    for key in BACKENDS:
        if key == backend and key not in entry:
            raise fail(key, f"missing: the {backend} backend needs its release (e.g. {key} = \"1.2.3\")")
        if key != backend and key in entry:
            raise fail(key, f"not allowed for backend {backend!r} (the image has no {key})")
    if backend != "tensorflow" and family == "rocm":
        raise fail("backend", "the rocm family is TensorFlow only (AMD's rocm/tensorflow image)")
    if not _ID_RE.match(entry["id"]):
        raise fail("id", "must be a lower-case Docker tag ([a-z0-9._-], at most 128 chars)")
    for key in ("cuda", "cudnn", "nccl", "rocm"):
        wanted = key in _FAMILY_FIELDS.get(family, ())
        if wanted and key not in entry:
            raise fail(key, f"missing (required for family {family!r})")
        if not wanted and key in entry:
            raise fail(key, f"not allowed for family {family!r}")
    for key in ("tensorflow", "jax", "torch", "cuda", "cudnn", "nccl", "rocm"):
        if key in entry and not _VERSION_RE.match(entry[key]):
            raise fail(key, f"{entry[key]!r} is not a version like 1.2.3")
    if not _PYTHON_RE.match(entry["python"]):
        raise fail("python", f"{entry['python']!r} is not a Python version like 3.11")
    if any(c in entry.get("notes", "") for c in "|\n"):
        raise fail("notes", "must be one line without '|' (it becomes a Markdown table cell)")
    if entry.get("size_budget_mb", 1) <= 0:
        raise fail("size_budget_mb", "must be a positive number of megabytes")

    fields = dict(entry)
    fields.setdefault("tensorflow", None)
    if "gpu_evidence" in fields:
        if family != "cuda":
            raise fail("gpu_evidence", f"not allowed for family {family!r} (it backs a CUDA stack)")
        fields["gpu_evidence"] = _parse_evidence(fields["gpu_evidence"], fail)
    if "arm64" in fields:
        fields["arm64"] = _parse_arm64(fields["arm64"], entry, fail)
    variant = Variant(**fields)
    _check_against_tested_builds(variant, fail)
    return variant


def _parse_arm64(raw: Mapping[str, Any], entry: Mapping[str, Any], fail) -> Arm64Build:
    unknown = sorted(set(raw) - set(_ARM64_FIELDS))
    if unknown:
        raise fail("arm64", f"unknown key {unknown[0]!r} (known: {', '.join(_ARM64_FIELDS)})")
    # TensorFlow's aarch64 wheel is a CPU build (tensorflow/tensorflow#121157): no TF GPU image
    # on arm64; JAX's and PyTorch's aarch64 wheels carry CUDA.
    if entry["backend"] == "tensorflow" or entry["family"] == "rocm":
        raise fail("arm64", "arm64 images are JAX or PyTorch on Debian (TensorFlow's aarch64 wheel is "
                            "CPU-only, tensorflow/tensorflow#121157; ROCm images are AMD's, amd64 only)")
    if debian_suite_of(entry["base_image"]) is None:
        raise fail("arm64", f"arm64 images are built on Debian's own base, not {entry['base_image']}")
    gap = raw.get("evidence_gap")
    if not isinstance(gap, str) or not gap.strip() or any(c in gap for c in "|\n"):
        raise fail("arm64", "'evidence_gap' must say in one line what the arm64 GPU evidence does not "
                            "cover (other versions or GPUs), or that none was found")
    evidence = None
    if "gpu_evidence" in raw:
        if entry["family"] != "cuda":
            raise fail("arm64", "'gpu_evidence' is for CUDA variants")
        if not isinstance(raw["gpu_evidence"], dict):
            raise fail("arm64", "'gpu_evidence' must be a table")
        evidence = dataclasses.replace(_parse_evidence(raw["gpu_evidence"], lambda f, m: fail(f"arm64.{f}", m)),
                                       kind="arm64-gpu-run")
    budget = raw.get("size_budget_mb")
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0):
        raise fail("arm64", "'size_budget_mb' must be a positive number of megabytes")
    return Arm64Build(gpu_evidence=evidence, evidence_gap=gap.strip(), size_budget_mb=budget)


def _parse_evidence(raw: Mapping[str, Any], fail) -> GpuEvidence:
    where = "gpu_evidence"
    unknown = sorted(set(raw) - set(_EVIDENCE_FIELDS))
    if unknown:
        raise fail(where, f"unknown key {unknown[0]!r} (known: {', '.join(_EVIDENCE_FIELDS)})")
    for key in _EVIDENCE_FIELDS:
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise fail(where, f"{key!r} is missing or empty: every override names its source, "
                              "the GPU it ran on, the date and what was run")
        if any(c in value for c in "|\n"):
            raise fail(where, f"{key!r} must be one line without '|' (it becomes a table cell)")
    if not re.match(r"^https://\S+$", raw["source"]):
        raise fail(where, f"'source' must be an https:// URL, got {raw['source']!r}")
    try:
        date = datetime.date.fromisoformat(raw["date"])
    except ValueError:
        raise fail(where, f"'date' must be YYYY-MM-DD, got {raw['date']!r}") from None
    if date > datetime.date.today():
        raise fail(where, f"'date' {raw['date']} is in the future")
    return GpuEvidence(kind="gpu-verified-override", **{k: raw[k].strip() for k in _EVIDENCE_FIELDS})


def _check_against_tested_builds(v: Variant, fail) -> None:
    _check_python_of_base(v, fail)
    if v.backend != "tensorflow":
        _check_backend_release(v, fail)
        return
    # Keras: Keras 3 from TF 2.16 on; Keras 2.x exactly matches the TF X.Y before.
    assert v.tensorflow is not None
    tf_xy = version_tuple(v.tensorflow)[:2]
    keras = v.keras
    if v.family == "rocm":
        if not re.match(r"^\d+(\.\d+)*$", keras):
            raise fail("keras", f"{keras!r} is not a version or a major like 3")
    elif not _VERSION_RE.match(keras) or len(keras.split(".")) != 3:
        raise fail("keras", f"{keras!r} must be an exact X.Y.Z release (it is locked)")
    keras_major = int(keras.split(".")[0])
    expected_major = 3 if tf_xy >= (2, 16) else 2
    if keras_major != expected_major:
        raise fail("keras", f"Keras {keras} does not fit TensorFlow {v.tensorflow}: "
                            f"TensorFlow {'>= 2.16 needs Keras 3' if expected_major == 3 else '< 2.16 needs Keras 2 (tf.keras)'}")
    if keras_major == 2 and version_tuple(keras)[:2] != tf_xy:
        raise fail("keras", f"Keras {keras} does not fit TensorFlow {v.tensorflow}: "
                            f"Keras 2 must be {tf_xy[0]}.{tf_xy[1]}.x")

    if v.family == "rocm":
        assert v.rocm is not None
        rocm_xy = ".".join(v.rocm.split(".")[:2])
        supported = tested_builds.ROCM_TENSORFLOW.get(rocm_xy)
        if supported is None:
            raise fail("rocm", f"ROCm {v.rocm} has no TensorFlow support entry "
                               f"(known: {', '.join(tested_builds.ROCM_TENSORFLOW)})")
        if ".".join(v.tensorflow.split(".")[:2]) not in supported:
            raise fail("tensorflow", f"TensorFlow {v.tensorflow} is not validated on ROCm {v.rocm} "
                                     f"(validated: {', '.join(supported)})")
        return

    release = v.tf_release
    if release is None:
        raise fail("tensorflow", f"TensorFlow {v.tensorflow} has no tested-build entry "
                                 f"(known: {', '.join(tested_builds.TENSORFLOW_RELEASES)})")
    py = version_tuple(v.python)
    if not version_tuple(release.python_min) <= py <= version_tuple(release.python_max):
        raise fail("python", f"TensorFlow {v.tensorflow} supports Python "
                             f"{release.python_min}-{release.python_max}, not {v.python}")
    if v.family != "cuda":
        return
    stack = release.stack
    if stack is None:
        raise fail("tensorflow", f"TensorFlow {v.tensorflow} has no pip CUDA stack (`and-cuda`)")
    if v.is_override:
        _check_override(v, release, fail)
    assert release.nccl is not None and v.nccl is not None
    if not release.nccl.accepts(v.nccl):
        raise fail("nccl", f"TensorFlow {v.tensorflow} needs {stack.nccl_package}"
                           f"{release.nccl.describe()}, not {v.nccl}")


def _check_override(v: Variant, release: tested_builds.TensorflowRelease, fail) -> None:
    """A stack other than TF's tested one: allowed only with GPU evidence, only a stack we
    know wheel by wheel, and only where TF's `and-cuda` extra is a range."""
    tested = release.stack
    assert tested is not None
    tested_text = f"TensorFlow {v.tensorflow} was tested with CUDA {tested.cuda} / cuDNN {tested.cudnn}"
    field = "cuda" if v.cuda != tested.cuda else "cudnn"
    if v.gpu_evidence is None:
        raise fail(field, f"{tested_text}, not CUDA {v.cuda} / cuDNN {v.cudnn}: pin the tested stack, "
                          "or add gpu_evidence = {source, gpu, date, ran} for a stack someone ran on a GPU")
    if not release.and_cuda_is_range:
        raise fail(field, f"{tested_text}, and its `and-cuda` extra pins that exactly, so no other "
                          "stack can be installed with it")
    if (v.cuda, v.cudnn) not in tested_builds.OVERRIDE_STACKS:
        known = ", ".join(f"CUDA {c} / cuDNN {d}" for c, d in tested_builds.OVERRIDE_STACKS)
        field = "cudnn" if any(c == v.cuda for c, _ in tested_builds.OVERRIDE_STACKS) else "cuda"
        raise fail(field, f"no wheel set known for CUDA {v.cuda} / cuDNN {v.cudnn} "
                          f"(tested_builds.OVERRIDE_STACKS has: {known})")


def _check_python_of_base(v: Variant, fail) -> None:
    """Python provided by a Debian base we know."""
    if v.debian_suite in tested_builds.DEBIAN_PYTHON:
        provided = tested_builds.DEBIAN_PYTHON[v.debian_suite]
        if provided != v.python:
            raise fail("python", f"{v.base_image} provides Python {provided}, not {v.python}")


def _check_backend_release(v: Variant, fail) -> None:
    """A JAX or PyTorch variant: a release we know, on its Python, with Keras 3, and on a
    CUDA image exactly the stack the release pins, backed by GPU evidence."""
    name, version = v.backend, v.framework_version
    release = v.backend_release
    if release is None:
        known = ", ".join(backend_releases.RELEASES[name])
        raise fail(name, f"{v.framework_name} {version} is not in backend_releases.py (known: {known})")
    if not _VERSION_RE.match(v.keras) or len(v.keras.split(".")) != 3 or not v.keras.startswith("3."):
        raise fail("keras", f"{v.keras!r}: the {name} backend needs an exact Keras 3 release like 3.15.1")
    if not version_tuple(release.python_min) <= version_tuple(v.python) <= version_tuple(release.python_max):
        raise fail("python", f"{v.framework_name} {version} supports Python "
                             f"{release.python_min}-{release.python_max}, not {v.python}")
    if v.family == "cpu":
        if release.cpu_requirement is None:
            raise fail("family", f"PyPI has no CPU-only {v.framework_name} {version} (its Linux wheel is the "
                                 "CUDA build): use the cuda variant, which trains on the CPU without a GPU")
        return
    stack = release.stack
    if (v.cuda, v.cudnn) != (stack.cuda, stack.cudnn):
        raise fail("cuda", f"{v.framework_name} {version} pins CUDA {stack.cuda} / cuDNN {stack.cudnn}, "
                           f"not CUDA {v.cuda} / cuDNN {v.cudnn}")
    if v.nccl != release.nccl:
        raise fail("nccl", f"{v.framework_name} {version} resolves {stack.nccl_package}=={release.nccl}, not {v.nccl}")
    if v.gpu_evidence is None:
        raise fail("gpu_evidence", f"missing: a {v.framework_name} stack is pinned only with the GPU run "
                                   "behind it (source, gpu, date, ran: the project's own GPU CI or release notes)")
