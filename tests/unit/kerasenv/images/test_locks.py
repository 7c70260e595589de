"""Hash-locked requirements: committed files, parse/render, and what write() refuses."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kerasenv.images import locks
from kerasenv.errors import KerasenvError
from kerasenv.images.locks import Pin
from kerasenv.matrix.schema import load

VARIANTS = [v for v in load().variants if v.family != "rocm"]
CUDA_VARIANTS = [v for v in VARIANTS if v.family == "cuda"]
CPU = next(v for v in VARIANTS if v.family == "cpu")
ENTRY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][A-Za-z0-9.+!]*( \\)?$")
HASH = re.compile(r"^    --hash=sha256:[0-9a-f]{64}( \\)?$")
FAKE_HASH = "--hash=sha256:" + "ab" * 32


def ids(variants):
    return [v.id for v in variants]


def lock_of(repo_root, v, name=locks.MAIN_LOCK) -> str:
    return (repo_root / "images" / v.id / name).read_text(encoding="utf-8")


def committed_locks(repo_root):
    for v in VARIANTS:
        yield lock_of(repo_root, v)
        if v.family == "cuda":
            yield lock_of(repo_root, v, locks.CUDA_LOCK)


def versions(pins: dict[str, Pin]) -> dict[str, str]:
    return {name: pin.version for name, pin in pins.items()}


# --- committed locks ------------------------------------------------------------------

def test_every_committed_entry_is_an_exact_pin_with_sha256_hashes(repo_root):
    for text in committed_locks(repo_root):
        body = [line for line in text.splitlines() if line and not line.startswith("#")]
        assert body and ENTRY.match(body[0])
        for line in body:
            assert ENTRY.match(line) or HASH.match(line), line
        for pin in locks.parse(text).values():
            assert pin.hashes, pin.name


@pytest.mark.parametrize("v", CUDA_VARIANTS, ids=ids(CUDA_VARIANTS))
def test_cuda_lock_holds_exactly_the_tested_wheels(repo_root, v):
    pins = locks.parse(lock_of(repo_root, v, locks.CUDA_LOCK))
    assert versions(pins) == {locks.normalize(n): ver for n, ver in v.cuda_wheels().items()}


@pytest.mark.parametrize("v", VARIANTS, ids=ids(VARIANTS))
def test_main_lock_holds_matrix_versions_and_no_nvidia_wheel(repo_root, v):
    pins = versions(locks.parse(lock_of(repo_root, v)))
    # Only the NVIDIA wheels a backend needs beyond the shared CUDA stack (JAX: NVSHMEM, CCCL).
    assert sorted(name for name in pins if name.startswith("nvidia")) == sorted(v.extra_cuda_wheels())
    assert all(pins[name] == version for name, version in v.extra_cuda_wheels().items())
    assert pins[v.framework_package] == v.framework_version
    assert pins["keras"] == v.keras
    assert locks.check_variant(v, repo_root / "images" / v.id) == []


def test_cpu_variant_has_no_cuda_lock(repo_root):
    assert not (repo_root / "images" / CPU.id / locks.CUDA_LOCK).exists()


# --- parse / render / write -------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "numpy>=1.26", "-e git+https://example.org/x.git", "--index-url https://example.org/simple",
])
def test_parse_rejects_an_unexpected_line(line):
    with pytest.raises(ValueError, match="unexpected line"):
        locks.parse(f"absl-py==2.1.0 \\\n    {FAKE_HASH}\n{line}\n")


def test_parse_reads_entries_hashes_and_skips_comments():
    pins = locks.parse(f"# header\n\nKeras==3.15.1 \\\n    {FAKE_HASH} \\\n    {FAKE_HASH}\nsix==1.16.0\n")
    assert pins["keras"] == Pin("Keras", "3.15.1", (FAKE_HASH, FAKE_HASH))
    assert pins["six"].hashes == ()


def test_parse_rejects_a_malformed_hash_line():
    with pytest.raises(ValueError, match="not a sha256 hash line"):
        locks.parse("six==1.16.0 \\\n    --hash=sha256:deadbeef\n")


def test_render_then_parse_round_trips():
    v = CUDA_VARIANTS[0]
    pins = [Pin("zipp", "3.20.0", (FAKE_HASH,)), Pin("Absl_Py", "2.1.0", (FAKE_HASH, FAKE_HASH))]
    text = locks.render(v, pins, cuda=False)
    assert locks.parse(text) == {locks.normalize(p.name): p for p in pins}
    assert text.index("Absl_Py==") < text.index("zipp==")  # sorted by normalized name
    assert f"# inputs: {' '.join(locks.inputs(v))}" in text.splitlines()


def resolved(v, *extra: Pin) -> dict[str, Pin]:
    """What a resolution of v could return: its own pins plus `extra`."""
    pins = [Pin(v.tensorflow_package, v.tensorflow, (FAKE_HASH,)), Pin("keras", v.keras, (FAKE_HASH,))]
    pins += [Pin(name, ver, (FAKE_HASH,)) for name, ver in v.cuda_wheels().items()]
    pins += [Pin(*req.split("=="), (FAKE_HASH,)) for req in locks.keras_tools_inputs(v)]
    return {locks.normalize(p.name): p for p in pins + list(extra)}


def test_write_splits_cuda_wheels_into_their_own_lock(tmp_path):
    v = CUDA_VARIANTS[0]
    written = locks.write(v, tmp_path, resolved(v))
    assert sorted(p.name for p in written) == sorted([locks.MAIN_LOCK, locks.CUDA_LOCK])
    assert locks.check_variant(v, tmp_path) == []
    assert list(tmp_path.glob("*.tmp")) == []


@pytest.mark.parametrize("v", [CPU, CUDA_VARIANTS[0]], ids=["cpu", "cuda"])
def test_write_refuses_unpinned_nvidia_wheels(tmp_path, v):
    stray = Pin("nvidia-nvtx-cu12", "12.5.82", (FAKE_HASH,))
    with pytest.raises(KerasenvError, match="nvidia-nvtx-cu12"):
        locks.write(v, tmp_path, resolved(v, stray))
    assert list(tmp_path.iterdir()) == []


def test_inputs_name_every_pin_and_nothing_for_rocm():
    v = CUDA_VARIANTS[0]
    assert locks.inputs(v)[:4] == [f"tensorflow=={v.tensorflow}", f"keras=={v.keras}", "tensorboard",
                                   f"tensorboard-plugin-profile=={v.profile_plugin}"]
    assert locks.inputs(v)[4:7] == ["grain==0.2.18", "pydot==4.0.1", "tf2onnx==1.17.0"]
    assert len(locks.inputs(v)) == 4 + len(locks.keras_tools_inputs(v)) + len(v.cuda_wheels())
    assert locks.inputs(next(x for x in load().variants if x.family == "rocm")) == []


@pytest.mark.parametrize("variant_id, tools", [
    # JAX 0.12: jax2onnx with the table's flax beside it (the first flax whose nnx imports on 0.12)
    ("jax0.12-cpu", ["tensorflow-cpu==2.21.0", "grain==0.2.18", "pydot==4.0.1", "jax2onnx==0.17.1",
                     "flax==0.12.12"]),
    ("torch2.15-cuda13.2", ["tensorflow-cpu==2.21.0", "grain==0.2.18", "pydot==4.0.1", "onnxscript==0.7.2"]),
    ("tf2.21-cpu", ["grain==0.2.18", "pydot==4.0.1", "tf2onnx==1.17.0"]),
    # Keras 3.6 has neither format="grain" (3.12) nor ONNX export (3.8); tf.keras 2 neither.
    ("tf2.17-cuda12.3", ["pydot==4.0.1"]),
    ("tf2.14-cuda11.8", ["pydot==4.0.1"]),
])
def test_keras_tools_join_the_inputs_by_backend_and_keras_release(variant_id, tools):
    """[keras_tools]: tensorflow-cpu only beside JAX/PyTorch (TF images have their own TF),
    and each tool only where that Keras uses it; pinned exactly, before any NVIDIA wheel."""
    v = load().get(variant_id)
    assert locks.keras_tools_inputs(v) == tools
    reqs = locks.inputs(v)
    assert all(t in reqs for t in tools)
    assert max(reqs.index(t) for t in tools) < min([i for i, r in enumerate(reqs) if r.startswith("nvidia-")] or [99])


def test_check_names_a_keras_tool_locked_at_another_version(tmp_path):
    v = load().get("jax0.12-cpu")
    pins = resolved(v)
    pins["tensorflow-cpu"] = Pin("tensorflow-cpu", "2.20.0", (FAKE_HASH,))
    del pins["grain"]
    locks.write(v, tmp_path, pins)
    problems = [reason for _, reason in locks.check_variant(v, tmp_path)]
    assert "tensorflow-cpu is 2.20.0, the matrix says 2.21.0" in problems
    assert "grain is absent, the matrix says 0.2.18" in problems


# --- the JupyterLab flavour's lock ------------------------------------------------------------

LAB = load().jupyter.jupyterlab
JUPYTER_VARIANTS = load().with_jupyter()


@pytest.fixture
def lab_folder(tmp_path, repo_root):
    """A variant folder with the CPU variant's own committed lock, and no JupyterLab lock yet."""
    (tmp_path / locks.MAIN_LOCK).write_text(lock_of(repo_root, CPU), encoding="utf-8")
    return tmp_path


def lab_pins(*extra: Pin) -> list[Pin]:
    return [Pin("jupyterlab", LAB, (FAKE_HASH,)), Pin("jupyter-server", "2.21.1", (FAKE_HASH, FAKE_HASH)),
            *extra]


def jupyter_problems(folder, lab=LAB) -> list[str]:
    return [reason for path, reason in locks.check_jupyter(CPU, folder, lab) if path == folder / locks.JUPYTER_LOCK]


@pytest.mark.parametrize("v", JUPYTER_VARIANTS, ids=ids(JUPYTER_VARIANTS))
def test_committed_jupyter_locks_are_consistent(repo_root, v):
    folder = repo_root / "images" / v.id
    assert locks.check_jupyter(v, folder, LAB) == []
    pins = locks.parse(lock_of(repo_root, v, locks.JUPYTER_LOCK))
    assert pins["jupyterlab"].version == LAB
    assert not [n for n in pins if n.startswith("nvidia-") or n in (v.tensorflow_package, "keras")]


def test_a_consistent_jupyter_lock_has_no_problems(lab_folder):
    path = locks.write_jupyter(CPU, lab_folder, LAB, lab_pins())
    assert path == lab_folder / locks.JUPYTER_LOCK and list(lab_folder.glob("*.tmp")) == []
    assert locks.check_jupyter(CPU, lab_folder, LAB) == []
    assert f"# inputs: jupyterlab=={LAB}" in path.read_text().splitlines()


def test_a_missing_jupyter_lock_is_a_problem(lab_folder):
    assert jupyter_problems(lab_folder) == [f"missing; run `kerasenv lock {CPU.id}`"]


def test_a_jupyter_lock_for_another_jupyterlab_is_a_problem(lab_folder):
    locks.write_jupyter(CPU, lab_folder, "4.5.0", [Pin("jupyterlab", "4.5.0", (FAKE_HASH,))])
    (problem,) = jupyter_problems(lab_folder)
    assert "locked for another JupyterLab" in problem and LAB in problem and f"kerasenv lock {CPU.id}" in problem


def test_a_jupyter_pin_the_variant_lock_has_too_is_a_problem(lab_folder):
    numpy = locks.parse(lock_of_folder(lab_folder))["numpy"]
    locks.write_jupyter(CPU, lab_folder, LAB, lab_pins(Pin("numpy", numpy.version, (FAKE_HASH,))))
    assert jupyter_problems(lab_folder) == [
        f"numpy is pinned by the variant's own lock too; run `kerasenv lock {CPU.id}`"]


def test_a_jupyter_pin_without_a_hash_is_a_problem(lab_folder):
    locks.write_jupyter(CPU, lab_folder, LAB, lab_pins(Pin("tornado", "6.5.2", ())))
    assert jupyter_problems(lab_folder) == ["tornado has no --hash"]


def test_a_jupyter_lock_that_does_not_pin_the_matrix_jupyterlab_is_a_problem(lab_folder):
    locks.write_jupyter(CPU, lab_folder, LAB, [Pin("jupyter-server", "2.21.1", (FAKE_HASH,))])
    assert jupyter_problems(lab_folder) == [f"does not pin jupyterlab=={LAB}"]
    locks.write_jupyter(CPU, lab_folder, LAB, [Pin("jupyterlab", "4.5.0", (FAKE_HASH,))])
    assert jupyter_problems(lab_folder) == [f"does not pin jupyterlab=={LAB}"]


def test_a_malformed_jupyter_lock_is_a_problem(lab_folder):
    locks.write_jupyter(CPU, lab_folder, LAB, lab_pins())
    path = lab_folder / locks.JUPYTER_LOCK
    path.write_text(path.read_text() + "jupyterlab>=4\n")
    (problem,) = jupyter_problems(lab_folder)
    assert "unexpected line" in problem


def test_several_jupyter_lock_problems_are_all_reported(lab_folder):
    numpy = locks.parse(lock_of_folder(lab_folder))["numpy"]
    locks.write_jupyter(CPU, lab_folder, LAB, [Pin("numpy", numpy.version, ()), Pin("tornado", "6.5.2", ())])
    assert sorted(jupyter_problems(lab_folder)) == sorted([
        "numpy has no --hash", "tornado has no --hash", f"does not pin jupyterlab=={LAB}",
        f"numpy is pinned by the variant's own lock too; run `kerasenv lock {CPU.id}`"])


def test_render_jupyter_round_trips_sorted_with_its_header():
    pins = [Pin("Tornado", "6.5.2", (FAKE_HASH,)), *lab_pins()]
    text = locks.render_jupyter(CPU, LAB, pins)
    assert locks.parse(text) == {locks.normalize(p.name): p for p in pins}
    assert text.index("\njupyter-server==") < text.index("\njupyterlab==") < text.index("\nTornado==")
    assert text.startswith(f"# GENERATED by `kerasenv lock {CPU.id}`")
    assert locks.jupyter_inputs(LAB) == [f"jupyterlab=={LAB}"]


def test_variant_pins_join_the_main_and_cuda_locks(repo_root):
    v = CUDA_VARIANTS[0]
    pins = locks.variant_pins(repo_root / "images" / v.id)
    assert v.tensorflow_package in pins and any(n.startswith("nvidia-") for n in pins)
    assert "jupyterlab" not in pins


def lock_of_folder(folder) -> str:
    return (folder / locks.MAIN_LOCK).read_text(encoding="utf-8")


def test_a_relock_hands_uv_the_committed_pins_as_preferences(tmp_path, monkeypatch):
    """uv prefers the versions already in --output-file: the committed pins go there, so a
    new input (the profiler plugin) changes only what it must."""
    v = CUDA_VARIANTS[0]
    folder = tmp_path / v.id
    locks.write(v, folder, resolved(v))
    seen = {}

    def fake_run(cmd, env, capture_output, text):
        out = Path(cmd[cmd.index("--output-file") + 1])
        seen["preferred"] = out.read_text(encoding="utf-8") if out.exists() else ""
        out.write_text(Path(folder / locks.MAIN_LOCK).read_text(encoding="utf-8"), encoding="utf-8")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(locks.shutil, "which", lambda name, path=None: "/usr/bin/uv")
    monkeypatch.setattr(locks.subprocess, "run", fake_run)
    locks.resolve(v, folder=folder)
    preferred = set(seen["preferred"].splitlines())
    assert f"tensorflow=={v.tensorflow}" in preferred
    assert {f"{name}=={version}" for name, version in v.cuda_wheels().items()} <= preferred
    assert not any("--hash" in line for line in preferred)
    locks.resolve(v, folder=tmp_path / "no-locks-yet")  # nothing committed: no preference
    assert seen["preferred"] == ""


def test_tensorboard_before_2_21_gets_a_setuptools_that_still_has_pkg_resources():
    """setuptools 82 removed pkg_resources, which TensorBoard < 2.21 imports at start-up."""
    for v in load().variants:
        if v.family == "rocm" or v.backend != "tensorflow":
            continue
        older = tuple(int(p) for p in v.tensorflow.split(".")[:2]) < (2, 21)
        assert ("setuptools<82" in locks.inputs(v)) is older, v.id
        pins = locks.parse((load().path.parent / v.id / locks.MAIN_LOCK).read_text(encoding="utf-8"))
        major = int(pins["setuptools"].version.split(".")[0])
        assert (major < 82) if older else True, (v.id, pins["setuptools"].version)


def test_record_newest_keeps_the_other_pythons_and_dates_each(tmp_path):
    """images/index-newest.json (issue 45): one entry per CPython, each with the day it was asked."""
    import json

    locks.record_newest(tmp_path, "3.11", {"flax": "0.12.8"}, "2026-12-04")
    path = locks.record_newest(tmp_path, "3.13", {"torch-xla": "2.9.0", "flax": "0.12.12"}, "2026-12-06")
    record = json.loads(path.read_text())
    assert record["python"] == {"3.11": {"recorded": "2026-12-04", "newest": {"flax": "0.12.8"}},
                                "3.13": {"recorded": "2026-12-06", "newest": {"flax": "0.12.12", "torch-xla": "2.9.0"}}}
    assert "kerasenv lock" in record["about"]
