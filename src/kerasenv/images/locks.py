"""Hash-locked requirements per variant: resolve with uv, write, parse, check.

cuda variants get two files: requirements-cuda.lock (the CUDA stack's nvidia-* wheels,
installed in a layer of its own) and requirements.lock (the framework, Keras and the rest,
with any NVIDIA wheel the backend needs beyond the stack).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import KerasenvError, UsageError
from ..matrix.schema import Variant

MAIN_LOCK = "requirements.lock"
# The arm64 image's (issue 36): the amd64 lock's pins resolved for aarch64, where the one
# difference is TensorFlow beside JAX/PyTorch: tensorflow-cpu has no aarch64 wheel, and there the
# `tensorflow` wheel is the CPU build (tensorflow/tensorflow#121157). The CUDA lock is shared:
# its pins are the same and uv writes the hashes of every platform's wheel.
ARM64_LOCK = "requirements-arm64.lock"
AARCH64_PLATFORM = "aarch64-manylinux_2_36"  # uv's newest aarch64 target; glibc 2.41 in trixie
CUDA_LOCK = "requirements-cuda.lock"
PLATFORM = "x86_64-manylinux_2_28"  # linux x86_64; glibc 2.36 in bookworm, 2.41 in trixie: both >= 2.28
_ENTRY_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")
_HASH_RE = re.compile(r"--hash=sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: tuple[str, ...]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def inputs(v: Variant) -> list[str]:
    """Top-level requirements the lock is resolved from."""
    if v.family == "rocm":
        return []
    if v.backend != "tensorflow":
        return backend_inputs(v)
    # TensorBoard: TF 2.21 dropped the dependency, but without it tf.summary (Keras'
    # TensorBoard callback, the smoke training's logs) raises TBNotInstalledError.
    reqs = [f"{v.tensorflow_package}=={v.tensorflow}", f"keras=={v.keras}", "tensorboard"]
    # The profiler's TensorBoard plugin (XProf): Profile tab, trace viewer, input-pipeline
    # analyser; the smoke's --profile reads its input-pipeline analysis.
    if v.profile_plugin:
        reqs.append(f"tensorboard-plugin-profile=={v.profile_plugin}")
    # TensorBoard before 2.21 (what TF <= 2.20 pins) imports pkg_resources, which setuptools
    # 82 removed (pypa/setuptools#5007): the `tensorboard` command died with "No module named
    # 'pkg_resources'" (tensorflow/tensorboard#7003, #7107; fixed in TensorBoard 2.21).
    if tuple(int(p) for p in v.tensorflow.split(".")[:2]) < (2, 21):
        reqs.append("setuptools<82")
    # Keras's tools beyond fit(): grain, pydot, the ONNX exporter ([keras_tools], keras_tools.py).
    reqs += keras_tools_inputs(v)
    # The nvidia wheels are named one by one rather than through `tensorflow[and-cuda]`:
    # exact pins for 2.20+ (whose extra has only ranges), and no TensorRT (2.14's extra).
    return reqs + cuda_inputs(v)


def parse(text: str) -> dict[str, Pin]:
    """Parse a pip requirements file made of `name==version \\ --hash=...` entries."""
    pins: dict[str, Pin] = {}
    current: tuple[str, str] | None = None
    hashes: list[str] = []

    def flush() -> None:
        if current:
            pins[normalize(current[0])] = Pin(current[0], current[1], tuple(hashes))

    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ENTRY_RE.match(line)
        if match:
            flush()
            current, hashes = (match.group(1), match.group(2)), []
        elif stripped.startswith("--hash="):
            found = _HASH_RE.findall(stripped)
            if not found or " ".join(found) != stripped.rstrip(" \\").strip():
                raise ValueError(f"not a sha256 hash line in lock file: {line!r}")
            hashes.extend(found)
        else:
            raise ValueError(f"unexpected line in lock file: {line!r}")
    flush()
    return pins


def keras_tools_inputs(v: Variant) -> list[str]:
    return v.keras_tools.requirements(v) if v.keras_tools else []


def cuda_inputs(v: Variant) -> list[str]:
    return [f"{name}=={version}" for name, version in sorted(v.cuda_wheels().items())]


def backend_inputs(v: Variant) -> list[str]:
    """JAX or PyTorch, Keras, and TensorBoard (which Keras' TensorBoard callback writes through
    tensorflow-cpu's tf.summary, and GpuMonitor through `tensorboard`'s own writer), and XProf,
    which reads the JAX profiler's XSpace files."""
    release = v.backend_release
    assert release is not None
    framework = release.gpu_requirement if v.family == "cuda" else release.cpu_requirement
    assert framework is not None
    reqs = [framework, f"keras=={v.keras}", "tensorboard"]
    if v.profile_plugin and v.backend == "jax":
        reqs.append(f"tensorboard-plugin-profile=={v.profile_plugin}")
    # tensorflow-cpu (tf.data utilities, Keras' TensorBoard callback), grain, pydot, the ONNX
    # exporter: [keras_tools] in the matrix, keras_tools.py says which backend gets what.
    reqs += keras_tools_inputs(v)
    extras = [f"{name}=={version}" for name, version in sorted(v.extra_cuda_wheels().items())]
    return reqs + cuda_inputs(v) + extras


def render(v: Variant, pins: list[Pin], *, cuda: bool) -> str:
    """A lock file. The CUDA lock names no variant: variants with the same CUDA stack
    must get byte-identical files, or Docker's cache (and so the shared layer) misses."""
    if cuda:
        header = [
            "# GENERATED by `kerasenv lock` from images/matrix.toml: do not edit.",
            f"# CUDA {v.cuda} stack (nvidia-* wheels); CPython {v.python}, {PLATFORM}, resolved by uv.",
        ]
        reqs = cuda_inputs(v)
    else:
        header = [
            f"# GENERATED by `kerasenv lock {v.id}` from images/matrix.toml: do not edit.",
            f"# {v.framework_name}, Keras and dependencies; CPython {v.python}, {PLATFORM}, resolved by uv.",
        ]
        reqs = inputs(v)
    return _lock_text(header, reqs, pins)


def _lock_text(header: list[str], reqs: list[str], pins: list[Pin]) -> str:
    """The header, how to install and the inputs, then `name==version \\ --hash=...` entries by name."""
    header = header + [
        "# Installed with: pip install --no-deps --require-hashes --only-binary=:all: -r <this file>",
        f"# inputs: {' '.join(reqs)}",
    ]
    body = []
    for pin in sorted(pins, key=lambda p: normalize(p.name)):
        lines = [f"{pin.name}=={pin.version}"] + [f"    {h}" for h in pin.hashes]
        body.append(" \\\n".join(lines))
    return "\n".join(header + body) + "\n"


def _write_atomic(path: Path, content: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(content, encoding="utf-8")
    tmp.replace(path)  # never a half-written lock


def resolve(v: Variant, *, ca_cert: str | None = None, folder: Path | None = None) -> dict[str, Pin]:
    """Run `uv pip compile --generate-hashes` for the variant (needs PyPI). With `folder`,
    the committed locks there are uv's preferences: a new input changes only what it must."""
    return _compile(v, inputs(v), ca_cert=ca_cert, preferred=_committed(folder, MAIN_LOCK, CUDA_LOCK))


def _as_requirements(pins) -> str:
    return "".join(f"{p.name}=={p.version}\n" for p in pins)


def _committed(folder: Path | None, *names: str) -> str:
    """The `name==version` lines of the committed locks `names` in `folder` (hashes left
    out), or '' (none yet, or one unparsable: check_variant reports that)."""
    if folder is None:
        return ""
    try:
        return _as_requirements(pin for name in names if (folder / name).exists()
                                for pin in parse((folder / name).read_text(encoding="utf-8")).values())
    except ValueError:
        return ""


def arm64_inputs(v: Variant) -> list[str]:
    """The amd64 inputs with tensorflow-cpu (no aarch64 wheel) as `tensorflow`, which is the CPU
    build on aarch64 (tensorflow/tensorflow#121157), at the same release."""
    return [r.replace("tensorflow-cpu==", "tensorflow==", 1) for r in inputs(v)]


def _arm64_swap(name: str) -> str:
    return "tensorflow" if normalize(name) == "tensorflow-cpu" else normalize(name)


def resolve_arm64(v: Variant, folder: Path, *, ca_cert: str | None = None) -> dict[str, Pin]:
    """The arm64 image's pins: the committed amd64 locks' versions as constraints (so both images of
    one tag hold the same versions), resolved for aarch64. The CUDA stack's pins come back too and
    stay in the shared CUDA lock."""
    amd64 = {**variant_pins(folder)}
    constraints = "".join(f"{p.name}=={p.version}\n" for k, p in amd64.items() if k != "tensorflow-cpu")
    pins = _compile(v, arm64_inputs(v), constraints=constraints, ca_cert=ca_cert, platform=AARCH64_PLATFORM)
    return pins


def write_arm64(v: Variant, folder: Path, pins: dict[str, Pin]) -> Path:
    cuda_names = {normalize(n) for n in v.cuda_wheels()}
    main = [p for k, p in pins.items() if k not in cuda_names]
    header = [f"# GENERATED by `kerasenv lock {v.id}` from images/matrix.toml: do not edit.",
              f"# The arm64 image's {v.framework_name}, Keras and dependencies; CPython {v.python}, "
              f"{AARCH64_PLATFORM}, resolved by uv with {MAIN_LOCK}'s versions as constraints.",
              "# The CUDA wheels are in requirements-cuda.lock, shared with the amd64 image."]
    path = folder / ARM64_LOCK
    _write_atomic(path, _lock_text(header, arm64_inputs(v), main))
    return path


def _read_derived_lock(v: Variant, path: Path, reqs: list[str], stale: str) -> tuple[dict[str, Pin], list]:
    """A lock made from the variant's own (the arm64 one, the JupyterLab one): its pins, or the
    one problem that stops the check (missing, other inputs than `reqs`, unparsable)."""
    if not path.exists():
        return {}, [(path, f"missing; run `kerasenv lock {v.id}`")]
    text = path.read_text(encoding="utf-8")
    if f"# inputs: {' '.join(reqs)}" not in text.splitlines():
        return {}, [(path, f"{stale}; run `kerasenv lock {v.id}`")]
    try:
        return parse(text), []
    except ValueError as exc:
        return {}, [(path, str(exc))]


def check_arm64(v: Variant, folder: Path) -> list[tuple[Path, str]]:
    """The arm64 lock of a variant with an arm64 image: present, from the matrix's inputs, and at
    the amd64 lock's versions (tensorflow for tensorflow-cpu), so one tag holds one stack."""
    path = folder / ARM64_LOCK
    if not v.arm64:
        return [(path, "the variant has no arm64 image ([variant.arm64]); remove it")] if path.exists() else []
    arm, problems = _read_derived_lock(v, path, arm64_inputs(v), "locked from other inputs than the matrix")
    if problems:
        return problems
    try:
        amd = parse((folder / MAIN_LOCK).read_text(encoding="utf-8")) if (folder / MAIN_LOCK).exists() else {}
    except ValueError as exc:
        return [(folder / MAIN_LOCK, str(exc))]
    want = {_arm64_swap(k): p.version for k, p in amd.items()}
    got = {k: p.version for k, p in arm.items()}
    if amd and got != want:
        differ = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        return [(path, f"differs from {MAIN_LOCK} in {', '.join(differ[:5])}: the two images of one tag hold "
                       f"one stack; run `kerasenv lock {v.id}`")]
    return [(path, f"{p.name} has no --hash") for p in arm.values() if not p.hashes]


def _compile(v: Variant, reqs: list[str], *, constraints: str | None = None,
             ca_cert: str | None = None, preferred: str = "", platform: str = PLATFORM) -> dict[str, Pin]:
    try:
        return _compile_plain(reqs, python=v.python, platform=platform, constraints=constraints,
                              ca_cert=ca_cert, preferred=preferred)
    except _UvFailed as exc:
        raise KerasenvError(f"uv could not resolve {v.id}: {exc.last}", details=exc.stderr) from None


class _UvFailed(Exception):
    def __init__(self, last: str, stderr: str):
        super().__init__(last)
        self.last, self.stderr = last, stderr


def _compile_plain(reqs: list[str], *, python: str, platform: str = PLATFORM, constraints: str | None = None,
                   ca_cert: str | None = None, preferred: str = "", no_deps: bool = False) -> dict[str, Pin]:
    # The venv's own uv first: `make lock` runs .venv/bin/kerasenv without .venv/bin on PATH.
    uv = shutil.which("uv", path=os.path.dirname(sys.executable)) or shutil.which("uv")
    if uv is None:
        raise UsageError("uv is not installed: run `make venv` (or `pip install uv`) and retry")
    env = dict(os.environ)
    if ca_cert:
        env["SSL_CERT_FILE"] = ca_cert
    with tempfile.TemporaryDirectory(prefix="kerasenv-lock-") as tmp:
        req = Path(tmp, "requirements.in")
        req.write_text("\n".join(reqs) + "\n", encoding="utf-8")
        out = Path(tmp, "requirements.txt")
        # uv prefers the versions already in --output-file: seeding it with the committed
        # pins keeps every version that still satisfies the inputs.
        if preferred:
            out.write_text(preferred, encoding="utf-8")
        cmd = [uv, "pip", "compile", "--quiet", "--generate-hashes", "--no-header", "--no-annotate",
               "--python-version", python, "--python-platform", platform,
               "--output-file", str(out), str(req)]
        if no_deps:
            cmd.insert(3, "--no-deps")
        if constraints is not None:
            Path(tmp, "constraints.txt").write_text(constraints, encoding="utf-8")
            cmd[3:3] = ["--constraint", str(Path(tmp, "constraints.txt"))]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise _UvFailed(last, proc.stderr)
        return parse(out.read_text(encoding="utf-8"))


# --- what the index serves (issue 45) ------------------------------------------------------------
# "X is the newest release" in the docs and the matrix comes from here, not from memory: the JAX 0.12
# images went without ONNX export because "flax 0.12.8 is the newest on PyPI" was what a Python 3.11
# pip saw, while flax 0.12.9+ (Requires-Python >= 3.12) had been served for 3.13 all along.
# `kerasenv lock` asks the index (uv, the image's Python and platform) for the newest release of each
# package that a claim names, and writes the answers with the day to images/index-newest.json;
# tests/unit/repo/test_newest_claims.py holds every such claim in the tree against that record.
INDEX_RECORD = "index-newest.json"
# The packages whose "newest" the docs or the matrix state (and why each is named there):
# flax and jax2onnx (ONNX export on JAX), torch-xla (SavedModel export on PyTorch), tensorflow
# (the newest TF, which reads the JAX images' StableHLO or not, and whose XLA emits Blackwell PTX or not).
WATCHED_ON_INDEX = ("flax", "jax2onnx", "tensorflow", "torch-xla")


def newest_on_index(python: str, names=WATCHED_ON_INDEX, *, ca_cert: str | None = None,
                    platform: str = PLATFORM) -> dict[str, str]:
    """The newest release of each of `names` that the index serves for CPython `python` on `platform`
    (uv resolves each alone, without dependencies: what `pip install NAME` on that Python would take)."""
    found = {}
    for name in names:
        pins = _compile_plain([name], python=python, platform=platform, ca_cert=ca_cert, no_deps=True)
        found[normalize(name)] = pins[normalize(name)].version
    return found


def record_newest(images: Path, python: str, newest: dict[str, str], day: str) -> Path:
    """Merge one Python's answers into images/index-newest.json (the other Pythons' stay as recorded)."""
    import json

    path = images / INDEX_RECORD
    record = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    record.setdefault("about", "the newest release the package index served for each CPython when "
                               "`kerasenv lock` last ran for a variant on it (x86_64 manylinux); "
                               "written by `kerasenv lock`, read by tests/unit/repo/test_newest_claims.py")
    record.setdefault("python", {})[python] = {"recorded": day, "newest": dict(sorted(newest.items()))}
    record["python"] = dict(sorted(record["python"].items()))
    _write_atomic(path, json.dumps(record, indent=2) + "\n")
    return path


def write(v: Variant, folder: Path, pins: dict[str, Pin]) -> list[Path]:
    cuda_names = {normalize(n) for n in v.cuda_wheels()}
    extras = {normalize(n) for n in v.extra_cuda_wheels()}
    cuda = [p for k, p in pins.items() if k in cuda_names]
    main = [p for k, p in pins.items() if k not in cuda_names]
    # Any other nvidia-* wheel would be a second, unpinned CUDA stack.
    strays = [p.name for p in main if normalize(p.name).startswith("nvidia-") and normalize(p.name) not in extras]
    if strays:
        raise KerasenvError(f"{v.id}: resolution pulled unpinned NVIDIA wheels {strays}; "
                            "add them to the CUDA stack in tested_builds.py or backend_releases.py")
    files = {folder / MAIN_LOCK: render(v, main, cuda=False)}
    if v.family == "cuda":
        files[folder / CUDA_LOCK] = render(v, cuda, cuda=True)
    folder.mkdir(parents=True, exist_ok=True)
    for path, content in files.items():
        _write_atomic(path, content)
    return list(files)


def check_variant(v: Variant, folder: Path) -> list[tuple[Path, str]]:
    """Problems with the committed locks of a variant (empty: consistent)."""
    if v.family == "rocm":
        return []  # AMD's image brings TensorFlow; nothing of ours is locked
    problems: list[tuple[Path, str]] = []
    expected_inputs = {MAIN_LOCK: f"# inputs: {' '.join(inputs(v))}",
                       CUDA_LOCK: f"# inputs: {' '.join(cuda_inputs(v))}"}
    wanted = {MAIN_LOCK: True, CUDA_LOCK: v.family == "cuda"}
    parsed: dict[str, dict[str, Pin]] = {}
    for name, needed in wanted.items():
        path = folder / name
        if not needed:
            if path.exists():
                problems.append((path, f"a {v.family} variant has no CUDA lock; remove it"))
            continue
        if not path.exists():
            problems.append((path, f"missing; run `kerasenv lock {v.id}`"))
            continue
        text = path.read_text(encoding="utf-8")
        if expected_inputs[name] not in text.splitlines():
            problems.append((path, f"locked from other inputs than the matrix; run `kerasenv lock {v.id}`"))
        try:
            parsed[name] = parse(text)
        except ValueError as exc:
            problems.append((path, str(exc)))
            continue
        for pin in parsed[name].values():
            if not pin.hashes:
                problems.append((path, f"{pin.name} has no --hash"))
    main = parsed.get(MAIN_LOCK, {})
    tools = [tuple(req.split("==")) for req in keras_tools_inputs(v)]
    for name, version in ((v.framework_package, v.framework_version), ("keras", v.keras), *tools):
        got = main.get(normalize(name))
        if main and (got is None or got.version != version):
            problems.append((folder / MAIN_LOCK, f"{name} is {got.version if got else 'absent'}, "
                                                 f"the matrix says {version}"))
    if v.family == "cuda" and CUDA_LOCK in parsed:
        got = {normalize(p.name): p.version for p in parsed[CUDA_LOCK].values()}
        want = {normalize(n): ver for n, ver in v.cuda_wheels().items()}
        if got != want:
            problems.append((folder / CUDA_LOCK, f"nvidia-* pins differ from the CUDA {v.cuda} stack of "
                                                 f"the matrix; run `kerasenv lock {v.id}`"))
    extras = {normalize(n): ver for n, ver in v.extra_cuda_wheels().items()}
    for name, version in extras.items():
        got = main.get(name)
        if main and (got is None or got.version != version):
            problems.append((folder / MAIN_LOCK, f"{name} is {got.version if got else 'absent'}, "
                                                 f"backend_releases.py pins {version}"))
    if any(k.startswith("nvidia-") and k not in extras for k in main):
        problems.append((folder / MAIN_LOCK, "contains nvidia-* wheels; they belong in the CUDA lock"))
    return problems


# --- the JupyterLab flavour ------------------------------------------------------------------

JUPYTER_LOCK = "requirements-jupyter.lock"


def jupyter_inputs(jupyterlab: str) -> list[str]:
    return [f"jupyterlab=={jupyterlab}"]


def variant_pins(folder: Path) -> dict[str, Pin]:
    """The variant's own locks (main and CUDA) as one mapping."""
    pins: dict[str, Pin] = {}
    for name in (MAIN_LOCK, CUDA_LOCK):
        if (folder / name).exists():
            pins.update(parse((folder / name).read_text(encoding="utf-8")))
    return pins


def resolve_jupyter(v: Variant, folder: Path, jupyterlab: str, *, ca_cert: str | None = None) -> list[Pin]:
    """JupyterLab's closure resolved with every pin of the variant as a constraint (needs
    PyPI); only what the variant does not already have, since that is all the layer adds."""
    base = variant_pins(folder)
    if not base:
        raise UsageError(f"{v.id} has no lock yet: run `kerasenv lock {v.id}` first")
    resolved = _compile(v, jupyter_inputs(jupyterlab), constraints=_as_requirements(base.values()),
                        ca_cert=ca_cert, preferred=_committed(folder, JUPYTER_LOCK))
    added = []
    for key, pin in resolved.items():
        if key in base:
            if base[key].version != pin.version:  # cannot happen under constraints; guard anyway
                raise KerasenvError(f"{v.id}: JupyterLab would change {pin.name} {base[key].version} -> {pin.version}")
            continue
        added.append(pin)
    strays = [p.name for p in added if normalize(p.name).startswith("nvidia-")]
    if strays:
        raise KerasenvError(f"{v.id}: JupyterLab pulled NVIDIA wheels {strays}")
    return added


def render_jupyter(v: Variant, jupyterlab: str, pins: list[Pin]) -> str:
    header = [
        f"# GENERATED by `kerasenv lock {v.id}` from images/matrix.toml: do not edit.",
        f"# The JupyterLab layer of kerasenv:{v.id}-jupyter: what JupyterLab needs beyond the",
        f"# variant's own locks, resolved with those as constraints; CPython {v.python}, {PLATFORM}, uv.",
    ]
    return _lock_text(header, jupyter_inputs(jupyterlab), pins)


def write_jupyter(v: Variant, folder: Path, jupyterlab: str, pins: list[Pin]) -> Path:
    path = folder / JUPYTER_LOCK
    _write_atomic(path, render_jupyter(v, jupyterlab, pins))
    return path


def check_jupyter(v: Variant, folder: Path, jupyterlab: str) -> list[tuple[Path, str]]:
    """Problems with a variant's committed JupyterLab lock (empty: consistent)."""
    path = folder / JUPYTER_LOCK
    pins, problems = _read_derived_lock(v, path, jupyter_inputs(jupyterlab),
                                        f"locked for another JupyterLab than the matrix's {jupyterlab}")
    if problems:
        return problems
    problems = [(path, f"{p.name} has no --hash") for p in pins.values() if not p.hashes]
    base = variant_pins(folder)
    problems += [(path, f"{p.name} is pinned by the variant's own lock too; run `kerasenv lock {v.id}`")
                 for k, p in pins.items() if k in base]
    if normalize("jupyterlab") not in pins or pins[normalize("jupyterlab")].version != jupyterlab:
        problems.append((path, f"does not pin jupyterlab=={jupyterlab}"))
    return problems
